//! SQL dialects of the `jdbc` catalog: how Flink types become column types,
//! how names are quoted, and the `CREATE TABLE` a table definition becomes.
//!
//! A type a dialect cannot hold without loss is refused with the column
//! named, so a job fails at submission instead of at DDL time or, worse,
//! with silently truncated data.

use std::fmt::Write;

use crate::domain::table::TableDefinition;
use crate::domain::types::{DataType, MAX_LENGTH, TypeKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    MySql,
    Sqlite,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialectError {
    #[error("column '{column}': {reason}")]
    Column { column: String, reason: String },
    #[error("{0}")]
    Name(String),
}

/// PostgreSQL's longest `VARCHAR(n)` and `CHAR(n)`.
const POSTGRES_MAX_CHAR: u32 = 10_485_760;
/// MySQL's longest `VARCHAR(n)` in utf8mb4 (65,535 bytes / 4).
const MYSQL_MAX_VARCHAR: u32 = 16_383;
const MYSQL_MAX_VARBINARY: u32 = 65_535;
/// SQLite stores decimals as 8-byte floats: 15 significant digits survive.
const SQLITE_MAX_DECIMAL_PRECISION: u32 = 15;
/// MySQL's row size limit, not counting TEXT and BLOB columns.
const MYSQL_MAX_ROW_BYTES: u64 = 65_535;
/// InnoDB's longest index key (with the default DYNAMIC row format).
const MYSQL_MAX_KEY_BYTES: u64 = 3072;
/// PostgreSQL's system columns, whose names a table cannot use.
const POSTGRES_SYSTEM_COLUMNS: &[&str] = &["tableoid", "xmin", "cmin", "xmax", "cmax", "ctid"];

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Self::Postgres => "PostgreSQL",
            Self::MySql => "MySQL/MariaDB",
            Self::Sqlite => "SQLite",
        }
    }

    /// Longest identifier, in bytes.
    pub fn max_identifier_len(self) -> usize {
        match self {
            Self::Postgres => 63,
            Self::MySql => 64,
            Self::Sqlite => 1024,
        }
    }

    /// A quoted identifier; quotes inside the name are doubled, NUL and
    /// over-long names are refused.
    pub fn quote(self, name: &str) -> Result<String, DialectError> {
        if name.is_empty() || name.contains('\0') {
            return Err(DialectError::Name(format!(
                "'{}' is not a valid {} identifier",
                name.escape_debug(),
                self.name()
            )));
        }
        if name.len() > self.max_identifier_len() {
            return Err(DialectError::Name(format!(
                "'{name}' is longer than {}'s limit of {} bytes",
                self.name(),
                self.max_identifier_len()
            )));
        }
        Ok(match self {
            Self::MySql => format!("`{}`", name.replace('`', "``")),
            Self::Postgres | Self::Sqlite => format!("\"{}\"", name.replace('"', "\"\"")),
        })
    }

    /// Most columns a table may have: PostgreSQL's `MaxHeapAttributeNumber`,
    /// InnoDB's column limit, SQLite's default `SQLITE_MAX_COLUMN`.
    pub fn max_columns(self) -> usize {
        match self {
            Self::Postgres => 1600,
            Self::MySql => 1017,
            Self::Sqlite => 2000,
        }
    }

    /// Most columns a primary key may have (`INDEX_MAX_KEYS`; MySQL's key
    /// parts); SQLite has no limit of its own below its column limit.
    fn max_key_columns(self) -> usize {
        match self {
            Self::Postgres => 32,
            Self::MySql => 16,
            Self::Sqlite => 2000,
        }
    }

    /// A name this system can hold as an identifier, as it is.
    fn check_identifier(self, what: &str, name: &str) -> Result<(), DialectError> {
        self.quote(name)?;
        if self == Self::MySql && name.ends_with(' ') {
            return Err(DialectError::Name(format!(
                "{what} '{name}' ends with a space, which MySQL/MariaDB refuses in identifiers"
            )));
        }
        Ok(())
    }

    /// A database name this system can hold.
    pub fn check_database_name(self, database: &str) -> Result<(), DialectError> {
        self.check_identifier("database name", database)
    }

    /// Whatever can be known before asking the system: names it refuses,
    /// more columns or key columns than it holds, rows larger than it
    /// allows, and the DDL itself (types it cannot hold).
    pub fn check_table(
        self,
        table: &str,
        definition: &TableDefinition,
    ) -> Result<(), DialectError> {
        self.check_identifier("table name", table)?;
        if self == Self::Sqlite && table.to_ascii_lowercase().starts_with("sqlite_") {
            return Err(DialectError::Name(format!(
                "table name '{table}' starts with 'sqlite_', which SQLite reserves for itself"
            )));
        }
        let physical: Vec<_> = definition
            .columns
            .iter()
            .filter(|c| c.is_physical())
            .collect();
        if physical.len() > self.max_columns() {
            return Err(DialectError::Name(format!(
                "{} tables hold at most {} columns; this one has {}",
                self.name(),
                self.max_columns(),
                physical.len()
            )));
        }
        for column in &physical {
            self.check_identifier("column name", &column.name)?;
            if self == Self::Postgres && POSTGRES_SYSTEM_COLUMNS.contains(&column.name.as_str()) {
                return Err(DialectError::Column {
                    column: column.name.clone(),
                    reason: "the name is one of PostgreSQL's system columns".into(),
                });
            }
        }
        if let Some(pk) = &definition.primary_key
            && pk.columns.len() > self.max_key_columns()
        {
            return Err(DialectError::Name(format!(
                "{} primary keys hold at most {} columns; '{}' has {}",
                self.name(),
                self.max_key_columns(),
                pk.name,
                pk.columns.len()
            )));
        }
        if self == Self::MySql {
            self.check_mysql_sizes(definition)?;
        }
        self.create_table("t", definition).map(|_| ())
    }

    /// MySQL's row size limit and InnoDB's key length limit, from the bytes
    /// each column takes at most (utf8mb4: four bytes a character).
    fn check_mysql_sizes(self, definition: &TableDefinition) -> Result<(), DialectError> {
        let mut row_bytes = 0u64;
        let mut nullable = 0u64;
        for column in definition.columns.iter().filter(|c| c.is_physical()) {
            let data_type =
                DataType::parse(&column.data_type).map_err(|e| DialectError::Column {
                    column: column.name.clone(),
                    reason: e.to_string(),
                })?;
            row_bytes += mysql_bytes(&data_type.kind);
            nullable += u64::from(data_type.nullable);
        }
        row_bytes += nullable.div_ceil(8);
        if row_bytes > MYSQL_MAX_ROW_BYTES {
            return Err(DialectError::Name(format!(
                "a MySQL/MariaDB row holds at most {MYSQL_MAX_ROW_BYTES} bytes besides TEXT and BLOB \
                 columns, and these columns take up to {row_bytes}: shorten VARCHAR columns or make \
                 some of them STRING"
            )));
        }
        if let Some(pk) = &definition.primary_key {
            let key_bytes: u64 = pk
                .columns
                .iter()
                .filter_map(|name| definition.columns.iter().find(|c| &c.name == name))
                .filter_map(|c| DataType::parse(&c.data_type).ok())
                .map(|t| mysql_bytes(&t.kind))
                .sum();
            if key_bytes > MYSQL_MAX_KEY_BYTES {
                return Err(DialectError::Name(format!(
                    "primary key '{}' takes up to {key_bytes} bytes; InnoDB keys hold at most \
                     {MYSQL_MAX_KEY_BYTES} (a VARCHAR(n) key column takes 4n)",
                    pk.name
                )));
            }
        }
        Ok(())
    }

    /// The column type for a Flink type, without nullability.
    pub fn column_type(self, data_type: &DataType) -> Result<String, String> {
        let cannot = |what: &str| Err(format!("{} cannot hold {what}", self.name()));
        let too_precise = |p: u32, max: u32| {
            Err(format!(
                "{} keeps at most {max} fractional digits of seconds, not {p}",
                self.name()
            ))
        };
        Ok(match (self, &data_type.kind) {
            (_, TypeKind::Boolean) => "BOOLEAN".into(),
            (Self::Postgres, TypeKind::TinyInt) => "SMALLINT".into(),
            (
                Self::Sqlite,
                TypeKind::TinyInt | TypeKind::SmallInt | TypeKind::Int | TypeKind::BigInt,
            ) => "INTEGER".into(),
            (_, TypeKind::TinyInt) => "TINYINT".into(),
            (_, TypeKind::SmallInt) => "SMALLINT".into(),
            (Self::Postgres, TypeKind::Int) => "INTEGER".into(),
            (_, TypeKind::Int) => "INT".into(),
            (_, TypeKind::BigInt) => "BIGINT".into(),
            (Self::Postgres, TypeKind::Float) => "REAL".into(),
            (Self::Sqlite, TypeKind::Float | TypeKind::Double) => "REAL".into(),
            (_, TypeKind::Float) => "FLOAT".into(),
            (Self::Postgres, TypeKind::Double) => "DOUBLE PRECISION".into(),
            (_, TypeKind::Double) => "DOUBLE".into(),
            (Self::Sqlite, TypeKind::Decimal { precision, .. })
                if *precision > SQLITE_MAX_DECIMAL_PRECISION =>
            {
                return Err(format!(
                    "SQLite stores decimals as 8-byte floats and keeps at most {SQLITE_MAX_DECIMAL_PRECISION} digits, not {precision}"
                ));
            }
            (Self::Postgres, TypeKind::Decimal { precision, scale }) => {
                format!("NUMERIC({precision}, {scale})")
            }
            (_, TypeKind::Decimal { precision, scale }) => format!("DECIMAL({precision}, {scale})"),
            (Self::Postgres, TypeKind::Char(n)) if *n <= POSTGRES_MAX_CHAR => format!("CHAR({n})"),
            (Self::Postgres, TypeKind::Char(_)) => return cannot("CHAR longer than 10485760"),
            (Self::MySql, TypeKind::Char(n)) if *n <= 255 => format!("CHAR({n})"),
            (Self::MySql, TypeKind::Char(_)) => return cannot("CHAR longer than 255"),
            (Self::Sqlite, TypeKind::Char(n)) => format!("CHAR({n})"),
            (Self::Postgres, TypeKind::VarChar(n)) if *n <= POSTGRES_MAX_CHAR => {
                format!("VARCHAR({n})")
            }
            (Self::MySql, TypeKind::VarChar(n)) if *n <= MYSQL_MAX_VARCHAR => {
                format!("VARCHAR({n})")
            }
            (Self::Sqlite, TypeKind::VarChar(n)) if *n < MAX_LENGTH => format!("VARCHAR({n})"),
            (Self::MySql, TypeKind::VarChar(_)) => "LONGTEXT".into(),
            (_, TypeKind::VarChar(_)) => "TEXT".into(),
            (Self::Postgres, TypeKind::Binary(_) | TypeKind::VarBinary(_)) => "BYTEA".into(),
            (Self::MySql, TypeKind::Binary(n)) if *n <= 255 => format!("BINARY({n})"),
            (Self::MySql, TypeKind::Binary(_)) => return cannot("BINARY longer than 255"),
            (Self::MySql, TypeKind::VarBinary(n)) if *n <= MYSQL_MAX_VARBINARY => {
                format!("VARBINARY({n})")
            }
            (Self::MySql, TypeKind::VarBinary(_)) => "LONGBLOB".into(),
            (Self::Sqlite, TypeKind::Binary(_) | TypeKind::VarBinary(_)) => "BLOB".into(),
            (_, TypeKind::Date) => "DATE".into(),
            (
                Self::Postgres | Self::MySql,
                TypeKind::Time(p) | TypeKind::Timestamp(p) | TypeKind::TimestampLtz(p),
            ) if *p > 6 => {
                return too_precise(*p, 6);
            }
            (Self::Postgres, TypeKind::Time(p)) => format!("TIME({p})"),
            (Self::Postgres, TypeKind::Timestamp(p)) => format!("TIMESTAMP({p})"),
            (Self::Postgres, TypeKind::TimestampLtz(p)) => format!("TIMESTAMPTZ({p})"),
            (Self::MySql, TypeKind::Time(p)) => format!("TIME({p})"),
            (Self::MySql, TypeKind::Timestamp(p)) => format!("DATETIME({p})"),
            // MySQL's TIMESTAMP is stored in UTC and shown in the session's zone.
            (Self::MySql, TypeKind::TimestampLtz(p)) => format!("TIMESTAMP({p})"),
            (Self::Sqlite, TypeKind::Time(_)) => "TIME".into(),
            (Self::Sqlite, TypeKind::Timestamp(_) | TypeKind::TimestampLtz(_)) => {
                "TIMESTAMP".into()
            }
            (Self::Postgres, TypeKind::Array(element)) => match element.kind {
                TypeKind::Array(_) | TypeKind::Map(..) | TypeKind::Row(_) => {
                    return cannot("arrays of arrays, maps or rows");
                }
                _ => format!("{}[]", self.column_type(element)?),
            },
            (_, TypeKind::Array(_)) => return cannot("ARRAY"),
            (_, TypeKind::Map(..)) => return cannot("MAP"),
            (_, TypeKind::Row(_)) => return cannot("ROW"),
        })
    }

    /// `CREATE TABLE <name> (...)` for the table's physical columns and
    /// primary key. Computed and virtual metadata columns exist only in the
    /// engine; partition keys do not apply to a JDBC table.
    pub fn create_table(
        self,
        qualified_name: &str,
        table: &TableDefinition,
    ) -> Result<String, DialectError> {
        let mut sql = format!("CREATE TABLE {qualified_name} (");
        let mut first = true;
        for column in table.columns.iter().filter(|c| c.is_physical()) {
            let fail = |reason: String| DialectError::Column {
                column: column.name.clone(),
                reason,
            };
            let data_type = DataType::parse(&column.data_type).map_err(|e| fail(e.to_string()))?;
            let sql_type = self.column_type(&data_type).map_err(fail)?;
            let quoted = self.quote(&column.name).map_err(|e| fail(e.to_string()))?;
            if !first {
                sql.push_str(", ");
            }
            first = false;
            write!(sql, "{quoted} {sql_type}").expect("writing to a String");
            if !data_type.nullable {
                sql.push_str(" NOT NULL");
            }
        }
        if let Some(pk) = &table.primary_key {
            let mut columns = Vec::new();
            for name in &pk.columns {
                if self == Self::MySql {
                    self.check_indexable(table, name)?;
                }
                columns.push(self.quote(name)?);
            }
            write!(sql, ", PRIMARY KEY ({})", columns.join(", ")).expect("writing to a String");
        }
        sql.push(')');
        Ok(sql)
    }

    /// MySQL cannot index a column of unbounded length.
    fn check_indexable(self, table: &TableDefinition, name: &str) -> Result<(), DialectError> {
        let Some(column) = table.columns.iter().find(|c| c.name == name) else {
            return Ok(());
        };
        let data_type = DataType::parse(&column.data_type).map_err(|e| DialectError::Column {
            column: name.into(),
            reason: e.to_string(),
        })?;
        match self.column_type(&data_type).as_deref() {
            Ok("LONGTEXT" | "LONGBLOB") => Err(DialectError::Column {
                column: name.into(),
                reason: "MySQL/MariaDB cannot make a primary key of a column without a length; \
                         give it VARCHAR(n) or VARBINARY(n)"
                    .into(),
            }),
            _ => Ok(()),
        }
    }
}

