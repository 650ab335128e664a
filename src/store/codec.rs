//! The row form of a catalog, shared by both backends: plain options and
//! sealed secrets as two JSON objects.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

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
