//! What the two stores share: one SQL text for every query, run through a
//! small per-backend trait. A backend says how it opens a transaction,
//! binds parameters and locks rows; the recipes (`catalogs.rs`, `jobs.rs`,
//! `ledger.rs`) are written once, against [`Sql`], with PostgreSQL-style
//! `$n` placeholders that the SQLite backend turns into its `?n`.
//!
//! Both schemas have one shape for this (JSON as text, counters and indexes
//! as 64-bit integers, the times the ledger compares as unix milliseconds),
//! so the same Rust types bind and decode on both.
//!
//! A bound `LIMIT` is written `LIMIT CAST($n AS BIGINT)`: SQLite takes a
//! bare `LIMIT ?` as a value its plan depends on, and compiles the cached
//! statement again every time the value is bound (every run); through the
//! `CAST` the statement stays prepared.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::postgres::QuietMoves;
use super::{Keyring, StoreError};

/// One parameter of a query.
#[derive(Debug, Clone)]
pub enum Param<'a> {
    Text(&'a str),
    /// Text made for the query (a pattern, say).
    Owned(String),
    OptText(Option<&'a str>),
    Int(i64),
    OptInt(Option<i64>),
    Bool(bool),
    Time(DateTime<Utc>),
    OptTime(Option<DateTime<Utc>>),
    /// A list, matched with [`Dialect::in_list`].
    Texts(Vec<&'a str>),
    Ints(Vec<i64>),
}

/// A statement and its parameters, `$1` first.
#[derive(Debug, Clone)]
pub struct Query<'a> {
    pub sql: Cow<'static, str>,
    pub params: Vec<Param<'a>>,
}

impl<'a> Query<'a> {
    pub fn new(sql: impl Into<Cow<'static, str>>) -> Self {
        Self {
            sql: sql.into(),
            params: Vec::new(),
        }
    }

    pub fn bind(mut self, param: Param<'a>) -> Self {
        self.params.push(param);
        self
    }

    pub fn text(self, value: &'a str) -> Self {
        self.bind(Param::Text(value))
    }

    pub fn opt_text(self, value: Option<&'a str>) -> Self {
        self.bind(Param::OptText(value))
    }

    pub fn int(self, value: i64) -> Self {
        self.bind(Param::Int(value))
    }

    pub fn opt_int(self, value: Option<i64>) -> Self {
        self.bind(Param::OptInt(value))
    }

    pub fn flag(self, value: bool) -> Self {
        self.bind(Param::Bool(value))
    }

    pub fn time(self, value: DateTime<Utc>) -> Self {
        self.bind(Param::Time(value))
    }

    pub fn opt_time(self, value: Option<DateTime<Utc>>) -> Self {
        self.bind(Param::OptTime(value))
    }

    pub fn texts(self, values: Vec<&'a str>) -> Self {
        self.bind(Param::Texts(values))
    }

    pub fn ints(self, values: Vec<i64>) -> Self {
        self.bind(Param::Ints(values))
    }
}

/// A row type both backends decode.
pub trait Decodable:
    for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
    + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
    + Send
    + Unpin
    + 'static
{
}

impl<T> Decodable for T where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + Send
        + Unpin
        + 'static
{
}

/// What the two SQL dialects write differently.
#[derive(Debug)]
pub struct Dialect {
    /// Appended to a `SELECT` that locks the rows it reads until the
    /// transaction ends (SQLite: nothing; its write transactions are
    /// exclusive from their start).
    pub for_update: &'static str,
    /// Appended to a `SELECT` that locks rows against deletion only.
    pub for_share: &'static str,
    /// Appended to the `SELECT` of a claim: rows another claim holds are
    /// passed over instead of waited for.
    pub skip_locked: &'static str,
    /// `<column> IN <list parameter n>`, as the dialect spells it.
    pub in_list: fn(column: &str, param: usize) -> String,
    /// Put after a table in `FROM` to read it through the named index,
    /// where the planner cannot be trusted to (SQLite: `INDEXED BY`, which
    /// fails the statement if the index cannot serve it).
    pub through_index: fn(index: &str) -> String,
    /// Whether one job is read, and a status report that plans no action
    /// is made, in one statement (PostgreSQL: `json_agg` of the job's hooks
    /// and actions, data-modifying `WITH`, the row version `xmin`, several
    /// jobs' reports at once) rather than in several, which cost no round
    /// trip on SQLite.
    pub one_statement_jobs: bool,
}

/// Runs queries: on a pool (each statement by itself) or in a transaction.
pub trait Sql: Send {
    fn dialect(&self) -> &'static Dialect;

    fn rows<T: Decodable>(
        &mut self,
        query: Query<'_>,
    ) -> impl Future<Output = Result<Vec<T>, sqlx::Error>> + Send;

    fn execute(
        &mut self,
        query: Query<'_>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    fn row<T: Decodable>(
        &mut self,
        query: Query<'_>,
    ) -> impl Future<Output = Result<Option<T>, sqlx::Error>> + Send {
        async move { Ok(self.rows(query).await?.into_iter().next()) }
    }
}

/// One store backend: how it connects, and what the two really differ in.
pub trait Backend: Send + Sync + 'static {
    /// Runs statements one by one, outside any transaction.
    type Pool: Sql + Clone + Sync + 'static;
    /// A transaction; dropped without [`Backend::commit`], it rolls back.
    type Tx: Sql;

    fn pool(&self) -> Self::Pool;

    /// Opens a transaction that will write: SQLite takes the write lock at
    /// once (`BEGIN IMMEDIATE`), so transactions never upgrade and deadlock.
    fn begin(&self) -> impl Future<Output = Result<Self::Tx, sqlx::Error>> + Send;

    fn commit(tx: Self::Tx) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Whether one process holds the store, so that every lease found at
    /// start belongs to a process that is gone (SQLite); replicas sharing a
    /// store (PostgreSQL) leave leases to run out.
    const SOLE_PROCESS: bool;

    /// A short, secret-free description for logs.
    fn describe(&self) -> String;

    /// The store's files on this machine (none for a server).
    fn local_files(&self) -> Vec<std::path::PathBuf>;

    fn migrate(&self) -> impl Future<Output = Result<(), sqlx::migrate::MigrateError>> + Send;

    /// How many migrations this build knows.
    fn migrations(&self) -> usize;

    /// A query naming the tables of the store's schema.
    fn table_names(&self) -> &'static str;

    /// How the pool's connections are used right now.
    fn pool_use(&self) -> PoolUse;
}