/// The most bytes a column of this type takes in a MySQL row (TEXT and
/// BLOB columns count only their pointer).
fn mysql_bytes(kind: &TypeKind) -> u64 {
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
        TypeKind::VarChar(n) if *n <= MYSQL_MAX_VARCHAR => {
            let bytes = u64::from(*n) * 4;
            bytes + length_prefix(bytes)
        }
        TypeKind::Binary(n) => u64::from(*n),
        TypeKind::VarBinary(n) if *n <= MYSQL_MAX_VARBINARY => {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(dialect: Dialect, flink: &str) -> Result<String, String> {
        dialect.column_type(&DataType::parse(flink).unwrap())
    }

    #[test]
    fn every_scalar_type_maps_to_a_column_type_in_each_dialect() {
        let cases = [
            ("BOOLEAN", "BOOLEAN", "BOOLEAN", "BOOLEAN"),
            ("TINYINT", "SMALLINT", "TINYINT", "INTEGER"),
            ("INT", "INTEGER", "INT", "INTEGER"),
            ("BIGINT", "BIGINT", "BIGINT", "INTEGER"),
            ("FLOAT", "REAL", "FLOAT", "REAL"),
            ("DOUBLE", "DOUBLE PRECISION", "DOUBLE", "REAL"),
            (
                "DECIMAL(10, 2)",
                "NUMERIC(10, 2)",
                "DECIMAL(10, 2)",
                "DECIMAL(10, 2)",
            ),
            ("CHAR(3)", "CHAR(3)", "CHAR(3)", "CHAR(3)"),
            ("VARCHAR(20)", "VARCHAR(20)", "VARCHAR(20)", "VARCHAR(20)"),
            ("STRING", "TEXT", "LONGTEXT", "TEXT"),
            ("BYTES", "BYTEA", "LONGBLOB", "BLOB"),
            ("DATE", "DATE", "DATE", "DATE"),
            ("TIME(3)", "TIME(3)", "TIME(3)", "TIME"),
            ("TIMESTAMP(3)", "TIMESTAMP(3)", "DATETIME(3)", "TIMESTAMP"),
            (
                "TIMESTAMP_LTZ(6)",
                "TIMESTAMPTZ(6)",
                "TIMESTAMP(6)",
                "TIMESTAMP",
            ),
        ];
        for (flink, postgres, mysql, sqlite) in cases {
            assert_eq!(
                mapped(Dialect::Postgres, flink).as_deref(),
                Ok(postgres),
                "{flink}"
            );
            assert_eq!(
                mapped(Dialect::MySql, flink).as_deref(),
                Ok(mysql),
                "{flink}"
            );
            assert_eq!(
                mapped(Dialect::Sqlite, flink).as_deref(),
                Ok(sqlite),
                "{flink}"
            );
        }
        assert_eq!(
            mapped(Dialect::Postgres, "ARRAY<INT>").as_deref(),
            Ok("INTEGER[]")
        );
    }

    #[test]
    fn what_a_dialect_cannot_hold_is_refused_with_the_reason() {
        let refused = [
            (
                Dialect::Postgres,
                "TIMESTAMP(9)",
                "at most 6 fractional digits",
            ),
            (Dialect::MySql, "TIME(7)", "at most 6 fractional digits"),
            (
                Dialect::MySql,
                "CHAR(256)",
                "cannot hold CHAR longer than 255",
            ),
            (Dialect::MySql, "ARRAY<INT>", "cannot hold ARRAY"),
            (Dialect::Sqlite, "DECIMAL(20, 2)", "at most 15 digits"),
            (Dialect::Postgres, "MAP<INT, INT>", "cannot hold MAP"),
            (Dialect::Postgres, "ARRAY<ARRAY<INT>>", "arrays of arrays"),
            (Dialect::Sqlite, "ROW<a INT>", "cannot hold ROW"),
        ];
        for (dialect, flink, reason) in refused {
            let error = mapped(dialect, flink).unwrap_err();
            assert!(
                error.contains(reason),
                "{flink} on {}: {error}",
                dialect.name()
            );
        }
    }

    fn table_of(columns: &[(&str, &str)], key: &[&str]) -> TableDefinition {
        let columns: Vec<_> = columns
            .iter()
            .map(|(name, data_type)| serde_json::json!({"name": name, "type": data_type}))
            .collect();
        let mut table = serde_json::json!({"columns": columns});
        if !key.is_empty() {
            table["primary_key"] = serde_json::json!({"name": "pk", "columns": key});
        }
        serde_json::from_value(table).unwrap()
    }

    #[test]
    fn tables_a_system_cannot_hold_are_refused_before_any_ddl() {
        let wide: Vec<(String, &str)> = (0..1700).map(|i| (format!("c{i}"), "INT")).collect();
        let wide: Vec<(&str, &str)> = wide.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let refused = [
            (
                Dialect::Postgres,
                "t",
                table_of(&wide, &[]),
                "at most 1600 columns",
            ),
            (
                Dialect::MySql,
                "t",
                table_of(&wide, &[]),
                "at most 1017 columns",
            ),
            (
                Dialect::MySql,
                "t ",
                table_of(&[("a", "INT")], &[]),
                "ends with a space",
            ),
            (
                Dialect::MySql,
                "t",
                table_of(&[("a ", "INT")], &[]),
                "ends with a space",
            ),
            (
                Dialect::Postgres,
                "t",
                table_of(&[("ctid", "INT")], &[]),
                "system columns",
            ),
            (
                Dialect::Sqlite,
                "sqlite_x",
                table_of(&[("a", "INT")], &[]),
                "reserves",
            ),
            (
                Dialect::MySql,
                "t",
                table_of(&[("a", "VARCHAR(10000)"), ("b", "VARCHAR(10000)")], &[]),
                "at most 65535 bytes",
            ),
            (
                Dialect::MySql,
                "t",
                table_of(&[("a", "VARCHAR(1000) NOT NULL")], &["a"]),
                "InnoDB keys hold at most 3072",
            ),
        ];
        for (dialect, name, table, expected) in refused {
            let error = dialect.check_table(name, &table).unwrap_err().to_string();
            assert!(error.contains(expected), "{}: {error}", dialect.name());
        }
        assert!(
            Dialect::Sqlite
                .check_table("t", &table_of(&wide, &[]))
                .is_ok()
        );
        assert!(
            Dialect::MySql
                .check_table("t", &table_of(&[("a", "VARCHAR(700) NOT NULL")], &["a"]))
                .is_ok()
        );
    }

    #[test]
    fn names_are_quoted_with_inner_quotes_doubled_and_limits_enforced() {
        assert_eq!(
            Dialect::Postgres.quote("a\"b; DROP").unwrap(),
            "\"a\"\"b; DROP\""
        );
        assert_eq!(Dialect::MySql.quote("a`b").unwrap(), "`a``b`");
        assert!(Dialect::Postgres.quote(&"x".repeat(64)).is_err());
        assert!(Dialect::MySql.quote("nul\0").is_err());
        assert!(Dialect::Sqlite.quote("").is_err());
    }
}
