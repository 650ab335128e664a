//! The ledger: the actions hooks take on each step of a job (the plan),
//! where each stands, how an attempt ended and when it is tried again, and
//! what operators may decide about a stuck or failed one. Every status
//! change records its actions here in the same store transaction, so a
//! crash loses none and runs none twice.
//!
//! Its tests, at the end, are a fifth of the file: the plan is checked for
//! every mode, preparation and move.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::job::{JobId, JobMode, JobStatus, StatusReport, Transition};

/// One step a hook takes on a status change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
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

/// When a job's staging (batch) or table (streaming) is made for its first
/// attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preparation {
    /// When the job is reported CREATED: a reporter that tells ctasd before
    /// the engine writes.
    OnCreated,
    /// When the job is submitted: ctasd watches the engine itself and hears
    /// of CREATED only after the engine may have written. For the same
    /// reason a restart does not empty the staging (the new attempt may
    /// already be writing): the sink's own guarantee across attempts holds,
    /// as Flink's filesystem sink commits only the last attempt's files.
    OnSubmission,
}

impl Preparation {
    /// A job watched on an engine is prepared when it is submitted.
    pub fn of(watched: bool) -> Self {
        if watched {
            Preparation::OnSubmission
        } else {
            Preparation::OnCreated
        }
    }
}

/// The action each hook of a job in `mode` takes when the job is submitted.
pub fn preparation(mode: JobMode, preparation: Preparation) -> Option<HookAction> {
    match (preparation, mode) {
        (Preparation::OnCreated, _) => None,
        (Preparation::OnSubmission, JobMode::Batch) => Some(HookAction::Begin),
        (Preparation::OnSubmission, JobMode::Streaming) => Some(HookAction::Create),
    }
}

/// The action a hook of a job in `mode` takes on the step `from → to`.
pub fn plan(
    mode: JobMode,
    preparation: Preparation,
    from: JobStatus,
    to: JobStatus,
) -> Option<HookAction> {
    use JobStatus::{Canceled, Created, Failed, Finished, Restarting, Running};
    match (mode, from, to) {
        // Prepared when the job was submitted, once.
        (_, _, Created) | (_, Restarting, Running) if preparation == Preparation::OnSubmission => {
            None
        }
        (JobMode::Streaming, _, Created) => Some(HookAction::Create),
        (JobMode::Streaming, _, _) => None,
        (JobMode::Batch, _, Created) => Some(HookAction::Begin),
        // A restart straight back to RUNNING is a new attempt too.
        (JobMode::Batch, Restarting, Running) => Some(HookAction::Begin),
        (JobMode::Batch, _, Finished) => Some(HookAction::Commit),
        (JobMode::Batch, _, Failed | Canceled) => Some(HookAction::Abort),
        (JobMode::Batch, _, _) => None,
    }
}

/// A job a report can find, as far as the plan is concerned: its status,
/// mode and preparation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub status: JobStatus,
    pub mode: JobMode,
    pub preparation: Preparation,
}

/// Every job shape from which reporting `to` is a single step that plans
/// no action: such a report changes the job's row and history only, and a
/// store may do it in one statement that checks the shape as it writes.
pub fn moves_without_actions(to: JobStatus) -> Vec<Shape> {
    let mut shapes = Vec::new();
    for status in JobStatus::ALL {
        let single_step = matches!(
            status.transition_to(to),
            Ok(Transition::Move { ref path, .. }) if path.as_slice() == [to]
        );
        if !single_step {
            continue;
        }
        for mode in [JobMode::Streaming, JobMode::Batch] {
            for preparation in [Preparation::OnCreated, Preparation::OnSubmission] {
                if plan(mode, preparation, status, to).is_none() {
                    shapes.push(Shape {
                        status,
                        mode,
                        preparation,
                    });
                }
            }
        }
    }
    shapes
}

