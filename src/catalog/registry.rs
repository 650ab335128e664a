//! Catalog factories and their registry: the factory of a type validates
//! its options, opens catalogs, and says where an engine writes; the
//! registry finds a type's factory. The built-in types are listed in
//! [`super::builtin`], and nowhere else.
//!
//! Validation reports what Flink's `FactoryUtil#createCatalog` reports, with
//! the same wording, so that people who know Flink recognise every message:
//! no `type`, an unknown type (with the available ones), missing required
//! options, unsupported options (with the supported ones).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;

use super::{Catalog, Staging, WriteLocation};
use crate::domain::WriteLocationKind;
use crate::domain::options::{COMMON_OPTIONS, OptionSpec, ValidationError, is_sensitive};
use crate::domain::{CatalogName, CatalogOptions};

/// A catalog that validated but could not be opened. The message is redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not open catalog '{catalog}': {reason}")]
pub struct OpenError {
    pub catalog: String,
    pub reason: String,
}

#[async_trait]
pub trait CatalogFactory: Send + Sync {
    /// The value of `type` that selects this factory.
    fn identifier(&self) -> &'static str;
    fn description(&self) -> &'static str;
    /// Options besides [`COMMON_OPTIONS`].
    fn options(&self) -> &'static [OptionSpec];

    /// Every option this type accepts: the common ones, then its own.
    fn all_options(&self) -> Vec<OptionSpec> {
        COMMON_OPTIONS
            .iter()
            .chain(self.options())
            .copied()
            .collect()
    }
    /// Options required given the others (the `jdbc` type needs a user and a
    /// password for a server, not for a SQLite directory); reported with
    /// the always-required ones, all in one message, as Flink does.
    fn required_with(&self, _options: &CatalogOptions) -> Vec<&'static str> {
        Vec::new()
    }
    /// Checks beyond presence: formats, combinations. Runs after the generic checks.
    fn validate(&self, _options: &CatalogOptions) -> Result<(), ValidationError> {
        Ok(())
    }
    /// Where an engine writes the rows of `staging` in a catalog with these
    /// options (the staging itself for a batch job, `staged`; the target for
    /// a streaming one). By default, nowhere an engine can reach: the
    /// in-memory catalog holds tables of this process only.
    fn write_location(
        &self,
        _options: &CatalogOptions,
        staging: &Staging,
        staged: bool,
    ) -> WriteLocation {
        let name = if staged {
            format!("staged:{}", staging.key.as_str())
        } else {
            staging.table.clone()
        };
        WriteLocation {
            kind: WriteLocationKind::Memory,
            name,
            url: None,
            path: None,
            sink_options: Default::default(),
            sink_statement: None,
            withheld_options: Vec::new(),
        }
    }

    /// Connects, and proves the connection works. Errors carry plain
    /// reasons; the registry redacts them.
    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, FactoryError>;
}

/// Why a factory could not open a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactoryError {
    /// An option's value is refused once looked at in the world (a path that
    /// is not a directory, a database that is ctasd's own store).
    Invalid(ValidationError),
    /// The system could not be reached or refused the connection.
    Unreachable(String),
}

impl From<String> for FactoryError {
    fn from(reason: String) -> Self {
        Self::Unreachable(reason)
    }
}

/// Every factory this process knows, by identifier.
pub struct FactoryRegistry {
    factories: BTreeMap<&'static str, Box<dyn CatalogFactory>>,
}

impl FactoryRegistry {
    pub fn new(factories: Vec<Box<dyn CatalogFactory>>) -> Self {
        Self {
            factories: factories.into_iter().map(|f| (f.identifier(), f)).collect(),
        }
    }

    pub fn factories(&self) -> impl Iterator<Item = &dyn CatalogFactory> {
        self.factories.values().map(|f| f.as_ref())
    }

    pub fn validate(
        &self,
        options: &CatalogOptions,
    ) -> Result<&dyn CatalogFactory, ValidationError> {
        let identifier = options.catalog_type().ok_or(ValidationError::MissingType)?;
        let factory =
            self.factories
                .get(identifier)
                .ok_or_else(|| ValidationError::UnknownType {
                    identifier: identifier.to_owned(),
                    available: self.factories.keys().map(|k| k.to_string()).collect(),
                })?;
        let specs = factory.all_options();
        let conditional = factory.required_with(options);
        let missing: Vec<String> = specs
            .iter()
            .filter(|s| s.required || conditional.contains(&s.key))
            .filter(|s| options.get(s.key).is_none())
            .map(|s| s.key.to_owned())
            .collect();
        if !missing.is_empty() {
            return Err(ValidationError::MissingOptions { missing });
        }
        let supported: BTreeSet<&str> = specs.iter().map(|s| s.key).collect();
        let unsupported: Vec<String> = options
            .keys()
            .filter(|k| !supported.contains(k))
            .map(str::to_owned)
            .collect();
        if !unsupported.is_empty() {
            return Err(ValidationError::UnsupportedOptions {
                identifier: identifier.to_owned(),
                unsupported,
                supported: supported.into_iter().map(str::to_owned).collect(),
            });
        }
        factory.validate(options)?;
        Ok(factory.as_ref())
    }

