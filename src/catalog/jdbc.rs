//! `jdbc`: tables in a real PostgreSQL, MySQL/MariaDB or SQLite database.
//!
//! Options use Flink's JDBC catalog names (`base-url`, `default-database`,
//! `username`, `password`). The base URL names a server (or, for SQLite, a
//! directory whose `<database>.db` files are the databases); the database is
//! always a separate option, as in Flink. Connections are built from typed
//! connect options, never from a URL with the password spliced in, so no
//! driver message can echo it; [`CatalogOptions::redact`] guards the rest.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::Mutex;

use super::dialect::Dialect;
use super::factory::{CatalogFactory, FactoryError, OptionSpec, ValidationError};
use super::protected::{ProtectedPaths, STORE_MARKER_TABLE, canonical_directory};
use super::{
    Catalog, CatalogError, ColumnInfo, CommitOutcome, Publish, Staging, TableInfo, staging_missing,
    table_exists_error, table_not_found,
};
use crate::domain::{CatalogOptions, ObjectName};
use crate::fault::{self, Point};

/// Tables ctasd makes for itself start with this; browsing hides them.
const HIDDEN_PREFIX: &str = "__ctasd_";

/// How long opening a connection may take before the catalog is reported unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

static OPTIONS: &[OptionSpec] = &[
    OptionSpec::location(
        "base-url",
        "Server URL without a database: jdbc:postgresql://host[:port], jdbc:mysql://host[:port], \
         jdbc:mariadb://host[:port], or jdbc:sqlite:/absolute/directory (each <database>.db file there is a database).",
    ),
    OptionSpec::required(
        "default-database",
        "The database to connect to and to use when a target names none.",
    ),
    OptionSpec::optional(
        "username",
        None,
        "User name; required for PostgreSQL and MySQL/MariaDB.",
    ),
    OptionSpec::optional(
        "password",
        None,
        "Password; required for PostgreSQL and MySQL/MariaDB (may be empty).",
    ),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JdbcUrl {
    Postgres { host: String, port: u16 },
    MySql { host: String, port: u16 },
    Sqlite { directory: PathBuf },
}

impl JdbcUrl {
    pub fn parse(url: &str) -> Result<Self, String> {
        if let Some(path) = url.strip_prefix("jdbc:sqlite:") {
            let directory = PathBuf::from(path);
            if !directory.is_absolute() {
                return Err("a jdbc:sqlite: base URL must name an absolute directory".into());
            }
            return Ok(Self::Sqlite { directory });
        }
        let (rest, default_port, postgres) =
            if let Some(rest) = url.strip_prefix("jdbc:postgresql://") {
                (rest, 5432, true)
            } else if let Some(rest) = url
                .strip_prefix("jdbc:mysql://")
                .or_else(|| url.strip_prefix("jdbc:mariadb://"))
            {
                (rest, 3306, false)
            } else {
                return Err(
                    "expected jdbc:postgresql://, jdbc:mysql://, jdbc:mariadb:// or jdbc:sqlite:"
                        .into(),
                );
            };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '@', '#']) {
            return Err("the base URL names only the server (host and port); \
                        put the database in 'default-database' and credentials in 'username'/'password'"
                .into());
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || authority.starts_with('[') => {
                let port = port
                    .parse::<u16>()
                    .map_err(|_| format!("'{port}' is not a valid port"))?;
                (host, port)
            }
            _ => (authority, default_port),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err("the base URL has no host".into());
        }
        let host = host.to_owned();
        Ok(if postgres {
            Self::Postgres { host, port }
        } else {
            Self::MySql { host, port }
        })
    }
}

pub struct JdbcCatalogFactory {
    protected: Arc<ProtectedPaths>,
}

impl JdbcCatalogFactory {
    pub fn new(protected: Arc<ProtectedPaths>) -> Self {
        Self { protected }
    }
}

fn invalid(key: &str, reason: impl Into<String>) -> ValidationError {
    ValidationError::InvalidValue {
        key: key.into(),
        reason: reason.into(),
    }
}

