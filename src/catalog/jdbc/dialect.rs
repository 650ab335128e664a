//! What the SQL systems differ in, as text: how names are quoted, which
//! column type holds each Flink type, the limits a table must fit, and the
//! statements that stage, publish and drop a table. Nothing here performs
//! I/O; [`super::Server`] runs the statements.
//!
//! A type a dialect cannot hold without loss is refused with the column
//! named, so a job fails at submission instead of at DDL time or, worse,
//! with silently truncated data.

use std::fmt::Write;

use crate::catalog::installation::Installation;
use crate::domain::flink::table::{ColumnDefinition, TableDefinition};
use crate::domain::flink::types::DataType;
use crate::domain::staging::StagingKey;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DialectError {
    #[error("column '{column}': {reason}")]
    Column { column: String, reason: String },
    #[error("{0}")]
    Name(String),
}

/// What a table being created is for: its primary key's name and the marker
/// it carries while it is a staging.
#[derive(Debug, Clone, Copy)]
pub struct Shape<'a> {
    /// The primary key constraint's name (a staging's own, on systems where
    /// the name must be unique beyond the table).
    pub key_name: Option<&'a str>,
    /// A staging's marker, as [`staging_marker`] writes it; `None` for a
    /// published table, which carries the declared table comment instead.
    pub marker: Option<&'a str>,
}

/// One staging to publish as its target.
#[derive(Debug, Clone)]
pub struct Publication<'a> {
    /// The staging's name as DDL names it (quoted, qualified where needed).
    pub staging: &'a str,
    /// The target's name as DDL names it.
    pub target: &'a str,
    /// The target exists and is replaced.
    pub replace: bool,
    /// Where a replaced table is parked until it is dropped (MySQL's swap).
    pub parked: &'a str,
    /// The staging's own primary key name (unquoted), renamed to the
    /// declared one.
    pub staging_key_name: Option<&'a str>,
    pub definition: &'a TableDefinition,
    /// The target's own name, unquoted, and the staging's marker: what the
    /// publication log records where a table keeps no marker of its own.
    pub table: &'a str,
    pub marker: &'a str,
    /// The database's publication log, as DDL names it.
    pub log: &'a str,
}

/// One SQL system's text. Names passed in are unquoted; every name in a
/// statement is quoted by [`Dialect::quote`].
pub trait Dialect: Send + Sync {
    fn name(&self) -> &'static str;
    /// Longest identifier, in bytes.
    fn max_identifier_len(&self) -> usize;
    /// The character that quotes identifiers.
    fn quote_char(&self) -> char;
    /// Most columns a table may have.
    fn max_columns(&self) -> usize;
    /// Most columns a primary key may have.
    fn max_key_columns(&self) -> usize;
    /// Whether DDL runs inside transactions (all or nothing).
    fn transactional_ddl(&self) -> bool;
    /// The column type for a Flink type, without nullability.
    fn column_type(&self, data_type: &DataType) -> Result<String, String>;

    /// A name this system refuses beyond length and NUL (a trailing space,
    /// a reserved prefix, a system column).
    fn check_name(&self, _kind: NameKind, _name: &str) -> Result<(), String> {
        Ok(())
    }

    /// Limits computed from the columns (MySQL's row and key sizes).
    fn check_sizes(&self, _table: &TableDefinition) -> Result<(), DialectError> {
        Ok(())
    }

    /// Whether a staging's primary key needs a name of its own: PostgreSQL
    /// names the key's index, and index names are unique in a schema.
    fn stages_key_name(&self) -> bool {
        false
    }

    /// `table` as DDL names it: MySQL's connection serves every database,
    /// so it qualifies; PostgreSQL and SQLite connect to one database.
    fn table_name(&self, _database: &str, table: &str) -> Result<String, DialectError> {
        self.quote(table)
    }

    /// A quoted identifier; quotes inside the name are doubled, NUL and
    /// over-long names are refused.
    fn quote(&self, name: &str) -> Result<String, DialectError> {
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
        let q = self.quote_char();
        Ok(format!("{q}{}{q}", name.replace(q, &format!("{q}{q}"))))
    }

