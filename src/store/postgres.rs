//! The PostgreSQL store, for production and for several replicas sharing one
//! database. Names sort with `COLLATE "C"` so that keyset pages match
//! SQLite's bytewise order; transactions lock the job row they change
//! (`FOR UPDATE`), and claims pass over rows another claim holds
//! (`SKIP LOCKED`), so replicas never run one action twice at once.
//! Transactions take their connections from sqlx's pool; statements run on
//! their own, most requests, from [`AutocommitConnections`].

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions, Postgres};
use sqlx::{Connection, Transaction};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::sql::{Backend, Dialect, SqlStore, sql_over};
use super::{Keyring, OpenStoreError, StoreError, connection_lost};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

static DIALECT: Dialect = Dialect {
    for_update: " FOR UPDATE",
    for_share: " FOR SHARE",
    skip_locked: " FOR UPDATE SKIP LOCKED",
    in_list: |column, param| format!("{column} = ANY(${param})"),
    through_index: |_| String::new(),
    one_statement_jobs: true,
};

/// How long a statement waits for a connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection may sit idle and still be used unchecked.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The store for production and replicas.
pub type PostgresStore = SqlStore<PostgresBackend>;

pub struct PostgresBackend {
    pool: PgPool,
    autocommit: AutocommitConnections,
    description: String,
}

