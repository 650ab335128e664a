//! The external systems that hold tables.
//!
//! A [`Catalog`] is a live connection to one system (an in-memory map, a
//! database server, a warehouse directory). Factories ([`registry`], listed
//! in [`builtin`]) validate options the way Flink's
//! `FactoryUtil#createCatalog` does and open catalogs; [`live`] keeps opened
//! catalogs, with their connection pools, between requests. Nothing here
//! knows about HTTP or the store.

pub mod builtin;
pub mod filesystem;
pub mod installation;
pub mod jdbc;
pub mod lineage;
pub mod live;
pub mod memory;
pub mod protected;
pub mod registry;
pub mod sink;

use async_trait::async_trait;

pub use live::LiveCatalogs;
pub use protected::ProtectedPaths;
pub use registry::{FactoryError, FactoryRegistry, OpenError, OpenOrInvalid};

use crate::domain::audit::{Audit, Observed};
use crate::domain::flink::table::TableDefinition;
pub use crate::domain::flink::table::{ColumnInfo, TableInfo};
use crate::domain::ledger::ActionOutcome;
pub use crate::domain::staging::{Staging, StagingKey, WriteLocation};

/// How a commit publishes the staging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// The target must not exist.
    Create,
    /// The target must exist; old and new are swapped atomically.
    Replace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitOutcome {
    Committed,
    /// The world already showed this staging published (a retry after a crash).
    AlreadyCommitted,
}

impl CommitOutcome {
    pub fn outcome(self) -> ActionOutcome {
        match self {
            CommitOutcome::Committed => ActionOutcome::Committed,
            CommitOutcome::AlreadyCommitted => ActionOutcome::AlreadyCommitted,
        }
    }
}

/// What a streaming `create` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    /// The table was there already (a repeated `CREATED`, or a create kind
    /// that keeps an existing table).
    AlreadyExisted,
    /// An existing table was dropped and created anew with the declared
    /// definition (a streaming replace).
    Replaced,
}

impl CreateOutcome {
    pub fn outcome(self) -> ActionOutcome {
        match self {
            CreateOutcome::Created => ActionOutcome::Created,
            CreateOutcome::AlreadyExisted => ActionOutcome::AlreadyExisted,
            CreateOutcome::Replaced => ActionOutcome::Replaced,
        }
    }
}

/// What a `begin` found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeginOutcome {
    /// A new, empty staging.
    Staged,
    /// This attempt's staging was there already (a repeated begin): its
    /// rows are kept.
    AlreadyStaged,
    /// A staging of an earlier attempt was replaced by an empty one: a
    /// restarted job starts over.
    Restaged,
    /// A staging without ctasd's marker (the engine wrote first) was taken
    /// as this attempt's, rows and all.
    Adopted,
}

impl BeginOutcome {
    pub fn outcome(self) -> ActionOutcome {
        match self {
            BeginOutcome::Staged => ActionOutcome::Staged,
            BeginOutcome::AlreadyStaged => ActionOutcome::AlreadyStaged,
            BeginOutcome::Restaged => ActionOutcome::Restaged,
            BeginOutcome::Adopted => ActionOutcome::Adopted,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("database '{0}' does not exist in this catalog")]
    DatabaseNotFound(String),
    #[error("table '{database}.{table}' does not exist in this catalog")]
    TableNotFound { database: String, table: String },
    #[error("table '{database}.{table}' already exists")]
    TableExists { database: String, table: String },
    #[error("the staging of '{database}.{table}' is gone and the table was not published")]
    StagingMissing { database: String, table: String },
    /// The definition cannot be created here (a type the system cannot hold).
    #[error("{0}")]
    Unsupported(String),
    /// The target is not ctasd's to replace or remove.
    #[error("'{database}.{table}' is not ctasd's to replace or remove: {reason}")]
    NotOwned {
        database: String,
        table: String,
        reason: String,
    },
    /// The target is ctasd's own store (or another ctasd's).
    #[error("{0}")]
    Protected(String),
    /// The system could not be reached or failed in a way worth retrying
    /// (a lock, a time-out); the text is already redacted.
    #[error("{0}")]
    Unavailable(String),
    /// The system refused the statement: trying again would not help. The
    /// text is the system's own, redacted.
    #[error("{0}")]
    Refused(String),
}

/// A live catalog. Implementations are cheap to share (`Arc`) and hold their
/// own connection pools.
#[async_trait]
pub trait Catalog: Send + Sync {
    fn default_database(&self) -> &str;
    async fn list_databases(&self) -> Result<Vec<String>, CatalogError>;
    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError>;
    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError>;
    async fn table_exists(&self, database: &str, table: &str) -> Result<bool, CatalogError>;

