//! PostgreSQL: its column types and limits, and a server reached with one
//! connection pool per database. DDL is transactional, so a publication is
//! one transaction: readers see the old table until it commits.

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool};
use sqlx::{ConnectOptions, Connection};

use super::dialect::{Dialect, DialectError, NameKind, Publication, backslash_escaped};
use super::{Answer, Ending, PoolPerDatabase, Server, one_statement, run_statements};
use crate::domain::flink::table::TableDefinition;
use crate::domain::flink::types::{DataType, TypeKind};

/// The longest `VARCHAR(n)` and `CHAR(n)`.
const MAX_CHAR: u32 = 10_485_760;
/// System columns, whose names a table cannot use.
const SYSTEM_COLUMNS: &[&str] = &["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"];

pub struct Postgres;

impl Dialect for Postgres {
    fn name(&self) -> &'static str {
        "PostgreSQL"
    }

    fn max_identifier_len(&self) -> usize {
        63
    }

    fn quote_char(&self) -> char {
        '"'
    }

    /// `MaxHeapAttributeNumber`.
    fn max_columns(&self) -> usize {
        1600
    }

    /// `INDEX_MAX_KEYS`.
    fn max_key_columns(&self) -> usize {
        32
    }

    fn transactional_ddl(&self) -> bool {
        true
    }

    fn stages_key_name(&self) -> bool {
        true
    }

    fn check_name(&self, kind: NameKind, name: &str) -> Result<(), String> {
        if kind == NameKind::Column && SYSTEM_COLUMNS.contains(&name) {
            return Err(format!(
                "column name '{name}' is one of PostgreSQL's system columns"
            ));
        }
        Ok(())
    }

    fn column_type(&self, data_type: &DataType) -> Result<String, String> {
        let cannot = |what: &str| Err(format!("PostgreSQL cannot hold {what}"));
        Ok(match &data_type.kind {
            TypeKind::Boolean => "BOOLEAN".into(),
            TypeKind::TinyInt | TypeKind::SmallInt => "SMALLINT".into(),
            TypeKind::Int => "INTEGER".into(),
            TypeKind::BigInt => "BIGINT".into(),
            TypeKind::Float => "REAL".into(),
            TypeKind::Double => "DOUBLE PRECISION".into(),
            TypeKind::Decimal { precision, scale } => format!("NUMERIC({precision}, {scale})"),
            TypeKind::Char(n) if *n <= MAX_CHAR => format!("CHAR({n})"),
            TypeKind::Char(_) => return cannot("CHAR longer than 10485760"),
            TypeKind::VarChar(n) if *n <= MAX_CHAR => format!("VARCHAR({n})"),
            TypeKind::VarChar(_) => "TEXT".into(),
            TypeKind::Binary(_) | TypeKind::VarBinary(_) => "BYTEA".into(),
            TypeKind::Date => "DATE".into(),
            TypeKind::Time(p) | TypeKind::Timestamp(p) | TypeKind::TimestampLtz(p) if *p > 6 => {
                return Err(format!(
                    "PostgreSQL keeps at most 6 fractional digits of seconds, not {p}"
                ));
            }
            TypeKind::Time(p) => format!("TIME({p})"),
            TypeKind::Timestamp(p) => format!("TIMESTAMP({p})"),
            TypeKind::TimestampLtz(p) => format!("TIMESTAMPTZ({p})"),
            TypeKind::Array(element) => match element.kind {
                TypeKind::Array(_) | TypeKind::Map(..) | TypeKind::Row(_) => {
                    return cannot("arrays of arrays, maps or rows");
                }
                _ => format!("{}[]", self.column_type(element)?),
            },
            TypeKind::Map(..) => return cannot("MAP"),
            TypeKind::Row(_) => return cannot("ROW"),
        })
    }

    fn after_create(
        &self,
        name: &str,
        table: &TableDefinition,
        comment: Option<&str>,
    ) -> Result<Vec<String>, DialectError> {
        let mut statements: Vec<String> = self.set_comment(name, comment)?.into_iter().collect();
        for column in table.columns.iter().filter(|c| c.is_physical()) {
            if let Some(text) = &column.comment {
                statements.push(format!(
                    "COMMENT ON COLUMN {name}.{} IS {}",
                    self.quote(&column.name)?,
                    self.literal(text)?
                ));
            }
        }
        Ok(statements)
    }

    /// An escape string (`E'...'`): its backslashes are escapes whatever
    /// `standard_conforming_strings` says, so escaping them is exact.
    fn literal(&self, text: &str) -> Result<String, DialectError> {
        Ok(format!("E'{}'", backslash_escaped(text)?))
    }

    /// The row type every table has keeps its comment through renames and
    /// is not the table's comment, which publication sets to the declared
    /// one.
    fn lasting_mark(&self, name: &str, marker: &str) -> Result<Vec<String>, DialectError> {
        Ok(vec![format!(
            "COMMENT ON TYPE {name} IS {}",
            self.literal(marker)?
        )])
    }

    fn set_comment(
        &self,
        name: &str,
        comment: Option<&str>,
    ) -> Result<Option<String>, DialectError> {
        let value = match comment {
            Some(c) => self.literal(c)?,
            None => "NULL".to_owned(),
        };
        Ok(Some(format!("COMMENT ON TABLE {name} IS {value}")))
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
            if let (Some(staged), Some(pk)) = (item.staging_key_name, &item.definition.primary_key)
            {
                statements.push(format!(
                    "ALTER TABLE {} RENAME CONSTRAINT {} TO {}",
                    item.target,
                    self.quote(staged)?,
                    self.quote(&pk.name)?
                ));
            }
            statements.extend(self.set_comment(item.target, item.definition.comment.as_deref())?);
        }
        Ok(statements)
    }
}

