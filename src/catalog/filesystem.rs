//! `filesystem`: a warehouse directory, `<path>/<database>/<table>/`.
//!
//! A table is a directory holding data files written by the engine and a
//! schema file whose name starts with `_`, which engines skip when reading.
//! Opening checks that the warehouse exists and is writable, by writing and
//! removing a probe file, so that a typo'd path is refused at registration
//! rather than at the first commit.
//!
//! A batch table is staged in a hidden directory `<db>/_ctasd_stg_<key>/` and
//! published with `renameat2`: `RENAME_NOREPLACE` for a new table (plain
//! `rename(2)` would silently replace an empty directory), `RENAME_EXCHANGE`
//! to swap a replacement in. Each published table keeps a marker file naming
//! the staging that produced it, so a commit retried after a crash knows
//! whether (and on which side of a swap) it already happened. The parent
//! directory is fsynced after every rename.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::factory::{CatalogFactory, OptionSpec, ValidationError};
use super::{
    Catalog, CatalogError, ColumnInfo, CommitOutcome, Publish, Staging, TableInfo, defined_table,
    staging_missing, table_exists_error, table_not_found,
};
use crate::domain::table::TableDefinition;
use crate::domain::{CatalogOptions, ObjectName};
use crate::fault::{self, Point};

const DEFAULT_DATABASE: &str = "default";
/// The schema of a table, as written by ctasd when it creates one.
pub const SCHEMA_FILE: &str = "_ctasd_schema.json";
/// In a staging or published table: the staging key that made it.
pub const COMMIT_MARKER: &str = "_ctasd_commit";
const STAGING_PREFIX: &str = "_ctasd_stg_";

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