#[async_trait]
impl CatalogFactory for JdbcCatalogFactory {
    fn identifier(&self) -> &'static str {
        "jdbc"
    }

    fn description(&self) -> &'static str {
        "Tables in a PostgreSQL, MySQL/MariaDB or SQLite database, created with real DDL."
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn validate(&self, options: &CatalogOptions) -> Result<(), ValidationError> {
        let url = JdbcUrl::parse(options.get("base-url").unwrap_or_default())
            .map_err(|r| invalid("base-url", r))?;
        let database = options.get("default-database").unwrap_or_default();
        ObjectName::parse("default-database", database)
            .map_err(|e| invalid("default-database", e.to_string()))?;
        check_url_safe(database).map_err(|reason| invalid("default-database", reason))?;
        if !matches!(url, JdbcUrl::Sqlite { .. }) {
            let missing: Vec<String> = ["username", "password"]
                .into_iter()
                .filter(|k| options.get(k).is_none())
                .map(String::from)
                .collect();
            if !missing.is_empty() {
                return Err(ValidationError::MissingOptions { missing });
            }
        }
        Ok(())
    }

    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, FactoryError> {
        let url = JdbcUrl::parse(options.get("base-url").unwrap_or_default())?;
        if let JdbcUrl::Sqlite { directory } = &url {
            canonical_directory(&directory.display().to_string())
                .and_then(|dir| {
                    self.protected
                        .refuse_database_directory(&dir)
                        .map_or(Ok(()), Err)
                })
                .map_err(|reason| FactoryError::Invalid(invalid("base-url", reason)))?;
        }
        let catalog = JdbcCatalog {
            url,
            protected: self.protected.clone(),
            username: options.get("username").unwrap_or_default().to_owned(),
            options: options.clone(),
            default_database: options
                .get("default-database")
                .unwrap_or_default()
                .to_owned(),
            pools: Mutex::new(HashMap::new()),
            not_stores: Mutex::new(HashSet::new()),
        };
        if let Some(reason) = catalog.refuse_own_file(&catalog.default_database) {
            return Err(FactoryError::Invalid(invalid("default-database", reason)));
        }
        catalog.check_connection(&catalog.default_database).await?;
        match catalog.refuse_store(&catalog.default_database).await {
            Ok(()) => Ok(Arc::new(catalog)),
            Err(CatalogError::Protected(reason)) => {
                Err(FactoryError::Invalid(invalid("default-database", reason)))
            }
            Err(other) => Err(FactoryError::Unreachable(other.to_string())),
        }
    }
}

/// Why a database name cannot be written into a JDBC URL as it is, if it
/// cannot: the sink URL an engine receives is `<base-url>/<database>`, and a
/// name holding `?`, `;` or `&` would add connection parameters to it
/// (`allowLoadLocalInfile=true`, ...).
pub fn check_url_safe(database: &str) -> Result<(), String> {
    match database
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || URL_SPECIAL.contains(c))
    {
        Some(c) => Err(format!(
            "database name '{}' contains {:?}, which a JDBC URL would read as part of its \
             syntax; ctasd refuses names that cannot be written into a URL as they are",
            database.escape_debug(),
            c
        )),
        None => Ok(()),
    }
}

