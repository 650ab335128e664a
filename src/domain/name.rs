//! Names that reach URLs, SQL and file paths.
//!
//! A catalog name is ctasd's own: it is strict so that it can appear unescaped
//! in a URL path and, later, in `catalog.database.table` targets. Database and
//! table names belong to the external system; browsing accepts whatever that
//! system may hold, minus what could escape a path or a query.

use std::fmt;

use serde::Serialize;

/// Longest catalog name accepted.
pub const CATALOG_NAME_MAX: usize = 64;
/// Longest database or table name accepted when browsing.
pub const OBJECT_NAME_MAX: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("{what} is longer than {max} characters")]
    TooLong { what: &'static str, max: usize },
    #[error(
        "{what} '{value}' is not valid: it must start with an ASCII letter and contain only ASCII letters, digits, '_' and '-'"
    )]
    BadRegisteredName { what: &'static str, value: String },
    #[error("{what} must not contain control characters, '/' or '\\', and must not be '.' or '..'")]
    BadObjectName { what: &'static str },
}

/// A registered catalog's name: `[A-Za-z][A-Za-z0-9_-]{0,63}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct CatalogName(String);

impl CatalogName {
    pub fn parse(value: &str) -> Result<Self, NameError> {
        registered_name("catalog name", value).map(Self)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CatalogName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A registered engine's name, by the same rule as a catalog's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct EngineName(String);

impl EngineName {
    pub fn parse(value: &str) -> Result<Self, NameError> {
        registered_name("engine name", value).map(Self)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EngineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A subscription's name, by the same rule as a catalog's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct SubscriptionName(String);

impl SubscriptionName {
    pub fn parse(value: &str) -> Result<Self, NameError> {
        registered_name("subscription name", value).map(Self)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SubscriptionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A name ctasd registers, fit for a URL path unescaped:
/// `[A-Za-z][A-Za-z0-9_-]{0,63}`.
fn registered_name(what: &'static str, value: &str) -> Result<String, NameError> {
    if value.is_empty() {
        return Err(NameError::Empty { what });
    }
    if value.chars().count() > CATALOG_NAME_MAX {
        return Err(NameError::TooLong {
            what,
            max: CATALOG_NAME_MAX,
        });
    }
    let mut chars = value.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !(first_ok && rest_ok) {
        return Err(NameError::BadRegisteredName {
            what,
            value: printable(value),
        });
    }
    Ok(value.to_owned())
}

/// A database or table name inside an external catalog.
///
/// Always passed to SQL as a bound parameter or a quoted identifier; the rule
/// here keeps it out of other directories when a catalog maps it to a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectName(String);

impl ObjectName {
    pub fn parse(what: &'static str, value: &str) -> Result<Self, NameError> {
        if value.is_empty() {
            return Err(NameError::Empty { what });
        }
        if value.chars().count() > OBJECT_NAME_MAX {
            return Err(NameError::TooLong {
                what,
                max: OBJECT_NAME_MAX,
            });
        }
        let escapes = value == "." || value == "..";
        if escapes
            || value
                .chars()
                .any(|c| c.is_control() || c == '/' || c == '\\')
        {
            return Err(NameError::BadObjectName { what });
        }
        Ok(Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Echo a rejected value back without control characters, and not too long.
fn printable(value: &str) -> String {
    value
        .chars()
        .take(CATALOG_NAME_MAX + 8)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_names_follow_the_documented_rule() {
        for good in ["pg", "a", "Warehouse_2", "my-catalog", &"x".repeat(64)] {
            assert!(
                CatalogName::parse(good).is_ok(),
                "{good} should be accepted"
            );
        }
        for bad in [
            "",
            "1pg",
            "_pg",
            "pg.db",
            "pg db",
            "pg;drop",
            "../etc",
            "pg\0",
            "pаg",
            &"x".repeat(65),
        ] {
            assert!(
                CatalogName::parse(bad).is_err(),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn object_names_cannot_escape_a_directory() {
        for bad in ["", ".", "..", "a/b", "..\\x", "a\0b", "tab\tle"] {
            assert!(
                ObjectName::parse("table name", bad).is_err(),
                "{bad:?} should be refused"
            );
        }
        for good in ["orders", "Mixed Case", "with.dot", "ünïcode", "a'quote"] {
            assert!(
                ObjectName::parse("table name", good).is_ok(),
                "{good:?} should be accepted"
            );
        }
    }

    #[test]
    fn a_refused_name_is_echoed_without_control_characters() {
        let message = CatalogName::parse("bad\nname").unwrap_err().to_string();
        assert!(message.contains("bad?name"), "{message}");
    }
}
