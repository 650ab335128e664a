//! `filesystem`: a warehouse directory, `<path>/<database>/<table>/`.
//!
//! A table is a directory holding data files written by the engine and a
//! schema file whose name starts with `_`, which engines skip when reading.
//! Opening checks that the warehouse exists and is writable, by writing and
//! removing a probe file, so that a typo'd path is refused at registration
//! rather than at the first commit. The warehouse must be a canonical path
//! outside the operating system's trees and ctasd's own data directory (see
//! [`super::protected`]).
//!
//! ctasd removes only directories it can prove it made: a staging or a
//! published table holds ctasd's marker and schema files. A replace whose
//! target is a directory someone else wrote is refused (at submission, and
//! as a conflict at commit); nothing of it is deleted. Removal deletes the
//! data first and ctasd's own files last, so a removal cut short by a crash
//! leaves a directory that still proves whose it is, and the retry finishes.
//!
//! A batch table is staged in a hidden directory `<db>/_ctasd_stg_<key>/` and
//! published with `renameat2`: `RENAME_NOREPLACE` for a new table (plain
//! `rename(2)` would silently replace an empty directory), `RENAME_EXCHANGE`
//! to swap a replacement in. Each published table keeps a marker file naming
//! the staging that produced it, so a commit retried after a crash knows
//! whether (and on which side of a swap) it already happened. The parent
//! directory is fsynced after every rename.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

mod audit;
mod beneath;
mod factory;
mod ownership;
mod table;

use self::beneath::{Dir, Kind};
use super::installation::Installation;
use super::sink::file_uri;
use super::{
    BeginOutcome, Catalog, CatalogError, ColumnInfo, CommitOutcome, CreateOutcome, Publish,
    Staging, TableInfo,
};
use crate::domain::ObjectName;
use crate::domain::audit::{Audit, Observed};
use crate::domain::flink::table::TableDefinition;
pub use factory::FilesystemCatalogFactory;
use ownership::*;
use table::Table;

const DEFAULT_DATABASE: &str = "default";
/// The schema of a table, as written by ctasd when it creates one.
pub const SCHEMA_FILE: &str = "_ctasd_schema.json";
/// In a staging or published table: the staging key that made it.
pub const COMMIT_MARKER: &str = "_ctasd_commit";
/// In a staging: the begin (attempt) that made it, so a begin for a new
/// attempt after a restart empties it and a repeated begin keeps its files.
const ATTEMPT_MARKER: &str = "_ctasd_attempt";
const STAGING_PREFIX: &str = "_ctasd_stg_";
/// Where a replacement is built before it is swapped in.
const FRESH_PREFIX: &str = "_ctasd_new_";
/// Every file ctasd writes into a table directory starts with this.
const OWN_FILE_PREFIX: &str = "_ctasd_";
/// Longest file name on the file systems ctasd runs on (`NAME_MAX`), in bytes.
const MAX_NAME_BYTES: usize = 255;

/// The data files' format of a table whose options name none: Flink's
/// filesystem connector needs one, so its sink gets this, and audits
/// read its files so.
pub const DEFAULT_FORMAT: &str = "csv";

/// The format a table's data files are written in.
pub fn table_format(definition: &TableDefinition) -> &str {
    definition
        .options
        .get("format")
        .map_or(DEFAULT_FORMAT, String::as_str)
}

pub struct FilesystemCatalog {
    /// The warehouse's path, for messages and write locations.
    root: PathBuf,
    /// The warehouse, opened: every file operation is made beneath it.
    warehouse: Arc<Dir>,
    /// Named in every marker this catalog writes.
    installation: Installation,
    default_database: String,
}

/// Sub-directories that are databases or tables: hidden (`.`) and staging
/// or metadata (`_`) entries are not, and neither is a link to a directory.
fn visible_subdirectories(dir: &Dir) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = dir
        .entries()?
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::Directory)
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.') && !name.starts_with('_'))
        .collect();
    names.sort();
    Ok(names)
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

