//! Jobs and their hooks as stored: what was submitted (with the catalog
//! snapshot each hook uses), and what a hook's kind makes of its target.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::audit::{Audit, AuditPolicy, AuditResult};
use super::catalog::CatalogDescriptor;
use super::engine::{EngineObservation, MAX_FAILURE_LEN, truncate};
use super::job::{JobId, JobMode, JobStatus};
use super::ledger::{ActionOutcome, ActionRecord, ActionState, Settlement};
use super::name::EngineName;
use super::options::{redact_secrets, secret_values};

/// What a hook does to its target, as in Flink's CTAS / RTAS / CRTAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum HookKind {
    /// The target must not exist.
    CreateTableAs,
    /// The target must exist; the commit swaps it.
    ReplaceTableAs,
    /// Either.
    CreateOrReplaceTableAs,
}

impl HookKind {
    /// What a hook of this kind does to its target, given whether the target
    /// exists at submission: runs, is skipped (`if_not_exists` and the
    /// target is there), or is refused.
    pub fn against_target(
        self,
        exists: bool,
        if_not_exists: bool,
    ) -> Result<HookFate, TargetRefusal> {
        match (self, exists) {
            (HookKind::CreateTableAs, true) if if_not_exists => Ok(HookFate::Skipped),
            (HookKind::CreateTableAs, true) => Err(TargetRefusal::Exists),
            (HookKind::ReplaceTableAs, false) => Err(TargetRefusal::Missing),
            (_, true) => Ok(HookFate::Replaces),
            (_, false) => Ok(HookFate::Creates),
        }
    }
}

/// What a hook does, decided at submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookFate {
    /// Its target does not exist: it is created.
    Creates,
    /// Its target exists and is replaced.
    Replaces,
    /// `if_not_exists` and the target exists: nothing happens.
    Skipped,
}

/// Why a hook cannot take its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TargetRefusal {
    #[error("already exists (set if_not_exists to skip it)")]
    Exists,
    #[error("does not exist; replace_table_as needs it")]
    Missing,
}

/// A hook as submitted. `catalog` is the snapshot the hook will use even if
/// the catalog is later altered or dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHook {
    pub kind: HookKind,
    pub database: String,
    pub table: String,
    pub if_not_exists: bool,
    /// `if_not_exists` and the target existed at submission: the hook does nothing.
    pub skipped: bool,
    /// The table definition as Flink's property map.
    pub table_properties: BTreeMap<String, String>,
    pub catalog: CatalogDescriptor,
    /// Checks on the staging that decide whether it is published.
    pub audits: Vec<Audit>,
    /// What the audits found when they last ran.
    pub audit_results: Vec<AuditResult>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    pub id: JobId,
    pub name: String,
    pub mode: JobMode,
    pub statement: Option<String>,
    /// The engine's own id for the job (Flink's `JobID`), when known.
    pub engine_job_id: Option<String>,
    /// The engine ctasd watches the job on; none when a reporter tells
    /// ctasd the job's statuses.
    pub engine: Option<EngineName>,
    /// A digest of the submission, so that a resubmission with the same id
    /// can be told apart from a different job reusing it.
    pub fingerprint: String,
    pub hooks: Vec<NewHook>,
    pub audit_policy: AuditPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub id: JobId,
    pub name: String,
    pub mode: JobMode,
    pub status: JobStatus,
    pub statement: Option<String>,
    pub engine_job_id: Option<String>,
    pub engine: Option<EngineName>,
    /// What the watcher last saw of the job on its engine.
    pub watch: Option<JobWatch>,
    /// What the watcher last saw of the engine itself.
    pub engine_observation: Option<EngineObservation>,
    pub failure: Option<String>,
    pub fingerprint: String,
    pub hooks: Vec<NewHook>,
    pub audit_policy: AuditPolicy,
    pub actions: Vec<ActionRecord>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the job last moved; the actions of that move carry this time.
    pub moved_at: DateTime<Utc>,
}

impl JobRecord {
    /// The failed actions that count against the job (not those an abort
    /// made unnecessary).
    pub fn failures(&self) -> impl Iterator<Item = &ActionRecord> {
        self.actions.iter().filter(|a| {
            a.state == ActionState::Failed && a.outcome != Some(ActionOutcome::Superseded)
        })
    }

    pub fn settlement(&self) -> Settlement {
        if self.failures().next().is_some() {
            Settlement::Failed
        } else if self.quarantined().next().is_some() {
            Settlement::Quarantined
        } else if !self.status.is_globally_terminal()
            || self.actions.iter().any(|a| a.state == ActionState::Pending)
        {
            Settlement::InProgress
        } else {
            Settlement::Settled
        }
    }

    /// The commits held back by a failed audit, their stagings kept.
    pub fn quarantined(&self) -> impl Iterator<Item = &ActionRecord> {
        self.actions.iter().filter(|a| {
            a.state == ActionState::Pending && a.outcome == Some(ActionOutcome::Quarantined)
        })
    }

