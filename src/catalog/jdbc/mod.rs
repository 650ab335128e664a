//! `jdbc`: tables in a real PostgreSQL, MySQL/MariaDB or SQLite database.
//!
//! Options use Flink's JDBC catalog names (`base-url`, `default-database`,
//! `username`, `password`). The base URL names a server (or, for SQLite, a
//! directory whose `<database>.db` files are the databases); the database is
//! always a separate option, as in Flink. Connections are built from typed
//! connect options, never from a URL with the password spliced in, so no
//! driver message can echo it; [`CatalogOptions::redact`] guards the rest.
//!
//! Staging, publication and removal are written once here, over two traits:
//! [`Dialect`] (the statements, as text) and [`Server`] (running them), one
//! implementation of each per system in `postgres`, `mysql` and `sqlite`.
//! A staging carries a marker naming the `begin` that made it, so a begin
//! for a new attempt (after a restart) empties it, and a repeated begin of
//! the same attempt leaves the rows written meanwhile alone.

pub mod dialect;
pub mod mysql;
pub mod postgres;
pub mod sqlite;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::installation::Installation;
use super::protected::{ProtectedPaths, STORE_MARKER_TABLE, canonical_directory};
use super::registry::{CatalogFactory, FactoryError};
use super::{
    BeginOutcome, Catalog, CatalogError, ColumnInfo, CommitOutcome, CreateOutcome, Publish,
    Staging, TableInfo, WriteLocation, staging_missing, table_exists_error, table_not_found,
};
use crate::domain::WriteLocationKind;
use crate::domain::options::{OptionSpec, ValidationError};
use crate::domain::table::TableDefinition;
use crate::domain::{CatalogOptions, ObjectName};
pub use dialect::{Dialect, DialectError, NameKind, Publication, Shape};

/// Tables ctasd makes for itself start with this; browsing hides them.
const HIDDEN_PREFIX: &str = "__ctasd_";

/// Where a system whose published tables keep no marker (MySQL) records
/// which staging each table of the database was published from, with the
/// comment that proves the log is ctasd's.
const PUBLICATION_LOG: &str = "__ctasd_published";
const LOG_NOTE: &str = "ctasd publication log: the staging each table here was published from";

/// How long opening a connection may take before the catalog is reported unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a table definition the database accepted in a dry run is
/// taken as accepted again, without another dry run.
const ACCEPTED_FOR: Duration = Duration::from_secs(60);

/// Most definitions remembered as accepted; past it, they start afresh.
const MOST_ACCEPTED: usize = 1024;

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
    installation: Installation,
}

impl JdbcCatalogFactory {
    pub fn new(protected: Arc<ProtectedPaths>, installation: Installation) -> Self {
        Self {
            protected,
            installation,
        }
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

    /// `username` and `password` are required unless the base URL names
    /// a SQLite directory.
    fn required_with(&self, options: &CatalogOptions) -> Vec<&'static str> {
        match options.get("base-url").map(JdbcUrl::parse) {
            Some(Ok(JdbcUrl::Sqlite { .. })) => Vec::new(),
            _ => vec!["username", "password"],
        }
    }

    fn validate(&self, options: &CatalogOptions) -> Result<(), ValidationError> {
        JdbcUrl::parse(options.get("base-url").unwrap_or_default())
            .map_err(|r| invalid("base-url", r))?;
        let database = options.get("default-database").unwrap_or_default();
        ObjectName::parse("default-database", database)
            .map_err(|e| invalid("default-database", e.to_string()))?;
        check_url_safe(database).map_err(|reason| invalid("default-database", reason))
    }

    fn write_location(
        &self,
        options: &CatalogOptions,
        staging: &Staging,
        staged: bool,
    ) -> WriteLocation {
        let name = if staged {
            staging_table(staging)
        } else {
            staging.table.clone()
        };
        let connector = connector_options(options, &staging.database, &name);
        let mut location = WriteLocation {
            url: connector.get("url").cloned(),
            ..super::sink::write_location(WriteLocationKind::Table, name, staging, connector)
        };
        if options.get("password").is_some_and(|p| !p.is_empty()) {
            location.withheld_options.push("password".to_owned());
            location.withheld_options.sort();
            location.withheld_options.dedup();
        }
        location
    }

    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, FactoryError> {
        let url = JdbcUrl::parse(options.get("base-url").unwrap_or_default())?;
        let default_database = options
            .get("default-database")
            .unwrap_or_default()
            .to_owned();
        let username = options.get("username").unwrap_or_default().to_owned();
        let password = options.get("password").unwrap_or_default().to_owned();
        let server: Box<dyn Server> = match url {
            JdbcUrl::Postgres { host, port } => Box::new(postgres::PostgresServer::new(
                host, port, username, password,
            )),
            JdbcUrl::MySql { host, port } => Box::new(mysql::MySqlServer::new(
                host,
                port,
                username,
                password,
                default_database.clone(),
            )),
            JdbcUrl::Sqlite { directory } => {
                canonical_directory(&directory.display().to_string())
                    .and_then(|dir| {
                        self.protected
                            .refuse_database_directory(&dir)
                            .map_or(Ok(()), Err)
                    })
                    .map_err(|reason| FactoryError::Invalid(invalid("base-url", reason)))?;
                let server = sqlite::SqliteServer::new(directory);
                if let Some(reason) = self
                    .protected
                    .refuse_database_file(&server.file(&default_database))
                {
                    return Err(FactoryError::Invalid(invalid("default-database", reason)));
                }
                Box::new(server)
            }
        };
        let catalog = JdbcCatalog {
            server,
            protected: self.protected.clone(),
            installation: self.installation.clone(),
            options: options.clone(),
            default_database,
            not_stores: Mutex::new(HashSet::new()),
            found_databases: std::sync::Mutex::new(HashSet::new()),
            accepted: std::sync::Mutex::new(HashMap::new()),
        };
        catalog.check_connection().await?;
        match catalog.refuse_store(&catalog.default_database).await {
            Ok(()) => Ok(Arc::new(catalog)),
            Err(CatalogError::Protected(reason)) => {
                Err(FactoryError::Invalid(invalid("default-database", reason)))
            }
            Err(other) => Err(FactoryError::Unreachable(other.to_string())),
        }
    }
}