    /// Streaming: create the target, visible at once; with `replace`, an
    /// existing target is dropped and created anew in one step where the
    /// system allows. A target kept as it is answers `AlreadyExisted`.
    async fn create_table(
        &self,
        staging: &Staging,
        replace: bool,
    ) -> Result<CreateOutcome, CatalogError>;

    /// Batch: create the hidden staging with the table's schema, for the
    /// attempt `attempt` (the begin action's id). Idempotent for one
    /// attempt; a staging of an earlier attempt is replaced by an empty one.
    async fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, CatalogError>;

    /// Batch: publish stagings of one database as their targets, all in one
    /// atomic step where the system allows (then every result is the same).
    /// Idempotent: a staging already published answers `AlreadyCommitted`.
    async fn commit(
        &self,
        batch: &[(Staging, Publish)],
    ) -> Vec<Result<CommitOutcome, CatalogError>>;

    /// Batch: remove the staging's data and metadata; the target is
    /// untouched. Idempotent.
    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError>;

    /// Refuses a table this catalog can never create as `database.table`
    /// (a name the system cannot hold or would hide, a column type or a
    /// definition it refuses), naming the culprit. The database exists;
    /// `existing` says whether the target does (a replace).
    async fn check_target(
        &self,
        _database: &str,
        _table: &str,
        _definition: &TableDefinition,
        _existing: bool,
    ) -> Result<(), CatalogError> {
        Ok(())
    }

    /// Refuses to replace an existing table that ctasd cannot prove is
    /// its to remove.
    async fn check_replaceable(&self, _database: &str, _table: &str) -> Result<(), CatalogError> {
        Ok(())
    }

    /// Refuses audits this catalog cannot run, saying why. By default it
    /// runs none: a catalog that holds no rows of its own has nothing to
    /// check.
    fn check_audits(&self, audits: &[Audit]) -> Result<(), String> {
        match audits {
            [] => Ok(()),
            _ => Err("this catalog type holds no rows ctasd can audit".into()),
        }
    }

    /// What each of `audits` observes on `staging` (read-only: nothing
    /// changes). A system that cannot be reached is an error, tried again;
    /// an audit that cannot be made is observed as refused, and fails.
    async fn audit(
        &self,
        _staging: &Staging,
        _audits: &[Audit],
    ) -> Result<Vec<Observed>, CatalogError> {
        Err(CatalogError::Unsupported(
            "this catalog type holds no rows ctasd can audit".into(),
        ))
    }

    /// Drops `database.table`, only when ctasd can prove it made it (its
    /// marker, naming this installation, is on it); anything else is
    /// `NotOwned` and stays as it is.
    async fn drop_table(&self, database: &str, table: &str) -> Result<(), CatalogError>;

    /// Release connections; called when the catalog is altered or dropped.
    async fn close(&self);
}

pub(crate) fn table_exists_error(staging: &Staging) -> CatalogError {
    CatalogError::TableExists {
        database: staging.database.clone(),
        table: staging.table.clone(),
    }
}

pub(crate) fn table_not_found(staging: &Staging) -> CatalogError {
    CatalogError::TableNotFound {
        database: staging.database.clone(),
        table: staging.table.clone(),
    }
}

pub(crate) fn staging_missing(staging: &Staging) -> CatalogError {
    CatalogError::StagingMissing {
        database: staging.database.clone(),
        table: staging.table.clone(),
    }
}

/// The physical columns of the staging's definition, as browsing shows them.
pub(crate) fn defined_table(staging: &Staging) -> TableInfo {
    let columns = staging
        .definition
        .columns
        .iter()
        .filter(|c| c.is_physical())
        .map(|c| ColumnInfo {
            name: c.name.clone(),
            data_type: c.data_type.clone(),
            nullable: crate::domain::flink::types::DataType::parse(&c.data_type)
                .map(|t| t.nullable)
                .unwrap_or(true),
        })
        .collect();
    TableInfo {
        database: staging.database.clone(),
        name: staging.table.clone(),
        columns,
        options: Default::default(),
    }
}
