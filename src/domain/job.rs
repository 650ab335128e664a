//! The job status machine and the hook plan.
//!
//! Statuses are Flink's `JobStatus`. Flink's `transitionState` is a
//! compare-and-set; which moves happen is decided by its schedulers
//! (`DefaultScheduler`, `AdaptiveScheduler`, the dispatcher). The table in
//! [`JobStatus::legal_next`] follows them, and also lets a reporter that
//! observed a job late skip straight to a terminal status or `SUSPENDED`,
//! because engines report what they saw, not every step in between.
//!
//! The plan says which action a hook takes on reaching a status: streaming
//! tables are created up front and kept; batch tables are staged on
//! `CREATED`, published on `FINISHED`, and discarded on `FAILED`/`CANCELED`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    Initializing,
    Created,
    Running,
    Failing,
    Failed,
    Cancelling,
    Canceled,
    Finished,
    Restarting,
    Suspended,
    Reconciling,
}

use JobStatus::*;

impl JobStatus {
    pub const ALL: [JobStatus; 11] = [
        Initializing,
        Created,
        Running,
        Failing,
        Failed,
        Cancelling,
        Canceled,
        Finished,
        Restarting,
        Suspended,
        Reconciling,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Initializing => "INITIALIZING",
            Created => "CREATED",
            Running => "RUNNING",
            Failing => "FAILING",
            Failed => "FAILED",
            Cancelling => "CANCELLING",
            Canceled => "CANCELED",
            Finished => "FINISHED",
            Restarting => "RESTARTING",
            Suspended => "SUSPENDED",
            Reconciling => "RECONCILING",
        }
    }

    /// `FINISHED`, `FAILED`, `CANCELED`: no transition leaves them.
    pub fn is_globally_terminal(self) -> bool {
        matches!(self, Finished | Failed | Canceled)
    }

    /// `SUSPENDED`: the job may come back after a JobManager failover.
    pub fn is_locally_terminal(self) -> bool {
        self == Suspended
    }

    /// Statuses a job in this status may move to.
    pub fn legal_next(self) -> &'static [JobStatus] {
        match self {
            Initializing => &[Created, Cancelling, Canceled, Failed, Suspended],
            Created => &[Running, Failing, Failed, Cancelling, Canceled, Suspended],
            Running => &[
                Finished, Failing, Failed, Cancelling, Canceled, Restarting, Suspended,
            ],
            Failing => &[Failed, Restarting, Cancelling, Canceled, Suspended],
            Cancelling => &[Canceled, Failed, Suspended],
            Restarting => &[
                Created, Running, Failing, Failed, Cancelling, Canceled, Suspended,
            ],
            Reconciling => &[
                Running, Finished, Failing, Failed, Cancelling, Canceled, Suspended,
            ],
            Suspended => &[Created, Reconciling, Initializing],
            Finished | Failed | Canceled => &[],
        }
    }

    pub fn can_move_to(self, next: JobStatus) -> bool {
        self.legal_next().contains(&next)
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not a job status; expected one of INITIALIZING, CREATED, RUNNING, FAILING, FAILED, CANCELLING, CANCELED, FINISHED, RESTARTING, SUSPENDED, RECONCILING"
)]
pub struct UnknownStatus(pub String);

impl clap::ValueEnum for JobStatus {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

impl FromStr for JobStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

/// What reporting a status does to a job in a given status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The job already has this status: nothing changes (engines retry).
    Repeat,
    /// A legal move.
    Move { from: JobStatus, to: JobStatus },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error(
        "job is {from}, which is globally terminal: no transition leaves it (refused: {to}); legal next statuses: none"
    )]
    Terminal { from: JobStatus, to: JobStatus },
    #[error("job cannot move from {from} to {to}; legal next statuses: {}", list(from.legal_next()))]
    Illegal { from: JobStatus, to: JobStatus },
}

