//! Persistence behind traits split by use (catalogs, engines, jobs, the
//! ledger), with a SQLite and a PostgreSQL backend chosen by the database
//! URL. Every query is written once (`catalogs.rs`, `engines.rs`, `jobs.rs`,
//! `ledger.rs`) over a small per-backend trait (`sql.rs`); `sqlite.rs` and
//! `postgres/` hold only what the two databases really differ in.
//!
//! The store owns encryption at rest: callers hand it plain options and get
//! plain options back, and nothing sensitive reaches a row unsealed. It maps
//! driver errors to [`StoreError`], so no layer above sees a driver type.
//!
//! Longer than most files: it declares every store trait, one per use, each
//! operation with the promise the backends keep.

mod catalogs;
mod engines;
mod events;
mod idempotency;
mod jobs;
mod ledger;
pub mod postgres;
mod reseal;
mod rows;
pub mod secrets;
mod sql;
pub mod sqlite;

pub use idempotency::{KeyClaim, KeyUse, StoredAnswer};
pub use reseal::{Resealed, Unopenable};
pub use sql::{PoolUse, SqlStore};

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::domain::audit::AuditResult;
use crate::domain::engine::{EngineDescriptor, EngineObservation, EngineRecord};
use crate::domain::event::{
    DeliveryRecord, DeliveryResult, DeliveryState, NewDelivery, OutboxRow, Subscription,
    SubscriptionRecord,
};
use crate::domain::job::{JobId, StatusReport, Transition};
use crate::domain::job_record::{JobCursor, JobFilter, JobRecord, JobWatch, NewJob, StatusChange};
use crate::domain::ledger::{ActionRecord, ActionResult, Deciding, Intervention, Shape};
use crate::domain::{CatalogDescriptor, CatalogName, CatalogRecord, EngineName, SubscriptionName};
pub use secrets::Keyring;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("catalog '{0}' already exists")]
    CatalogExists(String),
    #[error("catalog '{0}' does not exist")]
    CatalogNotFound(String),
    #[error(
        "catalog '{catalog}' is used by {jobs} unfinished job(s); drop it when they have ended"
    )]
    CatalogInUse { catalog: String, jobs: u64 },
    #[error("catalog '{0}' was changed by another request meanwhile; read it again and retry")]
    ConcurrentModification(String),
    #[error("job '{0}' already exists")]
    JobExists(String),
    #[error("job '{0}' does not exist")]
    JobNotFound(String),
    #[error(transparent)]
    Transition(crate::domain::job::TransitionError),
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error(
        "{0} is in use by another ctasd process: SQLite serves one process at a time \
         (stop the other one, or run replicas on PostgreSQL)"
    )]
    InUse(String),
    #[error("the store is not ready: {0}")]
    NotReady(String),
    #[error("stored secret of catalog '{catalog}' cannot be opened: {source}")]
    Secret {
        catalog: String,
        source: secrets::SealError,
    },
    #[error(transparent)]
    Decision(crate::domain::ledger::DecisionError),
    #[error("engine job id '{0}' is already another job's")]
    EngineJobIdTaken(String),
    #[error("engine '{0}' already exists")]
    EngineExists(String),
    #[error("engine '{0}' does not exist")]
    EngineNotFound(String),
    #[error("engine '{engine}' watches {jobs} unfinished job(s); drop it when they have ended")]
    EngineInUse { engine: String, jobs: u64 },
    #[error("engine '{0}' was changed by another request meanwhile; read it again and retry")]
    EngineModified(String),
    #[error("subscription '{0}' already exists")]
    SubscriptionExists(String),
    #[error("subscription '{0}' does not exist")]
    SubscriptionNotFound(String),
    #[error("subscription '{0}' was changed by another request meanwhile; read it again and retry")]
    SubscriptionModified(String),
    #[error("store failure: {0}")]
    Internal(String),
}

/// `?` on a driver's result classifies its error (see [`StoreError::from_sqlx`]).
impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        Self::from_sqlx(error)
    }
}

impl StoreError {
    /// Classify a driver error; `Unavailable` for anything that means "try later".
    pub(crate) fn from_sqlx(error: sqlx::Error) -> Self {
        match connection_lost(&error) {
            true => Self::Unavailable(error.to_string()),
            false => Self::Internal(error.to_string()),
        }
    }
}

