//! Audits on a staging table: each one query, run read-only and within
//! [`AUDIT_TIMEOUT`] ([`Server::read_only`]). A query the system refuses,
//! stops at its time limit or that tries to write fails its audit; a
//! system that cannot be reached fails nothing and is tried again.

use std::ops::ControlFlow;

use sqlparser::ast::{Query, SetExpr, Statement, Visit, Visitor};
use sqlparser::dialect::{
    Dialect as ParserDialect, MySqlDialect, PostgreSqlDialect, SQLiteDialect,
};
use sqlparser::parser::Parser;

use super::{JdbcCatalog, staging_table};
use crate::catalog::{CatalogError, Staging};
use crate::domain::audit::{AUDIT_TIMEOUT, Audit, Observed, STAGING_PLACEHOLDER};

/// A stand-in for the staging's name while a query is parsed.
const STAGING_STAND_IN: &str = "ctasd_staging";

impl JdbcCatalog {
    /// Refuses a `sql` audit whose query is not one `SELECT` for this
    /// system.
    pub(super) fn check_audit_queries(&self, audits: &[Audit]) -> Result<(), String> {
        for audit in audits {
            let Audit::Sql { name, query } = audit else {
                continue;
            };
            let text = query.replace(STAGING_PLACEHOLDER, STAGING_STAND_IN);
            let parser: Box<dyn ParserDialect> = match self.dialect().name() {
                "PostgreSQL" => Box::new(PostgreSqlDialect {}),
                "SQLite" => Box::new(SQLiteDialect {}),
                _ => Box::new(MySqlDialect {}),
            };
            let statements = Parser::parse_sql(parser.as_ref(), &text).map_err(|e| {
                format!(
                    "audit sql({name}): the query does not parse as {}: {e}",
                    self.dialect().name()
                )
            })?;
            let one_select = match statements.as_slice() {
                [statement @ Statement::Query(_)] => reads_only(statement),
                _ => Err("it is not one query".to_owned()),
            };
            one_select.map_err(|why| {
                format!(
                    "audit sql({name}): the query must be one SELECT, which reads and writes \
                     nothing ({why})"
                )
            })?;
        }
        Ok(())
    }

    /// What each audit observes on `staging`.
    pub(super) async fn run_audits(
        &self,
        staging: &Staging,
        audits: &[Audit],
    ) -> Result<Vec<Observed>, CatalogError> {
        let table = self.name_of(&staging.database, &staging_table(staging))?;
        let mut observed = Vec::with_capacity(audits.len());
        for audit in audits {
            observed.push(self.observe(staging, &table, audit).await?);
        }
        Ok(observed)
    }

    async fn observe(
        &self,
        staging: &Staging,
        table: &str,
        audit: &Audit,
    ) -> Result<Observed, CatalogError> {
        let dialect = self.dialect();
        let quoted = |columns: &[String]| -> Result<Vec<String>, CatalogError> {
            columns
                .iter()
                .map(|c| dialect.quote(c).map_err(Self::unsupported))
                .collect()
        };
        let query = match audit {
            Audit::RowCount { .. } => format!("SELECT COUNT(*) FROM {table}"),
            Audit::NotNull { columns } => {
                let nulls: Vec<String> = quoted(columns)?
                    .into_iter()
                    .map(|c| format!("{c} IS NULL"))
                    .collect();
                format!("SELECT COUNT(*) FROM {table} WHERE {}", nulls.join(" OR "))
            }
            Audit::Unique { columns } => {
                let columns = quoted(columns)?.join(", ");
                format!(
                    "SELECT COUNT(*) FROM (SELECT {columns} FROM {table} \
                     GROUP BY {columns} HAVING COUNT(*) > 1) duplicated"
                )
            }
            Audit::AcceptedValues { column, values } => {
                let column = dialect.quote(column).map_err(Self::unsupported)?;
                let accepted = values
                    .iter()
                    .map(|v| dialect.literal(v).map_err(Self::unsupported))
                    .collect::<Result<Vec<_>, _>>()?;
                format!(
                    "SELECT COUNT(*) FROM {table} WHERE {column} IS NOT NULL AND {} NOT IN ({})",
                    dialect.as_text(&column),
                    accepted.join(", ")
                )
            }
            Audit::RowCountChange { .. } => return self.row_count_change(staging, table).await,
            Audit::Sql { query, .. } => query.replace(STAGING_PLACEHOLDER, table),
        };
        let answer = match self.answer(staging, &query).await? {
            Ok(answer) => answer,
            Err(refusal) => return Ok(Observed::Refused(refusal)),
        };
        Ok(match audit {
            Audit::Sql { .. } => Observed::Answer(answer.is_true(), answer.truth()),
            _ => match answer.count() {
                Some(count) => Observed::Count(count),
                None => Observed::Refused(format!("the count read as {}", answer.describe())),
            },
        })
    }

