//! MySQL and MariaDB: their column types and limits, and a server reached
//! with one pool (one connection reaches every database, so names are
//! qualified). DDL commits statement by statement, so a publication is one
//! multi-table `RENAME TABLE`, atomic on its own; replaced tables are parked
//! under a hidden name by that rename and dropped after it.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::OnceCell;

use super::dialect::{Dialect, DialectError, NameKind, Publication, backslash_escaped};
use super::{Answer, CONNECT_TIMEOUT, Server, one_statement};
use crate::domain::flink::table::{ColumnDefinition, TableDefinition};
use crate::domain::flink::types::{DataType, TypeKind};
use crate::fault::{self, Point};

/// The longest `VARCHAR(n)` in utf8mb4 (65,535 bytes / 4).
const MAX_VARCHAR: u32 = 16_383;
const MAX_VARBINARY: u32 = 65_535;
/// The row size limit, not counting TEXT and BLOB columns.
const MAX_ROW_BYTES: u64 = 65_535;
/// InnoDB's longest index key (with the default DYNAMIC row format).
const MAX_KEY_BYTES: u64 = 3072;

pub struct MySql;

impl Dialect for MySql {
    fn as_text(&self, expression: &str) -> String {
        format!("CAST({expression} AS CHAR)")
    }

    fn name(&self) -> &'static str {
        "MySQL/MariaDB"
    }

    fn max_identifier_len(&self) -> usize {
        64
    }

    fn quote_char(&self) -> char {
        '`'
    }

    /// InnoDB's column limit.
    fn max_columns(&self) -> usize {
        1017
    }

    fn max_key_columns(&self) -> usize {
        16
    }

    fn transactional_ddl(&self) -> bool {
        false
    }

    fn check_name(&self, kind: NameKind, name: &str) -> Result<(), String> {
        if name.ends_with(' ') {
            return Err(format!(
                "{} '{name}' ends with a space, which MySQL/MariaDB refuses in identifiers",
                kind.as_str()
            ));
        }
        Ok(())
    }

    fn table_name(&self, database: &str, table: &str) -> Result<String, DialectError> {
        Ok(format!("{}.{}", self.quote(database)?, self.quote(table)?))
    }

    fn column_type(&self, data_type: &DataType) -> Result<String, String> {
        let cannot = |what: &str| Err(format!("MySQL/MariaDB cannot hold {what}"));
        Ok(match &data_type.kind {
            TypeKind::Boolean => "BOOLEAN".into(),
            TypeKind::TinyInt => "TINYINT".into(),
            TypeKind::SmallInt => "SMALLINT".into(),
            TypeKind::Int => "INT".into(),
            TypeKind::BigInt => "BIGINT".into(),
            TypeKind::Float => "FLOAT".into(),
            TypeKind::Double => "DOUBLE".into(),
            TypeKind::Decimal { precision, scale } => format!("DECIMAL({precision}, {scale})"),
            TypeKind::Char(n) if *n <= 255 => format!("CHAR({n})"),
            TypeKind::Char(_) => return cannot("CHAR longer than 255"),
            TypeKind::VarChar(n) if *n <= MAX_VARCHAR => format!("VARCHAR({n})"),
            TypeKind::VarChar(_) => "LONGTEXT".into(),
            TypeKind::Binary(n) if *n <= 255 => format!("BINARY({n})"),
            TypeKind::Binary(_) => return cannot("BINARY longer than 255"),
            TypeKind::VarBinary(n) if *n <= MAX_VARBINARY => format!("VARBINARY({n})"),
            TypeKind::VarBinary(_) => "LONGBLOB".into(),
            TypeKind::Date => "DATE".into(),
            TypeKind::Time(p) | TypeKind::Timestamp(p) | TypeKind::TimestampLtz(p) if *p > 6 => {
                return Err(format!(
                    "MySQL/MariaDB keeps at most 6 fractional digits of seconds, not {p}"
                ));
            }
            TypeKind::Time(p) => format!("TIME({p})"),
            TypeKind::Timestamp(p) => format!("DATETIME({p})"),
            // TIMESTAMP is stored in UTC and shown in the session's zone.
            TypeKind::TimestampLtz(p) => format!("TIMESTAMP({p})"),
            TypeKind::Array(_) => return cannot("ARRAY"),
            TypeKind::Map(..) => return cannot("MAP"),
            TypeKind::Row(_) => return cannot("ROW"),
        })
    }

    fn column(&self, column: &ColumnDefinition, data_type: &DataType) -> Result<String, String> {
        let mut sql = format!(
            "{} {}",
            self.quote(&column.name).map_err(|e| e.to_string())?,
            self.column_type(data_type)?
        );
        if !data_type.nullable {
            sql.push_str(" NOT NULL");
        }
        if let Some(comment) = &column.comment {
            sql.push_str(" COMMENT ");
            sql.push_str(&self.literal(comment).map_err(|e| e.to_string())?);
        }
        Ok(sql)
    }

    /// Backslashes escaped as well as quotes: safe whether or not the
    /// server's `sql_mode` has `NO_BACKSLASH_ESCAPES`, and exact because
    /// every connection ctasd opens takes that mode off (and checks it).
    fn literal(&self, text: &str) -> Result<String, DialectError> {
        Ok(format!("'{}'", backslash_escaped(text)?))
    }

    fn table_suffix(&self, comment: Option<&str>) -> Result<String, DialectError> {
        Ok(match comment {
            Some(c) => format!(" COMMENT = {}", self.literal(c)?),
            None => String::new(),
        })
    }

    fn set_comment(
        &self,
        name: &str,
        comment: Option<&str>,
    ) -> Result<Option<String>, DialectError> {
        Ok(Some(format!(
            "ALTER TABLE {name} COMMENT = {}",
            self.literal(comment.unwrap_or(""))?
        )))
    }

    /// MySQL cannot index a column of unbounded length; its row and key
    /// sizes are bounded (utf8mb4: four bytes a character).
    fn check_sizes(&self, definition: &TableDefinition) -> Result<(), DialectError> {
        let mut row_bytes = 0u64;
        let mut nullable = 0u64;
        for column in definition.columns.iter().filter(|c| c.is_physical()) {
            let data_type = parsed(column)?;
            row_bytes += max_bytes(&data_type.kind);
            nullable += u64::from(data_type.nullable);
        }
        row_bytes += nullable.div_ceil(8);
        if row_bytes > MAX_ROW_BYTES {
            return Err(DialectError::Name(format!(
                "a MySQL/MariaDB row holds at most {MAX_ROW_BYTES} bytes besides TEXT and BLOB \
                 columns, and these columns take up to {row_bytes}: shorten VARCHAR columns or make \
                 some of them STRING"
            )));
        }
        let Some(pk) = &definition.primary_key else {
            return Ok(());
        };
        let mut key_bytes = 0;
        for name in &pk.columns {
            let Some(column) = definition.columns.iter().find(|c| &c.name == name) else {
                continue;
            };
            let data_type = parsed(column)?;
            if matches!(
                self.column_type(&data_type).as_deref(),
                Ok("LONGTEXT" | "LONGBLOB")
            ) {
                return Err(DialectError::Column {
                    column: name.clone(),
                    reason: "MySQL/MariaDB cannot make a primary key of a column without a \
                             length; give it VARCHAR(n) or VARBINARY(n)"
                        .into(),
                });
            }
            key_bytes += max_bytes(&data_type.kind);
        }
        if key_bytes > MAX_KEY_BYTES {
            return Err(DialectError::Name(format!(
                "primary key '{}' takes up to {key_bytes} bytes; InnoDB keys hold at most \
                 {MAX_KEY_BYTES} (a VARCHAR(n) key column takes 4n)",
                pk.name
            )));
        }
        Ok(())
    }

    /// One `RENAME TABLE` for every hook of the batch (atomic), then the
    /// parked tables dropped and the declared comments set.
    fn logs_publications(&self) -> bool {
        true
    }

    fn publication_log_ddl(&self, log: &str, note: &str) -> Result<Option<String>, DialectError> {
        Ok(Some(format!(
            "CREATE TABLE IF NOT EXISTS {log} (table_name VARCHAR(64) NOT NULL PRIMARY KEY, \
             marker VARCHAR(1024) NOT NULL) COMMENT = {}",
            self.literal(note)?
        )))
    }

    fn log_publication(
        &self,
        log: &str,
        table: &str,
        marker: &str,
    ) -> Result<Option<String>, DialectError> {
        Ok(Some(format!(
            "REPLACE INTO {log} (table_name, marker) VALUES ({}, {})",
            self.literal(table)?,
            self.literal(marker)?
        )))
    }

    /// The renames in one statement; then, each step atomic on its own and
    /// each state proving whose the target is: the marker logged (the
    /// target's comment is still the staging's marker until then), the
    /// declared comment set.
    fn publish(&self, items: &[Publication]) -> Result<Vec<String>, DialectError> {
        let mut renames = Vec::new();
        for item in items {
            if item.replace {
                renames.push(format!("{} TO {}", item.target, item.parked));
            }
            renames.push(format!("{} TO {}", item.staging, item.target));
        }
        let mut statements = vec![format!("RENAME TABLE {}", renames.join(", "))];
        for item in items.iter().filter(|i| i.replace) {
            statements.push(format!("DROP TABLE {}", item.parked));
        }
        for item in items {
            statements.extend(self.log_publication(item.log, item.table, item.marker)?);
            statements.extend(self.set_comment(item.target, item.definition.comment.as_deref())?);
        }
        Ok(statements)
    }
}