/// Whether `error` means the store cannot be reached now (try later): no
/// connection, or the server ending it (SQLSTATE classes 08, connection
/// exception, and 57P, the server shutting down or terminating it).
pub(crate) fn connection_lost(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(e) => e
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
        _ => false,
    }
}

/// Registered catalogs. Every method is one transaction.
#[async_trait]
pub trait CatalogStore: Send + Sync {
    /// Fails with [`StoreError::CatalogExists`] when the name is taken.
    async fn insert_catalog(
        &self,
        catalog: &CatalogDescriptor,
    ) -> Result<CatalogRecord, StoreError>;

    async fn get_catalog(&self, name: &CatalogName) -> Result<Option<CatalogRecord>, StoreError>;

    /// Catalogs ordered by name (bytewise), strictly after `after`.
    async fn list_catalogs(
        &self,
        after: Option<&CatalogName>,
        limit: u32,
    ) -> Result<Vec<CatalogRecord>, StoreError>;

    /// Replaces the descriptor if the stored version is still `expected_version`.
    async fn update_catalog(
        &self,
        catalog: &CatalogDescriptor,
        expected_version: i64,
    ) -> Result<CatalogRecord, StoreError>;

    /// Whether a catalog was deleted. Refused with [`StoreError::CatalogInUse`]
    /// while unfinished jobs use it; the check and the deletion are one
    /// transaction, serialized with [`JobStore::insert_job`]'s own check that
    /// its catalogs exist, so a job is never stored on a dropped catalog.
    /// With `expected_version`, refused with
    /// [`StoreError::ConcurrentModification`] unless the catalog still has it.
    async fn delete_catalog(
        &self,
        name: &CatalogName,
        expected_version: Option<i64>,
    ) -> Result<bool, StoreError>;
}

/// Registered engines, what ctasd saw of them, and which replica polls
/// each: every method is one transaction.
#[async_trait]
pub trait EngineStore: Send + Sync {
    /// Fails with [`StoreError::EngineExists`] when the name is taken.
    async fn insert_engine(
        &self,
        engine: &EngineDescriptor,
        seen: &EngineObservation,
    ) -> Result<EngineRecord, StoreError>;

    async fn get_engine(&self, name: &EngineName) -> Result<Option<EngineRecord>, StoreError>;

    /// Engines ordered by name (bytewise), strictly after `after`.
    async fn list_engines(
        &self,
        after: Option<&EngineName>,
        limit: u32,
    ) -> Result<Vec<EngineRecord>, StoreError>;

    /// Replaces the descriptor (and what was seen of the engine) if the
    /// stored version is still `expected_version`.
    async fn update_engine(
        &self,
        engine: &EngineDescriptor,
        seen: &EngineObservation,
        expected_version: i64,
    ) -> Result<EngineRecord, StoreError>;

    /// Whether an engine was deleted; refused with
    /// [`StoreError::EngineInUse`] while it watches unfinished jobs.
    async fn delete_engine(&self, name: &EngineName) -> Result<bool, StoreError>;

    /// Takes (or keeps) the right to poll `name` for `lease`, for the
    /// replica `poller`; `false` while another replica holds it.
    async fn lease_engine(
        &self,
        name: &EngineName,
        poller: &str,
        lease: Duration,
    ) -> Result<bool, StoreError>;

    /// Records what a poll saw of the engine.
    async fn record_engine_seen(
        &self,
        name: &EngineName,
        seen: &EngineObservation,
    ) -> Result<(), StoreError>;