/// `segment` with every byte outside RFC 3986's unreserved set
/// percent-encoded.
fn escape_path_segment(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// Characters with a meaning in a JDBC URL's path or parameters.
const URL_SPECIAL: &[char] = &['?', '&', '#', ';', '=', '%', '/', '\\', '@', ':', '"', '\''];

#[derive(Clone)]
enum DialectPool {
    Postgres(PgPool),
    MySql(MySqlPool),
    Sqlite(SqlitePool),
}

pub struct JdbcCatalog {
    url: JdbcUrl,
    protected: Arc<ProtectedPaths>,
    username: String,
    /// Kept for the password and for redacting driver messages.
    options: CatalogOptions,
    default_database: String,
    /// One pool per database, opened on first use.
    pools: Mutex<HashMap<String, DialectPool>>,
    /// Databases already shown not to hold a ctasd store.
    not_stores: Mutex<HashSet<String>>,
}

impl JdbcCatalog {
    fn password(&self) -> &str {
        self.options.get("password").unwrap_or_default()
    }

    fn pg_options(&self, database: &str) -> PgConnectOptions {
        let JdbcUrl::Postgres { host, port } = &self.url else {
            unreachable!("postgres options for {:?}", self.url)
        };
        PgConnectOptions::new()
            .host(host)
            .port(*port)
            .username(&self.username)
            .password(self.password())
            .database(database)
            .application_name("ctasd")
    }

    fn mysql_options(&self, database: &str) -> MySqlConnectOptions {
        let JdbcUrl::MySql { host, port } = &self.url else {
            unreachable!("mysql options for {:?}", self.url)
        };
        let options = MySqlConnectOptions::new()
            .host(host)
            .port(*port)
            .username(&self.username)
            .database(database);
        if self.password().is_empty() {
            options
        } else {
            options.password(self.password())
        }
    }

    fn sqlite_file(&self, database: &str) -> PathBuf {
        let JdbcUrl::Sqlite { directory } = &self.url else {
            unreachable!("sqlite file for {:?}", self.url)
        };
        directory.join(format!("{database}.db"))
    }

    fn sqlite_options(&self, database: &str) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(self.sqlite_file(database))
            .create_if_missing(false)
            .busy_timeout(CONNECT_TIMEOUT)
    }

    fn unavailable(&self, error: impl std::fmt::Display) -> CatalogError {
        CatalogError::Unavailable(self.options.redact(&error.to_string()))
    }

    /// Opens one connection and runs `SELECT 1`, so that registration reports
    /// the driver's own reason (refused, unknown database, bad password)
    /// rather than a pool time-out.
    async fn check_connection(&self, database: &str) -> Result<(), String> {
        let attempt = async {
            match &self.url {
                JdbcUrl::Postgres { .. } => {
                    let mut conn = self.pg_options(database).connect().await?;
                    sqlx::query("SELECT 1").execute(&mut conn).await?;
                    conn.close().await
                }
                JdbcUrl::MySql { .. } => {
                    let mut conn = self.mysql_options(database).connect().await?;
                    sqlx::query("SELECT 1").execute(&mut conn).await?;
                    conn.close().await
                }
                JdbcUrl::Sqlite { .. } => {
                    let mut conn = self.sqlite_options(database).connect().await?;
                    sqlx::query("SELECT count(*) FROM sqlite_master")
                        .execute(&mut conn)
                        .await?;
                    conn.close().await
                }
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.options.redact(&describe(&self.url, database, &e))),
            Err(_) => Err(format!(
                "connecting to {} timed out after {} s",
                target(&self.url, database),
                CONNECT_TIMEOUT.as_secs()
            )),
        }
    }

    async fn pool(&self, database: &str) -> DialectPool {
        let mut pools = self.pools.lock().await;
        if let Some(pool) = pools.get(database) {
            return pool.clone();
        }
        let pool = match &self.url {
            JdbcUrl::Postgres { .. } => DialectPool::Postgres(
                PgPoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .idle_timeout(Duration::from_secs(300))
                    .connect_lazy_with(self.pg_options(database)),
            ),
            // Every MySQL database is reachable through information_schema
            // from one connection, so a MySQL catalog needs only one pool.
            JdbcUrl::MySql { .. } => DialectPool::MySql(
                MySqlPoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .idle_timeout(Duration::from_secs(300))
                    .connect_lazy_with(self.mysql_options(&self.default_database)),
            ),
            JdbcUrl::Sqlite { .. } => DialectPool::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .idle_timeout(Duration::from_secs(300))
                    .connect_lazy_with(self.sqlite_options(database)),
            ),
        };
        pools.insert(database.to_owned(), pool.clone());
        pool
    }

    /// The database exists and is not a ctasd store: every operation on a
    /// database starts here.
    async fn ensure_database(&self, database: &str) -> Result<(), CatalogError> {
        if !self.list_databases().await?.iter().any(|d| d == database) {
            return Err(CatalogError::DatabaseNotFound(database.to_owned()));
        }
        self.refuse_store(database).await
    }

    /// Why a SQLite database may not even be opened, if it is one of ctasd's
    /// own files reached through a link: two names for one file give SQLite
    /// two write-ahead logs, and the store could be damaged.
    fn refuse_own_file(&self, database: &str) -> Option<String> {
        match self.url {
            JdbcUrl::Sqlite { .. } => self.protected.refuse_file(&self.sqlite_file(database)),
            _ => None,
        }
    }

    /// Refuses a database that holds a ctasd store (this process's own or
    /// another's), recognised by its marker table whatever the host name,
    /// port, socket or file path it is reached by.
    async fn refuse_store(&self, database: &str) -> Result<(), CatalogError> {
        if self.not_stores.lock().await.contains(database) {
            return Ok(());
        }
        if let Some(reason) = self.refuse_own_file(database) {
            return Err(CatalogError::Protected(reason));
        }
        let holds_store: Result<bool, sqlx::Error> = match self.pool(database).await {
            DialectPool::Postgres(pool) => {
                sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class WHERE relname = $1 AND relkind IN ('r', 'p'))",
                )
                .bind(STORE_MARKER_TABLE)
                .fetch_one(&pool)
                .await
            }
            DialectPool::MySql(pool) => {
                sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?)",
                )
                .bind(database)
                .bind(STORE_MARKER_TABLE)
                .fetch_one(&pool)
                .await
            }
            DialectPool::Sqlite(pool) => {
                sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
                )
                .bind(STORE_MARKER_TABLE)
                .fetch_one(&pool)
                .await
            }
        };
        if holds_store.map_err(|e| self.unavailable(e))? {
            return Err(CatalogError::Protected(format!(
                "database '{database}' of {} holds a ctasd store (table '{STORE_MARKER_TABLE}'): \
                 ctasd never creates, replaces or drops tables in a store",
                target(&self.url, database)
            )));
        }
        self.not_stores.lock().await.insert(database.to_owned());
        Ok(())
    }
}