fn parsed(column: &ColumnDefinition) -> Result<DataType, DialectError> {
    DataType::parse(&column.data_type).map_err(|e| DialectError::Column {
        column: column.name.clone(),
        reason: e.to_string(),
    })
}

/// The most bytes a column of this type takes in a row (TEXT and BLOB
/// columns count only their pointer).
fn max_bytes(kind: &TypeKind) -> u64 {
    let fraction = |p: u32| u64::from(p).div_ceil(2);
    let length_prefix = |n: u64| if n > 255 { 2 } else { 1 };
    let decimal_digits = |digits: u32| {
        u64::from(digits / 9) * 4 + [0, 1, 1, 2, 2, 3, 3, 4, 4][(digits % 9) as usize]
    };
    match kind {
        TypeKind::Boolean | TypeKind::TinyInt => 1,
        TypeKind::SmallInt => 2,
        TypeKind::Int | TypeKind::Float => 4,
        TypeKind::BigInt | TypeKind::Double => 8,
        TypeKind::Decimal { precision, scale } => {
            decimal_digits(precision - scale) + decimal_digits(*scale)
        }
        TypeKind::Char(n) => u64::from(*n) * 4,
        TypeKind::VarChar(n) if *n <= MAX_VARCHAR => {
            let bytes = u64::from(*n) * 4;
            bytes + length_prefix(bytes)
        }
        TypeKind::Binary(n) => u64::from(*n),
        TypeKind::VarBinary(n) if *n <= MAX_VARBINARY => {
            u64::from(*n) + length_prefix(u64::from(*n))
        }
        TypeKind::VarChar(_) | TypeKind::VarBinary(_) => 12,
        TypeKind::Date => 3,
        TypeKind::Time(p) => 3 + fraction(*p),
        TypeKind::Timestamp(p) => 5 + fraction(*p),
        TypeKind::TimestampLtz(p) => 4 + fraction(*p),
        TypeKind::Array(_) | TypeKind::Map(..) | TypeKind::Row(_) => 0,
    }
}

