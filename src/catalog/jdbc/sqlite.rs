//! SQLite: its column types and limits, and a directory whose `<db>.db`
//! files are the databases, one pool each. DDL is transactional. SQLite
//! keeps no table comments: a staging's marker is a comment inside its
//! `CREATE TABLE` text, which SQLite keeps as written.

use std::path::PathBuf;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use sqlx::{ConnectOptions, Connection};

use super::dialect::{Dialect, DialectError, NameKind, Publication};
use super::{
    Answer, CONNECT_TIMEOUT, Ending, PoolPerDatabase, Server, one_statement, run_statements,
};
use crate::domain::flink::types::{DataType, MAX_LENGTH, TypeKind};

/// SQLite stores decimals as 8-byte floats: 15 significant digits survive.
const MAX_DECIMAL_PRECISION: u32 = 15;

pub struct Sqlite;

impl Dialect for Sqlite {
    fn name(&self) -> &'static str {
        "SQLite"
    }

    fn max_identifier_len(&self) -> usize {
        1024
    }

    fn quote_char(&self) -> char {
        '"'
    }

    /// The default `SQLITE_MAX_COLUMN`.
    fn max_columns(&self) -> usize {
        2000
    }

    fn max_key_columns(&self) -> usize {
        2000
    }

    fn transactional_ddl(&self) -> bool {
        true
    }

    fn check_name(&self, kind: NameKind, name: &str) -> Result<(), String> {
        if kind == NameKind::Table && name.to_ascii_lowercase().starts_with("sqlite_") {
            return Err(format!(
                "table name '{name}' starts with 'sqlite_', which SQLite reserves for itself"
            ));
        }
        Ok(())
    }

    fn column_type(&self, data_type: &DataType) -> Result<String, String> {
        let cannot = |what: &str| Err(format!("SQLite cannot hold {what}"));
        Ok(match &data_type.kind {
            TypeKind::Boolean => "BOOLEAN".into(),
            TypeKind::TinyInt | TypeKind::SmallInt | TypeKind::Int | TypeKind::BigInt => {
                "INTEGER".into()
            }
            TypeKind::Float | TypeKind::Double => "REAL".into(),
            TypeKind::Decimal { precision, .. } if *precision > MAX_DECIMAL_PRECISION => {
                return Err(format!(
                    "SQLite stores decimals as 8-byte floats and keeps at most \
                     {MAX_DECIMAL_PRECISION} digits, not {precision}"
                ));
            }
            TypeKind::Decimal { precision, scale } => format!("DECIMAL({precision}, {scale})"),
            TypeKind::Char(n) => format!("CHAR({n})"),
            TypeKind::VarChar(n) if *n < MAX_LENGTH => format!("VARCHAR({n})"),
            TypeKind::VarChar(_) => "TEXT".into(),
            TypeKind::Binary(_) | TypeKind::VarBinary(_) => "BLOB".into(),
            TypeKind::Date => "DATE".into(),
            TypeKind::Time(_) => "TIME".into(),
            TypeKind::Timestamp(_) | TypeKind::TimestampLtz(_) => "TIMESTAMP".into(),
            TypeKind::Array(_) => return cannot("ARRAY"),
            TypeKind::Map(..) => return cannot("MAP"),
            TypeKind::Row(_) => return cannot("ROW"),
        })
    }

    fn inner_suffix(&self, marker: Option<&str>) -> String {
        marker.map_or(String::new(), |marker| format!(" /* {marker} */"))
    }

    fn publish(&self, items: &[Publication]) -> Result<Vec<String>, DialectError> {
        let mut statements = Vec::new();
        for item in items {
            if item.replace {
                statements.push(format!("DROP TABLE {}", item.target));
            }
            statements.push(format!(
                "ALTER TABLE {} RENAME TO {}",
                item.staging, item.target
            ));
        }
        Ok(statements)
    }
}

/// A directory of SQLite database files, one pool per file.
pub struct SqliteServer {
    pub directory: PathBuf,
    pools: PoolPerDatabase<sqlx::Sqlite>,
}

