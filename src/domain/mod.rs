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
pub mod table;
pub mod types;

pub use catalog::{CatalogAlteration, CatalogDescriptor, CatalogRecord};
pub use name::{CatalogName, EngineName, NameError, ObjectName};
pub use options::{CatalogOptions, MASK, OptionsError};
pub use staging::{Staging, StagingKey, WriteLocation};
