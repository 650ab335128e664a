//! `filesystem`: a warehouse directory, `<path>/<database>/<table>/`.
//!
//! A table is a directory holding data files written by the engine and a
//! schema file whose name starts with `_`, which engines skip when reading.
//! Opening checks that the warehouse exists and is writable, by writing and
//! removing a probe file, so that a typo'd path is refused at registration
//! rather than at the first commit.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;

use super::factory::{CatalogFactory, OptionSpec, ValidationError};
use super::{Catalog, CatalogError, ColumnInfo, TableInfo};
use crate::domain::CatalogOptions;

const DEFAULT_DATABASE: &str = "default";
/// The schema of a table, as written by ctasd when it creates one.
pub const SCHEMA_FILE: &str = "_ctasd_schema.json";

static OPTIONS: &[OptionSpec] = &[
    OptionSpec::required(
        "path",
        "Absolute path of the warehouse directory; it must exist and be writable.",
    ),
    OptionSpec::optional(
        "default-database",
        Some(DEFAULT_DATABASE),
        "The database (a sub-directory of the warehouse) used when a target names none; created if missing.",
    ),
];

pub struct FilesystemCatalogFactory;

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
            crate::domain::ObjectName::parse("default-database", db).map_err(|e| {
                ValidationError::InvalidValue {
                    key: "default-database".into(),
                    reason: e.to_string(),
                }
            })?;
        }
        Ok(())
    }

    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, String> {
        let root = PathBuf::from(options.get("path").unwrap_or_default());
        let default_database = options
            .get("default-database")
            .unwrap_or(DEFAULT_DATABASE)
            .to_owned();
        let probe_root = root.clone();
        let database_dir = root.join(&default_database);
        tokio::task::spawn_blocking(move || -> Result<(), String> {
            let meta = std::fs::metadata(&probe_root)
                .map_err(|e| format!("warehouse directory '{}': {e}", probe_root.display()))?;
            if !meta.is_dir() {
                return Err(format!(
                    "warehouse path '{}' is not a directory",
                    probe_root.display()
                ));
            }
            let probe = probe_root.join(format!("_ctasd_probe_{}", uuid::Uuid::new_v4().simple()));
            std::fs::write(&probe, b"").map_err(|e| {
                format!(
                    "warehouse directory '{}' is not writable: {e}",
                    probe_root.display()
                )
            })?;
            let _ = std::fs::remove_file(&probe);
            std::fs::create_dir_all(&database_dir).map_err(|e| {
                format!(
                    "cannot create database directory '{}': {e}",
                    database_dir.display()
                )
            })
        })
        .await
        .map_err(|e| format!("warehouse check did not complete: {e}"))??;
        Ok(Arc::new(FilesystemCatalog {
            root,
            default_database,
        }))
    }
}

pub struct FilesystemCatalog {
    root: PathBuf,
    default_database: String,
}

/// Sub-directories that are databases or tables: hidden (`.`) and staging
/// or metadata (`_`) entries are not.
async fn visible_subdirectories(dir: PathBuf) -> Result<Vec<String>, std::io::Error> {
    tokio::task::spawn_blocking(move || {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_dir() && !name.starts_with('.') && !name.starts_with('_') {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

#[derive(Deserialize)]
struct SchemaFile {
    #[serde(default)]
    columns: Vec<SchemaColumn>,
}

#[derive(Deserialize)]
struct SchemaColumn {
    name: String,
    data_type: String,
    #[serde(default = "yes")]
    nullable: bool,
}

fn yes() -> bool {
    true
}

impl FilesystemCatalog {
    fn unavailable(&self, e: std::io::Error) -> CatalogError {
        CatalogError::Unavailable(format!("warehouse '{}': {e}", self.root.display()))
    }
}

#[async_trait]
impl Catalog for FilesystemCatalog {
    fn default_database(&self) -> &str {
        &self.default_database
    }

    async fn list_databases(&self) -> Result<Vec<String>, CatalogError> {
        visible_subdirectories(self.root.clone())
            .await
            .map_err(|e| self.unavailable(e))
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError> {
        match visible_subdirectories(self.root.join(database)).await {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(CatalogError::DatabaseNotFound(database.into()))
            }
            other => other.map_err(|e| self.unavailable(e)),
        }
    }

    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError> {
        let tables = self.list_tables(database).await?;
        if !tables.iter().any(|t| t == table) {
            return Err(CatalogError::TableNotFound {
                database: database.into(),
                table: table.into(),
            });
        }
        let schema_path = self.root.join(database).join(table).join(SCHEMA_FILE);
        let columns = match tokio::fs::read(&schema_path).await {
            Ok(bytes) => serde_json::from_slice::<SchemaFile>(&bytes)
                .map_err(|e| {
                    CatalogError::Unavailable(format!(
                        "schema file '{}': {e}",
                        schema_path.display()
                    ))
                })?
                .columns
                .into_iter()
                .map(|c| ColumnInfo {
                    name: c.name,
                    data_type: c.data_type,
                    nullable: c.nullable,
                })
                .collect(),
            // A directory without a schema file is a table whose schema the
            // engine owns (files written by hand): list it with no columns.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(self.unavailable(e)),
        };
        Ok(TableInfo {
            database: database.into(),
            name: table.into(),
            columns,
        })
    }

    async fn close(&self) {}
}
