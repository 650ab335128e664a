//! The external systems that hold tables.
//!
//! A [`Catalog`] is a live connection to one system (an in-memory map, a
//! database server, a warehouse directory). Factories in [`factory`] validate
//! options the way Flink's `FactoryUtil#createCatalog` does and open catalogs;
//! [`live`] keeps opened catalogs, with their connection pools, between requests.
//! Nothing here knows about HTTP or the store.

pub mod dialect;
pub mod factory;
pub mod filesystem;
pub mod jdbc;
pub mod live;
pub mod memory;

use async_trait::async_trait;

pub use factory::{FactoryRegistry, OpenError, OptionSpec, ValidationError};
pub use live::LiveCatalogs;

/// One column as the external system reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnInfo {
    pub name: String,
    /// The system's own type name, e.g. `character varying(20)`.
    pub data_type: String,
    pub nullable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    pub database: String,
    pub name: String,
    pub columns: Vec<ColumnInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("database '{0}' does not exist in this catalog")]
    DatabaseNotFound(String),
    #[error("table '{database}.{table}' does not exist in this catalog")]
    TableNotFound { database: String, table: String },
    /// The system could not be reached or failed; the text is already redacted.
    #[error("{0}")]
    Unavailable(String),
}

/// A live catalog. Implementations are cheap to share (`Arc`) and hold their
/// own connection pools.
#[async_trait]
pub trait Catalog: Send + Sync {
    fn default_database(&self) -> &str;
    async fn list_databases(&self) -> Result<Vec<String>, CatalogError>;
    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError>;
    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError>;
    /// Release connections; called when the catalog is altered or dropped.
    async fn close(&self);
}