/// Flink's JDBC connector options for `table` in `database`: its URL and
/// user, never the password.
fn connector_options(
    options: &CatalogOptions,
    database: &str,
    table: &str,
) -> BTreeMap<String, String> {
    let base = options
        .get("base-url")
        .unwrap_or_default()
        .trim_end_matches('/');
    // Submission refuses database names that a URL would misread; escaping
    // here as well keeps a job stored before that rule from reaching an
    // engine as extra connection parameters.
    let database = escape_path_segment(database);
    let url = match JdbcUrl::parse(base) {
        Ok(JdbcUrl::Sqlite { directory }) => {
            format!("jdbc:sqlite:{}/{database}.db", directory.display())
        }
        _ => format!("{base}/{database}"),
    };
    let mut connector = BTreeMap::from([
        ("connector".to_owned(), "jdbc".to_owned()),
        ("url".to_owned(), url),
        ("table-name".to_owned(), table.to_owned()),
    ]);
    if let Some(username) = options.get("username") {
        connector.insert("username".into(), username.into());
    }
    connector
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

/// One lazily connecting pool per database of a server, for the systems
/// where a connection is bound to one database.
pub(crate) struct PoolPerDatabase<DB: sqlx::Database> {
    pools: Mutex<std::collections::HashMap<String, sqlx::Pool<DB>>>,
}

impl<DB: sqlx::Database> PoolPerDatabase<DB> {
    pub(crate) fn new() -> Self {
        Self {
            pools: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The pool for `database`, made with `options` the first time.
    pub(crate) async fn get(
        &self,
        database: &str,
        options: impl FnOnce() -> <DB::Connection as sqlx::Connection>::Options,
    ) -> sqlx::Pool<DB> {
        let mut pools = self.pools.lock().await;
        pools
            .entry(database.to_owned())
            .or_insert_with(|| {
                sqlx::pool::PoolOptions::<DB>::new()
                    .max_connections(4)
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .idle_timeout(Duration::from_secs(300))
                    .connect_lazy_with(options())
            })
            .clone()
    }

    pub(crate) async fn close(&self) {
        let pools: Vec<_> = self.pools.lock().await.drain().map(|(_, p)| p).collect();
        for pool in pools {
            pool.close().await;
        }
    }
}

/// How [`run_statements`] ends its transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Keeps what the statements did; the crash suite can stop the run
    /// between two statements.
    Commit,
    /// Takes it all back: a dry run.
    RollBack,
}

/// `sql` as one statement alone. A text that reads as more than one
/// ([`dialect::is_one_statement`]) is not run; the rest is sent as a
/// prepared statement, which PostgreSQL and MySQL/MariaDB refuse to hold
/// more than one statement (their simple and text protocols would run them
/// all). SQLite's driver runs every statement of a text, so there the scan
/// is what keeps it to one. Not kept in the statement cache: DDL names
/// tables that are each used once.
pub(crate) fn one_statement<'q, DB>(
    sql: &str,
) -> Result<sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>, sqlx::Error>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
{
    if !dialect::is_one_statement(sql) {
        return Err(sqlx::Error::InvalidArgument(
            "ctasd refused to run a statement that reads as more than one".into(),
        ));
    }
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql.to_owned())).persistent(false))
}

/// Runs `statements` in one transaction on `pool`, for the systems whose
/// DDL is transactional.
pub(crate) async fn run_statements<DB>(
    pool: &sqlx::Pool<DB>,
    statements: &[String],
    ending: Ending,
) -> Result<(), sqlx::Error>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    let mut tx = pool.begin().await?;
    for (done, sql) in statements.iter().enumerate() {
        if done > 0 && ending == Ending::Commit {
            crate::fault::reached(crate::fault::Point::CommitMidway);
        }
        one_statement::<DB>(sql)?.execute(&mut *tx).await?;
    }
    match ending {
        Ending::Commit => tx.commit().await,
        Ending::RollBack => tx.rollback().await,
    }
}

