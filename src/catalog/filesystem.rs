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
}

impl FilesystemCatalogFactory {
    pub fn new(protected: Arc<ProtectedPaths>) -> Self {
        Self { protected }
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
        let root = tokio::task::spawn_blocking(move || -> Result<PathBuf, FactoryError> {
            let root = canonical_directory(&given).map_err(invalid_path)?;
            if let Some(reason) = protected.refuse_warehouse(&root) {
                return Err(invalid_path(reason));
            }
            let probe = root.join(format!("_ctasd_probe_{}", uuid::Uuid::new_v4().simple()));
            std::fs::write(&probe, b"").map_err(|e| {
                format!(
                    "warehouse directory '{}' is not writable: {e}",
                    root.display()
                )
            })?;
            let _ = std::fs::remove_file(&probe);
            let database_dir = root.join(&database);
            match std::fs::symlink_metadata(&database_dir) {
                Ok(meta) if meta.is_dir() => Ok(root),
                Ok(_) => Err(FactoryError::Invalid(ValidationError::InvalidValue {
                    key: "default-database".into(),
                    reason: format!(
                        "'{}' is not a directory of the warehouse (a file or a symbolic link)",
                        database_dir.display()
                    ),
                })),
                Err(_) => std::fs::create_dir(&database_dir)
                    .map(|()| root)
                    .map_err(|e| {
                        FactoryError::Unreachable(format!(
                            "cannot create database directory '{}': {e}",
                            database_dir.display()
                        ))
                    }),
            }
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
        let dir = self.root.join(database).join(table);
        let schema_path = dir.join(SCHEMA_FILE);
        let schema = match tokio::fs::read(&schema_path).await {
            Ok(bytes) => serde_json::from_slice::<SchemaFile>(&bytes).map_err(|e| {
                CatalogError::Unavailable(format!("schema file '{}': {e}", schema_path.display()))
            })?,
            // A directory without a schema file is a table whose schema the
            // engine owns (files written by hand): list it with no columns.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => SchemaFile {
                columns: Vec::new(),
                properties: Default::default(),
            },
            Err(e) => return Err(self.unavailable(e)),
        };
        let mut options: std::collections::BTreeMap<String, String> =
            TableDefinition::from_properties(&schema.properties)
                .map(|definition| definition.options)
                .unwrap_or_default()
                .into_iter()
                .filter(|(key, _)| !crate::domain::options::is_sensitive(key))
                .collect();
        options.insert("connector".into(), "filesystem".into());
        options.insert("path".into(), file_uri(&dir));
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
        let paths = self.paths(staging)?;
        let staging = staging.clone();
        self.blocking(move || paths.create(&staging, replace)).await
    }

    async fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, CatalogError> {
        let paths = self.paths(staging)?;
        let staging = staging.clone();
        self.blocking(move || paths.begin(&staging, attempt)).await
    }

    /// One directory after another: a directory rename cannot publish
    /// several at once, so a batch may end partly published.
    async fn commit(
        &self,
        batch: &[(Staging, Publish)],
    ) -> Vec<Result<CommitOutcome, CatalogError>> {
        let mut outcomes = Vec::with_capacity(batch.len());
        for (staging, publish) in batch {
            let outcome = match self.paths(staging) {
                Ok(paths) => {
                    let (staging, publish) = (staging.clone(), *publish);
                    self.blocking(move || paths.commit(&staging, publish)).await
                }
                Err(e) => Err(e),
            };
            outcomes.push(outcome);
        }
        outcomes
    }

    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError> {
        let paths = self.paths(staging)?;
        let staging = staging.clone();
        self.blocking(move || paths.abort(&staging)).await
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
        let dir = self.root.join(database).join(table);
        let (database, table) = (database.to_owned(), table.to_owned());
        self.blocking(move || match ownership(&dir)? {
            Ownership::Foreign(reason) => Err(CatalogError::NotOwned {
                database,
                table,
                reason,
            }
            .into()),
            _ => Ok(()),
        })
        .await
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
            fresh: database.join(format!("{FRESH_PREFIX}{}", staging.key.as_str())),
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

/// What a path under the warehouse is, as far as ctasd can prove.
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
}

fn ownership(dir: &Path) -> std::io::Result<Ownership> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ownership::Missing),
        Err(e) => return Err(e),
    };
    if meta.is_symlink() {
        return Ok(Ownership::Foreign(
            "it is a symbolic link, which ctasd never creates".into(),
        ));
    }
    if !meta.is_dir() {
        return Ok(Ownership::Foreign(
            "it is a file, not a table directory".into(),
        ));
    }
    let is_file = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_file());
    if is_file(SCHEMA_FILE)
        && is_file(COMMIT_MARKER)
        && let Some(key) = std::fs::read_to_string(dir.join(COMMIT_MARKER))
            .ok()
            .and_then(|marker| StagingKey::parse(&marker))
    {
        return Ok(Ownership::Made(key));
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let own = entry
            .file_name()
            .to_string_lossy()
            .starts_with(OWN_FILE_PREFIX);
        if !(own && entry.file_type()?.is_file()) {
            return Ok(Ownership::Foreign(format!(
                "it holds '{}' but no ctasd marker ({COMMIT_MARKER} and {SCHEMA_FILE}): \
                 ctasd did not make it",
                entry.file_name().to_string_lossy()
            )));
        }
    }
    Ok(Ownership::OnlyOwnFiles)
}