pub(crate) fn write_location(
    options: &CatalogOptions,
    staging: &Staging,
    staged: bool,
) -> super::WriteLocation {
    let name = if staged {
        staging_table(staging)
    } else {
        staging.table.clone()
    };
    let base = options
        .get("base-url")
        .unwrap_or_default()
        .trim_end_matches('/');
    // Submission refuses database names that a URL would misread; escaping
    // here as well keeps a job stored before that rule from reaching an
    // engine as extra connection parameters.
    let database = escape_path_segment(&staging.database);
    let url = match JdbcUrl::parse(base) {
        Ok(JdbcUrl::Sqlite { directory }) => {
            format!("jdbc:sqlite:{}/{database}.db", directory.display())
        }
        _ => format!("{base}/{database}"),
    };
    let mut sink_options = std::collections::BTreeMap::from([
        ("connector".to_owned(), "jdbc".to_owned()),
        ("url".to_owned(), url.clone()),
        ("table-name".to_owned(), name.clone()),
    ]);
    if let Some(username) = options.get("username") {
        sink_options.insert("username".into(), username.into());
    }
    super::WriteLocation {
        kind: "table".into(),
        name,
        url: Some(url),
        path: None,
        sink_options,
    }
}

fn staging_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}stg_{}", staging.key.as_str())
}

fn old_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}old_{}", staging.key.as_str())
}

fn is_already_exists(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.message().contains("already exists"))
}

impl JdbcCatalog {
    fn dialect(&self) -> Dialect {
        match self.url {
            JdbcUrl::Postgres { .. } => Dialect::Postgres,
            JdbcUrl::MySql { .. } => Dialect::MySql,
            JdbcUrl::Sqlite { .. } => Dialect::Sqlite,
        }
    }

    /// A table name as DDL names it: MySQL's connection serves every database,
    /// so the name is qualified; PostgreSQL and SQLite pools are per database.
    fn qualified(&self, database: &str, table: &str) -> Result<String, CatalogError> {
        let dialect = self.dialect();
        let quote = |name| {
            dialect
                .quote(name)
                .map_err(|e| CatalogError::Unsupported(e.to_string()))
        };
        Ok(match dialect {
            Dialect::MySql => format!("{}.{}", quote(database)?, quote(table)?),
            Dialect::Postgres | Dialect::Sqlite => quote(table)?,
        })
    }

    fn create_ddl(&self, staging: &Staging, table: &str) -> Result<String, CatalogError> {
        let name = self.qualified(&staging.database, table)?;
        self.dialect()
            .create_table(&name, &staging.definition)
            .map_err(|e| CatalogError::Unsupported(e.to_string()))
    }

