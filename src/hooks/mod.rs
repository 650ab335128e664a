//! Runs the actions recorded in the ledger.
//!
//! A status change records its actions in the same transaction (see the
//! store); this module then carries them out: right away for the job whose
//! status changed, and in a loop that resumes whatever is due, after a crash
//! or a failed attempt. Every action checks the world before acting (the
//! catalogs' `begin`/`commit`/`abort` are idempotent), so running one twice
//! publishes nothing twice. Catalogs are rebuilt from each hook's snapshot.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Mutex;

use crate::catalog::factory::OpenOrInvalid;
use crate::catalog::{
    BeginOutcome, Catalog, CatalogError, CreateOutcome, LiveCatalogs, Publish, Staging, StagingKey,
};
use crate::domain::hook::{ActionRecord, ActionResult, HookKind, JobRecord, NewHook};
use crate::domain::job::{ActionState, HookAction, JobId};
use crate::domain::table::TableDefinition;
use crate::fault::Point;
use crate::store::{Store, StoreError};

/// How long a claimed action is reserved for its runner without renewal:
/// after a runner dies, its claims are free again within this time.
const LEASE: Duration = Duration::from_secs(15);
/// How often a runner renews the leases of the actions it holds.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How long the resumer leaves a fresh action to the status report that
/// recorded it (and runs at once) before taking it over.
const UNTRIED_GRACE: Duration = Duration::from_secs(2);
/// How long a status report waits for actions that another runner holds.
const WAIT_FOR_OTHERS: Duration = Duration::from_secs(20);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest one attempt at an action may take (connect, DDL, rename, checks).
const ACTION_TIMEOUT: Duration = Duration::from_secs(30);

pub struct HookRunner {
    store: Arc<dyn Store>,
    catalogs: Arc<LiveCatalogs>,
    /// Catalogs opened from a snapshot that no longer matches the registered
    /// catalog (altered or dropped since submission).
    snapshots: Mutex<HashMap<String, Arc<dyn Catalog>>>,
}