/// Where a hook's action stands in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum ActionState {
    /// Recorded, not yet done: runs now, or again after a failure or a crash.
    Pending,
    Done,
    /// Gave up: the world refused it (e.g. a conflict at commit).
    Failed,
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
    /// What the action found or did, once it is done (or superseded, or
    /// given up).
    pub outcome: Option<ActionOutcome>,
    /// A commit an operator chose to publish in spite of its audits.
    pub audits_waived: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// How an attempt at an action ended, to be recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionResult {
    Done {
        outcome: ActionOutcome,
    },
    /// Try again after `retry_at` (the external system is down).
    Retry {
        error: String,
        retry_at: DateTime<Utc>,
    },
    Failed {
        error: String,
    },
    /// Failed, and its staging discarded (a conflict at commit): never run
    /// again, since a commit with no staging has nothing of its own to
    /// publish.
    Discarded {
        error: String,
    },
    /// A commit an audit vetoed, its staging kept until `until` (then the
    /// commit runs again, and discards it) unless an operator decides first.
    Quarantined {
        error: String,
        until: DateTime<Utc>,
    },
    /// A commit an audit vetoed, its staging discarded.
    Vetoed {
        error: String,
    },
}

/// Where everything ctasd had to do for a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Settlement {
    /// The job runs, or actions are still pending (retried with backoff).
    InProgress,
    /// Every action is done: tables published, created or discarded.
    Settled,
    /// An action failed: a refusal, a conflict at commit, a failed audit,
    /// or an operator gave up. The failures say which and why.
    Failed,
    /// A failed audit holds a commit back: its staging is kept until an
    /// operator publishes it anyway or discards it, or the quarantine ends.
    Quarantined,
}

/// What an action found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum ActionOutcome {
    /// `begin`: a new, empty staging.
    Staged,
    /// `begin` repeated: this attempt's staging was there, rows kept.
    AlreadyStaged,
    /// `begin` for a new attempt: the earlier attempt's staging emptied.
    Restaged,
    /// `begin`: a staging directory the engine made first, taken over.
    Adopted,
    /// `create`: the streaming table is there now.
    Created,
    /// `create`: the table was there already.
    AlreadyExisted,
    /// `create` of a replacing kind: the old table replaced.
    Replaced,
    /// `commit`: the staging published as the target.
    Committed,
    /// `commit` repeated: the target already holds this job's data.
    AlreadyCommitted,
    /// `abort`: the staging gone.
    Aborted,
    /// Failed without running: the job ended first, and an abort followed.
    Superseded,
    /// Failed because an operator gave up on it.
    GivenUp,
    /// `commit` failed by a conflict at its target, and its staging was
    /// discarded: there is nothing left to publish.
    Discarded,
    /// `commit` held back: an audit failed, and the staging is kept for
    /// inspection until an operator publishes it anyway or discards it, or
    /// the quarantine ends (the action is still pending).
    Quarantined,
    /// `commit` vetoed by a failed audit, and its staging discarded.
    Vetoed,
}

impl ActionOutcome {
    pub const ALL: [ActionOutcome; 15] = [
        ActionOutcome::Staged,
        ActionOutcome::AlreadyStaged,
        ActionOutcome::Restaged,
        ActionOutcome::Adopted,
        ActionOutcome::Created,
        ActionOutcome::AlreadyExisted,
        ActionOutcome::Replaced,
        ActionOutcome::Committed,
        ActionOutcome::AlreadyCommitted,
        ActionOutcome::Aborted,
        ActionOutcome::Superseded,
        ActionOutcome::GivenUp,
        ActionOutcome::Discarded,
        ActionOutcome::Quarantined,
        ActionOutcome::Vetoed,
    ];
}

/// What an operator decides about a stuck or failed action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum Decision {
    /// Run it again now, without waiting for its backoff (a failed one too,
    /// once its cause is fixed).
    Retry,
    /// Stop trying: the action fails, and a batch hook's staging is
    /// discarded by an abort, which releases the catalog.
    GiveUp,
    /// A commit whose audits vetoed it: publish the staging all the same,
    /// as a normal commit.
    PublishAnyway,
}

/// An operator's decision, with who made it and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deciding {
    pub decision: Decision,
    /// The token's name, when ctasd requires tokens.
    pub by: Option<String>,
    pub reason: Option<String>,
}