/// A database server reached through one system's driver: the I/O that
/// [`JdbcCatalog`]'s recipes need, each method one round trip or one
/// transaction.
#[async_trait]
pub(crate) trait Server: Send + Sync {
    fn dialect(&self) -> &'static dyn Dialect;
    /// `PostgreSQL at host:port, database 'x'`, for messages.
    fn describe(&self, database: &str) -> String;
    /// Opens one connection to `database` and runs a query.
    async fn check_connection(&self, database: &str) -> Result<(), sqlx::Error>;
    async fn list_databases(&self, default_database: &str) -> Result<Vec<String>, sqlx::Error>;
    /// Every table, ctasd's hidden ones too.
    async fn list_tables(&self, database: &str) -> Result<Vec<String>, sqlx::Error>;
    /// `(name, type, nullable)` of each column, in order.
    async fn columns(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Vec<(String, String, bool)>, sqlx::Error>;
    /// The text that may hold a staging's marker (its comment, or its DDL
    /// on SQLite); `None` when the table does not exist.
    async fn table_note(&self, database: &str, table: &str) -> Result<Option<String>, sqlx::Error>;
    /// The text that keeps a staging's marker once it is published
    /// ([`Dialect::lasting_mark`]); `None` when the table does not exist.
    async fn lasting_mark(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Option<String>, sqlx::Error> {
        self.table_note(database, table).await
    }
    /// The marker the publication log `log` (as DDL names it) holds for
    /// `table`, where the dialect keeps a log and the log is ctasd's.
    async fn logged_publication(
        &self,
        _database: &str,
        _log: &str,
        _table: &str,
    ) -> Result<Option<String>, sqlx::Error> {
        Ok(None)
    }
    /// [`Server::table_note`] of each of `tables`, in one round trip where
    /// the system can.
    async fn table_notes(
        &self,
        database: &str,
        tables: &[&str],
    ) -> Result<Vec<Option<String>>, sqlx::Error> {
        let mut notes = Vec::with_capacity(tables.len());
        for table in tables {
            notes.push(self.table_note(database, table).await?);
        }
        Ok(notes)
    }
    async fn holds_store(&self, database: &str, marker_table: &str) -> Result<bool, sqlx::Error>;
    /// Whether `relation` names an object of the schema other than one of
    /// `table`'s indexes (PostgreSQL: a primary key names its index).
    async fn name_taken_elsewhere(
        &self,
        _database: &str,
        _relation: &str,
        _table: &str,
    ) -> Result<bool, sqlx::Error> {
        Ok(false)
    }
    /// What outside `table` a replace of it would change, each named (a
    /// foreign key of another table, a trigger, a view): where DDL is not
    /// transactional, a replace is a rename and a drop, and the rename
    /// would carry these over to the table ctasd parks and drops.
    async fn replace_blockers(
        &self,
        _database: &str,
        _table: &str,
    ) -> Result<Vec<String>, sqlx::Error> {
        Ok(Vec::new())
    }
    /// Runs statements: in one transaction where DDL is transactional, else
    /// one after another. The crash suite can stop it between two.
    async fn run(&self, database: &str, statements: &[String]) -> Result<(), sqlx::Error>;
    /// Runs a table's creation and takes it back.
    async fn dry_run(&self, database: &str, statements: &[String]) -> Result<(), sqlx::Error>;
    /// The system's own words for a refusal.
    fn explain(&self, error: &dyn sqlx::error::DatabaseError) -> String {
        error.message().to_owned()
    }
    /// Whether a refusal is worth retrying (a lock, a deadlock, the server
    /// busy or restarting) rather than final.
    fn is_transient(&self, error: &dyn sqlx::error::DatabaseError) -> bool;
    /// Whether every operation on a database that is gone fails with an
    /// error [`Server::is_missing_database`] knows, rather than creating
    /// the database or finding it empty: then a database found once need
    /// not be looked up before each operation.
    fn reports_missing_databases(&self) -> bool {
        false
    }
    fn is_missing_database(&self, _error: &dyn sqlx::error::DatabaseError) -> bool {
        false
    }
    async fn close(&self);
}

pub struct JdbcCatalog {
    server: Box<dyn Server>,
    protected: Arc<ProtectedPaths>,
    /// Named in every staging's marker.
    installation: Installation,
    /// Kept for redacting driver messages.
    options: CatalogOptions,
    default_database: String,
    /// Databases already shown not to hold a ctasd store.
    not_stores: Mutex<HashSet<String>>,
    /// Databases found to exist (and hold no store), where the server
    /// [reports missing databases](Server::reports_missing_databases): not
    /// looked up again until an operation finds one gone.
    found_databases: std::sync::Mutex<HashSet<String>>,
    /// When each (database, definition as DDL) passed its dry run: the same
    /// definition submitted again soon is not tried again.
    accepted: std::sync::Mutex<HashMap<(String, String), std::time::Instant>>,
}

/// One staging of a publication, with its names as DDL names them.
struct PublishNames<'a> {
    staging: &'a Staging,
    staged: String,
    target: String,
    /// Where a replaced table is parked (MySQL's swap).
    parked: String,
    /// The staging's own primary key name, unquoted.
    key: String,
    replace: bool,
    /// The staging's marker, as read before the publication.
    marker: String,
}

fn staging_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}stg_{}", staging.key.as_str())
}

/// Where MySQL parks a table its swap replaced (or an attempt's staging a
/// restart replaced) until it is dropped.
fn parked_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}old_{}", staging.key.as_str())
}

/// Where MySQL builds a replacement before swapping it in.
fn fresh_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}new_{}", staging.key.as_str())
}

