//! What both backends share: the row form of a catalog (plain options and
//! sealed secrets as two JSON objects) and the mapping of their outcomes to
//! [`StoreError`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use sqlx::migrate::{MigrateError, Migrator};

use super::{Keyring, StoreError};
use crate::domain::options::is_sensitive;
use crate::domain::{CatalogDescriptor, CatalogName, CatalogOptions, CatalogRecord};

#[derive(sqlx::FromRow)]
pub(crate) struct CatalogRow {
    pub name: String,
    pub options: String,
    pub sealed_options: String,
    pub comment: Option<String>,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `(plain options JSON, sealed options JSON)`.
pub(crate) fn encode_options(options: &CatalogOptions, keyring: &Keyring) -> (String, String) {
    let mut plain = BTreeMap::new();
    let mut sealed = BTreeMap::new();
    for (key, value) in options.iter_plain() {
        if is_sensitive(key) {
            sealed.insert(key, keyring.seal(key, value));
        } else {
            plain.insert(key, value.to_owned());
        }
    }
    let json = |map| serde_json::to_string(&map).expect("a string map serializes");
    (json(plain), json(sealed))
}

impl CatalogRow {
    pub fn decode(self, keyring: &Keyring) -> Result<CatalogRecord, StoreError> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            StoreError::Internal(format!(
                "stored catalog '{}' has unreadable {what}: {e}",
                self.name
            ))
        };
        let mut options: BTreeMap<String, String> =
            serde_json::from_str(&self.options).map_err(|e| corrupt("options", &e))?;
        let sealed: BTreeMap<String, String> = serde_json::from_str(&self.sealed_options)
            .map_err(|e| corrupt("sealed options", &e))?;
        for (key, value) in sealed {
            let plain = keyring
                .open(&key, &value)
                .map_err(|source| StoreError::Secret {
                    catalog: self.name.clone(),
                    source,
                })?;
            options.insert(key, plain);
        }
        let descriptor = CatalogDescriptor {
            name: CatalogName::parse(&self.name).map_err(|e| corrupt("name", &e))?,
            options: CatalogOptions::new(options).map_err(|e| corrupt("options", &e))?,
            comment: self.comment,
        };
        Ok(CatalogRecord {
            descriptor,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// Counts applied migrations; the same SQL on both backends.
pub(crate) const APPLIED_MIGRATIONS: &str = "SELECT count(*) FROM _sqlx_migrations WHERE success";

pub(crate) fn readiness(
    applied: Result<i64, sqlx::Error>,
    migrator: &Migrator,
) -> Result<(), StoreError> {
    let applied = applied.map_err(|e| StoreError::NotReady(e.to_string()))?;
    let expected = migrator.iter().count() as i64;
    if applied < expected {
        return Err(StoreError::NotReady(format!(
            "{applied} of {expected} migrations applied"
        )));
    }
    Ok(())
}

pub(crate) fn migration_failed(error: MigrateError) -> StoreError {
    StoreError::Internal(format!("migration failed: {error}"))
}

pub(crate) fn insert_failed(name: &CatalogName, error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::CatalogExists(name.to_string())
        }
        _ => StoreError::from_sqlx(error),
    }
}

/// Why a versioned update matched no row, given what is stored now.
pub(crate) fn update_missed(name: &CatalogName, current: Option<CatalogRecord>) -> StoreError {
    match current {
        Some(_) => StoreError::ConcurrentModification(name.to_string()),
        None => StoreError::CatalogNotFound(name.to_string()),
    }
}