/// An operator's decision, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intervention {
    pub action_id: i64,
    pub decision: Decision,
    pub at: DateTime<Utc>,
    /// The token that decided (its name), when ctasd requires tokens.
    pub decided_by: Option<String>,
    /// Why, in the operator's words.
    pub reason: Option<String>,
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
    #[error(
        "action {0} is a commit whose staging was discarded after a conflict at its target; \
         there is nothing left to publish, so it cannot be retried: run the job again"
    )]
    StagingGone(i64),
    #[error(
        "action {0} is not a commit held back by a failed audit; only such a commit can be \
         published anyway"
    )]
    NotQuarantined(i64),
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
    if decision == Decision::Retry
        && matches!(
            action.outcome,
            Some(ActionOutcome::Discarded | ActionOutcome::Vetoed)
        )
    {
        return Err(DecisionError::StagingGone(action.id));
    }
    if decision == Decision::PublishAnyway
        && (action.action != HookAction::Commit
            || action.outcome != Some(ActionOutcome::Quarantined))
    {
        return Err(DecisionError::NotQuarantined(action.id));
    }
    Ok(())
}

/// The actions a move records, in order: for each step, one per hook that
/// is not skipped, as the plan says for the job's mode; each with the
/// status whose arrival triggers it. `hooks` are `(index, skipped)`.
pub fn planned_actions(
    mode: JobMode,
    preparation: Preparation,
    transition: &Transition,
    hooks: &[(i64, bool)],
) -> Vec<(i64, HookAction, JobStatus)> {
    transition
        .steps()
        .into_iter()
        .filter_map(|(from, to)| plan(mode, preparation, from, to).map(|action| (action, to)))
        .flat_map(|(action, to)| {
            hooks
                .iter()
                .filter(|(_, skipped)| !skipped)
                .map(move |(index, _)| (*index, action, to))
        })
        .collect()
}

/// One row of a job's status history, as a move writes it.
pub struct HistoryRow<'a> {
    pub from: JobStatus,
    pub to: JobStatus,
    /// Passed over between two reports; the last status reported was not.
    pub inferred: bool,
    pub failure: Option<&'a str>,
    pub engine_at: Option<DateTime<Utc>>,
}

/// The history rows a move writes: one per step, the failure on the last.
pub fn history_rows<'a>(transition: &Transition, report: &'a StatusReport) -> Vec<HistoryRow<'a>> {
    transition
        .steps()
        .into_iter()
        .map(|(from, to)| HistoryRow {
            from,
            to,
            inferred: to != report.status,
            failure: report.failure.as_deref().filter(|_| to == report.status),
            engine_at: report.engine_times.get(&to).copied(),
        })
        .collect()
}

/// Whether giving up `action` leaves a staging to discard: a batch hook's
/// begin or commit with no abort recorded after it.
pub fn abort_after_giving_up(
    mode: JobMode,
    action: &ActionRecord,
    actions: &[ActionRecord],
) -> bool {
    mode == JobMode::Batch
        && matches!(action.action, HookAction::Begin | HookAction::Commit)
        && !actions.iter().any(|a| {
            a.hook_index == action.hook_index && a.id > action.id && a.action == HookAction::Abort
        })
}

/// The longest wait between two attempts at an action.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long to wait before the next attempt, after `attempts` so far:
/// 0.5 s, 1 s, 2 s, ... up to [`MAX_BACKOFF`].
pub fn backoff(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(10);
    (Duration::from_millis(500) * 2u32.pow(exponent)).min(MAX_BACKOFF)
}

/// `wait` spread over 80 % to 120 % of itself, by `seed`: actions that
/// failed together (a database gone for all of them) are not all tried
/// again at the same instant when it is back. The spread is a function of
/// the seed, so a test can pin it.
pub fn jittered(wait: Duration, seed: u64) -> Duration {
    // splitmix64: a well-mixed 64-bit value from any seed.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let permille = 800 + z % 401;
    wait * permille as u32 / 1000
}

