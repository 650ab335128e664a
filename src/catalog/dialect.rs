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
