//! Pure types and rules. Nothing here performs I/O, so every rule can be tested
//! without a database, and every layer above can rely on values that already
//! passed validation.

pub mod catalog;
pub mod engine;
pub mod hook;
pub mod job;
pub mod ledger;
pub mod name;
pub mod options;
pub mod staging;
pub mod statement;
pub mod table;
pub mod types;

pub use catalog::{CatalogAlteration, CatalogDescriptor, CatalogRecord};
pub use name::{CatalogName, EngineName, NameError, ObjectName};
pub use options::{CatalogOptions, MASK, OptionsError};
pub use staging::{Staging, StagingKey, WriteLocation, WriteLocationKind};

/// For optional request fields that have no `null`:
/// `#[serde(default, deserialize_with = "non_null")]` reads an absent field
/// as `None` and refuses `null` (422 naming the field), as the document says.
pub fn non_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}