/// When an action that failed now is tried again: its backoff, jittered
/// by the action and its attempt.
pub fn retry(action: &ActionRecord, error: String) -> ActionResult {
    let seed = (action.id as u64).rotate_left(16) ^ u64::from(action.attempts);
    let wait = chrono::Duration::from_std(jittered(backoff(action.attempts), seed))
        .unwrap_or(chrono::Duration::seconds(30));
    ActionResult::Retry {
        error,
        retry_at: Utc::now() + wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_without_actions_are_single_steps_that_plan_nothing() {
        use JobStatus::*;
        let shape = |status, mode, preparation| Shape {
            status,
            mode,
            preparation,
        };
        let running = moves_without_actions(Running);
        assert!(running.contains(&shape(
            Restarting,
            JobMode::Streaming,
            Preparation::OnCreated
        )));
        assert!(running.contains(&shape(Created, JobMode::Batch, Preparation::OnCreated)));
        // A batch restart begins a new attempt; from INITIALIZING, CREATED
        // is passed over and plans the staging.
        assert!(!running.contains(&shape(Restarting, JobMode::Batch, Preparation::OnCreated)));
        assert!(
            !running
                .iter()
                .any(|s| s.status == Initializing || s.status == Running)
        );
        // A batch job's end always plans its commit or abort.
        for end in [Finished, Failed, Canceled] {
            assert!(
                !moves_without_actions(end)
                    .iter()
                    .any(|s| s.mode == JobMode::Batch)
            );
        }
        // Only a watched job's CREATED plans nothing.
        assert!(
            moves_without_actions(Created)
                .iter()
                .all(|s| s.preparation == Preparation::OnSubmission)
        );
        for to in JobStatus::ALL {
            for s in moves_without_actions(to) {
                assert_eq!(plan(s.mode, s.preparation, s.status, to), None);
                assert_eq!(
                    s.status.transition_to(to),
                    Ok(Transition::Move {
                        from: s.status,
                        path: vec![to]
                    })
                );
            }
        }
    }

    #[test]
    fn the_plan_stages_batch_tables_and_creates_streaming_ones_up_front() {
        use HookAction::*;
        let expected = |mode, preparation, from, to| match (mode, from, to) {
            (_, _, JobStatus::Created) | (_, JobStatus::Restarting, JobStatus::Running)
                if preparation == Preparation::OnSubmission =>
            {
                None
            }
            (JobMode::Streaming, _, JobStatus::Created) => Some(Create),
            (JobMode::Batch, _, JobStatus::Created) => Some(Begin),
            (JobMode::Batch, JobStatus::Restarting, JobStatus::Running) => Some(Begin),
            (JobMode::Batch, _, JobStatus::Finished) => Some(Commit),
            (JobMode::Batch, _, JobStatus::Failed | JobStatus::Canceled) => Some(Abort),
            _ => None,
        };
        for mode in [JobMode::Streaming, JobMode::Batch] {
            for preparation in [Preparation::OnCreated, Preparation::OnSubmission] {
                for from in JobStatus::ALL {
                    for to in from.legal_next().iter().copied() {
                        assert_eq!(
                            plan(mode, preparation, from, to),
                            expected(mode, preparation, from, to),
                            "{mode:?} {preparation:?} {from} -> {to}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_watched_job_is_prepared_once_when_submitted() {
        assert_eq!(preparation(JobMode::Batch, Preparation::OnCreated), None);
        assert_eq!(
            preparation(JobMode::Batch, Preparation::OnSubmission),
            Some(HookAction::Begin)
        );
        assert_eq!(
            preparation(JobMode::Streaming, Preparation::OnSubmission),
            Some(HookAction::Create)
        );
        // A restart, seen after the new attempt may have begun writing,
        // keeps the staging.
        for to in [JobStatus::Created, JobStatus::Running] {
            assert_eq!(
                plan(
                    JobMode::Batch,
                    Preparation::OnSubmission,
                    JobStatus::Restarting,
                    to
                ),
                None
            );
        }
    }

    #[test]
    fn attempts_back_off_from_half_a_second_to_thirty() {
        let waits: Vec<u64> = (1..=9).map(|n| backoff(n).as_millis() as u64).collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
    }
    #[test]
    fn jitter_spreads_a_wait_within_a_fifth_either_way() {
        let wait = Duration::from_secs(10);
        let spread: Vec<Duration> = (0..200).map(|seed| jittered(wait, seed)).collect();
        assert!(
            spread
                .iter()
                .all(|w| *w >= wait * 4 / 5 && *w <= wait * 6 / 5)
        );
        let distinct: std::collections::BTreeSet<_> = spread.iter().collect();
        assert!(
            distinct.len() > 100,
            "spread, not bunched: {}",
            distinct.len()
        );
        assert_eq!(
            jittered(wait, 7),
            jittered(wait, 7),
            "a function of the seed"
        );
    }
}