impl PostgresStore {
    pub async fn open_url(url: &str, keyring: Arc<Keyring>) -> Result<Self, OpenStoreError> {
        // Never log the URL itself: it may carry a password.
        let options = PgConnectOptions::from_str(url).map_err(|_| {
            OpenStoreError::InvalidUrl(
                "expected postgres://user[:password]@host[:port]/database".into(),
            )
        })?;
        let description = format!(
            "PostgreSQL at {}:{}, database '{}'",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("(default)")
        );
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A connection idle a while is checked before use (the server
            // may have gone away meanwhile); one in steady use is not: a
            // round trip before each statement would double the cost of
            // the shortest. A broken one fails its statement (503) and is
            // dropped.
            .test_before_acquire(false)
            .before_acquire(|connection, held| {
                Box::pin(async move {
                    if held.idle_for > CHECK_AFTER_IDLE {
                        connection.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect_with(options.clone())
            .await
            .map_err(|e| StoreError::Unavailable(format!("{description}: {e}")))?;
        let autocommit = AutocommitConnections::new(options);
        Ok(Self::new(
            PostgresBackend {
                pool,
                autocommit,
                description,
            },
            keyring,
        ))
    }
}

/// A list binds as a PostgreSQL array.
fn as_array<T: Clone>(values: &[T]) -> Result<Vec<T>, sqlx::error::BoxDynError> {
    Ok(values.to_vec())
}

sql_over!(Postgres, PgPool, DIALECT, as_array, str::to_owned);

/// Most connections kept for statements run on their own.
const MOST_AUTOCOMMIT: usize = 16;

/// Connections for the statements run on their own, outside any
/// transaction (most requests are one such statement), kept between
/// statements here rather than in sqlx's pool: the pool tests every
/// connection given back to it with a round trip, which for a request of
/// one statement costs as much again. A connection idle a while is checked
/// before use. One whose statement was abandoned midway is closed; one
/// whose statement failed other than in the database is closed with every
/// idle one (the server likely went away from them all), so that an
/// outage fails the statements under way, not the next ones as well.
#[derive(Clone)]
pub struct AutocommitConnections {
    shared: Arc<AutocommitShared>,
}

struct AutocommitShared {
    options: PgConnectOptions,
    idle: std::sync::Mutex<Vec<(PgConnection, Instant)>>,
    permits: Arc<Semaphore>,
}

/// One connection taken for one statement.
struct Taken {
    connection: Option<PgConnection>,
    shared: Arc<AutocommitShared>,
    _permit: OwnedSemaphorePermit,
    keep: bool,
}

impl Taken {
    fn connection(&mut self) -> &mut PgConnection {
        self.connection.as_mut().expect("taken with a connection")
    }

    /// Keeps the connection after a statement that ended as `outcome`, if
    /// it is as good as before.
    fn ended<T>(&mut self, outcome: &Result<T, sqlx::Error>) {
        match outcome {
            Err(error) if connection_lost(error) => self.shared.idle().clear(),
            Ok(_) | Err(sqlx::Error::Database(_) | sqlx::Error::RowNotFound) => self.keep = true,
            // Anything else may leave the connection midway.
            Err(_) => {}
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let (true, Some(connection)) = (self.keep, self.connection.take()) {
            self.shared.idle().push((connection, Instant::now()));
        }
    }
}

impl AutocommitShared {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(PgConnection, Instant)>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl AutocommitConnections {
    fn new(options: PgConnectOptions) -> Self {
        Self {
            shared: Arc::new(AutocommitShared {
                options,
                idle: std::sync::Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(MOST_AUTOCOMMIT)),
            }),
        }
    }

    /// A connection, within [`ACQUIRE_TIMEOUT`]: waiting for a turn,
    /// checking an idle one and opening a new one all count.
    async fn take(&self) -> Result<Taken, sqlx::Error> {
        tokio::time::timeout(ACQUIRE_TIMEOUT, self.take_unbounded())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
    }

    async fn take_unbounded(&self) -> Result<Taken, sqlx::Error> {
        let permit = self
            .shared
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        loop {
            let kept = self.shared.idle().pop();
            let Some((mut connection, since)) = kept else {
                break;
            };
            if since.elapsed() <= CHECK_AFTER_IDLE || connection.ping().await.is_ok() {
                return Ok(self.taken(connection, permit));
            }
        }
        let connection = PgConnection::connect_with(&self.shared.options).await?;
        Ok(self.taken(connection, permit))
    }

    fn taken(&self, connection: PgConnection, permit: OwnedSemaphorePermit) -> Taken {
        Taken {
            connection: Some(connection),
            shared: self.shared.clone(),
            _permit: permit,
            keep: false,
        }
    }

    /// Connections open: in use and idle.
    fn usage(&self) -> (u64, u64) {
        let idle = self.shared.idle().len();
        let in_use = MOST_AUTOCOMMIT - self.shared.permits.available_permits();
        (in_use as u64, idle as u64)
    }
}

impl super::sql::Sql for AutocommitConnections {
    fn dialect(&self) -> &'static Dialect {
        &DIALECT
    }

    async fn rows<T: super::sql::Decodable>(
        &mut self,
        query: super::sql::Query<'_>,
    ) -> Result<Vec<T>, sqlx::Error> {
        let mut taken = self.take().await?;
        let outcome = rows(taken.connection(), query).await;
        taken.ended(&outcome);
        outcome
    }

    async fn execute(&mut self, query: super::sql::Query<'_>) -> Result<u64, sqlx::Error> {
        let mut taken = self.take().await?;
        let outcome = execute(taken.connection(), query).await;
        taken.ended(&outcome);
        outcome
    }
}

impl Backend for PostgresBackend {
    type Pool = AutocommitConnections;
    type Tx = Transaction<'static, Postgres>;
    /// Replicas share the store: their leases are left to run out.
    const SOLE_PROCESS: bool = false;

    fn pool(&self) -> AutocommitConnections {
        self.autocommit.clone()
    }

    async fn begin(&self) -> Result<Self::Tx, sqlx::Error> {
        self.pool.begin().await
    }

    async fn commit(tx: Self::Tx) -> Result<(), sqlx::Error> {
        tx.commit().await
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn local_files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    async fn migrate(&self) -> Result<(), sqlx::migrate::MigrateError> {
        MIGRATOR.run(&self.pool).await
    }

    fn migrations(&self) -> usize {
        MIGRATOR.iter().count()
    }

    fn pool_use(&self) -> super::sql::PoolUse {
        let pooled = super::sql::PoolUse::of(&self.pool);
        let (in_use, idle) = self.autocommit.usage();
        super::sql::PoolUse {
            in_use: pooled.in_use + in_use,
            idle: pooled.idle + idle,
            max: pooled.max + MOST_AUTOCOMMIT as u64,
        }
    }

    fn table_names(&self) -> &'static str {
        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()"
    }
}