    async fn exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        let count: Result<i64, sqlx::Error> = match self.pool(database).await {
            DialectPool::Postgres(pool) => {
                sqlx::query_scalar(
                    "SELECT count(*) FROM information_schema.tables \
                     WHERE table_schema = current_schema() AND table_name = $1",
                )
                .bind(table)
                .fetch_one(&pool)
                .await
            }
            DialectPool::MySql(pool) => {
                sqlx::query_scalar("SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?")
                    .bind(database)
                    .bind(table)
                    .fetch_one(&pool)
                    .await
            }
            DialectPool::Sqlite(pool) => {
                sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1")
                    .bind(table)
                    .fetch_one(&pool)
                    .await
            }
        };
        count.map(|n| n > 0).map_err(|e| self.unavailable(e))
    }

    /// Creates the table under a probe name and takes it back, so that
    /// whatever the system refuses (row size, a limit this code does not
    /// know, a missing privilege) is refused at submission, in the system's
    /// words. PostgreSQL and SQLite roll the DDL back; MySQL creates a
    /// temporary table, seen only by its own connection, and drops it.
    async fn dry_run(
        &self,
        database: &str,
        definition: &crate::domain::table::TableDefinition,
    ) -> Result<(), CatalogError> {
        let probe = format!("{HIDDEN_PREFIX}probe_{}", uuid::Uuid::new_v4().simple());
        let name = self.qualified(database, &probe)?;
        let ddl = self
            .dialect()
            .create_table(&name, definition)
            .map_err(|e| CatalogError::Unsupported(e.to_string()))?;
        let attempt: Result<(), sqlx::Error> = async {
            match self.pool(database).await {
                DialectPool::Postgres(pool) => {
                    let mut tx = pool.begin().await?;
                    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
                        .execute(&mut *tx)
                        .await?;
                    tx.rollback().await
                }
                DialectPool::Sqlite(pool) => {
                    let mut tx = pool.begin().await?;
                    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
                        .execute(&mut *tx)
                        .await?;
                    tx.rollback().await
                }
                DialectPool::MySql(pool) => {
                    let mut conn = pool.acquire().await?;
                    let temporary = ddl.replacen("CREATE TABLE", "CREATE TEMPORARY TABLE", 1);
                    sqlx::raw_sql(sqlx::AssertSqlSafe(temporary))
                        .execute(&mut *conn)
                        .await?;
                    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP TEMPORARY TABLE {name}")))
                        .execute(&mut *conn)
                        .await
                        .map(|_| ())
                }
            }
        }
        .await;
        match attempt {
            Ok(()) => Ok(()),
            Err(sqlx::Error::Database(refused)) => Err(CatalogError::Unsupported(format!(
                "{} refuses this table: {}",
                self.dialect().name(),
                self.options.redact(refused.message())
            ))),
            Err(other) => Err(self.unavailable(other)),
        }
    }

    /// Runs generated DDL (every name in it quoted by [`Dialect::quote`]). On
    /// PostgreSQL and SQLite the statements form one transaction; MySQL
    /// commits each DDL statement by itself, so its callers pass statements
    /// that are atomic on their own.
    async fn run(&self, database: &str, statements: &[String]) -> Result<(), sqlx::Error> {
        match self.pool(database).await {
            DialectPool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                for (done, sql) in statements.iter().enumerate() {
                    if done > 0 {
                        fault::reached(Point::CommitMidway);
                    }
                    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await
            }
            DialectPool::Sqlite(pool) => {
                let mut tx = pool.begin().await?;
                for (done, sql) in statements.iter().enumerate() {
                    if done > 0 {
                        fault::reached(Point::CommitMidway);
                    }
                    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await
            }
            DialectPool::MySql(pool) => {
                for (done, sql) in statements.iter().enumerate() {
                    if done > 0 {
                        fault::reached(Point::CommitMidway);
                    }
                    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                        .execute(&pool)
                        .await?;
                }
                Ok(())
            }
        }
    }
}