/// Takes `NO_BACKSLASH_ESCAPES` off the session's `sql_mode` if the server
/// sets it, and checks that it is off: [`MySql::literal`] escapes
/// backslashes, which is safe either way but reads back exactly only with
/// backslash escapes on. A connection whose mode cannot be checked is not
/// used.
async fn backslashes_as_text(conn: &mut sqlx::MySqlConnection) -> Result<(), sqlx::Error> {
    const MODE: &str = "NO_BACKSLASH_ESCAPES";
    let has_mode = |mode: &str| mode.split(',').any(|m| m.eq_ignore_ascii_case(MODE));
    let read = "SELECT CAST(@@SESSION.sql_mode AS CHAR)";
    let mode: String = sqlx::query_scalar(read).fetch_one(&mut *conn).await?;
    if !has_mode(&mode) {
        return Ok(());
    }
    let kept: Vec<&str> = mode.split(',').filter(|m| !has_mode(m)).collect();
    sqlx::query("SET SESSION sql_mode = ?")
        .bind(kept.join(","))
        .execute(&mut *conn)
        .await?;
    let mode: String = sqlx::query_scalar(read).fetch_one(&mut *conn).await?;
    if has_mode(&mode) {
        return Err(sqlx::Error::Configuration(
            format!("the session's sql_mode keeps {MODE}; ctasd's literals need it off").into(),
        ));
    }
    Ok(())
}