/// A PostgreSQL server, one pool per database, opened on first use.
pub struct PostgresServer {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: String,
    pools: PoolPerDatabase<sqlx::Postgres>,
}

impl PostgresServer {
    pub fn new(host: String, port: u16, username: String, password: String) -> Self {
        Self {
            host,
            port,
            username,
            password,
            pools: PoolPerDatabase::new(),
        }
    }

    fn connect_options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new()
            .host(&self.host)
            .port(self.port)
            .username(&self.username)
            .password(&self.password)
            .database(database)
            .application_name("ctasd")
    }

    async fn pool(&self, database: &str) -> PgPool {
        self.pools
            .get(database, || self.connect_options(database))
            .await
    }
}

#[async_trait]
impl Server for PostgresServer {
    async fn read_only(
        &self,
        database: &str,
        query: &str,
        timeout: std::time::Duration,
    ) -> Result<Answer, sqlx::Error> {
        let pool = self.pool(database).await;
        let mut tx = pool.begin().await?;
        sqlx::query("SET TRANSACTION READ ONLY")
            .execute(&mut *tx)
            .await?;
        let limit = format!("SET LOCAL statement_timeout = {}", timeout.as_millis());
        sqlx::query(sqlx::AssertSqlSafe(limit))
            .execute(&mut *tx)
            .await?;
        let row = one_statement::<sqlx::Postgres>(query)?
            .fetch_optional(&mut *tx)
            .await?;
        tx.rollback().await?;
        Ok(Answer::of::<sqlx::Postgres>(row))
    }

