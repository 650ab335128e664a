//! JDBC URLs as ctasd reads and writes them: a catalog's `base-url` (a
//! server, or a directory of SQLite files), and the database names that
//! may be written into the URL an engine receives.

use std::path::PathBuf;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use url::{Host, Url};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JdbcUrl {
    Postgres { host: String, port: u16 },
    MySql { host: String, port: u16 },
    Sqlite { directory: PathBuf },
}

impl JdbcUrl {
    pub fn parse(url: &str) -> Result<Self, String> {
        if let Some(path) = url.strip_prefix("jdbc:sqlite:") {
            let directory = PathBuf::from(path);
            if !directory.is_absolute() {
                return Err("a jdbc:sqlite: base URL must name an absolute directory".into());
            }
            return Ok(Self::Sqlite { directory });
        }
        let (server, default_port, postgres) = if url.starts_with("jdbc:postgresql://") {
            (&url["jdbc:".len()..], 5432, true)
        } else if url.starts_with("jdbc:mysql://") || url.starts_with("jdbc:mariadb://") {
            (&url["jdbc:".len()..], 3306, false)
        } else {
            return Err(
                "expected jdbc:postgresql://, jdbc:mysql://, jdbc:mariadb:// or jdbc:sqlite:"
                    .into(),
            );
        };
        let server = Url::parse(server).map_err(|e| format!("the base URL is not a URL: {e}"))?;
        let names_more_than_a_server = !matches!(server.path(), "" | "/")
            || server.query().is_some()
            || server.fragment().is_some()
            || !server.username().is_empty()
            || server.password().is_some();
        if names_more_than_a_server {
            return Err("the base URL names only the server (host and port); \
                        put the database in 'default-database' and credentials in 'username'/'password'"
                .into());
        }
        let host = match server.host() {
            Some(Host::Domain(name)) if !name.is_empty() => name.to_owned(),
            Some(Host::Ipv4(address)) => address.to_string(),
            Some(Host::Ipv6(address)) => address.to_string(),
            _ => return Err("the base URL has no host".into()),
        };
        let port = server.port().unwrap_or(default_port);
        Ok(if postgres {
            Self::Postgres { host, port }
        } else {
            Self::MySql { host, port }
        })
    }
}

/// Why a database name cannot be written into a JDBC URL as it is, if it
/// cannot: the sink URL an engine receives is `<base-url>/<database>`, and a
/// name holding `?`, `;` or `&` would add connection parameters to it
/// (`allowLoadLocalInfile=true`, ...).
pub fn check_url_safe(database: &str) -> Result<(), String> {
    match database
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || URL_SPECIAL.contains(c))
    {
        Some(c) => Err(format!(
            "database name '{}' contains {:?}, which a JDBC URL would read as part of its \
             syntax; ctasd refuses names that cannot be written into a URL as they are",
            database.escape_debug(),
            c
        )),
        None => Ok(()),
    }
}

/// RFC 3986's unreserved characters are the only ones left as they are.
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `segment` with every byte outside RFC 3986's unreserved set
/// percent-encoded.
pub(super) fn escape_path_segment(segment: &str) -> String {
    utf8_percent_encode(segment, NOT_UNRESERVED).to_string()
}

/// Characters with a meaning in a JDBC URL's path or parameters.
pub(super) const URL_SPECIAL: &[char] =
    &['?', '&', '#', ';', '=', '%', '/', '\\', '@', ':', '"', '\''];