/// A staging's own primary key name, where the system needs one.
fn staging_key_name(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}pk_{}", staging.key.as_str())
}

impl JdbcCatalog {
    /// The attempt a staging's note names, when it is this installation's
    /// marker; any other table at the staging's name is not ctasd's.
    fn marked_attempt(&self, staging: &Staging, note: &str) -> Result<i64, CatalogError> {
        let attempt =
            dialect::parse_attempt_marker(note).ok_or_else(|| unmarked_staging(staging))?;
        self.installation
            .check(note)
            .map_err(|other| CatalogError::NotOwned {
                database: staging.database.clone(),
                table: staging_table(staging),
                reason: format!(
                    "its marker names another ctasd installation ({other}): two stores share \
                     this database, or a job id was used again; it is that installation's"
                ),
            })?;
        Ok(attempt)
    }

    /// Whether the target of `staging`, found with no staging beside it,
    /// is the table this staging became: it carries the staging's marker
    /// (PostgreSQL on the table's row type, SQLite in its DDL, MySQL until
    /// the declared comment is set) naming this staging and installation.
    /// Anything else at the target is someone else's table, and a commit
    /// never reports it as its own.
    async fn prove_published(&self, staging: &Staging, log: &str) -> Result<String, CatalogError> {
        let database = &staging.database;
        let ours = |mark: &str| {
            dialect::marked_key(mark) == Some(staging.key.as_str())
                && self.installation.check(mark).is_ok()
        };
        let mark = self
            .server
            .lasting_mark(database, &staging.table)
            .await
            .map_err(|e| self.failed(database, e))?;
        if let Some(mark) = mark.filter(|m| ours(m)) {
            return Ok(mark);
        }
        if self.dialect().logs_publications() {
            let logged = self
                .server
                .logged_publication(database, log, &staging.table)
                .await
                .map_err(|e| self.failed(database, e))?;
            if let Some(mark) = logged.filter(|m| ours(m)) {
                return Ok(mark);
            }
        }
        Err(CatalogError::NotOwned {
            database: database.clone(),
            table: staging.table.clone(),
            reason: "the staging is gone and the table there carries no marker of this job's \
                     staging: ctasd cannot prove it published it, and does not report it as \
                     committed"
                .into(),
        })
    }
}

impl JdbcCatalog {
    /// Drops `table` when it carries ctasd's marker naming this
    /// installation on the table itself (PostgreSQL's row type, SQLite's
    /// DDL). A MySQL table keeps no mark of its own, and the publication
    /// log cannot tell a table ctasd published from one made at the same
    /// name after it was dropped elsewhere: ctasd drops none there. A table
    /// ctasd created for a streaming job carries no mark either.
    async fn drop_marked(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        self.ensure_database(database).await?;
        let mark = self
            .server
            .lasting_mark(database, table)
            .await
            .map_err(|e| self.failed(database, e))?;
        let Some(mark) = mark else {
            return Err(CatalogError::TableNotFound {
                database: database.to_owned(),
                table: table.to_owned(),
            });
        };
        let ours = !self.dialect().logs_publications()
            && dialect::marked_key(&mark).is_some()
            && self.installation.check(&mark).is_ok();
        if !ours {
            return Err(CatalogError::NotOwned {
                database: database.to_owned(),
                table: table.to_owned(),
                reason: "it carries no marker of a ctasd staging of this installation (MySQL \
                         tables keep none, nor do tables created for streaming jobs): ctasd drops \
                         only what it can prove it published"
                    .into(),
            });
        }
        let drop = format!("DROP TABLE {}", self.name_of(database, table)?);
        self.run(database, &[drop]).await
    }

    /// Creates the database's publication log where the dialect keeps one,
    /// and proves a table at its name is ctasd's log before anything is
    /// written to it.
    async fn ensure_publication_log(&self, database: &str, log: &str) -> Result<(), CatalogError> {
        let note = self
            .server
            .table_note(database, PUBLICATION_LOG)
            .await
            .map_err(|e| self.failed(database, e))?;
        match note.as_deref() {
            Some(LOG_NOTE) => Ok(()),
            Some(_) => Err(CatalogError::NotOwned {
                database: database.to_owned(),
                table: PUBLICATION_LOG.to_owned(),
                reason: "it stands at the name of ctasd's publication log without the log's \
                         comment: ctasd did not create it, and writes nothing to it"
                    .into(),
            }),
            None => {
                let create = self
                    .dialect()
                    .publication_log_ddl(log, LOG_NOTE)
                    .map_err(Self::unsupported)?;
                self.run(database, &Vec::from_iter(create)).await
            }
        }
    }
}

/// The staging key a dry run's probe table is marked with.
fn probe_staging_key() -> crate::domain::StagingKey {
    crate::domain::StagingKey::new(&"0".repeat(32), 0).expect("32 hex digits")
}

/// A table at a staging's name without ctasd's marker, which ctasd writes
/// in the statement or transaction that creates a staging: someone else
/// made it, and it is neither adopted, published nor dropped.
fn unmarked_staging(staging: &Staging) -> CatalogError {
    CatalogError::NotOwned {
        database: staging.database.clone(),
        table: staging_table(staging),
        reason: "it stands at ctasd's staging name without ctasd's marker, which ctasd writes \
                 when it creates a staging: ctasd did not create it, and neither adopts, \
                 publishes nor drops it"
            .into(),
    }
}