    fn dialect(&self) -> &'static dyn Dialect {
        &Postgres
    }

    fn describe(&self, database: &str) -> String {
        format!(
            "PostgreSQL at {}:{}, database '{database}'",
            self.host, self.port
        )
    }

    async fn check_connection(&self, database: &str) -> Result<(), sqlx::Error> {
        let mut conn = self.connect_options(database).connect().await?;
        sqlx::query("SELECT 1").execute(&mut conn).await?;
        conn.close().await
    }

    async fn list_databases(&self, default_database: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT datname::text FROM pg_database WHERE NOT datistemplate AND datallowconn ORDER BY 1",
        )
        .fetch_all(&self.pool(default_database).await)
        .await
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1",
        )
        .fetch_all(&self.pool(database).await)
        .await
    }

    async fn columns(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Vec<(String, String, bool)>, sqlx::Error> {
        sqlx::query_as(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull \
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relname = $1 \
               AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        )
        .bind(table)
        .fetch_all(&self.pool(database).await)
        .await
    }

    async fn table_note(&self, database: &str, table: &str) -> Result<Option<String>, sqlx::Error> {
        Ok(self.table_notes(database, &[table]).await?.pop().flatten())
    }

    async fn table_notes(
        &self,
        database: &str,
        tables: &[&str],
    ) -> Result<Vec<Option<String>>, sqlx::Error> {
        let found: Vec<(String, Option<String>)> = sqlx::query_as(
            "SELECT c.relname::text, obj_description(c.oid, 'pg_class') FROM pg_class c \
             WHERE c.relname = ANY($1) AND c.relnamespace = current_schema()::regnamespace \
               AND c.relkind IN ('r', 'p')",
        )
        .bind(tables)
        .fetch_all(&self.pool(database).await)
        .await?;
        Ok(tables
            .iter()
            .map(|table| {
                found
                    .iter()
                    .find(|(name, _)| name == table)
                    .map(|(_, note)| note.clone().unwrap_or_default())
            })
            .collect())
    }

    async fn lasting_mark(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Option<String>, sqlx::Error> {
        let found: Option<Option<String>> = sqlx::query_scalar(
            "SELECT obj_description(c.reltype, 'pg_type') FROM pg_class c \
             WHERE c.relname = $1 AND c.relnamespace = current_schema()::regnamespace \
               AND c.relkind IN ('r', 'p')",
        )
        .bind(table)
        .fetch_optional(&self.pool(database).await)
        .await?;
        Ok(found.map(Option::unwrap_or_default))
    }

    async fn holds_store(&self, database: &str, marker_table: &str) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class WHERE relname = $1 AND relkind IN ('r', 'p'))",
        )
        .bind(marker_table)
        .fetch_one(&self.pool(database).await)
        .await
    }

    async fn name_taken_elsewhere(
        &self,
        database: &str,
        relation: &str,
        table: &str,
    ) -> Result<bool, sqlx::Error> {
        // A primary key's index shares the schema's namespace with tables.
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_class r WHERE r.relname = $1 \
               AND r.relnamespace = current_schema()::regnamespace \
               AND NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid \
                               WHERE i.indexrelid = r.oid AND t.relname = $2))",
        )
        .bind(relation)
        .bind(table)
        .fetch_one(&self.pool(database).await)
        .await
    }

    async fn run(&self, database: &str, statements: &[String]) -> Result<(), sqlx::Error> {
        run_statements(&self.pool(database).await, statements, Ending::Commit).await
    }

    async fn dry_run(&self, database: &str, statements: &[String]) -> Result<(), sqlx::Error> {
        run_statements(&self.pool(database).await, statements, Ending::RollBack).await
    }

    fn explain(&self, error: &dyn sqlx::error::DatabaseError) -> String {
        let mut text = error.message().to_owned();
        if let Some(pg) = error.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
            for extra in [pg.detail(), pg.hint()].into_iter().flatten() {
                text.push_str("; ");
                text.push_str(extra);
            }
        }
        text
    }

    fn is_transient(&self, error: &dyn sqlx::error::DatabaseError) -> bool {
        // Connection (08), transaction rollback (40: serialization,
        // deadlock), resources (53), lock not available, cancelled by a
        // time-out or an administrator, cannot connect now.
        let code = error.code().unwrap_or_default();
        let code = code.as_ref();
        code.starts_with("08")
            || code.starts_with("40")
            || code.starts_with("53")
            || matches!(code, "55P03" | "57014" | "57P01" | "57P02" | "57P03")
    }

    fn is_time_out(&self, error: &dyn sqlx::error::DatabaseError) -> bool {
        error.code().is_some_and(|code| code == "57014")
    }

    fn reports_missing_databases(&self) -> bool {
        // Every operation connects to the database itself: connecting to
        // one that is gone fails, and dropping one ends the connections
        // open to it.
        true
    }

    fn is_missing_database(&self, error: &dyn sqlx::error::DatabaseError) -> bool {
        // invalid_catalog_name: "database ... does not exist".
        error.code().as_deref() == Some("3D000")
    }

    async fn close(&self) {
        self.pools.close().await;
    }
}
