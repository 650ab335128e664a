//! The `filesystem` catalog type: its options, and opening a warehouse
//! (canonical, outside the system's trees and ctasd's data, writable).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::beneath::{Dir, Kind};
use crate::catalog::installation::Installation;
use crate::catalog::protected::{ProtectedPaths, canonical_directory};
use crate::catalog::registry::{CatalogFactory, FactoryError};
use crate::catalog::sink::file_uri;
use crate::catalog::{Catalog, Staging, WriteLocation};
use crate::domain::CatalogOptions;
use crate::domain::WriteLocationKind;
use crate::domain::options::{OptionSpec, ValidationError};

use super::*;

pub(super) static OPTIONS: &[OptionSpec] = &[
    OptionSpec::location(
        "path",
        "Absolute, canonical path of the warehouse directory; it must exist and be writable, \
         and lie outside system directories and ctasd's data directory.",
    ),
    OptionSpec::optional(
        "default-database",
        Some(DEFAULT_DATABASE),
        "The database (a sub-directory of the warehouse) used when a target names none; created if missing.",
    ),
];

pub struct FilesystemCatalogFactory {
    pub(super) protected: Arc<ProtectedPaths>,
    pub(super) installation: Installation,
}

impl FilesystemCatalogFactory {
    pub fn new(protected: Arc<ProtectedPaths>, installation: Installation) -> Self {
        Self {
            protected,
            installation,
        }
    }
}

pub(super) fn invalid_path(reason: String) -> FactoryError {
    FactoryError::Invalid(ValidationError::InvalidValue {
        key: "path".into(),
        reason,
    })
}

#[async_trait]
impl CatalogFactory for FilesystemCatalogFactory {
    fn identifier(&self) -> &'static str {
        "filesystem"
    }

    fn description(&self) -> &'static str {
        "Tables as directories of data files under a warehouse directory."
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn validate(&self, options: &CatalogOptions) -> Result<(), ValidationError> {
        let path = options.get("path").unwrap_or_default();
        if !Path::new(path).is_absolute() {
            return Err(ValidationError::InvalidValue {
                key: "path".into(),
                reason: format!("'{path}' is not an absolute path"),
            });
        }
        if let Some(db) = options.get("default-database") {
            check_name("database name", db).map_err(|reason| ValidationError::InvalidValue {
                key: "default-database".into(),
                reason,
            })?;
        }
        Ok(())
    }

    /// The directory, and Flink's filesystem connector writing there: the
    /// path as a `file://` URI, the table's options (its `format`) kept, and
    /// [`DEFAULT_FORMAT`] for a table that names none (Flink's connector
    /// refuses a sink without one).
    fn write_location(
        &self,
        options: &CatalogOptions,
        staging: &Staging,
        staged: bool,
    ) -> WriteLocation {
        let name = if staged {
            format!("{STAGING_PREFIX}{}", staging.key.as_str())
        } else {
            staging.table.clone()
        };
        let path = Path::new(options.get("path").unwrap_or_default())
            .join(&staging.database)
            .join(&name);
        let mut connector = std::collections::BTreeMap::from([
            ("connector".to_owned(), "filesystem".to_owned()),
            ("path".to_owned(), file_uri(&path)),
        ]);
        if !staging.definition.options.contains_key("format") {
            connector.insert("format".to_owned(), DEFAULT_FORMAT.to_owned());
        }
        WriteLocation {
            path: Some(path.display().to_string()),
            ..crate::catalog::sink::write_location(
                WriteLocationKind::Directory,
                name,
                staging,
                connector,
            )
        }
    }

    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, FactoryError> {
        let given = options.get("path").unwrap_or_default().to_owned();
        let default_database = options
            .get("default-database")
            .unwrap_or(DEFAULT_DATABASE)
            .to_owned();
        let protected = self.protected.clone();
        let database = default_database.clone();
        let opened = tokio::task::spawn_blocking(move || -> Result<_, FactoryError> {
            let root = canonical_directory(&given).map_err(invalid_path)?;
            if let Some(reason) = protected.refuse_warehouse(&root) {
                return Err(invalid_path(reason));
            }
            let warehouse = Dir::open(&root).map_err(|e| {
                invalid_path(format!(
                    "warehouse directory '{}' cannot be opened: {e}",
                    root.display()
                ))
            })?;
            let probe = format!("_ctasd_probe_{}", uuid::Uuid::new_v4().simple());
            warehouse.write_file(&probe, b"").map_err(|e| {
                format!(
                    "warehouse directory '{}' is not writable: {e}",
                    root.display()
                )
            })?;
            let _ = warehouse.remove_file(&probe);
            let database_dir = root.join(&database);
            let not_a_directory = || {
                FactoryError::Invalid(ValidationError::InvalidValue {
                    key: "default-database".into(),
                    reason: format!(
                        "'{}' is not a directory of the warehouse (a file or a symbolic link)",
                        database_dir.display()
                    ),
                })
            };
            match warehouse.kind(&database) {
                Ok(Kind::Directory) => {}
                Ok(Kind::Missing) => warehouse.create_dir(&database).map_err(|e| {
                    FactoryError::Unreachable(format!(
                        "cannot create database directory '{}': {e}",
                        database_dir.display()
                    ))
                })?,
                _ => return Err(not_a_directory()),
            }
            Ok((root, warehouse))
        })
        .await
        .map_err(|e| format!("warehouse check did not complete: {e}"))??;
        let (root, warehouse) = opened;
        Ok(Arc::new(FilesystemCatalog {
            root,
            warehouse: Arc::new(warehouse),
            installation: self.installation.clone(),
            default_database,
        }))
    }
}