/// Removes a directory that [`ownership`] proved ctasd's: the data first,
/// ctasd's own files last, then the directory. Cut short, it leaves a
/// directory that still proves whose it is.
fn remove_owned(dir: &Path, database: &Path) -> std::io::Result<()> {
    remove_data(dir)?;
    remove_own_files(dir, database)
}

/// Everything in `dir` but ctasd's own files.
fn remove_data(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(OWN_FILE_PREFIX)
        {
            continue;
        }
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// ctasd's own files in `dir`, then `dir` itself, once the data is gone.
fn remove_own_files(dir: &Path, database: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        std::fs::remove_file(entry?.path())?;
    }
    std::fs::remove_dir(dir)?;
    sync_dir(database)
}

struct TablePaths {
    database: PathBuf,
    staging: PathBuf,
    /// Where a replacement (a new attempt's staging, a streaming replace) is
    /// built before `RENAME_EXCHANGE` swaps it in.
    fresh: PathBuf,
    target: PathBuf,
}

impl TablePaths {
    /// The database directory exists and is a real directory of the
    /// warehouse (a symbolic link could lead anywhere).
    fn check_database(&self, staging: &Staging) -> Result<(), Failure> {
        match std::fs::symlink_metadata(&self.database) {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(CatalogError::Unsupported(format!(
                "database directory '{}' is a symbolic link or a file; ctasd works only in \
                 real directories of the warehouse",
                self.database.display()
            ))
            .into()),
            Err(_) => Err(CatalogError::DatabaseNotFound(staging.database.clone()).into()),
        }
    }