fn target(url: &JdbcUrl, database: &str) -> String {
    match url {
        JdbcUrl::Postgres { host, port } => {
            format!("PostgreSQL at {host}:{port}, database '{database}'")
        }
        JdbcUrl::MySql { host, port } => {
            format!("MySQL/MariaDB at {host}:{port}, database '{database}'")
        }
        JdbcUrl::Sqlite { directory } => {
            format!(
                "SQLite database '{}'",
                directory.join(format!("{database}.db")).display()
            )
        }
    }
}

fn describe(url: &JdbcUrl, database: &str, error: &sqlx::Error) -> String {
    let reason = match error {
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    };
    format!("connecting to {} failed: {reason}", target(url, database))
}

#[async_trait]
impl Catalog for JdbcCatalog {
    fn default_database(&self) -> &str {
        &self.default_database
    }

    async fn list_databases(&self) -> Result<Vec<String>, CatalogError> {
        match (&self.url, self.pool(&self.default_database).await) {
            (_, DialectPool::Postgres(pool)) => sqlx::query_scalar(
                "SELECT datname::text FROM pg_database WHERE NOT datistemplate AND datallowconn ORDER BY 1",
            )
            .fetch_all(&pool)
            .await
            .map_err(|e| self.unavailable(e)),
            (_, DialectPool::MySql(pool)) => sqlx::query_scalar(
                "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata \
                 WHERE schema_name NOT IN ('information_schema', 'mysql', 'performance_schema', 'sys') ORDER BY 1",
            )
            .fetch_all(&pool)
            .await
            .map_err(|e| self.unavailable(e)),
            (JdbcUrl::Sqlite { directory }, _) => {
                let mut names = Vec::new();
                let mut entries = tokio::fs::read_dir(directory).await.map_err(|e| self.unavailable(e))?;
                while let Some(entry) = entries.next_entry().await.map_err(|e| self.unavailable(e))? {
                    let file_name = entry.file_name().to_string_lossy().into_owned();
                    if let Some(stem) = file_name.strip_suffix(".db")
                        && entry.file_type().await.is_ok_and(|t| t.is_file())
                    {
                        names.push(stem.to_owned());
                    }
                }
                names.sort();
                Ok(names)
            }
            (_, DialectPool::Sqlite(_)) => unreachable!("a SQLite pool always has a jdbc:sqlite: URL"),
        }
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError> {
        self.ensure_database(database).await?;
        let tables = match self.pool(database).await {
            DialectPool::Postgres(pool) => {
                sqlx::query_scalar(
                    "SELECT table_name::text FROM information_schema.tables \
                     WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1",
                )
                .fetch_all(&pool)
                .await
            }
            DialectPool::MySql(pool) => {
                sqlx::query_scalar(
                    "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                     WHERE table_schema = ? AND table_type = 'BASE TABLE' ORDER BY 1",
                )
                .bind(database)
                .fetch_all(&pool)
                .await
            }
            DialectPool::Sqlite(pool) => {
                sqlx::query_scalar(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
                     ORDER BY name",
                )
                .fetch_all(&pool)
                .await
            }
        };
        let tables: Vec<String> = tables.map_err(|e| self.unavailable(e))?;
        Ok(tables
            .into_iter()
            .filter(|t| !t.starts_with(HIDDEN_PREFIX))
            .collect())
    }

    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError> {
        if !self.list_tables(database).await?.iter().any(|t| t == table) {
            return Err(CatalogError::TableNotFound {
                database: database.into(),
                table: table.into(),
            });
        }
        let rows: Result<Vec<(String, String, bool)>, sqlx::Error> = match self.pool(database).await {
            DialectPool::Postgres(pool) => {
                sqlx::query_as(
                    "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull \
                     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
                     JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = current_schema() AND c.relname = $1 \
                       AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                )
                .bind(table)
                .fetch_all(&pool)
                .await
            }
            DialectPool::MySql(pool) => {
                sqlx::query_as::<_, (String, String, String)>(
                    "SELECT CAST(column_name AS CHAR), CAST(column_type AS CHAR), CAST(is_nullable AS CHAR) \
                     FROM information_schema.columns WHERE table_schema = ? AND table_name = ? \
                     ORDER BY ordinal_position",
                )
                .bind(database)
                .bind(table)
                .fetch_all(&pool)
                .await
                .map(|rows| rows.into_iter().map(|(n, t, nullable)| (n, t, nullable == "YES")).collect())
            }
            DialectPool::Sqlite(pool) => {
                sqlx::query_as::<_, (String, String, i64)>(
                    "SELECT name, type, \"notnull\" FROM pragma_table_info(?1) ORDER BY cid",
                )
                .bind(table)
                .fetch_all(&pool)
                .await
                .map(|rows| rows.into_iter().map(|(n, t, not_null)| (n, t, not_null == 0)).collect())
            }
        };
        let columns = rows
            .map_err(|e| self.unavailable(e))?
            .into_iter()
            .map(|(name, data_type, nullable)| ColumnInfo {
                name,
                data_type,
                nullable,
            })
            .collect();
        Ok(TableInfo {
            database: database.into(),
            name: table.into(),
            columns,
        })
    }

    async fn table_exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        self.ensure_database(database).await?;
        self.exists(database, table).await
    }