/// A pool's connections: open (in use or idle) and the most it may open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUse {
    pub in_use: u64,
    pub idle: u64,
    pub max: u64,
}

impl PoolUse {
    pub fn of<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) -> Self {
        let idle = pool.num_idle() as u64;
        Self {
            in_use: u64::from(pool.size()).saturating_sub(idle),
            idle,
            max: u64::from(pool.options().get_max_connections()),
        }
    }
}

/// A store over one backend; the recipes are its trait implementations.
pub struct SqlStore<B: Backend> {
    pub(crate) backend: B,
    pub(crate) keyring: Arc<Keyring>,
    /// The fast path for status reports that plan no action, where the
    /// dialect moves them in one statement (PostgreSQL); without it, every
    /// report takes the plain transaction.
    pub(crate) quiet_moves: Option<QuietMoves<B::Pool>>,
}

impl<B: Backend> SqlStore<B> {
    pub(crate) fn new(backend: B, keyring: Arc<Keyring>) -> Self {
        let quiet_moves = backend
            .pool()
            .dialect()
            .one_statement_jobs
            .then(|| QuietMoves::new(backend.pool(), keyring.clone()));
        Self {
            backend,
            keyring,
            quiet_moves,
        }
    }

    pub(crate) fn pool(&self) -> B::Pool {
        self.backend.pool()
    }

    pub(crate) async fn begin(&self) -> Result<B::Tx, StoreError> {
        self.backend.begin().await.map_err(StoreError::from_sqlx)
    }

    pub(crate) async fn commit(&self, tx: B::Tx) -> Result<(), StoreError> {
        B::commit(tx).await.map_err(StoreError::from_sqlx)
    }

    /// Deletes the row named `name` of `table` unless `users` (a count,
    /// `$1` the name) finds something that still needs it. The row is
    /// locked first, so a writer that checked it exists (a submission)
    /// either went first and is counted, or waits and then finds it gone.
    pub(crate) async fn delete_unless_used(
        &self,
        table: &str,
        name: &str,
        expected_version: Option<i64>,
        users: &str,
    ) -> Result<Deletion, StoreError> {
        let mut tx = self.begin().await?;
        let for_update = tx.dialect().for_update;
        let exists: Option<(i64,)> = tx
            .row(
                Query::new(format!(
                    "SELECT version FROM {table} WHERE name = $1{for_update}"
                ))
                .text(name),
            )
            .await?;
        match (exists, expected_version) {
            (None, _) => return Ok(Deletion::Missing),
            (Some((version,)), Some(expected)) if version != expected => {
                return Ok(Deletion::Changed);
            }
            _ => {}
        }
        let (used,): (i64,) = tx
            .row(Query::new(users.to_owned()).text(name))
            .await?
            .unwrap_or((0,));
        if used > 0 {
            return Ok(Deletion::InUse(used as u64));
        }
        tx.execute(Query::new(format!("DELETE FROM {table} WHERE name = $1")).text(name))
            .await?;
        self.commit(tx).await?;
        Ok(Deletion::Deleted)
    }
}