fn is_already_exists(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.message().contains("already exists"))
}

impl JdbcCatalog {
    fn dialect(&self) -> &'static dyn Dialect {
        self.server.dialect()
    }

    /// A driver error as a catalog error: a refusal by the system is final
    /// (`Refused`), unless it is one worth retrying; anything else (no
    /// connection, a time-out) is `Unavailable` and retried.
    fn failed(&self, database: &str, error: sqlx::Error) -> CatalogError {
        match &error {
            sqlx::Error::Database(db) if self.server.is_missing_database(db.as_ref()) => {
                self.found_databases().remove(database);
                CatalogError::DatabaseNotFound(database.to_owned())
            }
            sqlx::Error::Database(db) if !self.server.is_transient(db.as_ref()) => {
                CatalogError::Refused(self.options.redact(&format!(
                    "{} refused: {}",
                    self.dialect().name(),
                    self.server.explain(db.as_ref())
                )))
            }
            sqlx::Error::InvalidArgument(refusal) => CatalogError::Refused(refusal.clone()),
            sqlx::Error::Database(db) => CatalogError::Unavailable(self.options.redact(&format!(
                "{}: {}",
                self.server.describe(database),
                self.server.explain(db.as_ref())
            ))),
            other => CatalogError::Unavailable(
                self.options
                    .redact(&format!("{}: {other}", self.server.describe(database))),
            ),
        }
    }

    fn unsupported(error: DialectError) -> CatalogError {
        CatalogError::Unsupported(error.to_string())
    }

    /// Registration reports the driver's own reason (refused, unknown
    /// database, bad password) rather than a pool time-out.
    async fn check_connection(&self) -> Result<(), String> {
        let database = &self.default_database;
        let attempt = self.server.check_connection(database);
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                let reason = match &e {
                    sqlx::Error::Database(db) => db.message().to_owned(),
                    other => other.to_string(),
                };
                Err(self.options.redact(&format!(
                    "connecting to {} failed: {reason}",
                    self.server.describe(database)
                )))
            }
            Err(_) => Err(format!(
                "connecting to {} timed out after {} s",
                self.server.describe(database),
                CONNECT_TIMEOUT.as_secs()
            )),
        }
    }

    /// The database exists and is not a ctasd store: every operation on a
    /// database starts here. Where the server reports missing databases,
    /// one found before is taken as there, and an operation that finds it
    /// gone fails as [`CatalogError::DatabaseNotFound`] all the same.
    async fn ensure_database(&self, database: &str) -> Result<(), CatalogError> {
        if self.server.reports_missing_databases() && self.found_databases().contains(database) {
            return Ok(());
        }
        if !self.list_databases().await?.iter().any(|d| d == database) {
            return Err(CatalogError::DatabaseNotFound(database.to_owned()));
        }
        self.refuse_store(database).await?;
        self.found_databases().insert(database.to_owned());
        Ok(())
    }

    fn accepted_lately(&self, definition: &(String, String)) -> bool {
        let accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        accepted
            .get(definition)
            .is_some_and(|at| at.elapsed() < ACCEPTED_FOR)
    }

    fn remember_accepted(&self, definition: (String, String)) {
        let mut accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        if accepted.len() >= MOST_ACCEPTED {
            accepted.retain(|_, at| at.elapsed() < ACCEPTED_FOR);
        }
        if accepted.len() < MOST_ACCEPTED {
            accepted.insert(definition, std::time::Instant::now());
        }
    }

    fn found_databases(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.found_databases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Refuses a database that holds a ctasd store (this process's own or
    /// another's), recognised by its marker table whatever the host name,
    /// port, socket or file path it is reached by; and, before it is even
    /// opened, a SQLite file that is one of ctasd's own under another name
    /// (two names for one file give SQLite two write-ahead logs).
    async fn refuse_store(&self, database: &str) -> Result<(), CatalogError> {
        if self.not_stores.lock().await.contains(database) {
            return Ok(());
        }
        if let Some(reason) = self.own_file(database) {
            return Err(CatalogError::Protected(reason));
        }
        let holds_store = self
            .server
            .holds_store(database, STORE_MARKER_TABLE)
            .await
            .map_err(|e| self.failed(database, e))?;
        if holds_store {
            return Err(CatalogError::Protected(format!(
                "database '{database}' of {} holds a ctasd store (table '{STORE_MARKER_TABLE}'): \
                 ctasd never creates, replaces or drops tables in a store",
                self.server.describe(database)
            )));
        }
        self.not_stores.lock().await.insert(database.to_owned());
        Ok(())
    }

    fn own_file(&self, database: &str) -> Option<String> {
        let file: PathBuf = match self.options.get("base-url").map(JdbcUrl::parse) {
            Some(Ok(JdbcUrl::Sqlite { directory })) => directory.join(format!("{database}.db")),
            _ => return None,
        };
        self.protected.refuse_database_file(&file)
    }

    async fn exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        self.server
            .table_note(database, table)
            .await
            .map(|note| note.is_some())
            .map_err(|e| self.failed(database, e))
    }

    fn name_of(&self, database: &str, table: &str) -> Result<String, CatalogError> {
        self.dialect()
            .table_name(database, table)
            .map_err(Self::unsupported)
    }

    async fn run(&self, database: &str, statements: &[String]) -> Result<(), CatalogError> {
        self.server
            .run(database, statements)
            .await
            .map_err(|e| self.failed(database, e))
    }

    /// The statements that make `name` a fresh staging of this attempt.
    fn staging_ddl(
        &self,
        staging: &Staging,
        name: &str,
        attempt: i64,
    ) -> Result<Vec<String>, CatalogError> {
        let key_name = staging_key_name(staging);
        let marker = dialect::staging_marker(attempt, &staging.key, &self.installation);
        let shape = Shape {
            key_name: self
                .dialect()
                .stages_key_name()
                .then_some(key_name.as_str()),
            marker: Some(&marker),
        };
        self.dialect()
            .create_table(name, &staging.definition, shape)
            .map_err(Self::unsupported)
    }

    /// Statements that put a new table in place of the existing `target`,
    /// built by `create(name)`: inside one transaction where DDL is
    /// transactional, else built under another name and swapped in with one
    /// `RENAME TABLE`.
    fn replace_ddl(
        &self,
        staging: &Staging,
        target: &str,
        create: impl Fn(&str) -> Result<Vec<String>, CatalogError>,
    ) -> Result<Vec<String>, CatalogError> {
        if self.dialect().transactional_ddl() {
            let mut statements = vec![format!("DROP TABLE {target}")];
            statements.extend(create(target)?);
            return Ok(statements);
        }
        let database = &staging.database;
        let fresh = self.name_of(database, &fresh_table(staging))?;
        let parked = self.name_of(database, &parked_table(staging))?;
        let mut statements = vec![format!("DROP TABLE IF EXISTS {fresh}")];
        statements.extend(create(&fresh)?);
        statements.push(format!(
            "RENAME TABLE {target} TO {parked}, {fresh} TO {target}"
        ));
        statements.push(format!("DROP TABLE {parked}"));
        Ok(statements)
    }

    /// Publishes a batch of stagings of one database, all or nothing where
    /// the system allows.
    async fn publish(
        &self,
        database: &str,
        batch: &[(Staging, Publish)],
    ) -> Result<Vec<CommitOutcome>, CatalogError> {
        self.ensure_database(database).await?;
        let log = self.name_of(database, PUBLICATION_LOG)?;
        if self.dialect().logs_publications() {
            self.ensure_publication_log(database, &log).await?;
        }
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut names = Vec::new();
        for (staging, publish) in batch {
            let staged = staging_table(staging);
            let notes = self
                .server
                .table_notes(database, &[&staged, &staging.table])
                .await
                .map_err(|e| self.failed(database, e))?;
            if let Some(note) = notes[0].as_deref() {
                self.marked_attempt(staging, note)?;
            }
            let [staged_exists, target_exists] = [0, 1].map(|i| notes[i].is_some());
            match (staged_exists, target_exists, publish) {
                (false, true, _) => {
                    // Published already, perhaps by a run that crashed
                    // before it could record so: only if the table still
                    // carries this staging's marker, else it is another's.
                    let marker = self.prove_published(staging, &log).await?;
                    self.finish_published(staging, &log, &marker).await?;
                    outcomes.push(CommitOutcome::AlreadyCommitted);
                    continue;
                }
                (false, false, _) => return Err(staging_missing(staging)),
                (true, true, Publish::Create) => return Err(table_exists_error(staging)),
                (true, false, Publish::Replace) => return Err(table_not_found(staging)),
                (true, true, Publish::Replace) => {
                    self.refuse_blocked_replace(database, &staging.table)
                        .await?
                }
                (true, _, _) => {}
            }
            names.push(PublishNames {
                staging,
                staged: self.name_of(database, &staging_table(staging))?,
                target: self.name_of(database, &staging.table)?,
                parked: self.name_of(database, &parked_table(staging))?,
                key: staging_key_name(staging),
                replace: *publish == Publish::Replace,
                marker: notes[0].clone().unwrap_or_default(),
            });
            outcomes.push(CommitOutcome::Committed);
        }
        let items: Vec<Publication> = names
            .iter()
            .map(
                |PublishNames {
                     staging,
                     staged,
                     target,
                     parked,
                     key,
                     replace,
                     marker,
                 }| Publication {
                    staging: staged,
                    target,
                    replace: *replace,
                    parked,
                    staging_key_name: self.dialect().stages_key_name().then_some(key.as_str()),
                    definition: &staging.definition,
                    table: &staging.table,
                    marker,
                    log: &log,
                },
            )
            .collect();
        if !items.is_empty() {
            let statements = self.dialect().publish(&items).map_err(Self::unsupported)?;
            match self.server.run(database, &statements).await {
                Ok(()) => {}
                Err(e) if is_already_exists(&e) => {
                    return Err(table_exists_error(names[0].staging));
                }
                Err(e) => {
                    self.undo_swaps(database, &names).await;
                    return Err(self.failed(database, e));
                }
            }
        }
        Ok(outcomes)
    }

    /// After a publication that failed part way where DDL is not
    /// transactional: a replace whose rename went through (the old table is
    /// parked, the staging gone) is renamed back, so a commit reported
    /// failed never leaves the new table published. Best effort: what
    /// cannot be undone is left for the retry, which finds it.
    async fn undo_swaps(&self, database: &str, names: &[PublishNames<'_>]) {
        if self.dialect().transactional_ddl() {
            return;
        }
        let mut renames = Vec::new();
        for PublishNames {
            staging,
            staged,
            target,
            parked,
            replace,
            ..
        } in names
        {
            if !replace {
                continue;
            }
            let notes = self
                .server
                .table_notes(database, &[&staging_table(staging), &parked_table(staging)])
                .await;
            if let Ok([None, Some(_)]) = notes.as_deref() {
                renames.push(format!("{target} TO {staged}, {parked} TO {target}"));
            }
        }
        if renames.is_empty() {
            return;
        }
        let undo = format!("RENAME TABLE {}", renames.join(", "));
        if let Err(error) = self.server.run(database, &[undo]).await {
            tracing::warn!(%database, error = %self.failed(database, error), "a failed publication could not be renamed back");
        }
    }

    /// Refuses to replace `table` when the replace would change objects
    /// outside it (see [`Server::replace_blockers`]): nothing is renamed or
    /// dropped, and the table stays exactly where it is.
    async fn refuse_blocked_replace(
        &self,
        database: &str,
        table: &str,
    ) -> Result<(), CatalogError> {
        let blockers = self
            .server
            .replace_blockers(database, table)
            .await
            .map_err(|e| self.failed(database, e))?;
        if blockers.is_empty() {
            return Ok(());
        }
        Err(CatalogError::NotOwned {
            database: database.to_owned(),
            table: table.to_owned(),
            reason: format!(
                "{} {} it, and {} replaces a table by renaming it away and dropping it, which \
                 would change {}; drop or move {} first",
                blockers.join(", "),
                if blockers.len() == 1 {
                    "depends on"
                } else {
                    "depend on"
                },
                self.dialect().name(),
                if blockers.len() == 1 { "it" } else { "them" },
                if blockers.len() == 1 { "it" } else { "them" },
            ),
        })
    }

    /// What a publication cut short by a crash may have left: a parked
    /// table (MySQL drops it after the rename) and the declared comment.
    async fn finish_published(
        &self,
        staging: &Staging,
        log: &str,
        marker: &str,
    ) -> Result<(), CatalogError> {
        if self.dialect().transactional_ddl() {
            return Ok(());
        }
        let database = &staging.database;
        let mut statements = vec![format!(
            "DROP TABLE IF EXISTS {}",
            self.name_of(database, &parked_table(staging))?
        )];
        statements.extend(
            self.dialect()
                .log_publication(log, &staging.table, marker)
                .map_err(Self::unsupported)?,
        );
        statements.extend(
            self.dialect()
                .set_comment(
                    &self.name_of(database, &staging.table)?,
                    staging.definition.comment.as_deref(),
                )
                .map_err(Self::unsupported)?,
        );
        self.run(database, &statements).await
    }
}

#[async_trait]
impl Catalog for JdbcCatalog {
    fn default_database(&self) -> &str {
        &self.default_database
    }

    async fn list_databases(&self) -> Result<Vec<String>, CatalogError> {
        self.server
            .list_databases(&self.default_database)
            .await
            .map_err(|e| self.failed(&self.default_database, e))
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError> {
        self.ensure_database(database).await?;
        let tables = self
            .server
            .list_tables(database)
            .await
            .map_err(|e| self.failed(database, e))?;
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
        let columns = self
            .server
            .columns(database, table)
            .await
            .map_err(|e| self.failed(database, e))?
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
            options: connector_options(&self.options, database, table),
        })
    }

    async fn table_exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        self.ensure_database(database).await?;
        self.exists(database, table).await
    }

    async fn create_table(
        &self,
        staging: &Staging,
        replace: bool,
    ) -> Result<CreateOutcome, CatalogError> {
        let database = &staging.database;
        self.ensure_database(database).await?;
        let exists = self.exists(database, &staging.table).await?;
        if exists && !replace {
            return Ok(CreateOutcome::AlreadyExisted);
        }
        let target = self.name_of(database, &staging.table)?;
        let create = |name: &str| {
            self.dialect()
                .create_table(name, &staging.definition, Shape::published())
                .map_err(Self::unsupported)
        };
        if exists {
            self.refuse_blocked_replace(database, &staging.table)
                .await?;
            let statements = self.replace_ddl(staging, &target, create)?;
            self.run(database, &statements).await?;
            return Ok(CreateOutcome::Replaced);
        }
        match self.server.run(database, &create(&target)?).await {
            Ok(()) => Ok(CreateOutcome::Created),
            Err(e) if is_already_exists(&e) => Ok(CreateOutcome::AlreadyExisted),
            Err(e) => Err(self.failed(database, e)),
        }
    }

    async fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, CatalogError> {
        let database = &staging.database;
        self.ensure_database(database).await?;
        let name = self.name_of(database, &staging_table(staging))?;
        let note = self
            .server
            .table_note(database, &staging_table(staging))
            .await
            .map_err(|e| self.failed(database, e))?;
        let Some(note) = note else {
            let statements = self.staging_ddl(staging, &name, attempt)?;
            return match self.server.run(database, &statements).await {
                Ok(()) => Ok(BeginOutcome::Staged),
                // Another runner made it meanwhile; the retry reads its marker.
                Err(e) if is_already_exists(&e) => Err(CatalogError::Unavailable(
                    "the staging was created meanwhile by another runner; trying again".into(),
                )),
                Err(e) => Err(self.failed(database, e)),
            };
        };
        if self.marked_attempt(staging, &note)? >= attempt {
            return Ok(BeginOutcome::AlreadyStaged);
        }
        let statements =
            self.replace_ddl(staging, &name, |n| self.staging_ddl(staging, n, attempt))?;
        self.run(database, &statements).await?;
        Ok(BeginOutcome::Restaged)
    }

    async fn commit(
        &self,
        batch: &[(Staging, Publish)],
    ) -> Vec<Result<CommitOutcome, CatalogError>> {
        let Some((first, _)) = batch.first() else {
            return Vec::new();
        };
        match self.publish(&first.database, batch).await {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(error) => batch.iter().map(|_| Err(error.clone())).collect(),
        }
    }

    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError> {
        let database = &staging.database;
        self.ensure_database(database).await?;
        let note = self
            .server
            .table_note(database, &staging_table(staging))
            .await
            .map_err(|e| self.failed(database, e))?;
        if let Some(note) = note {
            self.marked_attempt(staging, &note)?;
        }
        let mut leftovers = vec![staging_table(staging)];
        if !self.dialect().transactional_ddl() {
            leftovers.extend([fresh_table(staging), parked_table(staging)]);
        }
        let statements = leftovers
            .iter()
            .map(|t| {
                Ok(format!(
                    "DROP TABLE IF EXISTS {}",
                    self.name_of(database, t)?
                ))
            })
            .collect::<Result<Vec<_>, CatalogError>>()?;
        self.run(database, &statements).await
    }

    async fn check_replaceable(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        self.ensure_database(database).await?;
        self.refuse_blocked_replace(database, table).await
    }

    async fn check_target(
        &self,
        database: &str,
        table: &str,
        definition: &TableDefinition,
        existing: bool,
    ) -> Result<(), CatalogError> {
        if table.starts_with(HIDDEN_PREFIX) {
            return Err(CatalogError::Unsupported(format!(
                "table names starting with '{HIDDEN_PREFIX}' are reserved for ctasd's staging"
            )));
        }
        check_url_safe(database).map_err(CatalogError::Unsupported)?;
        let dialect = self.dialect();
        dialect
            .check_identifier(NameKind::Database, database)
            .map_err(Self::unsupported)?;
        dialect
            .check_table(table, definition)
            .map_err(Self::unsupported)?;
        self.ensure_database(database).await?;
        if let Some(pk) = &definition.primary_key {
            let owner = if existing { table } else { "" };
            let taken = self
                .server
                .name_taken_elsewhere(database, &pk.name, owner)
                .await
                .map_err(|e| self.failed(database, e))?;
            if taken {
                return Err(CatalogError::Unsupported(format!(
                    "primary key name '{}' is taken: {} names a primary key's index with it, and \
                     another table or index of the schema has that name",
                    pk.name,
                    dialect.name()
                )));
            }
        }
        // Whatever the system refuses that this code does not know (row
        // size, a privilege, a limit) is refused now, in its own words: a
        // table of this definition is created under a unique name and
        // taken back, unless the same definition passed a moment ago.
        let probe_ddl = |probe: &str, probe_key: &str| {
            let marker = dialect::staging_marker(0, &probe_staging_key(), &self.installation);
            let shape = Shape {
                key_name: dialect.stages_key_name().then_some(probe_key),
                marker: Some(&marker),
            };
            dialect
                .create_table(&self.name_of(database, probe)?, definition, shape)
                .map_err(Self::unsupported)
        };
        let seen = (
            database.to_owned(),
            probe_ddl("probe", "probekey")?.join(";\n"),
        );
        if self.accepted_lately(&seen) {
            return Ok(());
        }
        let probe = format!("{HIDDEN_PREFIX}probe_{}", uuid::Uuid::new_v4().simple());
        let probe_key = format!("{HIDDEN_PREFIX}probekey_{}", uuid::Uuid::new_v4().simple());
        match self
            .server
            .dry_run(database, &probe_ddl(&probe, &probe_key)?)
            .await
        {
            Ok(()) => {
                self.remember_accepted(seen);
                Ok(())
            }
            Err(e) => match self.failed(database, e) {
                CatalogError::Refused(reason) => Err(CatalogError::Unsupported(reason)),
                other => Err(other),
            },
        }
    }

    async fn drop_table(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        self.drop_marked(database, table).await
    }

    async fn close(&self) {
        self.server.close().await;
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
    fn every_hidden_name_fits_every_dialects_identifier_limit() {
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
        let dialects: [&dyn Dialect; 3] = [&postgres::Postgres, &mysql::MySql, &sqlite::Sqlite];
        for dialect in dialects {
            for name in [
                staging_table(&staging),
                parked_table(&staging),
                fresh_table(&staging),
                staging_key_name(&staging),
                format!("{HIDDEN_PREFIX}probekey_{}", "f".repeat(32)),
            ] {
                assert!(dialect.quote(&name).is_ok(), "{name} on {}", dialect.name());
            }
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