    /// Up to `limit` of the unfinished jobs watched on `name`, by id, those
    /// after `after`: a page at a time, so a whole read is never held at once.
    async fn watched_jobs(
        &self,
        name: &EngineName,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<WatchedJob>, StoreError>;

    /// The jobs watched on `name` that changed at or after `since`,
    /// finished ones included (through an index, not among every job):
    /// each one's id, status and last change, so that a poll reads whole
    /// only those it does not have as they are.
    async fn watched_changes(
        &self,
        name: &EngineName,
        since: DateTime<Utc>,
    ) -> Result<Vec<WatchedChange>, StoreError>;

    /// The jobs among `ids` (those still there) as the watcher sees them.
    async fn watched_jobs_among(&self, ids: &[&str]) -> Result<Vec<WatchedJob>, StoreError>;

    /// One job as the watcher sees it, as the store has it now.
    async fn watched_job(&self, job: &JobId) -> Result<Option<WatchedJob>, StoreError>;

    /// How many unfinished jobs each engine watches, by name.
    async fn watched_counts(&self) -> Result<Vec<(String, u64)>, StoreError>;

    /// Records what the watcher saw of these jobs, many in one statement.
    async fn record_watches(&self, watches: &[(JobId, JobWatch)]) -> Result<(), StoreError>;
}

/// A job as the watcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedJob {
    pub id: JobId,
    pub status: crate::domain::job::JobStatus,
    pub engine_job_id: Option<String>,
    /// The latest engine time applied to it (unix ms).
    pub engine_applied_until: Option<i64>,
    pub created_at: DateTime<Utc>,
    /// The job's last change in the store (its watch apart).
    pub updated_at: DateTime<Utc>,
    pub watch: Option<JobWatch>,
}

/// That a watched job changed: when last, and to what status.
#[derive(Debug, Clone)]
pub struct WatchedChange {
    pub id: JobId,
    pub status: crate::domain::job::JobStatus,
    pub updated_at: DateTime<Utc>,
}

/// Jobs as submitted, and what happened to them.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Fails with [`StoreError::JobExists`] when the id is taken, and with
    /// [`StoreError::CatalogNotFound`] when a hook's catalog was dropped
    /// since the hook was checked.
    async fn insert_job(&self, job: &NewJob) -> Result<JobRecord, StoreError>;

    /// The job with its hooks and its whole action ledger, oldest first.
    async fn get_job(&self, id: &JobId) -> Result<Option<JobRecord>, StoreError>;

    /// When each of these jobs last changed (its `updated_at`), in one
    /// indexed read, for checking jobs kept rendered; a job that does not
    /// exist is left out.
    async fn jobs_updated_at(
        &self,
        ids: &[&str],
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError>;

    /// Jobs newest first (by creation time, then id), strictly after
    /// `after`, that match `filter`.
    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<&JobCursor>,
        limit: u32,
    ) -> Result<Vec<JobRecord>, StoreError>;

    /// Every status the job reached, oldest first.
    async fn status_history(&self, id: &JobId) -> Result<Vec<StatusChange>, StoreError>;

    /// Every decision operators made about the job's actions, oldest first.
    async fn interventions(&self, job: &JobId) -> Result<Vec<Intervention>, StoreError>;

    /// Folds the job's restart cycles but the latest `keep` out of its
    /// history (each cycle: a RESTARTING and the statuses up to the next
    /// one), counting them; how many were folded now.
    async fn fold_restarts(&self, job: &JobId, keep: u32) -> Result<u64, StoreError>;

    /// How many jobs target `catalog.database.table` and are unfinished or
    /// have actions left to run.
    async fn jobs_on_table(
        &self,
        catalog: &str,
        database: &str,
        table: &str,
    ) -> Result<u64, StoreError>;

    /// How many restart cycles were folded out of the job's history.
    async fn folded_restarts(&self, job: &JobId) -> Result<u64, StoreError>;

    /// Deletes up to `limit` jobs that ended (FINISHED, FAILED, CANCELED)
    /// with nothing left to do (no pending action) and last changed before
    /// `ended_before`, oldest first, with their hooks, actions, history,
    /// interventions and watch; how many.
    async fn purge_ended_jobs(
        &self,
        ended_before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Sets (or clears) the engine's id for the job; an id another job
    /// has is [`StoreError::EngineJobIdTaken`].
    async fn set_engine_job_id(
        &self,
        job: &JobId,
        engine_job_id: Option<&str>,
    ) -> Result<(), StoreError>;
}

/// Events out: subscriptions, the outbox the ledger fills, deliveries.
#[async_trait]
pub trait EventStore: Send + Sync {
    /// Stores a subscription with its signing secret, sealed;
    /// [`StoreError::SubscriptionExists`] when the name is taken.
    async fn insert_subscription(
        &self,
        subscription: &Subscription,
        secret: &str,
    ) -> Result<SubscriptionRecord, StoreError>;

