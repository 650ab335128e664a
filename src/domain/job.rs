//! The job status machine and the hook plan.
//!
//! Statuses are Flink's `JobStatus`. Flink's `transitionState` is a
//! compare-and-set; which moves happen is decided by its schedulers
//! (`DefaultScheduler`, `AdaptiveScheduler`, the dispatcher). The table in
//! [`JobStatus::legal_next`] follows them, and also lets a reporter that
//! observed a job late skip straight to a terminal status or `SUSPENDED`.
//!
//! Reporters poll, so they miss statuses: a short batch job passes
//! `CREATED → RUNNING → FINISHED` in ~300 ms and a poller sees
//! `CREATED → FINISHED`. A report is accepted when Flink could have passed
//! through statuses to reach it ([`JobStatus::path_to`]: the shortest way
//! through the table), and every status on the way is applied in order, so
//! `CREATED`'s `begin` runs before `FINISHED`'s `commit`. Only a move Flink
//! could never make (out of `FINISHED`) is refused.
//!
//! The plan says which action a hook takes on each step: streaming tables
//! are created up front and kept; batch tables are staged on `CREATED`,
//! published on `FINISHED`, and discarded on `FAILED`/`CANCELED`. A batch
//! job leaving `RESTARTING` starts a new attempt, so its staging is begun
//! again, empty: Flink's `DefaultScheduler` restarts `RESTARTING → RUNNING`,
//! other paths go through `CREATED`.

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
#[derive(strum::IntoStaticStr)]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
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
        self.into()
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

    /// The statuses a job passes through from `self` to `to`, ending with
    /// `to`: the shortest way through [`JobStatus::legal_next`], preferring
    /// the order each status lists its next ones in (`RUNNING` first). `None`
    /// when `to` cannot be reached.
    pub fn path_to(self, to: JobStatus) -> Option<Vec<JobStatus>> {
        let mut came_from: [Option<JobStatus>; 11] = [None; 11];
        let mut queue = std::collections::VecDeque::from([self]);
        let mut seen = [false; 11];
        seen[self as usize] = true;
        while let Some(status) = queue.pop_front() {
            for &next in status.legal_next() {
                if seen[next as usize] {
                    continue;
                }
                seen[next as usize] = true;
                came_from[next as usize] = Some(status);
                if next == to {
                    let mut path = vec![to];
                    let mut at = to;
                    while let Some(previous) = came_from[at as usize].filter(|p| *p != self) {
                        path.push(previous);
                        at = previous;
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(next);
            }
        }
        None
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
    /// A legal move, through `path` (the reported status last; any before it
    /// were passed over between two reports).
    Move {
        from: JobStatus,
        path: Vec<JobStatus>,
    },
}

impl Transition {
    /// Each step of the move as `(from, to)`, in order.
    pub fn steps(&self) -> Vec<(JobStatus, JobStatus)> {
        match self {
            Transition::Repeat => Vec::new(),
            Transition::Move { from, path } => std::iter::once(*from)
                .chain(path.iter().copied())
                .zip(path.iter().copied())
                .collect(),
        }
    }
}

/// A status report, as an engine or its poller sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusReport {
    pub status: JobStatus,
    /// Why the job failed, for `FAILED`/`FAILING`.
    pub failure: Option<String>,
    /// When the engine says the job reached each status (Flink's
    /// `timestamps` of `/jobs/<id>`), recorded beside ctasd's own time.
    pub engine_times: std::collections::BTreeMap<JobStatus, chrono::DateTime<chrono::Utc>>,
}

impl StatusReport {
    pub fn new(status: JobStatus) -> Self {
        Self {
            status,
            failure: None,
            engine_times: Default::default(),
        }
    }
}

/// How far ahead of ctasd's clock a reported engine time may be, unless
/// configured otherwise (`--max-engine-time-ahead-secs`): further
/// is not a clock's skew but a wrong unit (microseconds sent as
/// milliseconds), and would make every later report look older.
pub const MAX_ENGINE_TIME_AHEAD: chrono::Duration = chrono::Duration::minutes(5);

/// How far an engine's clock may be behind ctasd's before a time it
/// gives is taken to be before a job was submitted.
pub const CLOCK_SKEW_ALLOWANCE: chrono::Duration = chrono::Duration::seconds(60);

/// A terminal status that an earlier run under the same engine job id
/// reached: it ended before this job was submitted (beyond
/// [`CLOCK_SKEW_ALLOWANCE`]), so it is not evidence about this job's run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the engine says the job reached {status} at {}, before this job was submitted at {} \
     (beyond the {} s clock-skew allowance): that was an earlier run under the same engine job \
     id, so nothing is published or discarded; the job waits for its own run",
    ended_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    submitted_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    CLOCK_SKEW_ALLOWANCE.num_seconds()
)]
pub struct StaleRun {
    pub status: JobStatus,
    pub ended_at: chrono::DateTime<chrono::Utc>,
    pub submitted_at: chrono::DateTime<chrono::Utc>,
}