    /// A string literal that reads back as exactly `text` on this system
    /// with the settings ctasd's connections run with. The standard form
    /// (quotes doubled, nothing else special) is SQLite's; systems where a
    /// backslash escapes override it. NUL, which no system keeps in text,
    /// is refused.
    /// `expression` read as text, to compare with string literals.
    fn as_text(&self, expression: &str) -> String {
        format!("CAST({expression} AS TEXT)")
    }

    fn literal(&self, text: &str) -> Result<String, DialectError> {
        refuse_nul(text)?;
        Ok(format!("'{}'", text.replace('\'', "''")))
    }

    /// The column definition, comment included where the system keeps it
    /// in the column's own clause.
    fn column(&self, column: &ColumnDefinition, data_type: &DataType) -> Result<String, String> {
        let mut sql = format!(
            "{} {}",
            self.quote(&column.name).map_err(|e| e.to_string())?,
            self.column_type(data_type)?
        );
        if !data_type.nullable {
            sql.push_str(" NOT NULL");
        }
        Ok(sql)
    }

    /// What closes a `CREATE TABLE` after its column list (MySQL's table
    /// comment).
    fn table_suffix(&self, _comment: Option<&str>) -> Result<String, DialectError> {
        Ok(String::new())
    }

    /// What follows the column list inside the parentheses (SQLite keeps
    /// the staging marker there, in a comment).
    fn inner_suffix(&self, _marker: Option<&str>) -> String {
        String::new()
    }

    /// Statements run after `CREATE TABLE` in the same transaction
    /// (PostgreSQL's `COMMENT ON`).
    fn after_create(
        &self,
        _name: &str,
        _table: &TableDefinition,
        _comment: Option<&str>,
    ) -> Result<Vec<String>, DialectError> {
        Ok(Vec::new())
    }

    /// Statements that leave a staging's marker where publication keeps it
    /// (the table's comment gives way to the declared one): PostgreSQL's
    /// comment on the table's row type. Elsewhere the marker lasts as it
    /// is (SQLite's DDL text) or until the declared comment is set (MySQL).
    fn lasting_mark(&self, _name: &str, _marker: &str) -> Result<Vec<String>, DialectError> {
        Ok(Vec::new())
    }

    /// Whether a published table keeps no marker of its own (MySQL: its
    /// comment becomes the declared one, and nothing else on a table lasts
    /// through that), so publication records the staging's marker in the
    /// database's publication log instead, after the rename.
    fn logs_publications(&self) -> bool {
        false
    }

    /// The publication log's creation, for a dialect that keeps one.
    fn publication_log_ddl(&self, _log: &str, _note: &str) -> Result<Option<String>, DialectError> {
        Ok(None)
    }

    /// The statement that records `marker` as `table`'s in the log.
    fn log_publication(
        &self,
        _log: &str,
        _table: &str,
        _marker: &str,
    ) -> Result<Option<String>, DialectError> {
        Ok(None)
    }

    /// Sets a table's comment, or its staging marker, on an existing table;
    /// `None` where the system cannot (SQLite).
    fn set_comment(
        &self,
        _name: &str,
        _comment: Option<&str>,
    ) -> Result<Option<String>, DialectError> {
        Ok(None)
    }

    /// Publishes stagings as their targets: one transaction on systems with
    /// transactional DDL, else statements each atomic on its own.
    fn publish(&self, items: &[Publication]) -> Result<Vec<String>, DialectError>;