    async fn get_subscription(
        &self,
        name: &SubscriptionName,
    ) -> Result<Option<SubscriptionRecord>, StoreError>;

    /// Every subscription, by name.
    async fn list_subscriptions(&self) -> Result<Vec<SubscriptionRecord>, StoreError>;

    /// Every subscription with its secret opened, for the deliverer only.
    async fn subscriptions_with_secrets(
        &self,
    ) -> Result<Vec<(SubscriptionRecord, String)>, StoreError>;

    /// Replaces what may change (all but the name and the secret), when
    /// the stored version is `expected_version` (any, when `None`).
    async fn update_subscription(
        &self,
        subscription: &Subscription,
        expected_version: Option<i64>,
    ) -> Result<SubscriptionRecord, StoreError>;

    /// Deletes it and its deliveries; whether it was there.
    async fn delete_subscription(&self, name: &SubscriptionName) -> Result<bool, StoreError>;

    /// The oldest outbox rows, up to `limit`.
    async fn outbox_batch(&self, limit: u32) -> Result<Vec<OutboxRow>, StoreError>;

    /// In one transaction: stores the deliveries (one per subscription and
    /// event id; a repeated one is ignored) and deletes the outbox rows
    /// `drained`.
    async fn fan_out(&self, deliveries: &[NewDelivery], drained: &[i64]) -> Result<(), StoreError>;

    /// Leases up to `limit` due deliveries, oldest first, each the oldest
    /// pending one of its job for its subscription, counting the attempt.
    async fn claim_deliveries(
        &self,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;

    async fn record_delivery(&self, id: i64, result: &DeliveryResult) -> Result<(), StoreError>;

    /// A subscription's deliveries, newest first, with ids below `before`.
    async fn list_deliveries(
        &self,
        subscription: &SubscriptionName,
        state: Option<DeliveryState>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError>;

    /// Makes a delivery pending again, due now, its attempts counted from
    /// zero; `None` when the subscription has no such delivery.
    async fn redeliver(
        &self,
        subscription: &SubscriptionName,
        id: i64,
    ) -> Result<Option<DeliveryRecord>, StoreError>;

    /// How many deliveries each subscription has in each state.
    async fn delivery_counts(&self) -> Result<Vec<(String, DeliveryState, u64)>, StoreError>;
}

/// A move made and read back in one statement.
#[derive(Debug)]
pub struct MovedJob {
    pub transition: Transition,
    pub job: JobRecord,
}

/// What a status report did: the move, and the actions due for the job
/// that the reporter now holds (leased in the same transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub transition: Transition,
    pub claimed: Vec<ActionRecord>,
}

/// The action ledger: status changes and the actions they imply, claims,
/// results, operators' decisions.
#[async_trait]
pub trait Ledger: Send + Sync {
    /// Moves the job to the reported status, through any statuses passed
    /// over, and records every step and the actions each implies, in one
    /// transaction under the job's lock; with a `lease`, in the same
    /// transaction, claims the job's due actions for the caller. A begin or create
    /// still waiting when an abort is recorded for its hook gives way to
    /// it. Reporting the current status changes nothing and answers
    /// [`Transition::Repeat`].
    async fn transition_job(
        &self,
        id: &JobId,
        report: &StatusReport,
        lease: Option<Duration>,
    ) -> Result<Moved, StoreError>;

    /// A report whose move is one of `shapes` (see
    /// [`moves_without_actions`]) and so plans no action: the job moved,
    /// its history noted and the job read back as it then stands, all in
    /// one statement, where the store can (with the reports of other jobs
    /// made meanwhile). `None` when it cannot, when the job is in none of
    /// `shapes`, when another transaction holds it, or when it changed while
    /// the statement ran: the caller then reports through
    /// [`Ledger::transition_job`], which decides and explains every case.
    ///
    /// [`moves_without_actions`]: crate::domain::ledger::moves_without_actions
    async fn move_without_actions(
        &self,
        id: &JobId,
        report: &StatusReport,
        shapes: &[Shape],
    ) -> Result<Option<MovedJob>, StoreError>;