/// A MySQL or MariaDB server: every database through one pool on the
/// catalog's default database.
pub struct MySqlServer {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: String,
    pub default_database: String,
    pool: OnceCell<MySqlPool>,
}

impl MySqlServer {
    pub fn new(
        host: String,
        port: u16,
        username: String,
        password: String,
        default_database: String,
    ) -> Self {
        Self {
            host,
            port,
            username,
            password,
            default_database,
            pool: OnceCell::new(),
        }
    }

    fn connect_options(&self, database: &str) -> MySqlConnectOptions {
        let options = MySqlConnectOptions::new()
            .host(&self.host)
            .port(self.port)
            .username(&self.username)
            .database(database);
        if self.password.is_empty() {
            options
        } else {
            options.password(&self.password)
        }
    }

    async fn pool(&self) -> &MySqlPool {
        self.pool
            .get_or_init(|| async {
                MySqlPoolOptions::new()
                    .after_connect(|conn, _| Box::pin(backslashes_as_text(conn)))
                    .max_connections(4)
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .idle_timeout(Duration::from_secs(300))
                    .connect_lazy_with(self.connect_options(&self.default_database))
            })
            .await
    }
}

#[async_trait]
impl Server for MySqlServer {
    /// On a connection of its own, closed after: its session's time limit
    /// (`max_statement_time` on MariaDB, `max_execution_time` on MySQL)
    /// and read-only transaction go with it.
    async fn read_only(
        &self,
        database: &str,
        query: &str,
        timeout: Duration,
    ) -> Result<Answer, sqlx::Error> {
        let mut conn = self.connect_options(database).connect().await?;
        backslashes_as_text(&mut conn).await?;
        let mariadb = format!("SET SESSION max_statement_time = {}", timeout.as_secs_f64());
        if sqlx::query(sqlx::AssertSqlSafe(mariadb))
            .execute(&mut conn)
            .await
            .is_err()
        {
            let mysql = format!("SET SESSION max_execution_time = {}", timeout.as_millis());
            sqlx::query(sqlx::AssertSqlSafe(mysql))
                .execute(&mut conn)
                .await?;
        }
        sqlx::query("START TRANSACTION READ ONLY")
            .execute(&mut conn)
            .await?;
        let row = one_statement::<sqlx::MySql>(query)?
            .fetch_optional(&mut conn)
            .await;
        let _ = conn.close().await;
        Ok(Answer::of::<sqlx::MySql>(row?))
    }

