//! Rows as both stores hold them, decoded into domain records (catalog
//! secrets opened with the keyring), and driver outcomes mapped to
//! [`StoreError`].

use std::collections::{BTreeMap, HashMap};

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::migrate::MigrateError;

use super::{Keyring, StoreError};
use crate::domain::audit::{AuditPolicy, OnAuditFailure};
use crate::domain::engine::{EngineObservation, Reachability};
use crate::domain::job::{JobId, JobMode, JobStatus, Transition};
use crate::domain::job_record::{HookKind, JobRecord, JobWatch, NewHook, NewJob, StatusChange};
use crate::domain::ledger::{
    ActionOutcome, ActionRecord, ActionState, Decision, HookAction, Intervention,
};
use crate::domain::options::is_sensitive;
use crate::domain::{CatalogDescriptor, CatalogName, CatalogOptions, CatalogRecord, EngineName};

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
    split_sealed(options.iter_plain(), keyring)
}

/// A hook's table properties as `(plain JSON, sealed JSON)`: options whose
/// keys are secrets are sealed, as a catalog's are.
pub(crate) fn encode_properties(
    properties: &BTreeMap<String, String>,
    keyring: &Keyring,
) -> (String, String) {
    split_sealed(
        properties.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        keyring,
    )
}

fn split_sealed<'a>(
    entries: impl Iterator<Item = (&'a str, &'a str)>,
    keyring: &Keyring,
) -> (String, String) {
    let mut plain = BTreeMap::new();
    let mut sealed = BTreeMap::new();
    for (key, value) in entries {
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
        let descriptor = decode_descriptor(
            &self.name,
            &self.options,
            &self.sealed_options,
            self.comment,
            keyring,
        )?;
        Ok(CatalogRecord {
            descriptor,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// A catalog descriptor from its stored parts, secrets opened.
pub(crate) fn decode_descriptor(
    name: &str,
    plain_json: &str,
    sealed_json: &str,
    comment: Option<String>,
    keyring: &Keyring,
) -> Result<CatalogDescriptor, StoreError> {
    let corrupt = |what: &str, e: &dyn std::fmt::Display| {
        StoreError::Internal(format!(
            "stored catalog '{name}' has unreadable {what}: {e}"
        ))
    };
    let mut options: BTreeMap<String, String> =
        serde_json::from_str(plain_json).map_err(|e| corrupt("options", &e))?;
    let sealed: BTreeMap<String, String> =
        serde_json::from_str(sealed_json).map_err(|e| corrupt("sealed options", &e))?;
    for (key, value) in sealed {
        let plain = keyring
            .open(&key, &value)
            .map_err(|source| StoreError::Secret {
                catalog: name.to_owned(),
                source,
            })?;
        options.insert(key, plain);
    }
    Ok(CatalogDescriptor {
        name: CatalogName::parse(name).map_err(|e| corrupt("name", &e))?,
        options: CatalogOptions::new(options).map_err(|e| corrupt("options", &e))?,
        comment,
    })
}

/// Counts applied migrations.
pub(crate) const APPLIED_MIGRATIONS: &str = "SELECT count(*) FROM _sqlx_migrations WHERE success";

/// The action columns as [`ActionRow`] reads them.
pub(crate) const ACTION_COLUMNS: &str = "id, job_id, hook_index, action, trigger, state, attempts, \
     lease_until, last_error, outcome, audits_waived, created_at, updated_at";

/// The catalog columns as [`CatalogRow`] reads them.
pub(crate) const CATALOG_COLUMNS: &str =
    "name, options, sealed_options, comment, version, created_at, updated_at";

/// The tables a migrated store holds; readiness checks each is there, so a
/// store damaged from outside (a table dropped) is not reported ready.
pub(crate) const STORE_TABLES: &[&str] = &[
    "actions",
    "catalogs",
    "ctasd_store",
    "deliveries",
    "engines",
    "hooks",
    "idempotency_keys",
    "job_interventions",
    "job_transitions",
    "job_watches",
    "jobs",
    "outbox",
    "subscriptions",
];

/// Ready: every migration applied and every table of the schema present.
pub(crate) fn readiness(
    applied: Result<i64, sqlx::Error>,
    tables: Result<Vec<String>, sqlx::Error>,
    expected: usize,
) -> Result<(), StoreError> {
    let not_ready = |error: sqlx::Error| match StoreError::from_sqlx(error) {
        StoreError::Internal(reason) => StoreError::NotReady(reason),
        unavailable => unavailable,
    };
    let applied = applied.map_err(not_ready)?;
    let expected = expected as i64;
    if applied < expected {
        return Err(StoreError::NotReady(format!(
            "{applied} of {expected} migrations applied"
        )));
    }
    let tables = tables.map_err(not_ready)?;
    let missing: Vec<&str> = STORE_TABLES
        .iter()
        .filter(|t| !tables.iter().any(|present| present == *t))
        .copied()
        .collect();
    if !missing.is_empty() {
        return Err(StoreError::NotReady(format!(
            "the store's schema is damaged: table(s) {} missing; restore the store from a backup",
            missing.join(", ")
        )));
    }
    Ok(())
}

pub(crate) fn migration_failed(error: MigrateError) -> StoreError {
    StoreError::Internal(format!("migration failed: {error}"))
}

pub(crate) fn insert_failed(name: &CatalogName, error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::CatalogExists(name.to_string())
        }
        _ => StoreError::from_sqlx(error),
    }
}

/// Why a versioned update matched no row, given what is stored now.
pub(crate) fn update_missed(name: &CatalogName, current: Option<CatalogRecord>) -> StoreError {
    match current {
        Some(_) => StoreError::ConcurrentModification(name.to_string()),
        None => StoreError::CatalogNotFound(name.to_string()),
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct JobRow {
    pub id: String,
    pub name: String,
    pub mode: String,
    pub status: String,
    pub statement: Option<String>,
    pub failure: Option<String>,
    pub fingerprint: String,
    pub engine_job_id: Option<String>,
    pub engine: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub moved_at: DateTime<Utc>,
    /// From `job_watches`, when the watcher has seen the job.
    pub watch_updated_at: Option<DateTime<Utc>>,
    pub watch_engine_status: Option<String>,
    pub watch_first_seen_at: Option<DateTime<Utc>>,
    pub watch_last_seen_at: Option<DateTime<Utc>>,
    pub watch_missing_since: Option<DateTime<Utc>>,
    pub watch_note: Option<String>,
    pub watch_examined_until: Option<i64>,
    /// From `engines`, for a watched job.
    pub engine_reachability: Option<String>,
    pub engine_reachability_since: Option<DateTime<Utc>>,
    pub engine_checked_at: Option<DateTime<Utc>>,
    pub engine_last_error: Option<String>,
    pub engine_version: Option<String>,
    pub on_audit_failure: String,
    pub quarantine_seconds: i64,
}

/// Also read as JSON (`json_agg`), where one job is read in one statement.
#[derive(sqlx::FromRow, serde::Deserialize)]
pub(crate) struct HookRow {
    pub job_id: String,
    pub hook_index: i64,
    pub kind: String,
    pub catalog: String,
    pub database_name: String,
    pub table_name: String,
    pub if_not_exists: bool,
    pub skipped: bool,
    pub table_properties: String,
    pub catalog_options: String,
    pub catalog_sealed_options: String,
    pub catalog_comment: Option<String>,
    /// Rows written before table secrets were sealed have none.
    #[serde(default = "no_sealed_properties")]
    pub sealed_table_properties: String,
    /// JSON arrays: the hook's audits, and what they found last.
    #[serde(default = "no_audits")]
    pub audits: String,
    #[serde(default = "no_audits")]
    pub audit_results: String,
}

fn no_audits() -> String {
    "[]".to_owned()
}

fn no_sealed_properties() -> String {
    "{}".to_owned()
}

/// Also read as JSON (`json_agg`), where one job is read in one statement.
#[derive(sqlx::FromRow, serde::Deserialize)]
pub(crate) struct ActionRow {
    pub id: i64,
    pub job_id: String,
    pub hook_index: i64,
    pub action: String,
    pub trigger: String,
    pub state: String,
    pub attempts: i64,
    /// Unix milliseconds until which a runner holds it.
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
    pub outcome: Option<String>,
    #[serde(default)]
    pub audits_waived: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A job status as stored.
pub(crate) fn job_status(stored: &str) -> Result<JobStatus, StoreError> {
    stored.parse().map_err(|_| corrupt("status", stored))
}

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Internal(format!("stored {what} '{value}' is not readable"))
}

impl HookRow {
    pub fn decode(self, keyring: &Keyring) -> Result<NewHook, StoreError> {
        let table_properties = self.properties(keyring)?;
        let catalog = decode_descriptor(
            &self.catalog,
            &self.catalog_options,
            &self.catalog_sealed_options,
            self.catalog_comment,
            keyring,
        )?;
        Ok(NewHook {
            kind: HookKind::parse(&self.kind).ok_or_else(|| corrupt("hook kind", &self.kind))?,
            database: self.database_name,
            table: self.table_name,
            if_not_exists: self.if_not_exists,
            skipped: self.skipped,
            table_properties,
            catalog,
            audits: serde_json::from_str(&self.audits)
                .map_err(|_| corrupt("hook audits", &self.audits))?,
            audit_results: serde_json::from_str(&self.audit_results)
                .map_err(|_| corrupt("audit results", &self.audit_results))?,
        })
    }
}

impl HookRow {
    /// The table properties, sealed secrets opened.
    fn properties(&self, keyring: &Keyring) -> Result<BTreeMap<String, String>, StoreError> {
        let unreadable = || corrupt("table properties of hook", &self.hook_index.to_string());
        let mut properties: BTreeMap<String, String> =
            serde_json::from_str(&self.table_properties).map_err(|_| unreadable())?;
        let sealed: BTreeMap<String, String> =
            serde_json::from_str(&self.sealed_table_properties).map_err(|_| unreadable())?;
        for (key, value) in sealed {
            let plain = keyring
                .open(&key, &value)
                .map_err(|source| StoreError::Secret {
                    catalog: self.catalog.clone(),
                    source,
                })?;
            properties.insert(key, plain);
        }
        Ok(properties)
    }
}

impl ActionRow {
    pub fn decode(self) -> Result<ActionRecord, StoreError> {
        Ok(ActionRecord {
            id: self.id,
            job_id: JobId::parse(&self.job_id).map_err(|_| corrupt("job id", &self.job_id))?,
            hook_index: u32::try_from(self.hook_index)
                .map_err(|_| corrupt("hook index", &self.hook_index.to_string()))?,
            action: HookAction::parse(&self.action)
                .ok_or_else(|| corrupt("action", &self.action))?,
            trigger: self
                .trigger
                .parse()
                .map_err(|_| corrupt("status", &self.trigger))?,
            state: ActionState::parse(&self.state)
                .ok_or_else(|| corrupt("action state", &self.state))?,
            attempts: u32::try_from(self.attempts).unwrap_or(u32::MAX),
            in_progress: self
                .lease_until
                .is_some_and(|until| until > Utc::now().timestamp_millis()),
            last_error: self.last_error,
            outcome: self
                .outcome
                .as_deref()
                .map(|o| ActionOutcome::parse(o).ok_or_else(|| corrupt("action outcome", o)))
                .transpose()?,
            audits_waived: self.audits_waived,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

impl JobRow {
    pub fn decode(
        self,
        hooks: Vec<HookRow>,
        actions: Vec<ActionRow>,
        keyring: &Keyring,
    ) -> Result<JobRecord, StoreError> {
        Ok(JobRecord {
            id: JobId::parse(&self.id).map_err(|_| corrupt("job id", &self.id))?,
            name: self.name,
            mode: JobMode::parse(&self.mode).ok_or_else(|| corrupt("job mode", &self.mode))?,
            status: self
                .status
                .parse()
                .map_err(|_| corrupt("status", &self.status))?,
            statement: self.statement,
            engine_job_id: self.engine_job_id,
            engine: self
                .engine
                .as_deref()
                .map(|e| EngineName::parse(e).map_err(|_| corrupt("engine name", e)))
                .transpose()?,
            watch: match self.watch_updated_at {
                None => None,
                Some(_) => Some(JobWatch {
                    engine_status: self
                        .watch_engine_status
                        .as_deref()
                        .map(|s| s.parse().map_err(|_| corrupt("engine status", s)))
                        .transpose()?,
                    first_seen_at: self.watch_first_seen_at,
                    last_seen_at: self.watch_last_seen_at,
                    missing_since: self.watch_missing_since,
                    note: self.watch_note,
                    examined_until: self.watch_examined_until,
                }),
            },
            engine_observation: match self.engine_reachability.as_deref() {
                None => None,
                Some(reachability) => Some(EngineObservation {
                    reachability: Reachability::parse(reachability)
                        .ok_or_else(|| corrupt("engine reachability", reachability))?,
                    since: self.engine_reachability_since,
                    checked_at: self.engine_checked_at,
                    last_error: self.engine_last_error,
                    version: self.engine_version,
                }),
            },
            failure: self.failure,
            fingerprint: self.fingerprint,
            hooks: hooks
                .into_iter()
                .map(|h| h.decode(keyring))
                .collect::<Result<_, _>>()?,
            actions: actions
                .into_iter()
                .map(ActionRow::decode)
                .collect::<Result<_, _>>()?,
            audit_policy: AuditPolicy {
                on_failure: OnAuditFailure::parse(&self.on_audit_failure)
                    .ok_or_else(|| corrupt("audit policy", &self.on_audit_failure))?,
                quarantine: Duration::from_secs(
                    u64::try_from(self.quarantine_seconds).unwrap_or(0),
                ),
            },
            created_at: self.created_at,
            updated_at: self.updated_at,
            moved_at: self.moved_at,
        })
    }
}

/// Jobs with their hooks and actions, read with one query each for a whole
/// page; hooks and actions are grouped under their jobs in their read order.
pub(crate) fn assemble_jobs(
    jobs: Vec<JobRow>,
    hooks: Vec<HookRow>,
    actions: Vec<ActionRow>,
    keyring: &Keyring,
) -> Result<Vec<JobRecord>, StoreError> {
    let mut hooks_of: HashMap<String, Vec<HookRow>> = HashMap::new();
    for hook in hooks {
        hooks_of.entry(hook.job_id.clone()).or_default().push(hook);
    }
    let mut actions_of: HashMap<String, Vec<ActionRow>> = HashMap::new();
    for action in actions {
        actions_of
            .entry(action.job_id.clone())
            .or_default()
            .push(action);
    }
    jobs.into_iter()
        .map(|job| {
            let hooks = hooks_of.remove(&job.id).unwrap_or_default();
            let actions = actions_of.remove(&job.id).unwrap_or_default();
            job.decode(hooks, actions, keyring)
        })
        .collect()
}

pub(crate) fn job_insert_failed(job: &NewJob, error: sqlx::Error) -> StoreError {
    match (&error, &job.engine_job_id) {
        (sqlx::Error::Database(db), Some(taken)) if on_engine_job_id(db.as_ref()) => {
            StoreError::EngineJobIdTaken(taken.clone())
        }
        (sqlx::Error::Database(db), _) if db.is_unique_violation() => {
            StoreError::JobExists(job.id.to_string())
        }
        _ => StoreError::from_sqlx(error),
    }
}

/// A unique violation on the engine job id's index, as its own error.
pub(crate) fn engine_id_taken(engine_job_id: Option<&str>, error: sqlx::Error) -> StoreError {
    match (&error, engine_job_id) {
        (sqlx::Error::Database(db), Some(taken)) if on_engine_job_id(db.as_ref()) => {
            StoreError::EngineJobIdTaken(taken.to_owned())
        }
        _ => StoreError::from_sqlx(error),
    }
}

/// PostgreSQL names the violated index; SQLite names the column.
fn on_engine_job_id(db: &dyn sqlx::error::DatabaseError) -> bool {
    db.is_unique_violation()
        && (db.constraint().is_some_and(|c| c.contains("engine_job_id"))
            || db.message().contains("engine_job_id"))
}

#[derive(sqlx::FromRow)]
pub(crate) struct InterventionRow {
    pub action_id: i64,
    pub decision: String,
    pub at: DateTime<Utc>,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
}

impl InterventionRow {
    pub fn decode(self) -> Result<Intervention, StoreError> {
        Ok(Intervention {
            action_id: self.action_id,
            decision: Decision::parse(&self.decision)
                .ok_or_else(|| corrupt("decision", &self.decision))?,
            at: self.at,
            decided_by: self.decided_by,
            reason: self.reason,
        })
    }
}

/// The next status of a job, or why it cannot move.
pub(crate) fn check_transition(
    id: &JobId,
    current: &str,
    to: JobStatus,
) -> Result<Transition, StoreError> {
    let current: JobStatus = current
        .parse()
        .map_err(|_| corrupt("status of job", id.as_str()))?;
    current.transition_to(to).map_err(StoreError::Transition)
}

#[derive(sqlx::FromRow)]
pub(crate) struct TransitionRow {
    pub from_status: Option<String>,
    pub to_status: String,
    pub failure: Option<String>,
    pub at: DateTime<Utc>,
    pub inferred: bool,
    pub engine_at: Option<DateTime<Utc>>,
}

impl TransitionRow {
    pub fn decode(self) -> Result<StatusChange, StoreError> {
        let status = |s: &str| s.parse::<JobStatus>().map_err(|_| corrupt("status", s));
        Ok(StatusChange {
            from: self.from_status.as_deref().map(status).transpose()?,
            to: status(&self.to_status)?,
            failure: self.failure,
            at: self.at,
            inferred: self.inferred,
            engine_at: self.engine_at,
        })
    }
}
