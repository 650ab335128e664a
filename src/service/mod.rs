//! The application: one use case per function, written once for every
//! client (the HTTP API now, a watcher or statements later). A use case
//! validates, plans, persists and acts, in that order; it speaks in domain
//! types and answers with [`ServiceError`], which names what went wrong in
//! terms a client can act on and leaves HTTP to the API.

mod catalogs;
mod engine_watch;
mod engines;
mod events;
mod freshness;
mod idempotency;
mod jobs;
mod lineage;
mod matching;
mod mirror;
mod report;
mod statements;
mod submit;
mod watch;

use std::sync::Arc;

pub use crate::catalog::builtin::type_names as catalog_type_names;
pub use catalogs::{CatalogType, Registration};
pub use engine_watch::EngineWatch;
pub use engines::{EngineAlteration, EngineRegistration, EngineRequest, EngineWithJobs};
pub use events::{SubscriptionAlteration, SubscriptionRequest, SubscriptionWithCounts};
pub use idempotency::{KeyClaim, StoredAnswer};
pub use jobs::JobEvents;
pub use statements::StatementResult;
pub use submit::{HookRequest, JobRequest, Submission};
pub use watch::Polled;

use crate::catalog::registry::OpenOrInvalid;
use crate::catalog::{CatalogError, LiveCatalogs};
use crate::domain::catalog::AlterError;
use crate::domain::engine::EngineSettingError;
use crate::domain::job::{JobStatus, StaleRun, TransitionError};
use crate::domain::ledger::DecisionError;
use crate::domain::options::{OptionsError, ValidationError};
use crate::domain::{NameError, WriteLocation};
use crate::engine::{AllowedHosts, EngineHttp};
use crate::hooks::HookRunner;
use crate::metrics::Metrics;
use crate::store::secrets::SealError;
use crate::store::{Store, StoreError};

/// What every use case can reach.
pub struct Services {
    store: Arc<dyn Store>,
    catalogs: Arc<LiveCatalogs>,
    hooks: Arc<HookRunner>,
    /// What every engine is reached with.
    engines_http: Arc<EngineHttp>,
    /// Posts events to subscribers: bounded in time, no redirects followed.
    events_http: reqwest::Client,
    metrics: Arc<Metrics>,
    freshness: freshness::Freshness,
    shapes: report::ShapeHints,
    /// Secrets no key given opens, found at start: why `/readyz` says not
    /// ready.
    missing_keys: Option<String>,
    /// Told when a job moves here: its events are in the outbox, and the
    /// events loop, however long it has found nothing, goes at its busy
    /// pace again.
    events_nudge: Arc<tokio::sync::Notify>,
}

