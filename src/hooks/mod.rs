//! Runs the actions recorded in the ledger.
//!
//! A status change records its actions in the same transaction (see the
//! store), which also leases the due ones to the reporter; this module
//! then carries them out: right away for the job whose status changed, and
//! in a loop that resumes whatever is due, after a crash or a failed
//! attempt. Every action checks the world before acting (the catalogs'
//! `begin`/`commit`/`abort` are idempotent), so running one twice publishes
//! nothing twice. Catalogs are the hooks' snapshots (see `LiveCatalogs`).

mod audit;
mod execute;

use crate::metrics::Metrics;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, TryStreamExt};

use crate::catalog::LiveCatalogs;
use crate::domain::job::JobId;
use crate::domain::job_record::JobRecord;
use crate::domain::ledger::{ActionOutcome, ActionRecord, ActionResult, ActionState, HookAction};
use crate::store::{Store, StoreError};

/// How long a claimed action is reserved for its runner without renewal:
/// after a runner dies, its claims are free again within this time.
pub const LEASE: Duration = Duration::from_secs(15);
/// How often a runner renews the leases of the actions it holds.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How long the resumer leaves a fresh action to the status report that
/// recorded it (and runs at once) before taking it over.
const UNTRIED_GRACE: Duration = Duration::from_secs(2);
/// How long a status report waits for actions that another runner holds.
const WAIT_FOR_OTHERS: Duration = Duration::from_secs(20);
/// Due actions claimed at a time by the resumer.
const RESUME_BATCH: u32 = 64;
/// Jobs whose due actions the resumer runs side by side.
const JOBS_RESUMED_AT_ONCE: usize = 8;
/// Longest one attempt at an action may take (connect, DDL, rename, checks).
const ACTION_TIMEOUT: Duration = Duration::from_secs(30);

/// How an attempt at an action ended, as recorded at `at`.
struct Recorded {
    id: i64,
    result: ActionResult,
    at: DateTime<Utc>,
}

pub struct HookRunner {
    store: Arc<dyn Store>,
    catalogs: Arc<LiveCatalogs>,
    metrics: Arc<Metrics>,
}

impl HookRunner {
    pub fn new(store: Arc<dyn Store>, catalogs: Arc<LiveCatalogs>, metrics: Arc<Metrics>) -> Self {
        Self {
            store,
            catalogs,
            metrics,
        }
    }

    /// After a status report: runs the actions it claimed and whatever else
    /// becomes due for the job, waits (briefly) for actions another runner
    /// holds, and answers the job as it then stands. The job is read from
    /// the store once; again only while another runner holds its actions.
    /// Due actions are claimed again only while the job has some pending.
    pub async fn run_job_actions(
        &self,
        job: &JobId,
        claimed: Vec<ActionRecord>,
    ) -> Result<JobRecord, StoreError> {
        let record = self.read(job).await?;
        self.run_read_job_actions(record, claimed).await
    }

    /// [`HookRunner::run_job_actions`] for a job just read as `record`.
    pub async fn run_read_job_actions(
        &self,
        mut record: JobRecord,
        mut claimed: Vec<ActionRecord>,
    ) -> Result<JobRecord, StoreError> {
        let deadline = tokio::time::Instant::now() + WAIT_FOR_OTHERS;
        let job = record.id.clone();
        loop {
            if claimed
                .iter()
                .any(|c| !record.actions.iter().any(|a| a.id == c.id))
            {
                // Recorded by a report that moved the job meanwhile.
                record = self.read(&job).await?;
            }
            if !claimed.is_empty() {
                note_claims(&mut record, &claimed);
                let audited = claimed.iter().any(|a| audits_before(&record, a));
                let results = self.run(&record, claimed).await?;
                note_results(&mut record, &results);
                if audited {
                    // What the audits found was recorded with their hooks.
                    record = self.read(&job).await?;
                }
            }
            // Nothing pending in the job as read: the claims a move records
            // are the reporter's own, made in its transaction.
            let pending = record
                .actions
                .iter()
                .any(|a| a.state == ActionState::Pending);
            claimed = if pending {
                self.store
                    .claim_due_actions(Some(&job), LEASE, 16, Duration::ZERO)
                    .await?
            } else {
                Vec::new()
            };
            if !claimed.is_empty() {
                continue;
            }
            if !being_run_elsewhere(&record.actions) || tokio::time::Instant::now() >= deadline {
                return Ok(record);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            record = self.read(&job).await?;
        }
    }

    async fn read(&self, job: &JobId) -> Result<JobRecord, StoreError> {
        self.store
            .get_job(job)
            .await?
            .ok_or_else(|| StoreError::JobNotFound(job.to_string()))
    }

    /// Runs every due action of every job; returns how many ran. The jobs
    /// of one claimed batch run side by side (each job's actions in order):
    /// after a crash, thousands may be due at once.
    pub async fn run_due(&self) -> Result<usize, StoreError> {
        let mut total = 0;
        loop {
            let claimed = self
                .store
                .claim_due_actions(None, LEASE, RESUME_BATCH, UNTRIED_GRACE)
                .await?;
            if claimed.is_empty() {
                return Ok(total);
            }
            total += claimed.len();
            let mut by_job: BTreeMap<JobId, Vec<ActionRecord>> = BTreeMap::new();
            for action in claimed {
                by_job
                    .entry(action.job_id.clone())
                    .or_default()
                    .push(action);
            }
            futures_util::stream::iter(by_job)
                .map(|(job, actions)| async move {
                    // A job deleted meanwhile has nothing left to run.
                    if let Some(record) = self.store.get_job(&job).await? {
                        self.run(&record, actions).await?;
                    }
                    Ok::<_, StoreError>(())
                })
                .buffer_unordered(JOBS_RESUMED_AT_ONCE)
                .try_collect::<()>()
                .await?;
        }
    }

    /// Runs claimed actions of one job, keeping their leases meanwhile, and
    /// records each result.
    async fn run(
        &self,
        job: &JobRecord,
        actions: Vec<ActionRecord>,
    ) -> Result<Vec<Recorded>, StoreError> {
        let renewal = self.keep_leases(actions.iter().map(|a| a.id).collect());
        let ran = self.run_claimed(job, actions).await;
        renewal.abort();
        ran
    }

    /// Renews the leases on `ids` until aborted; those recorded meanwhile
    /// are no longer leased and stay as they are.
    fn keep_leases(&self, ids: Vec<i64>) -> tokio::task::JoinHandle<()> {
        let store = self.store.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(RENEW_EVERY);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                if let Err(error) = store.renew_leases(&ids, LEASE).await {
                    tracing::warn!(%error, "renewing hook action leases failed; will retry");
                }
            }
        })
    }
}

