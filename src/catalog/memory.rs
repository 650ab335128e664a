//! `generic_in_memory`: tables that live in this process, lost on restart, as
//! in Flink's `GenericInMemoryCatalog`.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use super::factory::{CatalogFactory, OptionSpec};
use super::{Catalog, CatalogError, TableInfo};
use crate::domain::CatalogOptions;

const DEFAULT_DATABASE: &str = "default";

static OPTIONS: &[OptionSpec] = &[OptionSpec::optional(
    "default-database",
    Some(DEFAULT_DATABASE),
    "The database created with the catalog and used when a target names none.",
)];

pub struct MemoryCatalogFactory;

#[async_trait]
impl CatalogFactory for MemoryCatalogFactory {
    fn identifier(&self) -> &'static str {
        "generic_in_memory"
    }

    fn description(&self) -> &'static str {
        "Tables kept in this process's memory; they are lost when ctasd restarts."
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, String> {
        let default_database = options
            .get("default-database")
            .unwrap_or(DEFAULT_DATABASE)
            .to_owned();
        let databases = BTreeMap::from([(default_database.clone(), BTreeMap::new())]);
        Ok(Arc::new(MemoryCatalog {
            default_database,
            databases: RwLock::new(databases),
        }))
    }
}

pub struct MemoryCatalog {
    default_database: String,
    databases: RwLock<BTreeMap<String, BTreeMap<String, TableInfo>>>,
}

impl MemoryCatalog {
    fn read(
        &self,
    ) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, BTreeMap<String, TableInfo>>> {
        // A panic while holding the lock cannot leave a half-written map: every
        // write is a single insert, so a poisoned lock is still consistent.
        self.databases
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl Catalog for MemoryCatalog {
    fn default_database(&self) -> &str {
        &self.default_database
    }

    async fn list_databases(&self) -> Result<Vec<String>, CatalogError> {
        Ok(self.read().keys().cloned().collect())
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError> {
        let databases = self.read();
        let tables = databases
            .get(database)
            .ok_or_else(|| CatalogError::DatabaseNotFound(database.to_owned()))?;
        Ok(tables.keys().cloned().collect())
    }

    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError> {
        let databases = self.read();
        let tables = databases
            .get(database)
            .ok_or_else(|| CatalogError::DatabaseNotFound(database.to_owned()))?;
        tables
            .get(table)
            .cloned()
            .ok_or_else(|| CatalogError::TableNotFound {
                database: database.to_owned(),
                table: table.to_owned(),
            })
    }

    async fn close(&self) {}
}