    /// The staging's rows over the table it replaces.
    async fn row_count_change(
        &self,
        staging: &Staging,
        table: &str,
    ) -> Result<Observed, CatalogError> {
        if !self.exists(&staging.database, &staging.table).await? {
            return Ok(Observed::Ratio(None));
        }
        let target = self.name_of(&staging.database, &staging.table)?;
        let mut counts = Vec::with_capacity(2);
        for name in [table, target.as_str()] {
            match self
                .answer(staging, &format!("SELECT COUNT(*) FROM {name}"))
                .await?
            {
                Ok(answer) => counts.push(answer.count().unwrap_or_default() as f64),
                Err(refusal) => return Ok(Observed::Refused(refusal)),
            }
        }
        let (staged, replaced) = (counts[0], counts[1]);
        let ratio = if replaced == 0.0 {
            if staged == 0.0 { 1.0 } else { f64::INFINITY }
        } else {
            staged / replaced
        };
        Ok(Observed::Ratio(Some(ratio)))
    }

    /// Runs one audit query: its answer, or the system's refusal (which
    /// fails the audit); a system out of reach is an error, tried again.
    async fn answer(
        &self,
        staging: &Staging,
        query: &str,
    ) -> Result<Result<super::Answer, String>, CatalogError> {
        let database = &staging.database;
        match self.server.read_only(database, query, AUDIT_TIMEOUT).await {
            Ok(answer) => Ok(Ok(answer)),
            Err(sqlx::Error::Database(db)) if self.server.is_time_out(db.as_ref()) => {
                Ok(Err(format!("stopped after {} s", AUDIT_TIMEOUT.as_secs())))
            }
            Err(error) => match self.failed(database, error) {
                CatalogError::Refused(refusal) => Ok(Err(refusal)),
                other => Err(other),
            },
        }
    }
}

/// Whether a query only reads: no statement nested in it (a `WITH` that
/// deletes, say) and no `SELECT … INTO`, which makes a table. The
/// read-only transaction refuses these too; here they are refused before
/// the job is taken.
fn reads_only(statement: &Statement) -> Result<(), String> {
    struct Writes;
    impl Visitor for Writes {
        type Break = &'static str;

        fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<Self::Break> {
            match statement {
                Statement::Query(_) => ControlFlow::Continue(()),
                _ => ControlFlow::Break("it holds a statement that is not a query"),
            }
        }

        fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<Self::Break> {
            match selects_into(&query.body) {
                true => ControlFlow::Break("SELECT … INTO makes a table"),
                false => ControlFlow::Continue(()),
            }
        }
    }
    match statement.visit(&mut Writes) {
        ControlFlow::Break(why) => Err(why.to_owned()),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Whether a query's body, or a side of its set operations, is `SELECT … INTO`.
fn selects_into(body: &SetExpr) -> bool {
    match body {
        SetExpr::Select(select) => select.into.is_some(),
        SetExpr::SetOperation { left, right, .. } => selects_into(left) || selects_into(right),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(sql: &str) -> Result<(), String> {
        let statements = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap();
        reads_only(&statements[0])
    }

    #[test]
    fn only_queries_that_read_are_audits() {
        assert!(read("SELECT COUNT(*) = 0 FROM s WHERE id IN (SELECT id FROM t)").is_ok());
        assert!(read("WITH x AS (SELECT 1 AS n) SELECT n > 0 FROM x").is_ok());
        assert!(
            read("WITH gone AS (DELETE FROM s RETURNING id) SELECT COUNT(*) FROM gone").is_err()
        );
        assert!(read("SELECT * INTO copied FROM s").is_err());
        assert!(read("SELECT 1 FROM s UNION SELECT * INTO copied FROM t").is_err());
    }
}
