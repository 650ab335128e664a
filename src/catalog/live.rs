//! Opened catalogs, kept between requests with their connection pools.
//!
//! Entries are keyed by catalog name and tagged with the stored record's
//! incarnation (`created_at`) and version, so a catalog altered, or dropped
//! and registered again, by another request or replica is reopened on its
//! next use instead of serving stale options. Opening happens outside the
//! lock: a slow database never blocks requests for other catalogs.
//!
//! A job's hooks use the catalog as it was at submission (its snapshot).
//! While the registered catalog still has those options, it is the one
//! used (so an in-memory catalog is the one users browse); otherwise the
//! snapshot is opened on its own, kept while it is used, and closed after
//! [`SNAPSHOT_IDLE`] without use.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, RwLock};

use super::Catalog;
use super::registry::{FactoryRegistry, OpenOrInvalid};
use crate::domain::{CatalogDescriptor, CatalogRecord};

/// How long a catalog opened from a job's snapshot stays open unused.
pub const SNAPSHOT_IDLE: Duration = Duration::from_secs(300);

struct Entry {
    created_at: DateTime<Utc>,
    version: i64,
    /// The digest of the name and options it was opened with.
    opened_with: SnapshotKey,
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
    /// Catalogs opened from snapshots, by a digest of name and options
    /// (no secret is kept as a key), with when each was last used.
    snapshots: Mutex<HashMap<SnapshotKey, SnapshotCatalog>>,
}

struct SnapshotCatalog {
    catalog: Arc<dyn Catalog>,
    last_used: Instant,
}

/// A SHA-256 digest of a snapshot's catalog name and options.
type SnapshotKey = [u8; 32];

impl LiveCatalogs {
    pub fn new(registry: FactoryRegistry) -> Self {
        Self {
            registry,
            open: RwLock::new(HashMap::new()),
            snapshots: Mutex::new(HashMap::new()),
        }
    }

    /// The registered catalog open in this process, if it was opened with
    /// exactly the snapshot's options: what a hook uses, found without
    /// reading the store. (A catalog altered or dropped since, here or on
    /// another replica, has another entry or none, and the hook goes
    /// through [`LiveCatalogs::for_snapshot`].)
    pub async fn open_with(&self, snapshot: &CatalogDescriptor) -> Option<Arc<dyn Catalog>> {
        let open = self.open.read().await;
        let entry = open.get(snapshot.name.as_str())?;
        (entry.opened_with == snapshot_key(snapshot)).then(|| entry.catalog.clone())
    }

    /// The catalog a hook with this snapshot uses: the registered one
    /// (`registered`, as stored now) while its options are the snapshot's,
    /// else one opened from the snapshot.
    pub async fn for_snapshot(
        &self,
        registered: Option<&CatalogRecord>,
        snapshot: &CatalogDescriptor,
    ) -> Result<Arc<dyn Catalog>, OpenOrInvalid> {
        if let Some(record) = registered.filter(|r| r.descriptor.options == snapshot.options) {
            return self.get(record).await;
        }
        let key = snapshot_key(snapshot);
        let idle = {
            let mut snapshots = self.snapshots.lock().await;
            let now = Instant::now();
            if let Some(kept) = snapshots.get_mut(&key) {
                kept.last_used = now;
                return Ok(kept.catalog.clone());
            }
            let idle: Vec<SnapshotKey> = snapshots
                .iter()
                .filter(|(_, kept)| now.duration_since(kept.last_used) > SNAPSHOT_IDLE)
                .map(|(key, _)| *key)
                .collect();
            idle.iter()
                .filter_map(|key| snapshots.remove(key))
                .map(|kept| kept.catalog)
                .collect::<Vec<_>>()
        };
        for catalog in idle {
            catalog.close().await;
        }
        let catalog = self
            .registry
            .open(&snapshot.name, &snapshot.options)
            .await?;
        let (kept, extra) = {
            let mut snapshots = self.snapshots.lock().await;
            match snapshots.get(&key) {
                Some(existing) => (existing.catalog.clone(), Some(catalog)),
                None => {
                    let last_used = Instant::now();
                    let kept = catalog.clone();
                    snapshots.insert(key, SnapshotCatalog { catalog, last_used });
                    (kept, None)
                }
            }
        };
        if let Some(extra) = extra {
            extra.close().await;
        }
        Ok(kept)
    }

    /// Opens every catalog of `records` once, so the first requests after a
    /// start find their connections ready. Failures are logged; the next
    /// use tries again.
    pub async fn warm_up(&self, records: &[CatalogRecord]) {
        for record in records {
            match self.get(record).await {
                Ok(_) => tracing::info!(catalog = %record.descriptor.name, "catalog reopened"),
                Err(error) => {
                    tracing::warn!(catalog = %record.descriptor.name, %error, "catalog could not be reopened")
                }
            }
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
                        opened_with: snapshot_key(&record.descriptor),
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

fn snapshot_key(snapshot: &CatalogDescriptor) -> SnapshotKey {
    let mut digest = Sha256::new();
    digest.update(snapshot.name.as_str());
    for (key, value) in snapshot.options.iter_plain() {
        digest.update([0u8]);
        digest.update(key);
        digest.update([0u8]);
        digest.update(value);
    }
    digest.finalize().into()
}
