//! The `jdbc` catalog type: its options, their validation, opening a
//! catalog on its server, and the Flink connector options an engine
//! writes a table with.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Mutex;

use crate::catalog::installation::Installation;
use crate::catalog::protected::{ProtectedPaths, canonical_directory};
use crate::catalog::registry::{CatalogFactory, FactoryError};
use crate::catalog::{Catalog, CatalogError, Staging, WriteLocation};
use crate::domain::WriteLocationKind;
use crate::domain::options::{OptionSpec, ValidationError};
use crate::domain::{CatalogOptions, ObjectName};

use super::*;

pub(super) static OPTIONS: &[OptionSpec] = &[
    OptionSpec::location(
        "base-url",
        "Server URL without a database: jdbc:postgresql://host[:port], jdbc:mysql://host[:port], \
         jdbc:mariadb://host[:port], or jdbc:sqlite:/absolute/directory (each <database>.db file there is a database).",
    ),
    OptionSpec::required(
        "default-database",
        "The database to connect to and to use when a target names none.",
    ),
    OptionSpec::optional(
        "username",
        None,
        "User name; required for PostgreSQL and MySQL/MariaDB.",
    ),
    OptionSpec::optional(
        "password",
        None,
        "Password; required for PostgreSQL and MySQL/MariaDB (may be empty).",
    ),
];

pub struct JdbcCatalogFactory {
    protected: Arc<ProtectedPaths>,
    installation: Installation,
}

impl JdbcCatalogFactory {
    pub fn new(protected: Arc<ProtectedPaths>, installation: Installation) -> Self {
        Self {
            protected,
            installation,
        }
    }
}

pub(super) fn invalid(key: &str, reason: impl Into<String>) -> ValidationError {
    ValidationError::InvalidValue {
        key: key.into(),
        reason: reason.into(),
    }
}

#[async_trait]
impl CatalogFactory for JdbcCatalogFactory {
    fn identifier(&self) -> &'static str {
        "jdbc"
    }

    fn description(&self) -> &'static str {
        "Tables in a PostgreSQL, MySQL/MariaDB or SQLite database, created with real DDL."
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    /// `username` and `password` are required unless the base URL names
    /// a SQLite directory.
    fn required_with(&self, options: &CatalogOptions) -> Vec<&'static str> {
        match options.get("base-url").map(JdbcUrl::parse) {
            Some(Ok(JdbcUrl::Sqlite { .. })) => Vec::new(),
            _ => vec!["username", "password"],
        }
    }

    fn validate(&self, options: &CatalogOptions) -> Result<(), ValidationError> {
        JdbcUrl::parse(options.get("base-url").unwrap_or_default())
            .map_err(|r| invalid("base-url", r))?;
        let database = options.get("default-database").unwrap_or_default();
        ObjectName::parse("default-database", database)
            .map_err(|e| invalid("default-database", e.to_string()))?;
        check_url_safe(database).map_err(|reason| invalid("default-database", reason))
    }

    fn write_location(
        &self,
        options: &CatalogOptions,
        staging: &Staging,
        staged: bool,
    ) -> WriteLocation {
        let name = if staged {
            staging_table(staging)
        } else {
            staging.table.clone()
        };
        let connector = connector_options(options, &staging.database, &name);
        let mut location = WriteLocation {
            url: connector.get("url").cloned(),
            ..crate::catalog::sink::write_location(
                WriteLocationKind::Table,
                name,
                staging,
                connector,
            )
        };
        if options.get("password").is_some_and(|p| !p.is_empty()) {
            location.withheld_options.push("password".to_owned());
            location.withheld_options.sort();
            location.withheld_options.dedup();
        }
        location
    }

    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, FactoryError> {
        let url = JdbcUrl::parse(options.get("base-url").unwrap_or_default())?;
        let default_database = options
            .get("default-database")
            .unwrap_or_default()
            .to_owned();
        let username = options.get("username").unwrap_or_default().to_owned();
        let password = options.get("password").unwrap_or_default().to_owned();
        let server: Box<dyn Server> = match url {
            JdbcUrl::Postgres { host, port } => Box::new(postgres::PostgresServer::new(
                host, port, username, password,
            )),
            JdbcUrl::MySql { host, port } => Box::new(mysql::MySqlServer::new(
                host,
                port,
                username,
                password,
                default_database.clone(),
            )),
            JdbcUrl::Sqlite { directory } => {
                canonical_directory(&directory.display().to_string())
                    .and_then(|dir| {
                        self.protected
                            .refuse_database_directory(&dir)
                            .map_or(Ok(()), Err)
                    })
                    .map_err(|reason| FactoryError::Invalid(invalid("base-url", reason)))?;
                let server = sqlite::SqliteServer::new(directory);
                if let Some(reason) = self
                    .protected
                    .refuse_database_file(&server.file(&default_database))
                {
                    return Err(FactoryError::Invalid(invalid("default-database", reason)));
                }
                Box::new(server)
            }
        };
        let catalog = JdbcCatalog {
            server,
            protected: self.protected.clone(),
            installation: self.installation.clone(),
            options: options.clone(),
            default_database,
            not_stores: Mutex::new(HashSet::new()),
            found_databases: std::sync::Mutex::new(HashSet::new()),
            accepted: std::sync::Mutex::new(HashMap::new()),
        };
        catalog.check_connection().await?;
        match catalog.refuse_store(&catalog.default_database).await {
            Ok(()) => Ok(Arc::new(catalog)),
            Err(CatalogError::Protected(reason)) => {
                Err(FactoryError::Invalid(invalid("default-database", reason)))
            }
            Err(other) => Err(FactoryError::Unreachable(other.to_string())),
        }
    }
}

/// Flink's JDBC connector options for `table` in `database`: its URL and
/// user, never the password.
pub(super) fn connector_options(
    options: &CatalogOptions,
    database: &str,
    table: &str,
) -> BTreeMap<String, String> {
    let base = options
        .get("base-url")
        .unwrap_or_default()
        .trim_end_matches('/');
    // Submission refuses database names that a URL would misread; escaping
    // here as well keeps a job stored before that rule from reaching an
    // engine as extra connection parameters.
    let database = escape_path_segment(database);
    let url = match JdbcUrl::parse(base) {
        Ok(JdbcUrl::Sqlite { directory }) => {
            format!("jdbc:sqlite:{}/{database}.db", directory.display())
        }
        _ => format!("{base}/{database}"),
    };
    let mut connector = BTreeMap::from([
        ("connector".to_owned(), "jdbc".to_owned()),
        ("url".to_owned(), url),
        ("table-name".to_owned(), table.to_owned()),
    ]);
    if let Some(username) = options.get("username") {
        connector.insert("username".into(), username.into());
    }
    connector
}