    /// When a quarantined staging is discarded unless an operator decides
    /// first: its commit's quarantine, counted from when the commit was
    /// recorded.
    pub fn quarantine_ends(&self, commit: &ActionRecord) -> DateTime<Utc> {
        commit.created_at
            + chrono::Duration::from_std(self.audit_policy.quarantine)
                .unwrap_or(chrono::Duration::MAX)
    }

    /// Whether only an engine-id update (which moves `updated_at`) or its
    /// deletion can change the job now: it ended, every action is done,
    /// and no engine watches it. Such a job may be kept rendered, checked
    /// against `updated_at` alone.
    pub fn is_at_rest(&self) -> bool {
        self.status.is_globally_terminal()
            && self.engine.is_none()
            && self.actions.iter().all(|a| a.state == ActionState::Done)
    }

    /// A text from outside (a reported failure, an engine's answer, a
    /// target system's error) as ctasd keeps it: every secret of the
    /// job's catalogs and of its tables' options masked, cut to
    /// [`MAX_FAILURE_LEN`] characters.
    pub fn outside_text(&self, text: &str) -> String {
        let secrets = self.hooks.iter().flat_map(|hook| {
            hook.catalog
                .options
                .secrets()
                .chain(secret_values(&hook.table_properties))
        });
        truncate(&redact_secrets(text, secrets), MAX_FAILURE_LEN)
    }

    /// The actions the job's last move recorded, for every status it
    /// passed through: what a status report answers with, the same again
    /// when the report is repeated.
    pub fn actions_of_last_move(&self) -> impl Iterator<Item = &ActionRecord> {
        self.actions
            .iter()
            .filter(|a| a.created_at == self.moved_at)
    }
}

/// What ctasd's watcher last saw of a job on its engine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobWatch {
    /// The job's status as the engine last gave it.
    pub engine_status: Option<JobStatus>,
    /// When the engine first and last knew the job.
    pub first_seen_at: Option<DateTime<Utc>>,
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Since when the engine, reachable, has not known the job.
    pub missing_since: Option<DateTime<Utc>>,
    /// What the watcher is waiting for, or why it gave up, in words.
    pub note: Option<String>,
    /// The engine's last change of the job that was fully examined (its
    /// `last-modification`, unix ms): a later one is looked at again.
    pub examined_until: Option<i64>,
}

/// One status a job reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusChange {
    /// `None` for the status the job was submitted with.
    pub from: Option<JobStatus>,
    pub to: JobStatus,
    pub failure: Option<String>,
    pub at: DateTime<Utc>,
    /// Passed over between two reports (the reporter saw a later status).
    pub inferred: bool,
    /// When the engine says the job reached it, if the report said.
    pub engine_at: Option<DateTime<Utc>>,
}

/// Which jobs to list.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub status: Option<JobStatus>,
    /// Jobs with a hook on this catalog.
    pub catalog: Option<String>,
    /// The job the engine knows by this id.
    pub engine_job_id: Option<String>,
    /// Jobs watched on this engine.
    pub engine: Option<String>,
    /// Only jobs with a commit held in quarantine.
    pub quarantined: bool,
    /// Jobs created at or after this time.
    pub created_after: Option<DateTime<Utc>>,
    /// Jobs created before this time.
    pub created_before: Option<DateTime<Utc>>,
    /// Jobs whose id starts with this text or whose name contains it
    /// (ignoring ASCII case).
    pub search: Option<String>,
}

impl JobFilter {
    /// [`JobFilter::search`] as two SQL `LIKE` patterns (escaped with `\`):
    /// a prefix of the id, and a part of the name in lower case.
    pub fn search_patterns(&self) -> Option<(String, String)> {
        let search = self.search.as_deref()?;
        let mut escaped = String::with_capacity(search.len() + 2);
        for c in search.chars() {
            if matches!(c, '%' | '_' | '\\') {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        Some((
            format!("{escaped}%"),
            format!("%{}%", escaped.to_ascii_lowercase()),
        ))
    }
}

/// Where a page of jobs, newest first, stopped: the last job's creation
/// time and id (the id orders jobs created in the same instant).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCursor {
    pub created_at: DateTime<Utc>,
    pub id: JobId,
}

impl JobCursor {
    pub fn of(job: &JobRecord) -> Self {
        Self {
            created_at: job.created_at,
            id: job.id.clone(),
        }
    }

    /// `<RFC 3339 time>~<job id>`, as [`fmt::Display`] writes it.
    pub fn parse(text: &str) -> Option<Self> {
        let (at, id) = text.split_once('~')?;
        Some(Self {
            created_at: DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc),
            id: JobId::parse(id).ok()?,
        })
    }
}

impl std::fmt::Display for JobCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self
            .created_at
            .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        write!(f, "{at}~{}", self.id)
    }
}