    /// Writes the schema and the marker into `dir`, created if needed, and
    /// the attempt marker when it is a staging.
    fn fill(dir: &Path, staging: &Staging, attempt: Option<i64>) -> std::io::Result<()> {
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
        match attempt {
            Some(attempt) => {
                write_durably(&dir.join(ATTEMPT_MARKER), attempt.to_string().as_bytes())?
            }
            // A published table is no attempt's staging any more.
            None => match std::fs::remove_file(dir.join(ATTEMPT_MARKER)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
        sync_dir(dir)
    }

    /// The attempt a staging directory was begun for, if it says.
    fn attempt_of(dir: &Path) -> Option<i64> {
        std::fs::read_to_string(dir.join(ATTEMPT_MARKER))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Removes what a swap cut short by a crash left at the fresh path:
    /// only ctasd builds there, from its own staging key.
    fn clear_fresh(&self) -> std::io::Result<()> {
        match ownership(&self.fresh)? {
            Ownership::Missing | Ownership::Foreign(_) => Ok(()),
            _ => remove_owned(&self.fresh, &self.database),
        }
    }

    /// Puts a directory built at the fresh path in place of `dir` with one
    /// `RENAME_EXCHANGE`, then removes what it replaced.
    fn swap_in(&self, dir: &Path) -> Result<(), Failure> {
        rename(&self.fresh, dir, RenameFlags::EXCHANGE)?;
        sync_dir(&self.database)?;
        // The fresh path now holds what was replaced, proven ctasd's.
        remove_owned(&self.fresh, &self.database)?;
        Ok(())
    }

    fn made_by(dir: &Path, staging: &Staging) -> std::io::Result<bool> {
        Ok(ownership(dir)? == Ownership::Made(staging.key.clone()))
    }

    /// The staging path is this hook's to fill: absent, its own, or only
    /// ctasd's files; anything else someone else put there.
    fn check_staging_free(&self, staging: &Staging) -> Result<(), Failure> {
        match ownership(&self.staging)? {
            Ownership::Missing | Ownership::OnlyOwnFiles => Ok(()),
            Ownership::Made(key) if key == staging.key => Ok(()),
            Ownership::Made(_) | Ownership::Foreign(_) => {
                Err(self.not_owned(staging, &self.staging))
            }
        }
    }

    fn not_owned(&self, staging: &Staging, dir: &Path) -> Failure {
        let reason = match ownership(dir) {
            Ok(Ownership::Foreign(reason)) => reason,
            _ => "it was made by another job's staging".into(),
        };
        CatalogError::NotOwned {
            database: staging.database.clone(),
            table: dir
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            reason,
        }
        .into()
    }

    fn create(&self, staging: &Staging, replace: bool) -> Result<CreateOutcome, Failure> {
        self.check_database(staging)?;
        match ownership(&self.target)? {
            Ownership::Missing => {}
            _ if !replace => return Ok(CreateOutcome::AlreadyExisted),
            Ownership::Foreign(_) => return Err(self.not_owned(staging, &self.target)),
            Ownership::Made(_) | Ownership::OnlyOwnFiles => {
                self.clear_fresh()?;
                Self::fill(&self.fresh, staging, None)?;
                self.swap_in(&self.target)?;
                return Ok(CreateOutcome::Replaced);
            }
        }
        self.check_staging_free(staging)?;
        Self::fill(&self.staging, staging, None)?;
        match rename(&self.staging, &self.target, RenameFlags::NOREPLACE) {
            Ok(()) => {
                sync_dir(&self.database)?;
                Ok(CreateOutcome::Created)
            }
            Err(e) if is_already_there(&e) => {
                remove_owned(&self.staging, &self.database)?;
                Ok(CreateOutcome::AlreadyExisted)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The staging for `attempt`. The staging path is ctasd's by its name
    /// (the job id and hook index under ctasd's hidden prefix, which no
    /// table may take), so a directory there without a marker is one the
    /// engine wrote first, and is adopted with its files.
    fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, Failure> {
        self.check_database(staging)?;
        self.clear_fresh()?;
        let outcome = match ownership(&self.staging)? {
            Ownership::Missing | Ownership::OnlyOwnFiles => BeginOutcome::Staged,
            Ownership::Made(key) if key != staging.key => {
                return Err(self.not_owned(staging, &self.staging));
            }
            Ownership::Made(_) => match Self::attempt_of(&self.staging) {
                Some(begun) if begun >= attempt => return Ok(BeginOutcome::AlreadyStaged),
                Some(_) => {
                    Self::fill(&self.fresh, staging, Some(attempt))?;
                    self.swap_in(&self.staging)?;
                    return Ok(BeginOutcome::Restaged);
                }
                None => BeginOutcome::Adopted,
            },
            Ownership::Foreign(_) if is_real_dir(&self.staging) => BeginOutcome::Adopted,
            Ownership::Foreign(_) => return Err(self.not_owned(staging, &self.staging)),
        };
        Self::fill(&self.staging, staging, Some(attempt))?;
        sync_dir(&self.database)?;
        Ok(outcome)
    }

    fn commit(&self, staging: &Staging, publish: Publish) -> Result<CommitOutcome, Failure> {
        self.check_database(staging)?;
        if !Self::made_by(&self.staging, staging)? {
            // Already published: after a swap, the staging path may still
            // hold the replaced table, which was proven ctasd's before the
            // swap and is removed now.
            if Self::made_by(&self.target, staging)? {
                self.remove_replaced()?;
                return Ok(CommitOutcome::AlreadyCommitted);
            }
            return Err(staging_missing(staging).into());
        }
        // Published, it is no attempt's staging any more.
        match std::fs::remove_file(self.staging.join(ATTEMPT_MARKER)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        match publish {
            Publish::Create => match rename(&self.staging, &self.target, RenameFlags::NOREPLACE) {
                Err(e) if is_already_there(&e) => return Err(table_exists_error(staging).into()),
                other => other?,
            },
            Publish::Replace => {
                match ownership(&self.target)? {
                    Ownership::Missing => return Err(table_not_found(staging).into()),
                    Ownership::Foreign(_) => return Err(self.not_owned(staging, &self.target)),
                    Ownership::Made(_) | Ownership::OnlyOwnFiles => {}
                }
                rename(&self.staging, &self.target, RenameFlags::EXCHANGE)?;
                sync_dir(&self.database)?;
                fault::reached(Point::CommitMidway);
                // The staging path now holds the replaced table.
                self.remove_replaced()?;
            }
        }
        sync_dir(&self.database)?;
        Ok(CommitOutcome::Committed)
    }

    /// Removes what a swap left at the staging path, if ctasd can prove it
    /// made it; anything else is left where it is, and said so in the log.
    fn remove_replaced(&self) -> Result<(), Failure> {
        match ownership(&self.staging)? {
            Ownership::Missing => Ok(()),
            Ownership::Made(_) | Ownership::OnlyOwnFiles => {
                Ok(remove_owned(&self.staging, &self.database)?)
            }
            Ownership::Foreign(reason) => {
                tracing::warn!(
                    path = %self.staging.display(),
                    %reason,
                    "left a directory in place after a replace: ctasd cannot prove it made it"
                );
                Ok(())
            }
        }
    }

    /// Removes the staging directory, data first and ctasd's files last, so
    /// an abort cut short (where the crash suite stops it) leaves a
    /// directory that the retry still finds. The staging path is ctasd's
    /// by its name, marked or not (the engine may have made it).
    fn abort(&self, staging: &Staging) -> Result<(), Failure> {
        self.clear_fresh()?;
        match ownership(&self.staging)? {
            Ownership::Missing => return Ok(()),
            Ownership::Made(key) if key != staging.key => {
                return Err(self.not_owned(staging, &self.staging));
            }
            Ownership::Foreign(_) if !is_real_dir(&self.staging) => {
                return Err(self.not_owned(staging, &self.staging));
            }
            _ => {}
        }
        remove_data(&self.staging)?;
        fault::reached(Point::AbortMidway);
        Ok(remove_own_files(&self.staging, &self.database)?)
    }
}

/// A directory itself, not a symbolic link to one.
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
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
