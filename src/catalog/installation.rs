//! Which ctasd wrote a marker. Every marker ctasd leaves in a target (a
//! staging's comment or DDL text, a table directory's marker file) names
//! the installation that wrote it: an id its store made once. Two stores
//! on one database or warehouse, or a client-chosen job id used again by
//! another installation, then cannot take each other's stagings and
//! tables for their own. A marker naming no installation was written
//! before markers named one, and is taken as this installation's.

/// This installation's id (hexadecimal; empty where no store made one, as
/// in tests that open catalogs without a server).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installation(String);

/// What precedes the id in a marker.
const NAMED: &str = "installation ";

impl Installation {
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into())
    }

    /// `text` with this installation named after it, as markers carry it.
    pub fn mark(&self, text: &str) -> String {
        if self.0.is_empty() {
            return text.to_owned();
        }
        format!("{text}, {NAMED}{}", self.0)
    }

    /// Whether a marker's text, as [`Installation::mark`] wrote it, is this
    /// installation's; else the installation it names.
    pub fn check(&self, marker: &str) -> Result<(), String> {
        match written_by(marker) {
            Some(other) if other != self.0 => Err(other.to_owned()),
            _ => Ok(()),
        }
    }
}

/// The installation a marker names, if it names one.
fn written_by(marker: &str) -> Option<&str> {
    let (_, rest) = marker.split_once(NAMED)?;
    let end = rest
        .find(|c: char| !c.is_ascii_hexdigit())
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_is_this_installations_unless_it_names_another() {
        let ours = Installation::new("0a1b");
        let theirs = Installation::new("ffee");
        let marked = ours.mark("ctasd staging, attempt 3");
        assert_eq!(marked, "ctasd staging, attempt 3, installation 0a1b");
        assert_eq!(ours.check(&marked), Ok(()));
        assert_eq!(theirs.check(&marked), Err("0a1b".to_owned()));
        assert_eq!(
            ours.check("CREATE TABLE t (a INT /* ctasd staging, attempt 1, installation ffee */)"),
            Err("ffee".to_owned())
        );
        assert_eq!(
            ours.check("ctasd staging, attempt 3"),
            Ok(()),
            "written before ids"
        );
        assert_eq!(Installation::default().mark("m"), "m");
    }
}