impl HookRunner {
    pub fn new(store: Arc<dyn Store>, catalogs: Arc<LiveCatalogs>) -> Self {
        Self {
            store,
            catalogs,
            snapshots: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `job`'s due actions now, then waits (briefly) for any that
    /// another runner holds, so a status report answers with their results.
    pub async fn run_job(&self, job: &JobId) -> Result<JobRecord, StoreError> {
        let deadline = tokio::time::Instant::now() + WAIT_FOR_OTHERS;
        loop {
            let claimed = self
                .store
                .claim_due_actions(Some(job), LEASE, 16, Duration::ZERO)
                .await?;
            if !claimed.is_empty() {
                self.run(claimed).await?;
                continue;
            }
            let record = self
                .store
                .get_job(job)
                .await?
                .ok_or_else(|| StoreError::JobNotFound(job.to_string()))?;
            if !being_run_elsewhere(&record.actions) || tokio::time::Instant::now() >= deadline {
                return Ok(record);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Runs every due action of every job; returns how many ran.
    pub async fn run_due(&self) -> Result<usize, StoreError> {
        let mut total = 0;
        loop {
            let claimed = self
                .store
                .claim_due_actions(None, LEASE, 32, UNTRIED_GRACE)
                .await?;
            if claimed.is_empty() {
                return Ok(total);
            }
            total += claimed.len();
            self.run(claimed).await?;
        }
    }

    /// Resumes due actions every `period`, until the process ends.
    pub fn spawn_resumer(self: Arc<Self>, period: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(period);
            loop {
                ticks.tick().await;
                if let Err(error) = self.run_due().await {
                    tracing::warn!(%error, "resuming hook actions failed; will retry");
                }
            }
        })
    }

    async fn run(&self, actions: Vec<ActionRecord>) -> Result<(), StoreError> {
        let renewal = self.keep_leases(actions.iter().map(|a| a.id).collect());
        let ran = self.run_claimed(actions).await;
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

    async fn run_claimed(&self, actions: Vec<ActionRecord>) -> Result<(), StoreError> {
        let mut jobs: HashMap<JobId, JobRecord> = HashMap::new();
        for action in &actions {
            if !jobs.contains_key(&action.job_id)
                && let Some(job) = self.store.get_job(&action.job_id).await?
            {
                jobs.insert(action.job_id.clone(), job);
            }
        }
        // The commits of one job on one catalog and database publish
        // together, in one transaction where the system allows.
        let mut batches: Vec<Vec<ActionRecord>> = Vec::new();
        for action in actions {
            let Some(job) = jobs.get(&action.job_id) else {
                continue;
            };
            let batch = (action.action == HookAction::Commit)
                .then(|| {
                    batches.iter().position(|batch| {
                        batch[0].action == HookAction::Commit
                            && batch[0].job_id == action.job_id
                            && same_place(job, batch[0].hook_index, action.hook_index)
                    })
                })
                .flatten();
            match batch {
                Some(index) => batches[index].push(action),
                None => batches.push(vec![action]),
            }
        }
        for batch in batches {
            let job = &jobs[&batch[0].job_id];
            let results = self.execute(job, &batch).await;
            for (action, result) in batch.iter().zip(results) {
                self.finish(job, action, &result).await?;
            }
        }
        Ok(())
    }

    /// Logs and records how an attempt ended.
    async fn finish(
        &self,
        job: &JobRecord,
        action: &ActionRecord,
        result: &ActionResult,
    ) -> Result<(), StoreError> {
        if let ActionResult::Done { .. } = result {
            crate::fault::reached(match action.action {
                HookAction::Create | HookAction::Begin => Point::StagingCreated,
                HookAction::Commit => Point::CommitApplied,
                HookAction::Abort => Point::AbortApplied,
            });
        }
        match result {
            ActionResult::Done { outcome } => {
                tracing::info!(job = %job.id, hook = action.hook_index, action = action.action.as_str(), outcome, "hook action done")
            }
            ActionResult::Retry { error, .. } => {
                tracing::warn!(job = %job.id, hook = action.hook_index, action = action.action.as_str(), %error, "hook action will be retried")
            }
            ActionResult::Failed { error } => {
                tracing::warn!(job = %job.id, hook = action.hook_index, action = action.action.as_str(), %error, "hook action failed")
            }
        }
        self.store.record_action(action.id, result).await
    }

    /// One attempt at a batch (one action, or the commits that publish
    /// together), bounded in time: a system that hangs is treated like one
    /// that is down, and the actions are retried later. Every step is
    /// idempotent, so an attempt cut short is safe to repeat.
    async fn execute(&self, job: &JobRecord, batch: &[ActionRecord]) -> Vec<ActionResult> {
        match tokio::time::timeout(ACTION_TIMEOUT, self.attempt(job, batch)).await {
            Ok(results) => results,
            Err(_) => batch
                .iter()
                .map(|action| {
                    retry(
                        action,
                        format!("did not complete within {} s", ACTION_TIMEOUT.as_secs()),
                    )
                })
                .collect(),
        }
    }

    async fn attempt(&self, job: &JobRecord, batch: &[ActionRecord]) -> Vec<ActionResult> {
        let action = &batch[0];
        let every = |result: ActionResult| batch.iter().map(|_| result.clone()).collect();
        let Some(hook) = job.hooks.get(action.hook_index as usize) else {
            return every(ActionResult::Failed {
                error: format!("job has no hook {}", action.hook_index),
            });
        };
        let catalog = match self.catalog_for(hook).await {
            Ok(catalog) => catalog,
            Err(CatalogFailure::Final(error)) => return every(ActionResult::Failed { error }),
            Err(CatalogFailure::Passing(error)) => {
                return batch.iter().map(|a| retry(a, error.clone())).collect();
            }
        };
        let mut stagings = Vec::with_capacity(batch.len());
        for action in batch {
            let hook = &job.hooks[action.hook_index as usize];
            match staging_of(job, action.hook_index, hook) {
                Ok(staging) => stagings.push((staging, hook)),
                Err(error) => return every(ActionResult::Failed { error }),
            }
        }
        if action.action == HookAction::Commit {
            return self.commit(catalog.as_ref(), batch, &stagings).await;
        }
        let (staging, hook) = &stagings[0];
        let outcome = match action.action {
            HookAction::Create => {
                let replace = self
                    .replaces_at_create(catalog.as_ref(), job, action, hook, staging)
                    .await;
                match replace {
                    Ok(replace) => catalog
                        .create_table(staging, replace)
                        .await
                        .map(CreateOutcome::as_str),
                    Err(e) => Err(e),
                }
            }
            HookAction::Begin => catalog
                .begin(staging, action.id)
                .await
                .map(BeginOutcome::as_str),
            HookAction::Abort => catalog.abort(staging).await.map(|()| "aborted"),
            HookAction::Commit => unreachable!("commits are run as a batch above"),
        };
        vec![settle(action, outcome.map(str::to_owned))]
    }

    /// Whether a streaming `create` drops and creates its target anew: for
    /// a replacing kind, once per job (a `CREATED` after a restart keeps
    /// the table and its rows), and on a retry only when the table does not
    /// already have the declared columns (the first attempt replaced it
    /// before a crash could record so).
    async fn replaces_at_create(
        &self,
        catalog: &dyn Catalog,
        job: &JobRecord,
        action: &ActionRecord,
        hook: &NewHook,
        staging: &Staging,
    ) -> Result<bool, CatalogError> {
        if hook.kind == HookKind::CreateTableAs {
            return Ok(false);
        }
        let created_before = job.actions.iter().any(|a| {
            a.hook_index == action.hook_index
                && a.action == HookAction::Create
                && a.state == ActionState::Done
                && a.id < action.id
        });
        if created_before {
            return Ok(false);
        }
        if action.attempts <= 1
            || !catalog
                .table_exists(&staging.database, &staging.table)
                .await?
        {
            return Ok(true);
        }
        let table = catalog.get_table(&staging.database, &staging.table).await?;
        let existing: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
        let declared: Vec<&str> = staging
            .definition
            .columns
            .iter()
            .filter(|c| c.is_physical())
            .map(|c| c.name.as_str())
            .collect();
        Ok(existing != declared)
    }

    /// Publishes a batch of commits; a conflict on any of them (someone
    /// changed a target since submission) discards every staging of the
    /// batch, and the job shows why.
    async fn commit(
        &self,
        catalog: &dyn Catalog,
        batch: &[ActionRecord],
        stagings: &[(Staging, &NewHook)],
    ) -> Vec<ActionResult> {
        let mut publications = Vec::with_capacity(stagings.len());
        for (staging, hook) in stagings {
            let publish = match hook.kind {
                HookKind::CreateTableAs => Publish::Create,
                HookKind::ReplaceTableAs => Publish::Replace,
                HookKind::CreateOrReplaceTableAs => {
                    match catalog
                        .table_exists(&staging.database, &staging.table)
                        .await
                    {
                        Ok(true) => Publish::Replace,
                        Ok(false) => Publish::Create,
                        Err(e) => return batch.iter().map(|a| settle(a, Err(e.clone()))).collect(),
                    }
                }
            };
            publications.push((staging.clone(), publish));
        }
        let outcomes = catalog.commit(&publications).await;
        let mut results = Vec::with_capacity(batch.len());
        for ((action, (staging, _)), outcome) in batch.iter().zip(&publications).zip(outcomes) {
            let result = match outcome {
                Ok(outcome) => ActionResult::Done {
                    outcome: outcome.as_str().to_owned(),
                },
                Err(
                    conflict @ (CatalogError::TableExists { .. }
                    | CatalogError::TableNotFound { .. }
                    | CatalogError::NotOwned { .. }),
                ) => match catalog.abort(staging).await {
                    Ok(()) => ActionResult::Failed {
                        error: format!("conflict at commit: {conflict}; staging discarded"),
                    },
                    Err(e) => retry(action, e.to_string()),
                },
                Err(other) => settle(action, Err(other)),
            };
            results.push(result);
        }
        results
    }

    /// The registered catalog when it still matches the snapshot (so an
    /// in-memory catalog is the same one users browse), else one opened
    /// from the snapshot.
    async fn catalog_for(&self, hook: &NewHook) -> Result<Arc<dyn Catalog>, CatalogFailure> {
        let snapshot = &hook.catalog;
        let registered = self
            .store
            .get_catalog(&snapshot.name)
            .await
            .map_err(|e| CatalogFailure::Passing(e.to_string()))?;
        if let Some(record) = registered.filter(|r| r.descriptor.options == snapshot.options) {
            return self
                .catalogs
                .get(&record)
                .await
                .map_err(CatalogFailure::from);
        }
        let key = format!(
            "{}:{:?}",
            snapshot.name,
            snapshot.options.iter_plain().collect::<Vec<_>>()
        );
        if let Some(catalog) = self.snapshots.lock().await.get(&key) {
            return Ok(catalog.clone());
        }
        let catalog = self
            .catalogs
            .registry()
            .open(&snapshot.name, &snapshot.options)
            .await
            .map_err(CatalogFailure::from)?;
        self.snapshots.lock().await.insert(key, catalog.clone());
        Ok(catalog)
    }
}

/// Why a hook's catalog could not be had.
enum CatalogFailure {
    /// Its options are refused: no retry will open it.
    Final(String),
    /// It could not be reached, or the store could not be read: retried.
    Passing(String),
}

impl From<OpenOrInvalid> for CatalogFailure {
    fn from(error: OpenOrInvalid) -> Self {
        match error {
            OpenOrInvalid::Invalid(_) => CatalogFailure::Final(error.to_string()),
            OpenOrInvalid::Open(_) => CatalogFailure::Passing(error.to_string()),
        }
    }
}

/// How an action's outcome is recorded: a system that could not be reached
/// (or answered with something worth retrying) is retried with backoff;
/// a refusal is final at once, with the system's own words.
fn settle(action: &ActionRecord, outcome: Result<String, CatalogError>) -> ActionResult {
    match outcome {
        Ok(outcome) => ActionResult::Done { outcome },
        Err(CatalogError::Unavailable(error)) => retry(action, error),
        Err(other) => ActionResult::Failed {
            error: other.to_string(),
        },
    }
}

/// Whether two hooks of `job` target the same catalog and database, so
/// their commits can publish together.
fn same_place(job: &JobRecord, a: u32, b: u32) -> bool {
    match (job.hooks.get(a as usize), job.hooks.get(b as usize)) {
        (Some(a), Some(b)) => a.catalog == b.catalog && a.database == b.database,
        _ => false,
    }
}

/// Whether another runner holds one of these actions, or is about to: an
/// action that is due and was never tried, yet could not be claimed, is
/// locked by a claim that has not committed yet (claims skip locked rows).
/// Actions waiting for a retry, or behind an earlier one, do not count.
fn being_run_elsewhere(actions: &[ActionRecord]) -> bool {
    let mut hooks_seen = std::collections::HashSet::new();
    actions
        .iter()
        .filter(|a| a.state == ActionState::Pending)
        // The oldest pending action of each hook is the one that can run.
        .filter(|a| hooks_seen.insert(a.hook_index))
        .any(|a| a.in_progress || a.attempts == 0)
}

/// The staging of hook `index` of `job`.
pub fn staging_of(job: &JobRecord, index: u32, hook: &NewHook) -> Result<Staging, String> {
    let key = StagingKey::new(job.id.as_str(), index)
        .ok_or_else(|| format!("job id {} is not 32 hex digits", job.id))?;
    let definition =
        TableDefinition::from_properties(&hook.table_properties).map_err(|e| e.to_string())?;
    Ok(Staging {
        key,
        database: hook.database.clone(),
        table: hook.table.clone(),
        definition,
    })
}

/// Try again later: 0.5 s, 1 s, 2 s, ... up to 30 s between attempts.
fn retry(action: &ActionRecord, error: String) -> ActionResult {
    let exponent = action.attempts.saturating_sub(1).min(10);
    let backoff = (Duration::from_millis(500) * 2u32.pow(exponent)).min(MAX_BACKOFF);
    let retry_at =
        Utc::now() + chrono::Duration::from_std(backoff).unwrap_or(chrono::Duration::seconds(30));
    ActionResult::Retry { error, retry_at }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::JobStatus;

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