    async fn create_table(&self, staging: &Staging) -> Result<bool, CatalogError> {
        self.ensure_database(&staging.database).await?;
        if self.exists(&staging.database, &staging.table).await? {
            return Ok(false);
        }
        let ddl = self.create_ddl(staging, &staging.table)?;
        match self.run(&staging.database, &[ddl]).await {
            Err(e) if is_already_exists(&e) => Ok(false),
            other => other.map(|()| true).map_err(|e| self.unavailable(e)),
        }
    }

    async fn begin(&self, staging: &Staging) -> Result<(), CatalogError> {
        self.ensure_database(&staging.database).await?;
        let ddl = self.create_ddl(staging, &staging_table(staging))?.replacen(
            "CREATE TABLE",
            "CREATE TABLE IF NOT EXISTS",
            1,
        );
        self.run(&staging.database, &[ddl])
            .await
            .map_err(|e| self.unavailable(e))
    }

    async fn commit(
        &self,
        staging: &Staging,
        publish: Publish,
    ) -> Result<CommitOutcome, CatalogError> {
        let database = staging.database.as_str();
        self.ensure_database(database).await?;
        let (staged_name, old_name) = (staging_table(staging), old_table(staging));
        let target_exists = self.exists(database, &staging.table).await?;
        if !self.exists(database, &staged_name).await? {
            // Published already, perhaps by a run that crashed before it could
            // record so; a MySQL swap may have left the replaced table behind.
            if self.exists(database, &old_name).await? {
                let drop = format!(
                    "DROP TABLE IF EXISTS {}",
                    self.qualified(database, &old_name)?
                );
                self.run(database, &[drop])
                    .await
                    .map_err(|e| self.unavailable(e))?;
            }
            return if target_exists {
                Ok(CommitOutcome::AlreadyCommitted)
            } else {
                Err(staging_missing(staging))
            };
        }
        let staged = self.qualified(database, &staged_name)?;
        let target = self.qualified(database, &staging.table)?;
        let renamed = self
            .dialect()
            .quote(&staging.table)
            .map_err(|e| CatalogError::Unsupported(e.to_string()))?;
        let statements = match (publish, target_exists, self.dialect()) {
            (Publish::Create, true, _) => return Err(table_exists_error(staging)),
            (Publish::Replace, false, _) => return Err(table_not_found(staging)),
            (Publish::Create, false, Dialect::MySql) => {
                vec![format!("RENAME TABLE {staged} TO {target}")]
            }
            (Publish::Create, false, _) => {
                vec![format!("ALTER TABLE {staged} RENAME TO {renamed}")]
            }
            // One statement swaps both names atomically; the old table is dropped after.
            (Publish::Replace, true, Dialect::MySql) => {
                let old = self.qualified(database, &old_name)?;
                vec![
                    format!("RENAME TABLE {target} TO {old}, {staged} TO {target}"),
                    format!("DROP TABLE {old}"),
                ]
            }
            // Transactional DDL: readers see the old rows until the commit.
            (Publish::Replace, true, _) => {
                vec![
                    format!("DROP TABLE {target}"),
                    format!("ALTER TABLE {staged} RENAME TO {renamed}"),
                ]
            }
        };
        match self.run(database, &statements).await {
            Ok(()) => Ok(CommitOutcome::Committed),
            Err(e) if is_already_exists(&e) => Err(table_exists_error(staging)),
            Err(e) => Err(self.unavailable(e)),
        }
    }

    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError> {
        self.ensure_database(&staging.database).await?;
        let drop = format!(
            "DROP TABLE IF EXISTS {}",
            self.qualified(&staging.database, &staging_table(staging))?
        );
        self.run(&staging.database, &[drop])
            .await
            .map_err(|e| self.unavailable(e))
    }