pub(crate) fn write_location(
    options: &CatalogOptions,
    staging: &Staging,
    staged: bool,
) -> super::WriteLocation {
    let name = if staged {
        format!("{STAGING_PREFIX}{}", staging.key.as_str())
    } else {
        staging.table.clone()
    };
    let path = Path::new(options.get("path").unwrap_or_default())
        .join(&staging.database)
        .join(&name);
    let path = path.display().to_string();
    let sink_options = std::collections::BTreeMap::from([
        ("connector".to_owned(), "filesystem".to_owned()),
        ("path".to_owned(), path.clone()),
    ]);
    super::WriteLocation {
        kind: "directory".into(),
        name,
        url: None,
        path: Some(path),
        sink_options,
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

#[derive(Serialize, Deserialize)]
struct SchemaFile {
    #[serde(default)]
    columns: Vec<SchemaColumn>,
    /// The full definition, as Flink's property map.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    properties: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
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

    async fn table_exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        Ok(self.list_tables(database).await?.iter().any(|t| t == table))
    }

    async fn create_table(&self, staging: &Staging) -> Result<bool, CatalogError> {
        let paths = self.paths(staging)?;
        let staging = staging.clone();
        self.blocking(move || paths.create(&staging)).await
    }

    async fn begin(&self, staging: &Staging) -> Result<(), CatalogError> {
        let paths = self.paths(staging)?;
        let staging = staging.clone();
        self.blocking(move || paths.begin(&staging)).await
    }

    async fn commit(
        &self,
        staging: &Staging,
        publish: Publish,
    ) -> Result<CommitOutcome, CatalogError> {
        let paths = self.paths(staging)?;
        let staging = staging.clone();
        self.blocking(move || paths.commit(&staging, publish)).await
    }

    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError> {
        let paths = self.paths(staging)?;
        let staging = staging.clone();
        self.blocking(move || paths.abort(&staging)).await
    }

    fn check_definition(
        &self,
        table: &str,
        _definition: &TableDefinition,
    ) -> Result<(), CatalogError> {
        if table.starts_with('_') || table.starts_with('.') {
            return Err(CatalogError::Unsupported(format!(
                "table name '{table}' starts with '_' or '.', which engines and browsing skip as hidden"
            )));
        }
        ObjectName::parse("table name", table)
            .map_err(|e| CatalogError::Unsupported(e.to_string()))?;
        Ok(())
    }

    async fn close(&self) {}
}

impl FilesystemCatalog {
    fn paths(&self, staging: &Staging) -> Result<TablePaths, CatalogError> {
        for (what, name) in [
            ("database name", &staging.database),
            ("table name", &staging.table),
        ] {
            ObjectName::parse(what, name).map_err(|e| CatalogError::Unsupported(e.to_string()))?;
        }
        let database = self.root.join(&staging.database);
        Ok(TablePaths {
            staging: database.join(format!("{STAGING_PREFIX}{}", staging.key.as_str())),
            target: database.join(&staging.table),
            database,
        })
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, CatalogError> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(work)
            .await
            .unwrap_or_else(|e| Err(Failure::Io(std::io::Error::other(e))))
            .map_err(|failure| match failure {
                Failure::Catalog(e) => e,
                Failure::Io(e) => {
                    CatalogError::Unavailable(format!("warehouse '{}': {e}", root.display()))
                }
            })
    }
}

/// A blocking step's failure: a catalog outcome, or I/O to report as unavailable.
enum Failure {
    Catalog(CatalogError),
    Io(std::io::Error),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<CatalogError> for Failure {
    fn from(e: CatalogError) -> Self {
        Self::Catalog(e)
    }
}

struct TablePaths {
    database: PathBuf,
    staging: PathBuf,
    target: PathBuf,
}

impl TablePaths {
    fn check_database(&self, staging: &Staging) -> Result<(), Failure> {
        if self.database.is_dir() {
            Ok(())
        } else {
            Err(CatalogError::DatabaseNotFound(staging.database.clone()).into())
        }
    }

    /// Writes the schema and the marker into `dir`, created if needed.
    fn fill(dir: &Path, staging: &Staging) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let table = defined_table(staging);
        let schema = SchemaFile {
            columns: table
                .columns
                .into_iter()
                .map(|c| SchemaColumn {
                    name: c.name,
                    data_type: c.data_type,
                    nullable: c.nullable,
                })
                .collect(),
            properties: staging.definition.to_properties(),
        };
        let json = serde_json::to_vec_pretty(&schema).map_err(std::io::Error::other)?;
        write_durably(&dir.join(SCHEMA_FILE), &json)?;
        write_durably(&dir.join(COMMIT_MARKER), staging.key.as_str().as_bytes())?;
        sync_dir(dir)
    }

    fn marked_by(dir: &Path, staging: &Staging) -> bool {
        std::fs::read(dir.join(COMMIT_MARKER)).is_ok_and(|m| m == staging.key.as_str().as_bytes())
    }

    fn create(&self, staging: &Staging) -> Result<bool, Failure> {
        self.check_database(staging)?;
        if self.target.exists() {
            return Ok(false);
        }
        Self::fill(&self.staging, staging)?;
        match rename(&self.staging, &self.target, RenameFlags::NOREPLACE) {
            Ok(()) => {
                sync_dir(&self.database)?;
                Ok(true)
            }
            Err(e) if is_already_there(&e) => {
                std::fs::remove_dir_all(&self.staging)?;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn begin(&self, staging: &Staging) -> Result<(), Failure> {
        self.check_database(staging)?;
        Self::fill(&self.staging, staging)?;
        sync_dir(&self.database)?;
        Ok(())
    }

    fn commit(&self, staging: &Staging, publish: Publish) -> Result<CommitOutcome, Failure> {
        self.check_database(staging)?;
        if !Self::marked_by(&self.staging, staging) {
            // Already published: after a swap, the staging path may still
            // hold the replaced table; it is ours to remove.
            if Self::marked_by(&self.target, staging) {
                if self.staging.exists() {
                    std::fs::remove_dir_all(&self.staging)?;
                    sync_dir(&self.database)?;
                }
                return Ok(CommitOutcome::AlreadyCommitted);
            }
            return Err(staging_missing(staging).into());
        }
        match publish {
            Publish::Create => match rename(&self.staging, &self.target, RenameFlags::NOREPLACE) {
                Err(e) if is_already_there(&e) => return Err(table_exists_error(staging).into()),
                other => other?,
            },
            Publish::Replace => {
                if !self.target.is_dir() {
                    return Err(table_not_found(staging).into());
                }
                rename(&self.staging, &self.target, RenameFlags::EXCHANGE)?;
                sync_dir(&self.database)?;
                fault::reached(Point::CommitMidway);
                // The staging path now holds the replaced table.
                std::fs::remove_dir_all(&self.staging)?;
            }
        }
        sync_dir(&self.database)?;
        Ok(CommitOutcome::Committed)
    }

    /// Removes the staging directory, whatever is left of it. Its name holds
    /// the hook's key, so it is ours with or without the marker: an abort cut
    /// short after removing the marker (which goes first, and is where the
    /// crash suite stops it) leaves a directory that the retry still removes.
    fn abort(&self, _staging: &Staging) -> Result<(), Failure> {
        if !self.staging.exists() {
            return Ok(());
        }
        match std::fs::remove_file(self.staging.join(COMMIT_MARKER)) {
            Ok(()) => fault::reached(Point::AbortMidway),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        std::fs::remove_dir_all(&self.staging)?;
        sync_dir(&self.database)?;
        Ok(())
    }
}

use rustix::fs::RenameFlags;

fn rename(from: &Path, to: &Path, flags: RenameFlags) -> std::io::Result<()> {
    rustix::fs::renameat_with(rustix::fs::CWD, from, rustix::fs::CWD, to, flags)
        .map_err(std::io::Error::from)
}

fn is_already_there(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code) if code == rustix::io::Errno::EXIST.raw_os_error()
        || code == rustix::io::Errno::NOTEMPTY.raw_os_error())
}

fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a rename or a new entry in `dir` survive a power cut.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}