/// The claims in the job as read: leased to this runner, one attempt more.
fn note_claims(record: &mut JobRecord, claimed: &[ActionRecord]) {
    for claim in claimed {
        if let Some(action) = record.actions.iter_mut().find(|a| a.id == claim.id) {
            *action = claim.clone();
        }
    }
}

/// Whether `action` is a commit that runs its hook's audits first.
fn audits_before(record: &JobRecord, action: &ActionRecord) -> bool {
    action.action == HookAction::Commit
        && record
            .hooks
            .get(action.hook_index as usize)
            .is_some_and(|hook| !hook.audits.is_empty())
}

/// The results just recorded, in the job as read, so the answer to a
/// report needs no second read.
fn note_results(record: &mut JobRecord, results: &[Recorded]) {
    for Recorded { id, result, at } in results {
        let Some(action) = record.actions.iter_mut().find(|a| a.id == *id) else {
            continue;
        };
        action.in_progress = false;
        action.updated_at = *at;
        match result {
            ActionResult::Done { outcome } => {
                action.state = ActionState::Done;
                action.outcome = Some(*outcome);
                action.last_error = None;
            }
            ActionResult::Retry { error, .. } => action.last_error = Some(error.clone()),
            ActionResult::Failed { error } => {
                action.state = ActionState::Failed;
                action.last_error = Some(error.clone());
            }
            ActionResult::Discarded { error } => {
                action.state = ActionState::Failed;
                action.outcome = Some(ActionOutcome::Discarded);
                action.last_error = Some(error.clone());
            }
            ActionResult::Quarantined { error, .. } => {
                action.outcome = Some(ActionOutcome::Quarantined);
                action.last_error = Some(error.clone());
            }
            ActionResult::Vetoed { error } => {
                action.state = ActionState::Failed;
                action.outcome = Some(ActionOutcome::Vetoed);
                action.last_error = Some(error.clone());
            }
        }
    }
}

/// Whether another runner holds one of these actions, or is about to: an
/// action that is due and was never tried, yet could not be claimed, is
/// locked by a claim that has not committed yet (claims skip locked rows).
/// Actions waiting for a retry, or behind an earlier one, do not count.
fn being_run_elsewhere(actions: &[ActionRecord]) -> bool {
    let mut hooks_seen = HashSet::new();
    actions
        .iter()
        .filter(|a| a.state == ActionState::Pending)
        // The oldest pending action of each hook is the one that can run.
        .filter(|a| hooks_seen.insert(a.hook_index))
        .any(|a| a.in_progress || a.attempts == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::{JobId, JobStatus};
    use crate::domain::ledger::HookAction;

    fn action(
        id: i64,
        hook_index: u32,
        state: ActionState,
        attempts: u32,
        in_progress: bool,
    ) -> ActionRecord {
        ActionRecord {
            id,
            job_id: JobId::parse("0123456789abcdef0123456789abcdef").unwrap(),
            hook_index,
            action: HookAction::Commit,
            trigger: JobStatus::Finished,
            state,
            attempts,
            in_progress,
            last_error: None,
            outcome: None,
            audits_waived: false,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn a_report_waits_for_actions_held_or_about_to_be_claimed_elsewhere_only() {
        use ActionState::{Done, Pending};
        // Held by another runner right now.
        assert!(being_run_elsewhere(&[action(1, 0, Pending, 1, true)]));
        // Due, never tried, and not claimable by us: another claim holds its row.
        assert!(being_run_elsewhere(&[
            action(1, 0, Done, 1, false),
            action(2, 0, Pending, 0, false)
        ]));
        // Waiting for its retry time after a failed attempt.
        assert!(!being_run_elsewhere(&[action(1, 0, Pending, 2, false)]));
        // Behind an earlier action of its hook that waits for a retry.
        assert!(!being_run_elsewhere(&[
            action(1, 0, Pending, 1, false),
            action(2, 0, Pending, 0, false)
        ]));
        assert!(!being_run_elsewhere(&[action(1, 0, Done, 1, false)]));
    }
}