    /// `CREATE TABLE` and what follows it, for a table named `name`
    /// (already quoted or qualified).
    fn create_table(
        &self,
        name: &str,
        table: &TableDefinition,
        shape: Shape,
    ) -> Result<Vec<String>, DialectError> {
        let mut sql = format!("CREATE TABLE {name} (");
        let mut first = true;
        for column in table.columns.iter().filter(|c| c.is_physical()) {
            let fail = |reason: String| DialectError::Column {
                column: column.name.clone(),
                reason,
            };
            let data_type = DataType::parse(&column.data_type).map_err(|e| fail(e.to_string()))?;
            let definition = self.column(column, &data_type).map_err(fail)?;
            if !first {
                sql.push_str(", ");
            }
            first = false;
            sql.push_str(&definition);
        }
        if let Some(pk) = &table.primary_key {
            let columns = pk
                .columns
                .iter()
                .map(|c| self.quote(c))
                .collect::<Result<Vec<_>, _>>()?;
            let name = self.quote(shape.key_name.unwrap_or(&pk.name))?;
            write!(
                sql,
                ", CONSTRAINT {name} PRIMARY KEY ({})",
                columns.join(", ")
            )
            .expect("writing to a String");
        }
        sql.push_str(&self.inner_suffix(shape.marker));
        sql.push(')');
        let comment = shape.marker.or(table.comment.as_deref());
        sql.push_str(&self.table_suffix(comment)?);
        let mut statements = vec![sql];
        statements.extend(self.after_create(name, table, comment)?);
        if let Some(marker) = shape.marker {
            statements.extend(self.lasting_mark(name, marker)?);
        }
        Ok(statements)
    }

    /// A name this system can hold as an identifier, as it is.
    fn check_identifier(&self, kind: NameKind, name: &str) -> Result<(), DialectError> {
        self.quote(name)?;
        self.check_name(kind, name).map_err(DialectError::Name)
    }

    /// Whatever can be known before asking the system: names it refuses,
    /// more columns or key columns than it holds, rows larger than it
    /// allows, and the DDL itself (types it cannot hold).
    fn check_table(&self, table: &str, definition: &TableDefinition) -> Result<(), DialectError> {
        self.check_identifier(NameKind::Table, table)?;
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
            self.check_identifier(NameKind::Column, &column.name)
                .map_err(|e| DialectError::Column {
                    column: column.name.clone(),
                    reason: e.to_string(),
                })?;
        }
        if let Some(pk) = &definition.primary_key {
            if pk.columns.len() > self.max_key_columns() {
                return Err(DialectError::Name(format!(
                    "{} primary keys hold at most {} columns; '{}' has {}",
                    self.name(),
                    self.max_key_columns(),
                    pk.name,
                    pk.columns.len()
                )));
            }
            self.check_identifier(NameKind::Constraint, &pk.name)?;
        }
        self.check_sizes(definition)?;
        self.create_table("t", definition, Shape::published())
            .map(|_| ())
    }
}

/// Whether `sql` is one statement: no `;` outside its quoted literals,
/// quoted identifiers and comments, and none of those left open. Every
/// literal and identifier ctasd writes reads the same to this scan on each
/// system (quotes doubled inside; a backslash is never followed by an
/// unpaired quote), so a text that fails it holds a statement ctasd did
/// not write, and is not run.
pub fn is_one_statement(sql: &str) -> bool {
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        let closing = match c {
            ';' => return false,
            '\'' | '"' | '`' => c,
            '[' => ']',
            '-' if chars.peek() == Some(&'-') => '\n',
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut star = false;
                loop {
                    match chars.next() {
                        None => return false,
                        Some('/') if star => break,
                        Some(next) => star = next == '*',
                    }
                }
                continue;
            }
            _ => continue,
        };
        loop {
            match chars.next() {
                None => return closing == '\n',
                Some(next) if next == closing => {
                    // A doubled quote stays inside.
                    if closing != '\n' && closing != ']' && chars.peek() == Some(&closing) {
                        chars.next();
                        continue;
                    }
                    break;
                }
                Some(_) => {}
            }
        }
    }
    true
}

/// Refuses text holding NUL, which no SQL system keeps in a literal.
pub fn refuse_nul(text: &str) -> Result<(), DialectError> {
    if text.contains('\0') {
        return Err(DialectError::Name(format!(
            "'{}' contains NUL, which no SQL system keeps in text",
            text.escape_debug()
        )));
    }
    Ok(())
}

