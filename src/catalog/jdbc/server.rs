//! Running statements on a database server: a pool per database, one
//! statement alone or several in one transaction, and the [`Server`] trait
//! each system implements with its driver.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::*;

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
    /// Runs `query`, one `SELECT`, in a read-only transaction (or on a
    /// read-only connection) that may last at most `timeout`, and answers
    /// its first row's first column: a write it attempts fails and changes
    /// nothing, and a query past the time is stopped.
    async fn read_only(
        &self,
        database: &str,
        query: &str,
        timeout: std::time::Duration,
    ) -> Result<Answer, sqlx::Error>;
    /// The system's own words for a refusal.
    fn explain(&self, error: &dyn sqlx::error::DatabaseError) -> String {
        error.message().to_owned()
    }
    /// Whether a refusal is worth retrying (a lock, a deadlock, the server
    /// busy or restarting) rather than final.
    fn is_transient(&self, error: &dyn sqlx::error::DatabaseError) -> bool;
    /// Whether a refusal is a statement stopped at its time limit, which an
    /// audit takes as its failure rather than as a reason to try again.
    fn is_time_out(&self, error: &dyn sqlx::error::DatabaseError) -> bool;
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

/// The first column of an audit query's first row, as read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Int(i64),
    Bool(bool),
    Text(String),
    /// No row, or a null.
    Null,
}

impl Answer {
    /// Reads the first column of `row`, whichever type the system gave it.
    pub(crate) fn of<DB>(row: Option<DB::Row>) -> Self
    where
        DB: sqlx::Database,
        for<'r> i64: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
        for<'r> i32: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
        for<'r> bool: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
        for<'r> String: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
        usize: sqlx::ColumnIndex<DB::Row>,
    {
        use sqlx::Row;
        let Some(row) = row else {
            return Answer::Null;
        };
        if let Ok(value) = row.try_get::<Option<i64>, _>(0) {
            return value.map_or(Answer::Null, Answer::Int);
        }
        if let Ok(value) = row.try_get::<Option<i32>, _>(0) {
            return value.map_or(Answer::Null, |v| Answer::Int(i64::from(v)));
        }
        if let Ok(value) = row.try_get::<Option<bool>, _>(0) {
            return value.map_or(Answer::Null, Answer::Bool);
        }
        match row.try_get::<Option<String>, _>(0) {
            Ok(value) => value.map_or(Answer::Null, Answer::Text),
            Err(_) => Answer::Text("a value of a type ctasd does not read".into()),
        }
    }

    /// Whether the answer reads as true: a true boolean, a number other
    /// than 0, or the text `true`, `t` or `1`.
    pub(crate) fn is_true(&self) -> bool {
        match self {
            Answer::Bool(value) => *value,
            Answer::Int(value) => *value != 0,
            Answer::Text(text) => matches!(
                text.trim().to_ascii_lowercase().as_str(),
                "true" | "t" | "1"
            ),
            Answer::Null => false,
        }
    }

    /// The answer as a count, for the counting audits.
    pub(crate) fn count(&self) -> Option<u64> {
        match self {
            Answer::Int(value) => u64::try_from(*value).ok(),
            Answer::Text(text) => text.trim().parse().ok(),
            _ => None,
        }
    }

    /// A `sql` audit's answer, as the job shows it: whether it was true,
    /// never the value itself. The query reads with the catalog's
    /// credentials, which a job's submitter may not have; what it read
    /// stays in the database.
    pub(crate) fn truth(&self) -> String {
        match self {
            _ if self.is_true() => "true".into(),
            Answer::Null => "no value".into(),
            Answer::Bool(false) | Answer::Int(0) => "false".into(),
            _ => "not a truth value".into(),
        }
    }

    /// A count as read, for a count that did not read as one.
    pub(crate) fn describe(&self) -> String {
        match self {
            Answer::Int(value) => value.to_string(),
            Answer::Bool(value) => value.to_string(),
            Answer::Text(text) => text.chars().take(200).collect(),
            Answer::Null => "no value".into(),
        }
    }
}