impl SqliteServer {
    pub fn new(directory: PathBuf) -> Self {
        Self {
            directory,
            pools: PoolPerDatabase::new(),
        }
    }

    pub fn file(&self, database: &str) -> PathBuf {
        self.directory.join(format!("{database}.db"))
    }

    fn connect_options(&self, database: &str) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(self.file(database))
            .create_if_missing(false)
            .busy_timeout(CONNECT_TIMEOUT)
    }

    async fn pool(&self, database: &str) -> SqlitePool {
        self.pools
            .get(database, || self.connect_options(database))
            .await
    }
}

#[async_trait]
impl Server for SqliteServer {
    /// On a read-only connection of its own, which a progress handler
    /// stops once the time is up.
    async fn read_only(
        &self,
        database: &str,
        query: &str,
        timeout: std::time::Duration,
    ) -> Result<Answer, sqlx::Error> {
        let mut conn = self
            .connect_options(database)
            .read_only(true)
            .connect()
            .await?;
        let deadline = std::time::Instant::now() + timeout;
        conn.lock_handle()
            .await?
            .set_progress_handler(1000, move || std::time::Instant::now() < deadline);
        let row = one_statement::<sqlx::Sqlite>(query)?
            .fetch_optional(&mut conn)
            .await;
        let _ = conn.close().await;
        Ok(Answer::of::<sqlx::Sqlite>(row?))
    }

    fn dialect(&self) -> &'static dyn Dialect {
        &Sqlite
    }

    fn describe(&self, database: &str) -> String {
        format!("SQLite database '{}'", self.file(database).display())
    }

    async fn check_connection(&self, database: &str) -> Result<(), sqlx::Error> {
        let mut conn = self.connect_options(database).connect().await?;
        sqlx::query("SELECT count(*) FROM sqlite_master")
            .execute(&mut conn)
            .await?;
        conn.close().await
    }

    async fn list_databases(&self, _default_database: &str) -> Result<Vec<String>, sqlx::Error> {
        let mut names = Vec::new();
        let mut entries = tokio::fs::read_dir(&self.directory).await?;
        while let Some(entry) = entries.next_entry().await? {
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

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
             ORDER BY name",
        )
        .fetch_all(&self.pool(database).await)
        .await
    }

    async fn columns(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Vec<(String, String, bool)>, sqlx::Error> {
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT name, type, \"notnull\" FROM pragma_table_info(?1) ORDER BY cid",
        )
        .bind(table)
        .fetch_all(&self.pool(database).await)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(name, data_type, not_null)| (name, data_type, not_null == 0))
            .collect())
    }

    async fn table_note(&self, database: &str, table: &str) -> Result<Option<String>, sqlx::Error> {
        sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1")
            .bind(table)
            .fetch_optional(&self.pool(database).await)
            .await
    }

    async fn holds_store(&self, database: &str, marker_table: &str) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        )
        .bind(marker_table)
        .fetch_one(&self.pool(database).await)
        .await
    }

    async fn run(&self, database: &str, statements: &[String]) -> Result<(), sqlx::Error> {
        run_statements(&self.pool(database).await, statements, Ending::Commit).await
    }

    async fn dry_run(&self, database: &str, statements: &[String]) -> Result<(), sqlx::Error> {
        run_statements(&self.pool(database).await, statements, Ending::RollBack).await
    }

    fn is_transient(&self, error: &dyn sqlx::error::DatabaseError) -> bool {
        // SQLITE_BUSY and SQLITE_LOCKED, with their extended codes.
        let code: i64 = error
            .code()
            .and_then(|c| c.parse().ok())
            .unwrap_or_default();
        matches!(code & 0xff, 5 | 6)
    }

    fn is_time_out(&self, error: &dyn sqlx::error::DatabaseError) -> bool {
        // SQLITE_INTERRUPT: the progress handler stopped the statement.
        error.code().is_some_and(|code| code == "9")
    }

    async fn close(&self) {
        self.pools.close().await;
    }
}
