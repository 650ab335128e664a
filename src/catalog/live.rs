//! Opened catalogs, kept between requests with their connection pools.
//!
//! Entries are keyed by catalog name and tagged with the stored record's
//! incarnation (`created_at`) and version, so a catalog altered, or dropped
//! and registered again, by another request or replica is reopened on its
//! next use instead of serving stale options. Opening happens outside the
//! lock: a slow database never blocks requests for other catalogs.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::RwLock;

use super::Catalog;
use super::factory::{FactoryRegistry, OpenOrInvalid};
use crate::domain::CatalogRecord;

struct Entry {
    created_at: DateTime<Utc>,
    version: i64,
    catalog: Arc<dyn Catalog>,
}

impl Entry {
    /// Whether this entry is at least as new as `record`, for the same incarnation.
    fn covers(&self, record: &CatalogRecord) -> bool {
        self.created_at == record.created_at && self.version >= record.version
    }
}

pub struct LiveCatalogs {
    registry: FactoryRegistry,
    open: RwLock<HashMap<String, Entry>>,
}

impl LiveCatalogs {
    pub fn new(registry: FactoryRegistry) -> Self {
        Self {
            registry,
            open: RwLock::new(HashMap::new()),
        }
    }

    pub fn registry(&self) -> &FactoryRegistry {
        &self.registry
    }

    /// The live catalog for this stored record, opened now if needed.
    pub async fn get(&self, record: &CatalogRecord) -> Result<Arc<dyn Catalog>, OpenOrInvalid> {
        let name = record.descriptor.name.as_str();
        if let Some(entry) = self.open.read().await.get(name)
            && entry.created_at == record.created_at
            && entry.version == record.version
        {
            return Ok(entry.catalog.clone());
        }
        let catalog = self
            .registry
            .open(&record.descriptor.name, &record.descriptor.options)
            .await?;
        Ok(self.install(record, catalog).await)
    }

    /// Keep a catalog just opened for `record`, closing whatever older one it
    /// replaces, and return the one now kept. When another request already
    /// installed this version or a newer one, that one wins and the newcomer
    /// is closed, so a catalog in use is never closed by a race.
    pub async fn install(
        &self,
        record: &CatalogRecord,
        catalog: Arc<dyn Catalog>,
    ) -> Arc<dyn Catalog> {
        let name = record.descriptor.name.as_str();
        let (kept, to_close) = {
            let mut open = self.open.write().await;
            match open.get(name) {
                Some(existing) if existing.covers(record) => {
                    (existing.catalog.clone(), Some(catalog))
                }
                _ => {
                    let entry = Entry {
                        created_at: record.created_at,
                        version: record.version,
                        catalog: catalog.clone(),
                    };
                    let old = open.insert(name.to_owned(), entry);
                    (catalog, old.map(|e| e.catalog))
                }
            }
        };
        if let Some(catalog) = to_close {
            catalog.close().await;
        }
        kept
    }

    /// Keeps the live catalog of `previous` for `next`, the same catalog
    /// with only its comment changed: reopening would gain nothing, and an
    /// in-memory catalog would lose its tables.
    pub async fn carry_over(&self, previous: &CatalogRecord, next: &CatalogRecord) {
        let mut open = self.open.write().await;
        if let Some(entry) = open.get_mut(next.descriptor.name.as_str())
            && entry.created_at == previous.created_at
            && entry.version == previous.version
        {
            entry.version = next.version;
        }
    }

    /// Forget and close a dropped catalog.
    pub async fn evict(&self, name: &str) {
        let removed = self.open.write().await.remove(name);
        if let Some(entry) = removed {
            entry.catalog.close().await;
        }
    }
}