    /// Leases up to `limit` due actions (of `job` only, if given) for
    /// `lease`: for each hook only its oldest pending action, so a commit
    /// never overtakes its begin. An action never tried is taken only once
    /// it has been due for `untried_grace`: the status report that recorded
    /// it runs it at once, and the resumer leaves it to that report unless
    /// the report seems to have died.
    async fn claim_due_actions(
        &self,
        job: Option<&JobId>,
        lease: Duration,
        limit: u32,
        untried_grace: Duration,
    ) -> Result<Vec<ActionRecord>, StoreError>;

    /// Releases leases that no live runner can hold: called once at start.
    /// A SQLite store belongs to one process (it holds the file's lock), so
    /// every lease in it was taken by a process that has since died. A
    /// PostgreSQL store is shared by replicas, so its leases are left to run
    /// out; it releases none.
    async fn release_orphaned_leases(&self) -> Result<u64, StoreError>;

    /// Extends the leases on `ids` that are still held (pending, leased) to
    /// `lease` from now: a runner keeps its claims while it works on them,
    /// so a lease can be short and a dead runner's claims free soon.
    async fn renew_leases(&self, ids: &[i64], lease: Duration) -> Result<(), StoreError>;

    /// Records how an attempt ended and releases the lease; answers the
    /// time it recorded, the action's new `updated_at`.
    async fn record_action(
        &self,
        id: i64,
        result: &ActionResult,
    ) -> Result<DateTime<Utc>, StoreError>;

    /// Applies an operator's decision about an action of `job`, under the
    /// job's lock, and records it: a retry makes the action due now (a
    /// failed one pending again); giving up fails it and, for a batch
    /// hook's begin or commit, records the abort that discards the staging.
    async fn decide_action(
        &self,
        job: &JobId,
        action: i64,
        decision: &Deciding,
    ) -> Result<(), StoreError>;

    /// Keeps what a hook's audits found when they last ran.
    async fn record_audit_results(
        &self,
        job: &JobId,
        hook_index: u32,
        results: &[AuditResult],
    ) -> Result<(), StoreError>;
}

/// The first answers to POSTs sent with an `Idempotency-Key`.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `key` for this request, or says why not (running, used for
    /// another request, or answered already: the answer to replay). A key
    /// created before `expired_before_ms`, or an unanswered claim made
    /// before `abandoned_before_ms`, is claimed afresh.
    async fn claim_idempotency_key(
        &self,
        key: &KeyUse<'_>,
        expired_before_ms: i64,
        abandoned_before_ms: i64,
    ) -> Result<KeyClaim, StoreError>;

    /// Renews an unanswered claim while its request runs: a claim is
    /// abandoned once it has not been renewed for a while, so the key of a
    /// process that died is free again within seconds.
    async fn renew_idempotency_claim(
        &self,
        caller: &str,
        key: &str,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Keeps the answer to replay, or (`None`) lets the key go so that a
    /// retry runs again (the answer was not final).
    async fn finish_idempotency_key(
        &self,
        caller: &str,
        key: &str,
        answer: Option<&StoredAnswer>,
    ) -> Result<(), StoreError>;

    /// Deletes up to `batch` expired keys and up to `batch` abandoned
    /// claims (as [`Self::claim_idempotency_key`] tells them); how many.
    async fn purge_idempotency_keys(
        &self,
        expired_before_ms: i64,
        abandoned_before_ms: i64,
        batch: i64,
    ) -> Result<u64, StoreError>;
}

/// Everything ctasd keeps: catalogs, jobs and the ledger, in one database.
#[async_trait]
pub trait Store:
    CatalogStore + EngineStore + JobStore + Ledger + IdempotencyStore + EventStore
{
    /// A short, secret-free description for logs, e.g. `SQLite at ./ctasd-data/ctasd.db`.
    fn describe(&self) -> String;

    /// The files of this store on this machine (none for a server), which
    /// no catalog may point at.
    fn local_files(&self) -> Vec<std::path::PathBuf>;

    /// Whether this process is the only one that can open the store, so
    /// that every change to it is made here.
    fn sole_process(&self) -> bool;

    /// Runs the pending migrations of this backend.
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Reachable, fully migrated, and every table of the schema there.
    async fn check_ready(&self) -> Result<(), StoreError>;

    /// Seals every sealed value again under the active key (those another
    /// key still given sealed), so older keys can be removed; reports the
    /// values no key given can open.
    async fn reseal(&self) -> Result<Resealed, StoreError>;

    /// This installation's id, made by the migrations once per store:
    /// every marker ctasd leaves in a target carries it, so that a marker
    /// of another installation is told apart.
    async fn installation(&self) -> Result<String, StoreError>;

    /// What an operator graphs: pending and failed actions, pool use.
    async fn figures(&self) -> Result<StoreFigures, StoreError>;

    /// How many jobs are in each status (statuses no job is in are left out).
    async fn jobs_by_status(&self)
    -> Result<Vec<(crate::domain::job::JobStatus, i64)>, StoreError>;
}

/// The store as metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreFigures {
    pub pending_actions: i64,
    pub failed_actions: i64,
    pub connections: sql::PoolUse,
}