    async fn check_target(
        &self,
        database: &str,
        table: &str,
        definition: &crate::domain::table::TableDefinition,
    ) -> Result<(), CatalogError> {
        if table.starts_with(HIDDEN_PREFIX) {
            return Err(CatalogError::Unsupported(format!(
                "table names starting with '{HIDDEN_PREFIX}' are reserved for ctasd's staging"
            )));
        }
        check_url_safe(database).map_err(CatalogError::Unsupported)?;
        let unsupported =
            |e: super::dialect::DialectError| CatalogError::Unsupported(e.to_string());
        let dialect = self.dialect();
        dialect.check_database_name(database).map_err(unsupported)?;
        dialect
            .check_table(table, definition)
            .map_err(unsupported)?;
        self.ensure_database(database).await?;
        self.dry_run(database, definition).await
    }

    async fn close(&self) {
        let pools: Vec<DialectPool> = self.pools.lock().await.drain().map(|(_, p)| p).collect();
        for pool in pools {
            match pool {
                DialectPool::Postgres(p) => p.close().await,
                DialectPool::MySql(p) => p.close().await,
                DialectPool::Sqlite(p) => p.close().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_name_a_server_or_a_directory() {
        assert_eq!(
            JdbcUrl::parse("jdbc:postgresql://127.0.0.1:5433").unwrap(),
            JdbcUrl::Postgres {
                host: "127.0.0.1".into(),
                port: 5433
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:postgresql://db.example/").unwrap(),
            JdbcUrl::Postgres {
                host: "db.example".into(),
                port: 5432
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:mariadb://h").unwrap(),
            JdbcUrl::MySql {
                host: "h".into(),
                port: 3306
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:mysql://[::1]:3307").unwrap(),
            JdbcUrl::MySql {
                host: "::1".into(),
                port: 3307
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:sqlite:/var/db").unwrap(),
            JdbcUrl::Sqlite {
                directory: "/var/db".into()
            }
        );
    }

    #[test]
    fn staging_names_fit_every_dialects_identifier_limit() {
        let key = super::super::StagingKey::new(&"f".repeat(32), 63).unwrap();
        let definition =
            serde_json::from_value(serde_json::json!({"columns": [{"name": "x", "type": "INT"}]}))
                .unwrap();
        let staging = Staging {
            key,
            database: "d".into(),
            table: "t".into(),
            definition,
        };
        for dialect in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            assert!(dialect.quote(&staging_table(&staging)).is_ok());
            assert!(dialect.quote(&old_table(&staging)).is_ok());
        }
    }

    #[test]
    fn database_names_cannot_add_parameters_to_a_jdbc_url() {
        let injected = "x?allowLoadLocalInfile=true&autoDeserialize=true";
        assert!(check_url_safe(injected).unwrap_err().contains("'?'"));
        assert!(check_url_safe("x;a=b").is_err());
        assert!(check_url_safe("analytics_2026-q1.eu").is_ok());
        assert_eq!(
            escape_path_segment(injected),
            "x%3FallowLoadLocalInfile%3Dtrue%26autoDeserialize%3Dtrue"
        );
    }

    #[test]
    fn base_urls_with_a_database_credentials_or_a_bad_port_are_refused() {
        for bad in [
            "jdbc:postgresql://h:5432/db",
            "jdbc:mysql://user:pw@h",
            "jdbc:postgresql://h:99999",
            "jdbc:postgresql://",
            "jdbc:oracle:thin:@h",
            "postgres://h",
            "jdbc:sqlite:relative/dir",
        ] {
            assert!(JdbcUrl::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