impl Services {
    pub fn new(
        store: Arc<dyn Store>,
        catalogs: Arc<LiveCatalogs>,
        hooks: Arc<HookRunner>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            catalogs,
            hooks,
            engines_http: Arc::new(EngineHttp::new(AllowedHosts::default())),
            events_http: events::http_client(),
            metrics,
            freshness: freshness::Freshness::default(),
            shapes: report::ShapeHints::default(),
            missing_keys: None,
            events_nudge: Arc::default(),
        }
    }

    /// Services whose engines' URLs may name only these hosts.
    pub fn with_engine_hosts(mut self, allowed: AllowedHosts) -> Self {
        self.engines_http = Arc::new(EngineHttp::new(allowed));
        self
    }

    /// Services that answer not ready, saying why: secrets in the store
    /// that no key given opens (see [`crate::store::Resealed`]).
    pub fn with_missing_keys(mut self, missing: Option<String>) -> Self {
        self.missing_keys = missing;
        self
    }

    /// What tells the events loop that a job moved here.
    pub fn events_nudge(&self) -> Arc<tokio::sync::Notify> {
        self.events_nudge.clone()
    }

    /// The counters the API moves for every request.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The metrics in Prometheus' text format, the store's gauges read now.
    pub async fn metrics_text(&self) -> Result<String, ServiceError> {
        let figures = self.store.figures().await?;
        let metrics = &self.metrics;
        let set = |gauge: &prometheus::IntGaugeVec, label: &str, value: i64| {
            gauge.with_label_values(&[label]).set(value)
        };
        set(
            &metrics.actions_in_state,
            "pending",
            figures.pending_actions,
        );
        set(&metrics.actions_in_state, "failed", figures.failed_actions);
        let connections = figures.connections;
        for (state, value) in [
            ("in_use", connections.in_use),
            ("idle", connections.idle),
            ("max", connections.max),
        ] {
            set(
                &metrics.store_connections,
                state,
                i64::try_from(value).unwrap_or(i64::MAX),
            );
        }
        metrics.deliveries_in_state.reset();
        for (subscription, state, count) in self.store.delivery_counts().await? {
            metrics
                .deliveries_in_state
                .with_label_values(&[subscription.as_str(), state.as_str()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        Ok(metrics.render())
    }

    /// How many jobs are in each status (every status, in Flink's order)
    /// and how many actions wait or failed: the dashboard's header.
    pub async fn overview(&self) -> Result<Overview, ServiceError> {
        let figures = self.store.figures().await?;
        let counted = self.store.jobs_by_status().await?;
        let jobs_by_status = JobStatus::ALL
            .into_iter()
            .map(|status| {
                let jobs = counted
                    .iter()
                    .find(|(s, _)| *s == status)
                    .map_or(0, |(_, n)| *n);
                (status, jobs)
            })
            .collect();
        Ok(Overview {
            jobs_by_status,
            pending_actions: figures.pending_actions,
            failed_actions: figures.failed_actions,
        })
    }

    /// The store is reachable, migrated and whole.
    pub async fn ready(&self) -> Result<(), ServiceError> {
        self.store.check_ready().await?;
        match &self.missing_keys {
            Some(missing) => Err(StoreError::NotReady(missing.clone()).into()),
            None => Ok(()),
        }
    }
}

/// Jobs by status and the ledger's open and failed actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overview {
    pub jobs_by_status: Vec<(JobStatus, i64)>,
    pub pending_actions: i64,
    pub failed_actions: i64,
}

/// Why a use case could not be carried out. `field`, where present, names
/// the part of the request at fault (`hooks[0].target`).
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{message}")]
    NameInvalid { field: String, message: String },
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error(transparent)]
    Validation(#[from] ValidationError),
    #[error(transparent)]
    Alter(AlterError),
    #[error("{0}")]
    CatalogOpenFailed(String),
    #[error("catalog '{name}' does not exist")]
    CatalogNotFound { name: String, field: Option<String> },
    #[error("catalog '{0}' already exists")]
    CatalogExists(String),
    #[error("{0}")]
    CatalogInUse(String),
    #[error("catalog '{0}' was changed by another request meanwhile; read it again and retry")]
    CatalogModified(String),
    #[error("{0}")]
    CatalogUnavailable(String),
    #[error("{0}")]
    CatalogRefused(String),
    #[error("{message}")]
    DatabaseNotFound {
        message: String,
        field: Option<String>,
    },
    #[error("{0}")]
    TableNotFound(String),
    #[error("{message}")]
    TableExists { message: String, field: String },
    #[error("{message}")]
    TargetMissing { message: String, field: String },
    #[error("{message}")]
    TableNotOwned {
        message: String,
        field: Option<String>,
    },
    #[error("{message}")]
    TargetProtected { message: String, field: String },
    #[error("{message}")]
    TableInvalid { message: String, field: String },
    #[error("{message}")]
    TableUnsupported {
        message: String,
        field: Option<String>,
    },
    #[error("{0}")]
    StagingMissing(String),
    #[error("{message}")]
    JobInvalid { message: String, field: String },
    #[error("{0}")]
    JobExists(String),
    #[error("job '{0}' does not exist")]
    JobNotFound(String),
    #[error(transparent)]
    Transition(TransitionError),
    #[error(transparent)]
    StaleRun(StaleRun),
    #[error(transparent)]
    Decision(DecisionError),
    #[error("engine job id '{0}' is already another job's")]
    EngineJobIdTaken(String),
    #[error("{0}")]
    JobWatched(String),
    #[error(transparent)]
    EngineSetting(#[from] EngineSettingError),
    #[error("{0}")]
    EngineUnreachable(String),
    #[error("{0}")]
    TableInUse(String),
    #[error("engine '{name}' does not exist")]
    EngineNotFound { name: String, field: Option<String> },
    #[error("engine '{0}' already exists")]
    EngineExists(String),
    #[error("{0}")]
    EngineInUse(String),
    #[error("engine '{0}' was changed by another request meanwhile; read it again and retry")]
    EngineModified(String),
    #[error("{message}")]
    SubscriptionInvalid { field: String, message: String },
    #[error("subscription '{0}' does not exist")]
    SubscriptionNotFound(String),
    #[error("subscription '{0}' already exists")]
    SubscriptionExists(String),
    #[error("subscription '{0}' was changed by another request meanwhile; read it again and retry")]
    SubscriptionModified(String),
    #[error("{0}")]
    DeliveryNotFound(String),
    /// The store cannot be reached; the text is for the log only.
    #[error("the store is unavailable: {0}")]
    StoreUnavailable(String),
    #[error("{0}")]
    StoreNotReady(String),
    /// A failure of ctasd itself; the text is for the log only.
    #[error("{0}")]
    Internal(String),
}

impl ServiceError {
    pub(crate) fn job_invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::JobInvalid {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn name_invalid(field: impl Into<String>, error: NameError) -> Self {
        Self::NameInvalid {
            field: field.into(),
            message: error.to_string(),
        }
    }
}

impl From<StoreError> for ServiceError {
    fn from(error: StoreError) -> Self {
        let detail = error.to_string();
        match error {
            StoreError::CatalogExists(name) => Self::CatalogExists(name),
            StoreError::CatalogNotFound(name) => Self::CatalogNotFound { name, field: None },
            StoreError::CatalogInUse { .. } => Self::CatalogInUse(detail),
            StoreError::ConcurrentModification(name) => Self::CatalogModified(name),
            StoreError::JobExists(id) => Self::JobExists(format!("job '{id}' already exists")),
            StoreError::JobNotFound(id) => Self::JobNotFound(id),
            StoreError::Transition(e) => Self::Transition(e),
            StoreError::Decision(e) => Self::Decision(e),
            StoreError::EngineJobIdTaken(id) => Self::EngineJobIdTaken(id),
            StoreError::EngineExists(name) => Self::EngineExists(name),
            StoreError::EngineNotFound(name) => Self::EngineNotFound {
                name,
                field: Some("engine".into()),
            },
            StoreError::EngineInUse { .. } => Self::EngineInUse(detail),
            StoreError::EngineModified(name) => Self::EngineModified(name),
            StoreError::SubscriptionExists(name) => Self::SubscriptionExists(name),
            StoreError::SubscriptionNotFound(name) => Self::SubscriptionNotFound(name),
            StoreError::SubscriptionModified(name) => Self::SubscriptionModified(name),
            StoreError::Unavailable(_) => Self::StoreUnavailable(detail),
            StoreError::NotReady(reason) => Self::StoreNotReady(reason),
            // A key taken away too early: the operator's to give back, and
            // named, never a bare 500.
            StoreError::Secret {
                source: SealError::UnknownKey(_),
                ..
            } => Self::StoreNotReady(format!(
                "{detail}; give the key again (after the active one in --secret-key) and restart"
            )),
            StoreError::Secret { .. } | StoreError::InUse(_) | StoreError::Internal(_) => {
                Self::Internal(detail)
            }
        }
    }
}

impl From<CatalogError> for ServiceError {
    fn from(error: CatalogError) -> Self {
        let message = error.to_string();
        match error {
            CatalogError::DatabaseNotFound(_) => Self::DatabaseNotFound {
                message,
                field: None,
            },
            CatalogError::TableNotFound { .. } => Self::TableNotFound(message),
            CatalogError::TableExists { .. } => Self::TableExists {
                message,
                field: "target".into(),
            },
            CatalogError::StagingMissing { .. } => Self::StagingMissing(message),
            CatalogError::Unsupported(_) => Self::TableUnsupported {
                message,
                field: None,
            },
            CatalogError::NotOwned { .. } => Self::TableNotOwned {
                message,
                field: None,
            },
            CatalogError::Protected(_) => Self::TargetProtected {
                message,
                field: "target".into(),
            },
            CatalogError::Unavailable(_) => Self::CatalogUnavailable(message),
            CatalogError::Refused(_) => Self::CatalogRefused(message),
        }
    }
}

impl From<OpenOrInvalid> for ServiceError {
    fn from(error: OpenOrInvalid) -> Self {
        match error {
            OpenOrInvalid::Invalid(e) => Self::Validation(e),
            OpenOrInvalid::Open(e) => Self::CatalogOpenFailed(e.to_string()),
        }
    }
}

impl From<AlterError> for ServiceError {
    fn from(error: AlterError) -> Self {
        match error {
            AlterError::Options(e) => Self::Options(e),
            other => Self::Alter(other),
        }
    }
}

/// A live catalog that cannot be opened now although it was when it was
/// registered: the external system's state, not the request's fault.
fn unavailable(error: OpenOrInvalid) -> ServiceError {
    ServiceError::CatalogUnavailable(error.to_string())
}

/// The write locations of a job's hooks, as clients are told them.
pub type WriteLocations = Vec<Option<WriteLocation>>;