    fn dialect(&self) -> &'static dyn Dialect {
        &MySql
    }

    fn describe(&self, database: &str) -> String {
        format!(
            "MySQL/MariaDB at {}:{}, database '{database}'",
            self.host, self.port
        )
    }

    async fn check_connection(&self, database: &str) -> Result<(), sqlx::Error> {
        let mut conn = self.connect_options(database).connect().await?;
        backslashes_as_text(&mut conn).await?;
        conn.close().await
    }

    async fn list_databases(&self, _default_database: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata \
             WHERE schema_name NOT IN ('information_schema', 'mysql', 'performance_schema', 'sys') ORDER BY 1",
        )
        .fetch_all(self.pool().await)
        .await
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = ? AND table_type = 'BASE TABLE' ORDER BY 1",
        )
        .bind(database)
        .fetch_all(self.pool().await)
        .await
    }

    async fn columns(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Vec<(String, String, bool)>, sqlx::Error> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT CAST(column_name AS CHAR), CAST(column_type AS CHAR), CAST(is_nullable AS CHAR) \
             FROM information_schema.columns WHERE table_schema = ? AND table_name = ? \
             ORDER BY ordinal_position",
        )
        .bind(database)
        .bind(table)
        .fetch_all(self.pool().await)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(name, data_type, nullable)| (name, data_type, nullable == "YES"))
            .collect())
    }

    async fn table_note(&self, database: &str, table: &str) -> Result<Option<String>, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT CAST(table_comment AS CHAR) FROM information_schema.tables \
             WHERE table_schema = ? AND table_name = ? AND table_type = 'BASE TABLE'",
        )
        .bind(database)
        .bind(table)
        .fetch_optional(self.pool().await)
        .await
    }

    async fn logged_publication(
        &self,
        _database: &str,
        log: &str,
        table: &str,
    ) -> Result<Option<String>, sqlx::Error> {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT CAST(marker AS CHAR) FROM {log} WHERE table_name = ?"
        )))
        .bind(table)
        .fetch_optional(self.pool().await)
        .await
    }

    async fn holds_store(&self, database: &str, marker_table: &str) -> Result<bool, sqlx::Error> {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = ? AND table_name = ?)",
        )
        .bind(database)
        .bind(marker_table)
        .fetch_one(self.pool().await)
        .await
    }

    /// Foreign keys of other tables that reference `table`, triggers on it,
    /// and views whose definition names it.
    async fn replace_blockers(
        &self,
        database: &str,
        table: &str,
    ) -> Result<Vec<String>, sqlx::Error> {
        let view_reference = format!(
            "{}.{}",
            self.dialect().quote(database).unwrap_or_default(),
            self.dialect().quote(table).unwrap_or_default()
        );
        sqlx::query_scalar(
            "SELECT CAST(CONCAT('foreign key ', constraint_name, ' of table ', constraint_schema, '.', \
             table_name) AS CHAR) FROM information_schema.referential_constraints \
             WHERE unique_constraint_schema = ? AND referenced_table_name = ? \
             AND NOT (constraint_schema = ? AND table_name = ?) \
             UNION ALL SELECT CAST(CONCAT('trigger ', trigger_schema, '.', trigger_name) AS CHAR) \
             FROM information_schema.triggers WHERE event_object_schema = ? AND event_object_table = ? \
             UNION ALL SELECT CAST(CONCAT('view ', table_schema, '.', table_name) AS CHAR) \
             FROM information_schema.views WHERE LOCATE(?, view_definition) > 0 ORDER BY 1",
        )
        .bind(database)
        .bind(table)
        .bind(database)
        .bind(table)
        .bind(database)
        .bind(table)
        .bind(view_reference)
        .fetch_all(self.pool().await)
        .await
    }

    /// Statements one after another: each DDL statement commits by itself,
    /// so callers pass statements that are atomic on their own.
    async fn run(&self, _database: &str, statements: &[String]) -> Result<(), sqlx::Error> {
        let mut conn = self.pool().await.acquire().await?;
        for (done, sql) in statements.iter().enumerate() {
            if done > 0 {
                fault::reached(Point::CommitMidway);
            }
            one_statement::<sqlx::MySql>(sql)?
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// A temporary table, seen only by this connection, created and dropped.
    async fn dry_run(&self, _database: &str, statements: &[String]) -> Result<(), sqlx::Error> {
        let mut conn = self.pool().await.acquire().await?;
        let Some(create) = statements.first() else {
            return Ok(());
        };
        let name = create
            .strip_prefix("CREATE TABLE ")
            .and_then(|rest| rest.split(" (").next())
            .unwrap_or_default()
            .to_owned();
        let temporary = create.replacen("CREATE TABLE", "CREATE TEMPORARY TABLE", 1);
        one_statement::<sqlx::MySql>(&temporary)?
            .execute(&mut *conn)
            .await?;
        one_statement::<sqlx::MySql>(&format!("DROP TEMPORARY TABLE {name}"))?
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    fn is_transient(&self, error: &dyn sqlx::error::DatabaseError) -> bool {
        // Lock wait time-out, deadlock, too many connections, server
        // shutting down, query interrupted, connection killed; connection
        // refused or lost.
        error
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|e| {
                matches!(
                    e.number(),
                    1205 | 1213 | 1040 | 1053 | 1317 | 1927 | 2002 | 2003 | 2006 | 2013
                )
            })
    }

    fn is_time_out(&self, error: &dyn sqlx::error::DatabaseError) -> bool {
        // MariaDB's max_statement_time, MySQL's max_execution_time.
        error
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|e| matches!(e.number(), 1969 | 3024))
    }

    async fn close(&self) {
        if let Some(pool) = self.pool.get() {
            pool.close().await;
        }
    }
}