fn list(statuses: &[JobStatus]) -> String {
    statuses
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl JobStatus {
    pub fn transition_to(self, to: JobStatus) -> Result<Transition, TransitionError> {
        if self == to {
            Ok(Transition::Repeat)
        } else if self.is_globally_terminal() {
            Err(TransitionError::Terminal { from: self, to })
        } else if self.can_move_to(to) {
            Ok(Transition::Move { from: self, to })
        } else {
            Err(TransitionError::Illegal { from: self, to })
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobMode {
    Streaming,
    Batch,
}

/// One step a hook takes on a status change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HookAction {
    /// Batch: create the hidden staging table or directory.
    Begin,
    /// Streaming: create the target table, visible at once.
    Create,
    /// Batch: publish the staging as the target, atomically.
    Commit,
    /// Batch: drop the staging data and metadata; the target is untouched.
    Abort,
}

/// The action a hook of a job in `mode` takes on reaching `status`.
pub fn plan(mode: JobMode, status: JobStatus) -> Option<HookAction> {
    match (mode, status) {
        (JobMode::Streaming, Created) => Some(HookAction::Create),
        (JobMode::Streaming, _) => None,
        (JobMode::Batch, Created) => Some(HookAction::Begin),
        (JobMode::Batch, Finished) => Some(HookAction::Commit),
        (JobMode::Batch, Failed | Canceled) => Some(HookAction::Abort),
        (JobMode::Batch, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_parse_and_print_as_flink_spells_them() {
        for status in JobStatus::ALL {
            assert_eq!(status.as_str().parse::<JobStatus>(), Ok(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{status}\""));
        }
        assert!(
            "running".parse::<JobStatus>().is_err(),
            "Flink's names are upper case"
        );
    }

    #[test]
    fn globally_terminal_statuses_cannot_be_left() {
        for terminal in [Finished, Failed, Canceled] {
            assert!(terminal.legal_next().is_empty());
            for next in JobStatus::ALL.into_iter().filter(|s| *s != terminal) {
                assert_eq!(
                    terminal.transition_to(next),
                    Err(TransitionError::Terminal {
                        from: terminal,
                        to: next
                    })
                );
            }
        }
        let message = Finished.transition_to(Running).unwrap_err().to_string();
        assert_eq!(
            message,
            "job is FINISHED, which is globally terminal: no transition leaves it (refused: RUNNING); legal next statuses: none"
        );
    }

    #[test]
    fn every_non_terminal_status_can_still_end_and_repeating_is_a_no_op() {
        for status in JobStatus::ALL {
            assert_eq!(status.transition_to(status), Ok(Transition::Repeat));
            if !status.is_globally_terminal() && !status.is_locally_terminal() {
                assert!(
                    status.can_move_to(Failed) || status.can_move_to(Canceled),
                    "{status}"
                );
                assert!(
                    status.can_move_to(Suspended),
                    "{status} can be suspended by a failover"
                );
            }
        }
    }

    #[test]
    fn a_suspended_job_comes_back_only_through_recovery() {
        assert_eq!(
            Suspended.legal_next(),
            &[Created, Reconciling, Initializing]
        );
        assert!(
            Restarting.can_move_to(Created),
            "Flink calls onCreated again after a restart"
        );
    }

    #[test]
    fn an_illegal_move_names_the_legal_ones() {
        let message = Created.transition_to(Finished).unwrap_err().to_string();
        assert_eq!(
            message,
            "job cannot move from CREATED to FINISHED; legal next statuses: RUNNING, FAILING, FAILED, CANCELLING, CANCELED, SUSPENDED"
        );
    }

    #[test]
    fn the_plan_stages_batch_tables_and_creates_streaming_ones_up_front() {
        use HookAction::*;
        let expected = |mode, status| match (mode, status) {
            (JobMode::Streaming, JobStatus::Created) => Some(Create),
            (JobMode::Batch, JobStatus::Created) => Some(Begin),
            (JobMode::Batch, JobStatus::Finished) => Some(Commit),
            (JobMode::Batch, JobStatus::Failed | JobStatus::Canceled) => Some(Abort),
            _ => None,
        };
        for mode in [JobMode::Streaming, JobMode::Batch] {
            for status in JobStatus::ALL {
                assert_eq!(
                    plan(mode, status),
                    expected(mode, status),
                    "{mode:?} {status}"
                );
            }
        }
    }
}

impl JobMode {
    pub fn as_str(self) -> &'static str {
        match self {
            JobMode::Streaming => "streaming",
            JobMode::Batch => "batch",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [JobMode::Streaming, JobMode::Batch]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

impl HookAction {
    pub fn as_str(self) -> &'static str {
        match self {
            HookAction::Begin => "begin",
            HookAction::Create => "create",
            HookAction::Commit => "commit",
            HookAction::Abort => "abort",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            HookAction::Begin,
            HookAction::Create,
            HookAction::Commit,
            HookAction::Abort,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }
}

/// A job's id: 32 lowercase hex digits, as Flink's `JobID` prints.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct JobId(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job id '{0}' is not 32 hexadecimal digits")]
pub struct BadJobId(pub String);

impl JobId {
    pub fn parse(value: &str) -> Result<Self, BadJobId> {
        if value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(value.to_ascii_lowercase()))
        } else {
            Err(BadJobId(
                value.chars().take(64).filter(|c| !c.is_control()).collect(),
            ))
        }
    }

    pub fn generate() -> Self {
        Self(uuid::Uuid::new_v4().simple().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a hook's action stands in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ActionState {
    /// Recorded, not yet done: runs now, or again after a failure or a crash.
    Pending,
    Done,
    /// Gave up: the world refused it (e.g. a conflict at commit).
    Failed,
}

impl ActionState {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionState::Pending => "pending",
            ActionState::Done => "done",
            ActionState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [ActionState::Pending, ActionState::Done, ActionState::Failed]
            .into_iter()
            .find(|a| a.as_str() == s)
    }
}