/// Why a database or table name cannot be a directory of the warehouse.
fn check_name(what: &'static str, name: &str) -> Result<(), String> {
    ObjectName::parse(what, name).map_err(|e| e.to_string())?;
    if name.starts_with('_') || name.starts_with('.') {
        return Err(format!(
            "{what} '{name}' starts with '_' or '.', which engines and browsing skip as hidden"
        ));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{what} '{name}' is {} bytes long; a directory name holds at most {MAX_NAME_BYTES}",
            name.len()
        ));
    }
    Ok(())
}

#[async_trait]
impl Catalog for FilesystemCatalog {
    fn default_database(&self) -> &str {
        &self.default_database
    }

    async fn list_databases(&self) -> Result<Vec<String>, CatalogError> {
        let warehouse = self.warehouse.clone();
        self.blocking(move || Ok(visible_subdirectories(&warehouse)?))
            .await
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError> {
        let warehouse = self.warehouse.clone();
        let database = database.to_owned();
        self.blocking(move || {
            let db = open_database(&warehouse, &database)?;
            Ok(visible_subdirectories(&db)?)
        })
        .await
    }

    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError> {
        let tables = self.list_tables(database).await?;
        if !tables.iter().any(|t| t == table) {
            return Err(CatalogError::TableNotFound {
                database: database.into(),
                table: table.into(),
            });
        }
        let path = self.root.join(database).join(table);
        let warehouse = self.warehouse.clone();
        let (database_name, table_name) = (database.to_owned(), table.to_owned());
        let schema_path = path.join(SCHEMA_FILE);
        let schema = self
            .blocking(move || {
                let db = open_database(&warehouse, &database_name)?;
                let bytes = match db.open_dir(&table_name)?.read(SCHEMA_FILE) {
                    Ok(bytes) => bytes,
                    // A directory without a schema file is a table whose
                    // schema the engine owns (files written by hand): list
                    // it with no columns.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                Ok(Some(bytes))
            })
            .await?
            .map(|bytes| serde_json::from_slice::<SchemaFile>(&bytes))
            .transpose()
            .map_err(|e| {
                CatalogError::Unavailable(format!("schema file '{}': {e}", schema_path.display()))
            })?
            .unwrap_or(SchemaFile {
                columns: Vec::new(),
                properties: Default::default(),
            });
        let mut options: std::collections::BTreeMap<String, String> =
            TableDefinition::from_properties(&schema.properties)
                .map(|definition| definition.options)
                .unwrap_or_default()
                .into_iter()
                .filter(|(key, _)| !crate::domain::options::is_sensitive(key))
                .collect();
        options.insert("connector".into(), "filesystem".into());
        options.insert("path".into(), file_uri(&path));
        Ok(TableInfo {
            database: database.into(),
            name: table.into(),
            columns: schema
                .columns
                .into_iter()
                .map(|c| ColumnInfo {
                    name: c.name,
                    data_type: c.data_type,
                    nullable: c.nullable,
                })
                .collect(),
            options,
        })
    }

    async fn table_exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        Ok(self.list_tables(database).await?.iter().any(|t| t == table))
    }

    async fn create_table(
        &self,
        staging: &Staging,
        replace: bool,
    ) -> Result<CreateOutcome, CatalogError> {
        self.on_table(staging, move |table, staging| {
            table.create(staging, replace)
        })
        .await
    }

    async fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, CatalogError> {
        self.on_table(staging, move |table, staging| table.begin(staging, attempt))
            .await
    }

    /// One directory after another: a directory rename cannot publish
    /// several at once, so a batch may end partly published.
    async fn commit(
        &self,
        batch: &[(Staging, Publish)],
    ) -> Vec<Result<CommitOutcome, CatalogError>> {
        let mut outcomes = Vec::with_capacity(batch.len());
        for (staging, publish) in batch {
            let publish = *publish;
            let outcome = self
                .on_table(staging, move |table, staging| {
                    table.commit(staging, publish)
                })
                .await;
            outcomes.push(outcome);
        }
        outcomes
    }

    fn check_audits(&self, audits: &[Audit]) -> Result<(), String> {
        match audits.iter().find(|a| matches!(a, Audit::Sql { .. })) {
            Some(sql) => Err(format!(
                "audit {} needs SQL, which a filesystem catalog cannot run; row_count, \
                 not_null, unique, accepted_values and row_count_change read its data files",
                sql.name()
            )),
            None => Ok(()),
        }
    }

    async fn audit(
        &self,
        staging: &Staging,
        audits: &[Audit],
    ) -> Result<Vec<Observed>, CatalogError> {
        let audits = audits.to_vec();
        self.on_table(staging, move |table, staging| table.audit(staging, &audits))
            .await
    }

    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError> {
        self.on_table(staging, |table, staging| table.abort(staging))
            .await
    }

    async fn check_target(
        &self,
        database: &str,
        table: &str,
        _definition: &TableDefinition,
        _existing: bool,
    ) -> Result<(), CatalogError> {
        check_name("database name", database).map_err(CatalogError::Unsupported)?;
        check_name("table name", table).map_err(CatalogError::Unsupported)
    }

    async fn check_replaceable(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        let warehouse = self.warehouse.clone();
        let installation = self.installation.clone();
        let (database, table) = (database.to_owned(), table.to_owned());
        self.blocking(move || {
            let db = open_database(&warehouse, &database)?;
            match inspect(&db, &table, &installation)?.ownership {
                Ownership::Foreign(reason) | Ownership::Theirs(reason) => {
                    Err(CatalogError::NotOwned {
                        database,
                        table,
                        reason,
                    }
                    .into())
                }
                _ => Ok(()),
            }
        })
        .await
    }

    async fn drop_table(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        let warehouse = self.warehouse.clone();
        let installation = self.installation.clone();
        let (database, table) = (database.to_owned(), table.to_owned());
        self.blocking(move || {
            let db = open_database(&warehouse, &database)?;
            let found = inspect(&db, &table, &installation)?;
            let not_owned = |reason: String| CatalogError::NotOwned {
                database: database.clone(),
                table: table.clone(),
                reason,
            };
            match (found.ownership, found.dir) {
                (Ownership::Missing, _) => Err(CatalogError::TableNotFound {
                    database: database.clone(),
                    table: table.clone(),
                }
                .into()),
                (Ownership::Made(_), Some(dir)) => {
                    remove_owned(&db, &table, &dir)?;
                    db.sync()?;
                    Ok(())
                }
                (Ownership::Foreign(reason) | Ownership::Theirs(reason), _) => {
                    Err(not_owned(reason).into())
                }
                _ => Err(not_owned("it holds no table ctasd published".into()).into()),
            }
        })
        .await
    }

    async fn close(&self) {}
}

impl FilesystemCatalog {
    /// Runs `work` on the staging's table names in its database directory,
    /// opened beneath the warehouse, on a blocking thread.
    async fn on_table<T: Send + 'static>(
        &self,
        staging: &Staging,
        work: impl FnOnce(&Table, &Staging) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, CatalogError> {
        for (what, name) in [
            ("database name", &staging.database),
            ("table name", &staging.table),
        ] {
            ObjectName::parse(what, name).map_err(|e| CatalogError::Unsupported(e.to_string()))?;
        }
        let warehouse = self.warehouse.clone();
        let installation = self.installation.clone();
        let staging = staging.clone();
        self.blocking(move || {
            let table = Table::open(&warehouse, installation, &staging)?;
            work(&table, &staging)
        })
        .await
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
                Failure::Io(e) if beneath::is_link_refusal(&e) => CatalogError::Refused(format!(
                    "warehouse '{}': a symbolic link stands where ctasd works, and ctasd never \
                     follows one under a warehouse ({e})",
                    root.display()
                )),
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

/// The database directory `database`, a real directory of the warehouse
/// (a symbolic link could lead anywhere).
fn open_database(warehouse: &Dir, database: &str) -> Result<Dir, Failure> {
    match warehouse.open_dir(database) {
        Ok(dir) => Ok(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(CatalogError::DatabaseNotFound(database.to_owned()).into())
        }
        Err(e) if beneath::is_link_refusal(&e) || e.kind() == std::io::ErrorKind::NotADirectory => {
            Err(CatalogError::Unsupported(format!(
                "database directory '{database}' is a symbolic link or a file; ctasd works only \
                 in real directories of the warehouse"
            ))
            .into())
        }
        Err(e) => Err(e.into()),
    }
}

fn is_already_there(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code) if code == rustix::io::Errno::EXIST.raw_os_error()
        || code == rustix::io::Errno::NOTEMPTY.raw_os_error())
}
