//! Flink's catalog statements, run through the same use cases as the JSON
//! catalog routes (same validation, same store), with Flink's result
//! shapes: `OK` for a change, `catalog name` rows for `SHOW CATALOGS`,
//! `info name`/`info value` rows for `DESCRIBE CATALOG`. Unlike Flink,
//! `DESCRIBE` and `SHOW CREATE` never print a secret: they show `******`.

use super::{ServiceError, Services};
use crate::domain::flink::statement::{CatalogStatement, quote_identifier, quote_literal};
use crate::domain::{CatalogAlteration, CatalogName, CatalogRecord};

/// A statement's answer, as a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementResult {
    pub columns: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl StatementResult {
    fn ok() -> Self {
        Self::single("result", "OK".to_owned())
    }

    fn single(column: &'static str, value: String) -> Self {
        Self {
            columns: vec![column],
            rows: vec![vec![value]],
        }
    }
}

impl Services {
    pub async fn run_statement(
        &self,
        statement: CatalogStatement,
    ) -> Result<StatementResult, ServiceError> {
        use CatalogStatement as S;
        match statement {
            S::Create {
                name,
                if_not_exists,
                comment,
                options,
            } => {
                self.register_catalog(&name, options, comment, if_not_exists)
                    .await?;
                Ok(StatementResult::ok())
            }
            S::AlterSet { name, options } => {
                self.alter_by_statement(
                    &name,
                    CatalogAlteration {
                        set: options,
                        reset: vec![],
                        comment: None,
                    },
                )
                .await
            }
            S::AlterReset { name, keys } => {
                self.alter_by_statement(
                    &name,
                    CatalogAlteration {
                        set: Default::default(),
                        reset: keys,
                        comment: None,
                    },
                )
                .await
            }
            S::AlterComment { name, comment } => {
                self.alter_by_statement(
                    &name,
                    CatalogAlteration {
                        set: Default::default(),
                        reset: vec![],
                        comment: Some(comment),
                    },
                )
                .await
            }
            S::Drop { name, if_exists } => {
                let name = catalog_name(&name)?;
                if !self.drop_catalog(&name).await? && !if_exists {
                    return Err(not_found(&name));
                }
                Ok(StatementResult::ok())
            }
            S::ShowCatalogs => {
                let mut rows = Vec::new();
                let mut after: Option<CatalogName> = None;
                loop {
                    let page = self.list_catalogs(after.as_ref(), 1000).await?;
                    let Some(last) = page.last() else { break };
                    after = Some(last.descriptor.name.clone());
                    rows.extend(page.iter().map(|c| vec![c.descriptor.name.to_string()]));
                }
                Ok(StatementResult {
                    columns: vec!["catalog name"],
                    rows,
                })
            }
            S::Describe { name, extended } => {
                let record = self.catalog(&catalog_name(&name)?).await?;
                Ok(describe(&record, extended))
            }
            S::ShowCreate { name } => {
                let record = self.catalog(&catalog_name(&name)?).await?;
                Ok(StatementResult::single("result", show_create(&record)))
            }
        }
    }

    async fn alter_by_statement(
        &self,
        name: &str,
        alteration: CatalogAlteration,
    ) -> Result<StatementResult, ServiceError> {
        self.alter_catalog(&catalog_name(name)?, alteration).await?;
        Ok(StatementResult::ok())
    }
}

fn catalog_name(name: &str) -> Result<CatalogName, ServiceError> {
    CatalogName::parse(name).map_err(|e| ServiceError::name_invalid("statement", e))
}

fn not_found(name: &CatalogName) -> ServiceError {
    ServiceError::CatalogNotFound {
        name: name.to_string(),
        field: None,
    }
}

/// Flink's rows: name, type, comment; with EXTENDED, `option:<key>` for
/// every option but `type`, secrets masked.
fn describe(record: &CatalogRecord, extended: bool) -> StatementResult {
    let descriptor = &record.descriptor;
    let info = |name: &str, value: &str| vec![name.to_owned(), value.to_owned()];
    let mut rows = vec![
        info("name", descriptor.name.as_str()),
        info(
            "type",
            descriptor.options.catalog_type().unwrap_or_default(),
        ),
        info("comment", descriptor.comment.as_deref().unwrap_or_default()),
    ];
    if extended {
        rows.extend(
            descriptor
                .options
                .masked()
                .into_iter()
                .filter(|(key, _)| key != "type")
                .map(|(key, value)| vec![format!("option:{key}"), value]),
        );
    }
    StatementResult {
        columns: vec!["info name", "info value"],
        rows,
    }
}

/// A statement that registers this catalog again, secrets masked (fill
/// them in to run it).
fn show_create(record: &CatalogRecord) -> String {
    let descriptor = &record.descriptor;
    let mut sql = format!(
        "CREATE CATALOG {}\n",
        quote_identifier(descriptor.name.as_str())
    );
    if let Some(comment) = &descriptor.comment {
        sql.push_str(&format!("COMMENT {}\n", quote_literal(comment)));
    }
    let options: Vec<String> = descriptor
        .options
        .masked()
        .iter()
        .map(|(key, value)| format!("  {} = {}", quote_literal(key), quote_literal(value)))
        .collect();
    sql.push_str(&format!("WITH (\n{}\n)\n", options.join(",\n")));
    sql
}
