//! Jobs and their hooks as stored: what was submitted (with the catalog
//! snapshot each hook uses), and the ledger of actions the hooks take.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::catalog::CatalogDescriptor;
use super::job::{ActionState, HookAction, JobId, JobMode, JobStatus};

/// What a hook does to its target, as in Flink's CTAS / RTAS / CRTAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookKind {
    /// The target must not exist.
    CreateTableAs,
    /// The target must exist; the commit swaps it.
    ReplaceTableAs,
    /// Either.
    CreateOrReplaceTableAs,
}

impl HookKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::CreateTableAs => "create_table_as",
            HookKind::ReplaceTableAs => "replace_table_as",
            HookKind::CreateOrReplaceTableAs => "create_or_replace_table_as",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            HookKind::CreateTableAs,
            HookKind::ReplaceTableAs,
            HookKind::CreateOrReplaceTableAs,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    pub id: JobId,
    pub name: String,
    pub mode: JobMode,
    pub statement: Option<String>,
    /// The engine's own id for the job (Flink's `JobID`), when known.
    pub engine_job_id: Option<String>,
    /// A digest of the submission, so that a resubmission with the same id
    /// can be told apart from a different job reusing it.
    pub fingerprint: String,
    pub hooks: Vec<NewHook>,
}

/// One action in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionRecord {
    pub id: i64,
    pub job_id: JobId,
    pub hook_index: u32,
    pub action: HookAction,
    /// The status whose arrival recorded it.
    pub trigger: JobStatus,
    pub state: ActionState,
    pub attempts: u32,
    /// Leased by a runner right now (this process or another replica).
    pub in_progress: bool,
    pub last_error: Option<String>,
    /// What the action found or did, e.g. `committed`, `already committed`.
    pub outcome: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    pub id: JobId,
    pub name: String,
    pub mode: JobMode,
    pub status: JobStatus,
    pub statement: Option<String>,
    pub engine_job_id: Option<String>,
    pub failure: Option<String>,
    pub fingerprint: String,
    pub hooks: Vec<NewHook>,
    pub actions: Vec<ActionRecord>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the job last moved; the actions of that move carry this time.
    pub moved_at: DateTime<Utc>,
}

/// Where everything ctasd had to do for a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Settlement {
    /// The job runs, or actions are still pending (retried with backoff).
    InProgress,
    /// Every action is done: tables published, created or discarded.
    Settled,
    /// An action failed: a refusal, a conflict at commit, or an operator
    /// gave up. The failures say which and why.
    Failed,
}

/// Outcome of an action that a superseding abort made unnecessary.
pub const SUPERSEDED: &str = "superseded";

impl JobRecord {
    /// The failed actions that count against the job (not those an abort
    /// made unnecessary).
    pub fn failures(&self) -> impl Iterator<Item = &ActionRecord> {
        self.actions
            .iter()
            .filter(|a| a.state == ActionState::Failed && a.outcome.as_deref() != Some(SUPERSEDED))
    }

    pub fn settlement(&self) -> Settlement {
        if self.failures().next().is_some() {
            Settlement::Failed
        } else if !self.status.is_globally_terminal()
            || self.actions.iter().any(|a| a.state == ActionState::Pending)
        {
            Settlement::InProgress
        } else {
            Settlement::Settled
        }
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

/// How an attempt at an action ended, to be recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionResult {
    Done {
        outcome: String,
    },
    /// Try again after `retry_at` (the external system is down).
    Retry {
        error: String,
        retry_at: DateTime<Utc>,
    },
    Failed {
        error: String,
    },
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
}

/// What an operator decides about a stuck or failed action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run it again now, without waiting for its backoff (a failed one too,
    /// once its cause is fixed).
    Retry,
    /// Stop trying: the action fails, and a batch hook's staging is
    /// discarded by an abort, which releases the catalog.
    GiveUp,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Retry => "retry",
            Decision::GiveUp => "give_up",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Decision::Retry, Decision::GiveUp]
            .into_iter()
            .find(|d| d.as_str() == s)
    }
}

/// An operator's decision, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intervention {
    pub action_id: i64,
    pub decision: Decision,
    pub at: DateTime<Utc>,
}

/// Why an operator's decision cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    #[error("job '{job}' has no action {action}")]
    NotFound { job: String, action: i64 },
    #[error("action {0} is done; there is nothing to retry or give up")]
    Done(i64),
    #[error("action {0} is running right now; decide again once its attempt has ended")]
    Running(i64),
    #[error("action {0} was followed by a later action of its hook; retrying it would undo that")]
    Overtaken(i64),
}

/// What an operator's decision does to an action, given where it stands:
/// the rules shared by every store.
pub fn decide(
    action: &ActionRecord,
    later_of_hook: bool,
    decision: Decision,
) -> Result<(), DecisionError> {
    if action.state == ActionState::Done {
        return Err(DecisionError::Done(action.id));
    }
    if action.in_progress {
        return Err(DecisionError::Running(action.id));
    }
    if decision == Decision::Retry && later_of_hook {
        return Err(DecisionError::Overtaken(action.id));
    }
    Ok(())
}