/// What [`SqlStore::delete_unless_used`] did.
pub(crate) enum Deletion {
    Deleted,
    Missing,
    /// Kept: not the version the caller read.
    Changed,
    /// Kept: this many still need it.
    InUse(u64),
}

/// Implements [`Sql`] for a backend's pool and its transactions, given the
/// backend's database type, its [`Dialect`], the function that makes a list
/// parameter bindable and the one that turns the `$n` text into its own.
macro_rules! sql_over {
    ($db:ty, $pool:ty, $dialect:expr, $list:path, $text:path) => {
        fn arguments(
            params: &[$crate::store::sql::Param<'_>],
        ) -> Result<<$db as sqlx::Database>::Arguments, sqlx::error::BoxDynError> {
            use sqlx::Arguments;
            use $crate::store::sql::Param;
            let mut arguments = <$db as sqlx::Database>::Arguments::default();
            for param in params {
                match param {
                    Param::Text(v) => arguments.add(*v)?,
                    Param::Owned(v) => arguments.add(v.as_str())?,
                    Param::OptText(v) => arguments.add(*v)?,
                    Param::Int(v) => arguments.add(*v)?,
                    Param::OptInt(v) => arguments.add(*v)?,
                    Param::Bool(v) => arguments.add(*v)?,
                    Param::Time(v) => arguments.add(*v)?,
                    Param::OptTime(v) => arguments.add(*v)?,
                    Param::Texts(v) => arguments.add($list(v)?)?,
                    Param::Ints(v) => arguments.add($list(v)?)?,
                }
            }
            Ok(arguments)
        }

        async fn rows<'c, E, T>(
            executor: E,
            query: $crate::store::sql::Query<'_>,
        ) -> Result<Vec<T>, sqlx::Error>
        where
            E: sqlx::Executor<'c, Database = $db>,
            T: $crate::store::sql::Decodable,
        {
            let arguments = arguments(&query.params).map_err(sqlx::Error::Encode)?;
            sqlx::query_as_with::<$db, T, _>(sqlx::AssertSqlSafe($text(&query.sql)), arguments)
                .fetch_all(executor)
                .await
        }

        async fn execute<'c, E>(
            executor: E,
            query: $crate::store::sql::Query<'_>,
        ) -> Result<u64, sqlx::Error>
        where
            E: sqlx::Executor<'c, Database = $db>,
        {
            let arguments = arguments(&query.params).map_err(sqlx::Error::Encode)?;
            sqlx::query_with::<$db, _>(sqlx::AssertSqlSafe($text(&query.sql)), arguments)
                .execute(executor)
                .await
                .map(|done| done.rows_affected())
        }

        impl $crate::store::sql::Sql for $pool {
            fn dialect(&self) -> &'static $crate::store::sql::Dialect {
                &$dialect
            }

            async fn rows<T: $crate::store::sql::Decodable>(
                &mut self,
                query: $crate::store::sql::Query<'_>,
            ) -> Result<Vec<T>, sqlx::Error> {
                rows(&*self, query).await
            }

            async fn execute(
                &mut self,
                query: $crate::store::sql::Query<'_>,
            ) -> Result<u64, sqlx::Error> {
                execute(&*self, query).await
            }
        }

        impl $crate::store::sql::Sql for sqlx::Transaction<'static, $db> {
            fn dialect(&self) -> &'static $crate::store::sql::Dialect {
                &$dialect
            }

            async fn rows<T: $crate::store::sql::Decodable>(
                &mut self,
                query: $crate::store::sql::Query<'_>,
            ) -> Result<Vec<T>, sqlx::Error> {
                rows(&mut **self, query).await
            }

            async fn execute(
                &mut self,
                query: $crate::store::sql::Query<'_>,
            ) -> Result<u64, sqlx::Error> {
                execute(&mut **self, query).await
            }
        }
    };
}
pub(crate) use sql_over;

/// `sql` with PostgreSQL's `$n` placeholders written as SQLite's `?n`.
pub(crate) fn question_marks(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_numbered_question_marks() {
        assert_eq!(
            question_marks("SELECT $2, $10 FROM t WHERE a = $1 AND b = '$x'"),
            "SELECT ?2, ?10 FROM t WHERE a = ?1 AND b = '$x'"
        );
    }
}