impl StatusReport {
    /// Whether this report's terminal status comes, by the engine's own
    /// time for it, from a run that ended before the job was submitted. A
    /// run that started before and ends after is this job's.
    pub fn stale_run(&self, submitted_at: chrono::DateTime<chrono::Utc>) -> Option<StaleRun> {
        if !self.status.is_globally_terminal() {
            return None;
        }
        let ended_at = *self.engine_times.get(&self.status)?;
        (ended_at < submitted_at - CLOCK_SKEW_ALLOWANCE).then_some(StaleRun {
            status: self.status,
            ended_at,
            submitted_at,
        })
    }

    /// Whether the report may be stale: a terminal status with the
    /// engine's time for it.
    pub fn may_be_stale(&self) -> bool {
        self.status.is_globally_terminal() && self.engine_times.contains_key(&self.status)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error(
        "job is {from}, which is globally terminal: no transition leaves it (refused: {to}); legal next statuses: none"
    )]
    Terminal { from: JobStatus, to: JobStatus },
    #[error("job cannot move from {from} to {to}: Flink never moves that way; legal next statuses: {}", list(from.legal_next()))]
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
        } else {
            match self.path_to(to) {
                Some(path) => Ok(Transition::Move { from: self, path }),
                None => Err(TransitionError::Illegal { from: self, to }),
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum JobMode {
    Streaming,
    Batch,
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
    fn a_terminal_status_that_ended_before_submission_is_stale_and_one_ending_after_is_not() {
        let submitted = chrono::DateTime::from_timestamp_millis(10_000_000).unwrap();
        let at = |ms: i64| submitted + chrono::Duration::milliseconds(ms);
        let report = |status, ended| StatusReport {
            engine_times: [(status, ended)].into(),
            ..StatusReport::new(status)
        };
        let two_hours = -2 * 3600 * 1000;
        for status in [Finished, Failed, Canceled] {
            let stale = report(status, at(two_hours)).stale_run(submitted).unwrap();
            assert!(stale.to_string().contains("earlier run"), "{stale}");
        }
        assert_eq!(
            report(Finished, at(-30_000)).stale_run(submitted),
            None,
            "within the skew"
        );
        assert_eq!(report(Finished, at(5_000)).stale_run(submitted), None);
        assert_eq!(report(Running, at(two_hours)).stale_run(submitted), None);
        assert_eq!(
            StatusReport::new(Finished).stale_run(submitted),
            None,
            "no engine time"
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
    fn statuses_a_poller_missed_are_passed_through_in_flinks_order() {
        let path = |from: JobStatus, to| match from.transition_to(to) {
            Ok(Transition::Move { path, .. }) => path,
            other => panic!("{from} -> {to}: {other:?}"),
        };
        assert_eq!(path(Created, Finished), [Running, Finished]);
        assert_eq!(path(Initializing, Finished), [Created, Running, Finished]);
        assert_eq!(path(Initializing, Running), [Created, Running]);
        assert_eq!(path(Running, Finished), [Finished]);
        assert_eq!(path(Suspended, Running), [Created, Running]);
        let steps = Initializing.transition_to(Finished).unwrap().steps();
        assert_eq!(
            steps,
            [
                (Initializing, Created),
                (Created, Running),
                (Running, Finished)
            ]
        );
    }

    #[test]
    fn every_status_but_the_terminal_ones_can_reach_every_other() {
        for from in JobStatus::ALL
            .into_iter()
            .filter(|s| !s.is_globally_terminal())
        {
            for to in JobStatus::ALL.into_iter().filter(|to| *to != from) {
                assert!(from.transition_to(to).is_ok(), "{from} -> {to}");
            }
        }
    }

    #[test]
    fn an_illegal_move_names_the_legal_ones() {
        let message = Finished.transition_to(Running).unwrap_err().to_string();
        assert!(message.contains("legal next statuses: none"), "{message}");
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