/// `text` as a literal for systems where a backslash starts an escape
/// (MySQL/MariaDB by default, PostgreSQL's `E'...'`): backslashes and
/// quotes escaped, so the literal ends only at its closing quote whatever
/// the text holds.
pub fn backslash_escaped(text: &str) -> Result<String, DialectError> {
    refuse_nul(text)?;
    Ok(text.replace('\\', "\\\\").replace('\'', "''"))
}

/// What kind of object a name is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    Database,
    Table,
    Column,
    Constraint,
}

impl NameKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NameKind::Database => "database name",
            NameKind::Table => "table name",
            NameKind::Column => "column name",
            NameKind::Constraint => "constraint name",
        }
    }
}

impl Shape<'_> {
    /// A table as published: its declared key name and comment.
    pub fn published() -> Self {
        Shape {
            key_name: None,
            marker: None,
        }
    }
}

/// The marker a staging carries: the begin action that made it, so a
/// repeated begin knows whether the staging is already this attempt's; the
/// staging it is, so a published table still marked proves which job's
/// staging it was; and the installation that wrote it.
pub fn staging_marker(attempt: i64, key: &StagingKey, installation: &Installation) -> String {
    installation.mark(&format!(
        "ctasd staging, attempt {attempt}, {FOR}{}",
        key.as_str()
    ))
}

/// What precedes the staging key in a marker.
const FOR: &str = "for ";

/// The staging key a marker names, if it names one (markers written
/// before they named one do not).
pub fn marked_key(text: &str) -> Option<&str> {
    let (_, rest) = text.split_once("ctasd staging, attempt ")?;
    let (_, rest) = rest.split_once(&format!(", {FOR}"))?;
    let end = rest
        .find(|c: char| !(c.is_ascii_hexdigit() || c == '_'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The attempt named in a staging's comment or DDL text, if any.
pub fn parse_attempt_marker(text: &str) -> Option<i64> {
    let (_, rest) = text.split_once("ctasd staging, attempt ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_with_a_second_one_behind_it_is_not_one_statement() {
        let dialects: [&dyn Dialect; 3] = [
            &super::super::postgres::Postgres,
            &super::super::mysql::MySql,
            &super::super::sqlite::Sqlite,
        ];
        for dialect in dialects {
            for text in [
                "x\\'; DROP TABLE v; -- ",
                "a;b",
                "--",
                "/*",
                "'",
                "\\",
                "`;`",
                "\";\"",
            ] {
                let literal = dialect.literal(text).unwrap();
                let name = dialect.quote(text).unwrap();
                let sql = format!("COMMENT ON TABLE {name} IS {literal}");
                assert!(is_one_statement(&sql), "{}: {sql}", dialect.name());
            }
        }
        for stacked in [
            "CREATE TABLE t (a INT); DROP TABLE v",
            "ALTER TABLE t COMMENT = 'x'; DROP TABLE v",
            "ALTER TABLE t COMMENT = 'x''; DROP TABLE v",
            "SELECT 'open",
            "SELECT 1 /* open",
        ] {
            assert!(!is_one_statement(stacked), "{stacked}");
        }
        assert!(is_one_statement(
            "CREATE TABLE \"t\" (\"a\" INT /* ctasd staging, attempt 7 */)"
        ));
    }

    #[test]
    fn attempt_markers_read_back_from_comments_and_ddl_text() {
        let key = StagingKey::new("0123456789abcdef0123456789abcdef", 2).unwrap();
        let marker = staging_marker(42, &key, &Installation::new("ab12"));
        assert_eq!(parse_attempt_marker(&marker), Some(42));
        assert_eq!(marked_key(&marker), Some(key.as_str()));
        assert_eq!(Installation::new("ab12").check(&marker), Ok(()));
        assert_eq!(
            marked_key(&format!("CREATE TABLE \"t\" (\"a\" INT /* {marker} */)")),
            Some(key.as_str())
        );
        assert_eq!(
            marked_key("ctasd staging, attempt 7"),
            None,
            "written before keys"
        );
        assert_eq!(
            parse_attempt_marker("CREATE TABLE \"t\" (\"a\" INT /* ctasd staging, attempt 7 */)"),
            Some(7)
        );
        assert_eq!(parse_attempt_marker("orders by day"), None);
    }
}