    /// An alteration from `current` to `next`, with `given` the options the
    /// request set: one that changes where the catalog connects must give
    /// every secret again, or an operator could send the stored password to
    /// a server they control.
    pub fn check_relocation(
        &self,
        current: &CatalogOptions,
        next: &CatalogOptions,
        given: &BTreeMap<String, String>,
    ) -> Result<(), ValidationError> {
        let factory = self.validate(next)?;
        let moved: Vec<String> = factory
            .all_options()
            .iter()
            .filter(|spec| spec.locates && current.get(spec.key) != next.get(spec.key))
            .map(|spec| spec.key.to_owned())
            .collect();
        let missing: Vec<String> = next
            .keys()
            .filter(|key| is_sensitive(key) && !given.contains_key(*key))
            .map(str::to_owned)
            .collect();
        if moved.is_empty() || missing.is_empty() {
            return Ok(());
        }
        Err(ValidationError::SecretsRequired { moved, missing })
    }

    /// Where an engine writes a hook's rows, by the catalog type's factory;
    /// `None` for a type this process does not know.
    pub fn write_location(
        &self,
        options: &CatalogOptions,
        staging: &Staging,
        staged: bool,
    ) -> Option<WriteLocation> {
        let factory = self.factories.get(options.catalog_type()?)?;
        Some(factory.write_location(options, staging, staged))
    }

    /// Validate, then open. The catalog is usable when this returns.
    pub async fn open(
        &self,
        name: &CatalogName,
        options: &CatalogOptions,
    ) -> Result<Arc<dyn Catalog>, OpenOrInvalid> {
        let factory = self.validate(options)?;
        factory.open(options).await.map_err(|error| match error {
            FactoryError::Invalid(invalid) => OpenOrInvalid::Invalid(invalid),
            FactoryError::Unreachable(reason) => OpenOrInvalid::Open(OpenError {
                catalog: name.to_string(),
                reason: options.redact(&reason),
            }),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenOrInvalid {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Open(#[from] OpenError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> CatalogOptions {
        CatalogOptions::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap()
    }

    fn message(pairs: &[(&str, &str)]) -> String {
        super::super::builtin::registry(Default::default(), Default::default())
            .validate(&options(pairs))
            .err()
            .expect("should be refused")
            .to_string()
    }

    #[test]
    fn a_missing_type_is_reported_as_flink_does() {
        assert_eq!(
            message(&[("path", "/tmp")]),
            "Catalog options do not contain an option key 'type' for discovering a catalog."
        );
    }

    #[test]
    fn an_unknown_type_lists_the_available_factories() {
        assert_eq!(
            message(&[("type", "hive")]),
            "Could not find any factory for identifier 'hive' that implements 'CatalogFactory'.\n\n\
             Available factory identifiers are:\n\nfilesystem\ngeneric_in_memory\njdbc"
        );
    }

    #[test]
    fn missing_required_options_are_named() {
        assert_eq!(
            message(&[("type", "jdbc"), ("username", "u"), ("password", "p")]),
            "One or more required options are missing.\n\nMissing required options are:\n\nbase-url\ndefault-database"
        );
    }

    #[test]
    fn every_missing_option_is_named_at_once_even_those_required_by_others() {
        assert_eq!(
            message(&[("type", "jdbc"), ("base-url", "jdbc:postgresql://h")]),
            "One or more required options are missing.\n\nMissing required options are:\n\ndefault-database\nusername\npassword"
        );
        assert_eq!(
            message(&[("type", "jdbc"), ("base-url", "jdbc:sqlite:/d")]),
            "One or more required options are missing.\n\nMissing required options are:\n\ndefault-database"
        );
    }

    #[test]
    fn unsupported_options_are_named_with_the_supported_ones() {
        assert_eq!(
            message(&[
                ("type", "filesystem"),
                ("path", "/tmp"),
                ("zeta", "1"),
                ("alpha", "2")
            ]),
            "Unsupported options found for 'filesystem'.\n\nUnsupported options:\n\nalpha\nzeta\n\n\
             Supported options:\n\ndefault-database\npath\nproperty-version\ntype"
        );
    }

    #[test]
    fn property_version_is_accepted_by_every_type() {
        let registry = super::super::builtin::registry(Default::default(), Default::default());
        assert!(
            registry
                .validate(&options(&[
                    ("type", "generic_in_memory"),
                    ("property-version", "1")
                ]))
                .is_ok()
        );
    }
}
