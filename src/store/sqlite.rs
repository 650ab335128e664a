//! The embedded store: one SQLite file in WAL mode, held by one process.
//!
//! WAL lets readers proceed while the single writer commits; `busy_timeout`
//! makes concurrent writers queue instead of failing; write transactions
//! start with `BEGIN IMMEDIATE`, so they are serialized from their start.
//! The file (and its write-ahead log, which SQLite creates with the file's
//! mode) is readable by this user only, and a `flock` on `<db>.lock` keeps
//! a second process out.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Transaction;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

use super::sql::{Backend, Dialect, SqlStore, question_marks, sql_over};
use super::{Keyring, StoreError};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

static DIALECT: Dialect = Dialect {
    for_update: "",
    for_share: "",
    skip_locked: "",
    in_list: |column, param| format!("{column} IN (SELECT value FROM json_each(${param}))"),
    through_index: |index| format!(" INDEXED BY {index}"),
    one_statement_jobs: false,
};

/// The embedded store.
pub type SqliteStore = SqlStore<SqliteBackend>;

pub struct SqliteBackend {
    pool: SqlitePool,
    description: String,
    file: PathBuf,
    /// Held while the store is open: one process per file, so that leases
    /// left in it at start belong to a process that is gone.
    _lock: Option<std::fs::File>,
}

impl SqliteStore {
    pub async fn open_file(path: &Path, keyring: Arc<Keyring>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new().filename(path);
        let description = format!("SQLite at {}", path.display());
        Ok(Self::new(
            SqliteBackend::open(options, description).await?,
            keyring,
        ))
    }

    pub async fn open_url(url: &str, keyring: Arc<Keyring>) -> Result<Self, StoreError> {
        let options =
            SqliteConnectOptions::from_str(url).map_err(|e| StoreError::Internal(e.to_string()))?;
        let description = format!("SQLite at {}", options.get_filename().display());
        Ok(Self::new(
            SqliteBackend::open(options, description).await?,
            keyring,
        ))
    }
}

impl SqliteBackend {
    async fn open(options: SqliteConnectOptions, description: String) -> Result<Self, StoreError> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let file = options.get_filename().to_owned();
        let lock = lock_exclusively(&file, &description)?;
        make_private(&file, &description)?;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(10))
            // A file does not go away like a server: no check before use
            // (it would cost a trip to the connection's thread).
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("{description}: {e}")))?;
        Ok(Self {
            pool,
            description,
            file,
            _lock: lock,
        })
    }
}

/// A list binds as a JSON array, which `json_each` reads.
fn as_json<T: serde::Serialize>(values: &[T]) -> Result<String, sqlx::error::BoxDynError> {
    Ok(serde_json::to_string(values)?)
}

sql_over!(Sqlite, SqlitePool, DIALECT, as_json, question_marks);

impl Backend for SqliteBackend {
    type Pool = SqlitePool;
    type Tx = Transaction<'static, Sqlite>;
    /// One process holds the file: every lease found at start is a dead one's.
    const SOLE_PROCESS: bool = true;

    fn pool(&self) -> SqlitePool {
        self.pool.clone()
    }

    async fn begin(&self) -> Result<Self::Tx, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }

    async fn commit(tx: Self::Tx) -> Result<(), sqlx::Error> {
        tx.commit().await
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn local_files(&self) -> Vec<PathBuf> {
        let in_memory = self.file.as_os_str().is_empty() || self.file == Path::new(":memory:");
        if in_memory {
            Vec::new()
        } else {
            vec![self.file.clone()]
        }
    }

    async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        MIGRATOR.run(&self.pool).await
    }

    fn migrations(&self) -> usize {
        MIGRATOR.iter().count()
    }

    fn pool_use(&self) -> super::sql::PoolUse {
        super::sql::PoolUse::of(&self.pool)
    }

    fn table_names(&self) -> &'static str {
        "SELECT name FROM sqlite_master WHERE type = 'table'"
    }
}

/// Creates the database file readable by this user only (0600), or makes
/// an existing one and its WAL and shared-memory files so: SQLite creates
/// those with the database file's own mode.
fn make_private(database: &Path, description: &str) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if database.as_os_str().is_empty() || database == Path::new(":memory:") {
        return Ok(());
    }
    let failed = |e: std::io::Error| StoreError::Unavailable(format!("{description}: {e}"));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(database)
        .map_err(failed)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut path = database.as_os_str().to_owned();
        path.push(suffix);
        match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
            _ => {}
        }
    }
    Ok(())
}

/// Takes `<database>.lock` with `flock`, which the kernel releases when the
/// process ends, however it ends. SQLite's own locks are `fcntl` locks on the
/// database file and are not touched. An in-memory database needs none.
fn lock_exclusively(
    database: &Path,
    description: &str,
) -> Result<Option<std::fs::File>, StoreError> {
    use rustix::fs::{FlockOperation, flock};
    use std::os::unix::fs::OpenOptionsExt;
    if database.as_os_str().is_empty() || database == Path::new(":memory:") {
        return Ok(None);
    }
    let mut path = database.as_os_str().to_owned();
    path.push(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::Unavailable(format!("{description}: lock file: {e}")))?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError::InUse(description.to_owned())),
        Err(e) => Err(StoreError::Unavailable(format!(
            "{description}: lock file: {e}"
        ))),
    }
}
