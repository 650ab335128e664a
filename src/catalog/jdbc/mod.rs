//! `jdbc`: tables in a real PostgreSQL, MySQL/MariaDB or SQLite database.
//!
//! Options use Flink's JDBC catalog names (`base-url`, `default-database`,
//! `username`, `password`). The base URL names a server (or, for SQLite, a
//! directory whose `<database>.db` files are the databases); the database is
//! always a separate option, as in Flink. Connections are built from typed
//! connect options, never from a URL with the password spliced in, so no
//! driver message can echo it; [`CatalogOptions::redact`] guards the rest.
//!
//! Staging, publication and removal are written once here, over two traits:
//! [`Dialect`] (the statements, as text) and [`Server`] (running them), one
//! implementation of each per system in `postgres`, `mysql` and `sqlite`.
//! A staging carries a marker naming the `begin` that made it, so a begin
//! for a new attempt (after a restart) empties it, and a repeated begin of
//! the same attempt leaves the rows written meanwhile alone.

mod audit;
mod catalog;
pub mod dialect;
mod factory;
pub mod mysql;
pub mod postgres;
mod publish;
mod server;
pub mod sqlite;
mod url;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::Staging;
use super::installation::Installation;
use super::protected::ProtectedPaths;
use crate::domain::CatalogOptions;
use catalog::{is_already_exists, staging_key_name, staging_table};
pub use dialect::{Dialect, DialectError, NameKind, Publication, Shape};
pub use factory::JdbcCatalogFactory;
use factory::connector_options;
use publish::{fresh_table, parked_table};
pub(crate) use server::{Answer, Ending, PoolPerDatabase, Server, one_statement, run_statements};
use url::escape_path_segment;
pub use url::{JdbcUrl, check_url_safe};

/// Tables ctasd makes for itself start with this; browsing hides them.
const HIDDEN_PREFIX: &str = "__ctasd_";

/// Where a system whose published tables keep no marker (MySQL) records
/// which staging each table of the database was published from, with the
/// comment that proves the log is ctasd's.
const PUBLICATION_LOG: &str = "__ctasd_published";
const LOG_NOTE: &str = "ctasd publication log: the staging each table here was published from";

/// How long opening a connection may take before the catalog is reported unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a table definition the database accepted in a dry run is
/// taken as accepted again, without another dry run.
const ACCEPTED_FOR: Duration = Duration::from_secs(60);

/// Most definitions remembered as accepted; past it, they start afresh.
const MOST_ACCEPTED: usize = 1024;

pub struct JdbcCatalog {
    server: Box<dyn Server>,
    protected: Arc<ProtectedPaths>,
    /// Named in every staging's marker.
    installation: Installation,
    /// Kept for redacting driver messages.
    options: CatalogOptions,
    default_database: String,
    /// Databases already shown not to hold a ctasd store.
    not_stores: Mutex<HashSet<String>>,
    /// Databases found to exist (and hold no store), where the server
    /// [reports missing databases](Server::reports_missing_databases): not
    /// looked up again until an operation finds one gone.
    found_databases: std::sync::Mutex<HashSet<String>>,
    /// When each (database, definition as DDL) passed its dry run: the same
    /// definition submitted again soon is not tried again.
    accepted: std::sync::Mutex<HashMap<(String, String), std::time::Instant>>,
}

/// One staging of a publication, with its names as DDL names them.
struct PublishNames<'a> {
    staging: &'a Staging,
    staged: String,
    target: String,
    /// Where a replaced table is parked (MySQL's swap).
    parked: String,
    /// The staging's own primary key name, unquoted.
    key: String,
    replace: bool,
    /// The staging's marker, as read before the publication.
    marker: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_name_a_server_or_a_directory() {
        assert_eq!(
            JdbcUrl::parse("jdbc:postgresql://127.0.0.1:5433").unwrap(),
            JdbcUrl::Postgres {
                host: "127.0.0.1".into(),
                port: 5433
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:postgresql://db.example/").unwrap(),
            JdbcUrl::Postgres {
                host: "db.example".into(),
                port: 5432
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:mariadb://h").unwrap(),
            JdbcUrl::MySql {
                host: "h".into(),
                port: 3306
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:mysql://[::1]:3307").unwrap(),
            JdbcUrl::MySql {
                host: "::1".into(),
                port: 3307
            }
        );
        assert_eq!(
            JdbcUrl::parse("jdbc:sqlite:/var/db").unwrap(),
            JdbcUrl::Sqlite {
                directory: "/var/db".into()
            }
        );
    }

    #[test]
    fn base_urls_naming_more_or_less_than_a_server_are_refused() {
        for url in [
            "jdbc:postgresql://h:5432/db",
            "jdbc:postgresql://h?ssl=true",
            "jdbc:mysql://user:pw@h",
            "jdbc:mysql://h#x",
        ] {
            let refusal = JdbcUrl::parse(url).unwrap_err();
            assert!(
                refusal.contains("names only the server"),
                "{url}: {refusal}"
            );
        }
        for url in [
            "jdbc:postgresql://",
            "jdbc:mysql://h:99999",
            "jdbc:oracle:thin:@h",
            "jdbc:sqlite:relative",
        ] {
            assert!(JdbcUrl::parse(url).is_err(), "{url}");
        }
    }

    #[test]
    fn every_hidden_name_fits_every_dialects_identifier_limit() {
        let key = super::super::StagingKey::new(&"f".repeat(32), 63).unwrap();
        let definition =
            serde_json::from_value(serde_json::json!({"columns": [{"name": "x", "type": "INT"}]}))
                .unwrap();
        let staging = Staging {
            key,
            database: "d".into(),
            table: "t".into(),
            definition,
        };
        let dialects: [&dyn Dialect; 3] = [&postgres::Postgres, &mysql::MySql, &sqlite::Sqlite];
        for dialect in dialects {
            for name in [
                staging_table(&staging),
                parked_table(&staging),
                fresh_table(&staging),
                staging_key_name(&staging),
                format!("{HIDDEN_PREFIX}probekey_{}", "f".repeat(32)),
            ] {
                assert!(dialect.quote(&name).is_ok(), "{name} on {}", dialect.name());
            }
        }
    }

    #[test]
    fn database_names_cannot_add_parameters_to_a_jdbc_url() {
        let injected = "x?allowLoadLocalInfile=true&autoDeserialize=true";
        assert!(check_url_safe(injected).unwrap_err().contains("'?'"));
        assert!(check_url_safe("x;a=b").is_err());
        assert!(check_url_safe("analytics_2026-q1.eu").is_ok());
        assert_eq!(
            escape_path_segment(injected),
            "x%3FallowLoadLocalInfile%3Dtrue%26autoDeserialize%3Dtrue"
        );
    }

    #[test]
    fn base_urls_with_a_database_credentials_or_a_bad_port_are_refused() {
        for bad in [
            "jdbc:postgresql://h:5432/db",
            "jdbc:mysql://user:pw@h",
            "jdbc:postgresql://h:99999",
            "jdbc:postgresql://",
            "jdbc:oracle:thin:@h",
            "postgres://h",
            "jdbc:sqlite:relative/dir",
        ] {
            assert!(JdbcUrl::parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
