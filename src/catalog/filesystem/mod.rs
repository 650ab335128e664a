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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

mod beneath;

use rustix::fs::RenameFlags;

use self::beneath::{Dir, Kind};
use super::installation::Installation;
use super::protected::{ProtectedPaths, canonical_directory};
use super::registry::{CatalogFactory, FactoryError};
use super::sink::file_uri;
use super::{
    BeginOutcome, Catalog, CatalogError, ColumnInfo, CommitOutcome, CreateOutcome, Publish,
    Staging, StagingKey, TableInfo, WriteLocation, defined_table, staging_missing,
    table_exists_error, table_not_found,
};
use crate::domain::WriteLocationKind;
use crate::domain::options::{OptionSpec, ValidationError};
use crate::domain::table::TableDefinition;
use crate::domain::{CatalogOptions, ObjectName};
use crate::fault::{self, Point};

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

static OPTIONS: &[OptionSpec] = &[
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
    protected: Arc<ProtectedPaths>,
    installation: Installation,
}

impl FilesystemCatalogFactory {
    pub fn new(protected: Arc<ProtectedPaths>, installation: Installation) -> Self {
        Self {
            protected,
            installation,
        }
    }
}

fn invalid_path(reason: String) -> FactoryError {
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
    /// path as a `file://` URI, the table's options (its `format`) kept.
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
        let connector = std::collections::BTreeMap::from([
            ("connector".to_owned(), "filesystem".to_owned()),
            ("path".to_owned(), file_uri(&path)),
        ]);
        WriteLocation {
            path: Some(path.display().to_string()),
            ..super::sink::write_location(WriteLocationKind::Directory, name, staging, connector)
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

/// What a name in a database directory is, as far as ctasd can prove.
#[derive(Debug, PartialEq, Eq)]
enum Ownership {
    Missing,
    /// A directory holding ctasd's schema file and a marker naming the
    /// staging that made it: a table ctasd published, or one of its stagings.
    Made(StagingKey),
    /// A directory holding nothing but ctasd's own files (a staging cut short
    /// before its marker was written): removing it loses nothing.
    OnlyOwnFiles,
    /// Anything else: not ctasd's to remove or replace.
    Foreign(String),
    /// Made by another ctasd installation (its marker names it): not
    /// this one's to adopt, publish, replace or remove.
    Theirs(String),
}

/// A name looked at: what it is, and the directory itself, opened, when it
/// is one, so that what was proven is what is acted on.
struct Found {
    ownership: Ownership,
    dir: Option<Dir>,
}

fn inspect(db: &Dir, name: &str, installation: &Installation) -> std::io::Result<Found> {
    let foreign = |reason: &str| {
        Ok(Found {
            ownership: Ownership::Foreign(reason.to_owned()),
            dir: None,
        })
    };
    match db.kind(name)? {
        Kind::Missing => {
            return Ok(Found {
                ownership: Ownership::Missing,
                dir: None,
            });
        }
        Kind::Link => return foreign("it is a symbolic link, which ctasd never creates"),
        Kind::File | Kind::Other => return foreign("it is a file, not a table directory"),
        Kind::Directory => {}
    }
    let dir = match db.open_dir(name) {
        Ok(dir) => dir,
        Err(e) if beneath::is_link_refusal(&e) => {
            return foreign("it is a symbolic link, which ctasd never creates");
        }
        Err(e) => return Err(e),
    };
    let ownership = ownership_of(&dir, installation)?;
    Ok(Found {
        ownership,
        dir: Some(dir),
    })
}

fn ownership_of(dir: &Dir, installation: &Installation) -> std::io::Result<Ownership> {
    let is_file = |name: &str| dir.kind(name).is_ok_and(|kind| kind == Kind::File);
    if is_file(SCHEMA_FILE)
        && is_file(COMMIT_MARKER)
        && let Ok(marker) = dir.read(COMMIT_MARKER)
    {
        let marker = String::from_utf8_lossy(&marker);
        let key = marker.split(',').next().and_then(StagingKey::parse);
        match (key, installation.check(&marker)) {
            (Some(key), Ok(())) => return Ok(Ownership::Made(key)),
            (Some(_), Err(other)) => {
                return Ok(Ownership::Theirs(format!(
                    "its {COMMIT_MARKER} names another ctasd installation ({other}): two stores \
                     share this warehouse, or a job id was used again"
                )));
            }
            (None, _) => {}
        }
    }
    for (name, kind) in dir.entries()? {
        let name = name.to_string_lossy();
        if !(name.starts_with(OWN_FILE_PREFIX) && kind == Kind::File) {
            return Ok(Ownership::Foreign(format!(
                "it holds '{name}' but no ctasd marker ({COMMIT_MARKER} and {SCHEMA_FILE}): \
                 ctasd did not make it"
            )));
        }
    }
    Ok(Ownership::OnlyOwnFiles)
}

/// Removes the directory `name` of `db`, opened as `dir` when [`inspect`]
/// proved it ctasd's: the data first, ctasd's own files last, then the
/// directory. Cut short, it leaves a directory that still proves whose it is.
fn remove_owned(db: &Dir, name: &str, dir: &Dir) -> std::io::Result<()> {
    remove_data(dir)?;
    remove_own_files(db, name, dir)
}

/// Everything in `dir` but ctasd's own files; links are removed, not
/// followed.
fn remove_data(dir: &Dir) -> std::io::Result<()> {
    for (name, kind) in dir.entries()? {
        let name = name.to_string_lossy();
        if name.starts_with(OWN_FILE_PREFIX) {
            continue;
        }
        match kind {
            Kind::Directory => dir.remove_tree(&name)?,
            _ => dir.remove_file(&name)?,
        }
    }
    Ok(())
}

/// ctasd's own files in `dir`, then `dir` itself (`name` in `db`), once
/// the data is gone.
fn remove_own_files(db: &Dir, name: &str, dir: &Dir) -> std::io::Result<()> {
    for (entry, _) in dir.entries()? {
        dir.remove_file(&entry.to_string_lossy())?;
    }
    db.remove_dir(name)?;
    db.sync()
}

/// One hook's names in its database directory.
struct Table {
    db: Dir,
    installation: Installation,
    database: String,
    staging: String,
    /// Where a replacement (a new attempt's staging, a streaming replace) is
    /// built before `RENAME_EXCHANGE` swaps it in. Only ctasd writes there.
    fresh: String,
    target: String,
}

impl Table {
    fn open(
        warehouse: &Dir,
        installation: Installation,
        staging: &Staging,
    ) -> Result<Table, Failure> {
        Ok(Table {
            db: open_database(warehouse, &staging.database)?,
            installation,
            database: staging.database.clone(),
            staging: format!("{STAGING_PREFIX}{}", staging.key.as_str()),
            fresh: format!("{FRESH_PREFIX}{}", staging.key.as_str()),
            target: staging.table.clone(),
        })
    }

    /// Writes the schema and the marker into the directory `name`, and the
    /// attempt marker when it is a staging. `new`: the directory must be
    /// made now (ctasd's scratch path); else an existing real directory
    /// (one the engine wrote first) is filled as it is.
    fn fill(
        &self,
        name: &str,
        staging: &Staging,
        attempt: Option<i64>,
        new: bool,
    ) -> Result<(), Failure> {
        match self.db.create_dir(name) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && !new => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(self.not_owned_at(staging, name));
            }
            other => other?,
        }
        let dir = self.db.open_dir(name)?;
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
            // Secrets stay in ctasd's store, sealed, not beside the data.
            properties: staging
                .definition
                .to_properties()
                .into_iter()
                .filter(|(key, _)| !crate::domain::options::is_sensitive(key))
                .collect(),
        };
        let json = serde_json::to_vec_pretty(&schema).map_err(std::io::Error::other)?;
        dir.write_file(SCHEMA_FILE, &json)?;
        let marker = self.installation.mark(staging.key.as_str());
        dir.write_file(COMMIT_MARKER, marker.as_bytes())?;
        match attempt {
            Some(attempt) => dir.write_file(ATTEMPT_MARKER, attempt.to_string().as_bytes())?,
            // A published table is no attempt's staging any more.
            None => remove_if_there(&dir, ATTEMPT_MARKER)?,
        }
        dir.sync()?;
        Ok(())
    }

    /// The attempt a staging directory was begun for, if it says.
    fn attempt_of(dir: &Dir) -> Option<i64> {
        String::from_utf8(dir.read(ATTEMPT_MARKER).ok()?)
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Removes what a swap cut short by a crash left at the fresh path: a
    /// replacement ctasd built, or the table it replaced. Only ctasd writes
    /// there; anything else found there (a link, a foreign directory) is
    /// refused, never written into or removed.
    fn clear_fresh(&self, staging: &Staging) -> Result<(), Failure> {
        let found = inspect(&self.db, &self.fresh, &self.installation)?;
        match (found.ownership, found.dir) {
            (Ownership::Missing, _) => Ok(()),
            (Ownership::Made(_) | Ownership::OnlyOwnFiles, Some(dir)) => {
                Ok(remove_owned(&self.db, &self.fresh, &dir)?)
            }
            _ => Err(self.not_owned_at(staging, &self.fresh)),
        }
    }

    /// Puts a directory built at the fresh path in place of `name` with one
    /// `RENAME_EXCHANGE`, then removes what it replaced.
    fn swap_in(&self, name: &str) -> Result<(), Failure> {
        self.db.rename(&self.fresh, name, RenameFlags::EXCHANGE)?;
        self.db.sync()?;
        // The fresh path now holds what was replaced, proven ctasd's.
        self.remove_replaced(&self.fresh)
    }

    fn made_by(&self, name: &str, staging: &Staging) -> std::io::Result<bool> {
        Ok(inspect(&self.db, name, &self.installation)?.ownership
            == Ownership::Made(staging.key.clone()))
    }

    /// The staging path is this hook's to fill: absent, its own, or only
    /// ctasd's files; anything else someone else put there.
    fn check_staging_free(&self, staging: &Staging) -> Result<(), Failure> {
        match inspect(&self.db, &self.staging, &self.installation)?.ownership {
            Ownership::Missing | Ownership::OnlyOwnFiles => Ok(()),
            Ownership::Made(key) if key == staging.key => Ok(()),
            Ownership::Made(_) | Ownership::Foreign(_) | Ownership::Theirs(_) => {
                Err(self.not_owned_at(staging, &self.staging))
            }
        }
    }

    fn not_owned_at(&self, staging: &Staging, name: &str) -> Failure {
        let reason = match inspect(&self.db, name, &self.installation).map(|found| found.ownership)
        {
            Ok(Ownership::Foreign(reason) | Ownership::Theirs(reason)) => reason,
            Ok(Ownership::Made(key)) if key != staging.key => {
                "it was made by another job's staging".into()
            }
            _ => "it holds what ctasd did not make there".into(),
        };
        CatalogError::NotOwned {
            database: self.database.clone(),
            table: name.to_owned(),
            reason,
        }
        .into()
    }

    fn create(&self, staging: &Staging, replace: bool) -> Result<CreateOutcome, Failure> {
        match inspect(&self.db, &self.target, &self.installation)?.ownership {
            Ownership::Missing => {}
            _ if !replace => return Ok(CreateOutcome::AlreadyExisted),
            Ownership::Foreign(_) | Ownership::Theirs(_) => {
                return Err(self.not_owned_at(staging, &self.target));
            }
            Ownership::Made(_) | Ownership::OnlyOwnFiles => {
                self.clear_fresh(staging)?;
                self.fill(&self.fresh, staging, None, true)?;
                self.swap_in(&self.target)?;
                return Ok(CreateOutcome::Replaced);
            }
        }
        self.check_staging_free(staging)?;
        self.fill(&self.staging, staging, None, false)?;
        match self
            .db
            .rename(&self.staging, &self.target, RenameFlags::NOREPLACE)
        {
            Ok(()) => {
                self.db.sync()?;
                Ok(CreateOutcome::Created)
            }
            Err(e) if is_already_there(&e) => {
                self.remove_replaced(&self.staging)?;
                Ok(CreateOutcome::AlreadyExisted)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The staging for `attempt`. The staging path is ctasd's by its name
    /// (the job id and hook index under ctasd's hidden prefix, which no
    /// table may take), so a real directory there without a marker is one
    /// the engine wrote first, and is adopted with its files; ctasd's own
    /// files are then written beside them without following any link.
    fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, Failure> {
        self.clear_fresh(staging)?;
        let found = inspect(&self.db, &self.staging, &self.installation)?;
        let outcome = match found.ownership {
            Ownership::Missing | Ownership::OnlyOwnFiles => BeginOutcome::Staged,
            Ownership::Made(key) if key != staging.key => {
                return Err(self.not_owned_at(staging, &self.staging));
            }
            Ownership::Made(_) => match found.dir.as_ref().and_then(Self::attempt_of) {
                Some(begun) if begun >= attempt => return Ok(BeginOutcome::AlreadyStaged),
                Some(_) => {
                    self.fill(&self.fresh, staging, Some(attempt), true)?;
                    self.swap_in(&self.staging)?;
                    return Ok(BeginOutcome::Restaged);
                }
                None => BeginOutcome::Adopted,
            },
            Ownership::Foreign(_) if found.dir.is_some() => BeginOutcome::Adopted,
            Ownership::Foreign(_) | Ownership::Theirs(_) => {
                return Err(self.not_owned_at(staging, &self.staging));
            }
        };
        self.fill(&self.staging, staging, Some(attempt), false)?;
        self.db.sync()?;
        Ok(outcome)
    }

    fn commit(&self, staging: &Staging, publish: Publish) -> Result<CommitOutcome, Failure> {
        let found = inspect(&self.db, &self.staging, &self.installation)?;
        let (Ownership::Made(key), Some(dir)) = (&found.ownership, &found.dir) else {
            return self.committed_before(staging);
        };
        if *key != staging.key {
            return self.committed_before(staging);
        }
        // Published, it is no attempt's staging any more.
        remove_if_there(dir, ATTEMPT_MARKER)?;
        match publish {
            Publish::Create => {
                match self
                    .db
                    .rename(&self.staging, &self.target, RenameFlags::NOREPLACE)
                {
                    Err(e) if is_already_there(&e) => {
                        return Err(table_exists_error(staging).into());
                    }
                    other => other?,
                }
            }
            Publish::Replace => {
                match inspect(&self.db, &self.target, &self.installation)?.ownership {
                    Ownership::Missing => return Err(table_not_found(staging).into()),
                    Ownership::Foreign(_) | Ownership::Theirs(_) => {
                        return Err(self.not_owned_at(staging, &self.target));
                    }
                    Ownership::Made(_) | Ownership::OnlyOwnFiles => {}
                }
                self.db
                    .rename(&self.staging, &self.target, RenameFlags::EXCHANGE)?;
                self.db.sync()?;
                fault::reached(Point::CommitMidway);
                // The staging path now holds the replaced table.
                self.remove_replaced(&self.staging)?;
            }
        }
        self.db.sync()?;
        Ok(CommitOutcome::Committed)
    }

    /// No staging of this hook to publish: already published (after a
    /// swap, the staging path may still hold the replaced table, which was
    /// proven ctasd's before the swap and is removed now), or gone.
    fn committed_before(&self, staging: &Staging) -> Result<CommitOutcome, Failure> {
        if self.made_by(&self.target, staging)? {
            self.remove_replaced(&self.staging)?;
            return Ok(CommitOutcome::AlreadyCommitted);
        }
        Err(staging_missing(staging).into())
    }

    /// Removes what a swap left at `name`, if ctasd can prove it made it;
    /// anything else is left where it is, and said so in the log.
    fn remove_replaced(&self, name: &str) -> Result<(), Failure> {
        let found = inspect(&self.db, name, &self.installation)?;
        match (found.ownership, found.dir) {
            (Ownership::Missing, _) => Ok(()),
            (Ownership::Made(_) | Ownership::OnlyOwnFiles, Some(dir)) => {
                Ok(remove_owned(&self.db, name, &dir)?)
            }
            (ownership, _) => {
                tracing::warn!(
                    database = %self.database,
                    directory = %name,
                    ?ownership,
                    "left a directory in place after a replace: ctasd cannot prove it made it"
                );
                Ok(())
            }
        }
    }

    /// Removes the staging directory, data first and ctasd's files last, so
    /// an abort cut short (where the crash suite stops it) leaves a
    /// directory that the retry still finds. The staging path is ctasd's
    /// by its name, marked or not (the engine may have made it); a link
    /// there is refused and left.
    fn abort(&self, staging: &Staging) -> Result<(), Failure> {
        self.clear_fresh(staging)?;
        let found = inspect(&self.db, &self.staging, &self.installation)?;
        let dir = match (found.ownership, found.dir) {
            (Ownership::Missing, _) => return Ok(()),
            (Ownership::Made(key), _) if key != staging.key => {
                return Err(self.not_owned_at(staging, &self.staging));
            }
            (Ownership::Theirs(_), _) => return Err(self.not_owned_at(staging, &self.staging)),
            (_, Some(dir)) => dir,
            (_, None) => return Err(self.not_owned_at(staging, &self.staging)),
        };
        remove_data(&dir)?;
        fault::reached(Point::AbortMidway);
        Ok(remove_own_files(&self.db, &self.staging, &dir)?)
    }
}

/// Removes the file `name` of `dir` if it is there.
fn remove_if_there(dir: &Dir, name: &str) -> std::io::Result<()> {
    match dir.remove_file(name) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn is_already_there(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code) if code == rustix::io::Errno::EXIST.raw_os_error()
        || code == rustix::io::Errno::NOTEMPTY.raw_os_error())
}
