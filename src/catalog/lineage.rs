//! Where a catalog's tables are, in OpenLineage's dataset naming: the
//! namespace names the data source, the name the table in it.
//! PostgreSQL: `postgres://{host}:{port}` and `{database}.{schema}.{table}`
//! (ctasd's tables are in the connection's default schema, `public`);
//! MySQL/MariaDB: `mysql://{host}:{port}` and `{database}.{table}`; a
//! warehouse directory: `file` and the table's absolute path. SQLite has no
//! entry in the naming specification: a SQLite table is named as the file
//! it lives in, `file` and `{database file}/{table}`. An in-memory
//! catalog's tables live in ctasd only: `ctasd://{catalog}`.

use std::path::Path;

use super::jdbc::JdbcUrl;
use crate::domain::CatalogDescriptor;

/// A dataset's OpenLineage identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetName {
    pub namespace: String,
    pub name: String,
}

/// The OpenLineage name of `database.table` in `catalog`.
pub fn dataset_name(catalog: &CatalogDescriptor, database: &str, table: &str) -> DatasetName {
    let options = &catalog.options;
    let jdbc = options.get("base-url").map(JdbcUrl::parse);
    let (namespace, name) = match (options.get("type"), jdbc, options.get("path")) {
        (Some("jdbc"), Some(Ok(JdbcUrl::Postgres { host, port })), _) => (
            format!("postgres://{}:{port}", bracketed(&host)),
            format!("{database}.public.{table}"),
        ),
        (Some("jdbc"), Some(Ok(JdbcUrl::MySql { host, port })), _) => (
            format!("mysql://{}:{port}", bracketed(&host)),
            format!("{database}.{table}"),
        ),
        (Some("jdbc"), Some(Ok(JdbcUrl::Sqlite { directory })), _) => (
            "file".to_owned(),
            format!(
                "{}/{table}",
                directory.join(format!("{database}.db")).display()
            ),
        ),
        (Some("filesystem"), _, Some(path)) => (
            "file".to_owned(),
            Path::new(path.strip_prefix("file://").unwrap_or(path))
                .join(database)
                .join(table)
                .display()
                .to_string(),
        ),
        _ => (
            format!("ctasd://{}", catalog.name),
            format!("{database}.{table}"),
        ),
    };
    DatasetName { namespace, name }
}

/// An IPv6 address as a URL's authority writes it.
fn bracketed(host: &str) -> String {
    match host.contains(':') {
        true => format!("[{host}]"),
        false => host.to_owned(),
    }
}