#[async_trait]
impl<B: sql::Backend> Store for sql::SqlStore<B> {
    fn describe(&self) -> String {
        self.backend.describe()
    }

    fn local_files(&self) -> Vec<std::path::PathBuf> {
        self.backend.local_files()
    }

    fn sole_process(&self) -> bool {
        B::SOLE_PROCESS
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        self.backend.migrate().await.map_err(rows::migration_failed)
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        use sql::Sql;
        let mut pool = self.pool();
        let applied: Result<Option<(i64,)>, _> =
            pool.row(sql::Query::new(rows::APPLIED_MIGRATIONS)).await;
        let tables: Result<Vec<(String,)>, _> =
            pool.rows(sql::Query::new(self.backend.table_names())).await;
        rows::readiness(
            applied.map(|row| row.map_or(0, |(n,)| n)),
            tables.map(|names| names.into_iter().map(|(n,)| n).collect()),
            self.backend.migrations(),
        )
    }

    async fn reseal(&self) -> Result<Resealed, StoreError> {
        self.reseal_all().await
    }

    async fn installation(&self) -> Result<String, StoreError> {
        use sql::Sql;
        let row: Option<(String,)> = self
            .pool()
            .row(sql::Query::new("SELECT installation FROM ctasd_store"))
            .await?;
        Ok(row.map(|(id,)| id).unwrap_or_default())
    }

    async fn figures(&self) -> Result<StoreFigures, StoreError> {
        use sql::Sql;
        let counts: Vec<(String, i64)> = self
            .pool()
            .rows(sql::Query::new(
                "SELECT state, count(*) FROM actions WHERE state IN ('pending', 'failed') \
                 GROUP BY state",
            ))
            .await?;
        let count = |state: &str| {
            counts
                .iter()
                .find(|(s, _)| s == state)
                .map_or(0, |(_, n)| *n)
        };
        Ok(StoreFigures {
            pending_actions: count("pending"),
            failed_actions: count("failed"),
            connections: self.backend.pool_use(),
        })
    }

    async fn jobs_by_status(
        &self,
    ) -> Result<Vec<(crate::domain::job::JobStatus, i64)>, StoreError> {
        use sql::Sql;
        let counts: Vec<(String, i64)> = self
            .pool()
            .rows(sql::Query::new(
                "SELECT status, count(*) FROM jobs GROUP BY status",
            ))
            .await?;
        counts
            .into_iter()
            .map(|(status, n)| Ok((rows::job_status(&status)?, n)))
            .collect()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenStoreError {
    #[error("unsupported database URL: expected sqlite:, postgres:// or postgresql://")]
    UnsupportedUrl,
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Connects to the store named by `url`, or to the embedded SQLite file under
/// `data_dir` when there is none. Does not migrate.
pub async fn connect(
    url: Option<&str>,
    data_dir: &Path,
    keyring: Arc<Keyring>,
) -> Result<Arc<dyn Store>, OpenStoreError> {
    match url {
        None => Ok(Arc::new(
            sqlite::SqliteStore::open_file(&data_dir.join("ctasd.db"), keyring).await?,
        )),
        Some(url) if url.starts_with("sqlite:") => {
            Ok(Arc::new(sqlite::SqliteStore::open_url(url, keyring).await?))
        }
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => Ok(
            Arc::new(postgres::PostgresStore::open_url(url, keyring).await?),
        ),
        Some(_) => Err(OpenStoreError::UnsupportedUrl),
    }
}
