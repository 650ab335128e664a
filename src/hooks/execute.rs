//! One attempt at claimed actions: the hook's catalog (its snapshot), the
//! staging, and the catalog call each action makes; then the result, as the
//! ledger records it. A failure is either passing (the system could not be
//! reached, a lock, a time-out: retried with backoff) or final (the system
//! refused, the options are invalid, a conflict at commit: failed at once).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{ACTION_TIMEOUT, HookRunner, Recorded};
use crate::catalog::{
    BeginOutcome, Catalog, CatalogError, CreateOutcome, OpenOrInvalid, Publish, Staging,
};
use crate::domain::audit::AUDIT_TIMEOUT;
use crate::domain::job_record::{HookKind, JobRecord, NewHook};
use crate::domain::ledger::{
    ActionOutcome, ActionRecord, ActionResult, ActionState, HookAction, retry,
};
use crate::fault::{self, Point};
use crate::store::StoreError;

/// Why an attempt did not succeed.
#[derive(Clone)]
pub(super) enum Failure {
    /// Worth trying again later.
    Passing(String),
    /// Trying again would not help.
    Final(String),
}

impl From<CatalogError> for Failure {
    fn from(error: CatalogError) -> Self {
        match error {
            CatalogError::Unavailable(reason) => Failure::Passing(reason),
            other => Failure::Final(other.to_string()),
        }
    }
}

impl From<OpenOrInvalid> for Failure {
    fn from(error: OpenOrInvalid) -> Self {
        match error {
            OpenOrInvalid::Invalid(_) => Failure::Final(error.to_string()),
            OpenOrInvalid::Open(_) => Failure::Passing(error.to_string()),
        }
    }
}

/// `result` as the ledger keeps it: a target system's error may quote
/// any of the job's secrets, and is masked and cut like every text from
/// outside.
fn kept(job: &JobRecord, result: ActionResult) -> ActionResult {
    match result {
        ActionResult::Retry { error, retry_at } => ActionResult::Retry {
            error: job.outside_text(&error),
            retry_at,
        },
        ActionResult::Failed { error } => ActionResult::Failed {
            error: job.outside_text(&error),
        },
        ActionResult::Discarded { error } => ActionResult::Discarded {
            error: job.outside_text(&error),
        },
        ActionResult::Quarantined { error, until } => ActionResult::Quarantined {
            error: job.outside_text(&error),
            until,
        },
        ActionResult::Vetoed { error } => ActionResult::Vetoed {
            error: job.outside_text(&error),
        },
        done => done,
    }
}

/// What the ledger records for an outcome of `action`.
pub(super) fn recorded_result(
    action: &ActionRecord,
    outcome: Result<ActionOutcome, Failure>,
) -> ActionResult {
    match outcome {
        Ok(outcome) => ActionResult::Done { outcome },
        Err(Failure::Passing(error)) => retry(action, error),
        Err(Failure::Final(error)) => ActionResult::Failed { error },
    }
}

impl HookRunner {
    /// Runs claimed actions of `job` and records each result: the commits
    /// of the job on one catalog and database together (they publish in one
    /// transaction where the system allows), the others one by one.
    pub(super) async fn run_claimed(
        &self,
        job: &JobRecord,
        actions: Vec<ActionRecord>,
    ) -> Result<Vec<Recorded>, StoreError> {
        let mut batches: Vec<Vec<ActionRecord>> = Vec::new();
        for action in actions {
            let batch = (action.action == HookAction::Commit)
                .then(|| {
                    batches.iter().position(|batch| {
                        batch[0].action == HookAction::Commit
                            && same_place(job, batch[0].hook_index, action.hook_index)
                    })
                })
                .flatten();
            match batch {
                Some(index) => batches[index].push(action),
                None => batches.push(vec![action]),
            }
        }
        let mut recorded = Vec::new();
        for batch in batches {
            let limit = ACTION_TIMEOUT + AUDIT_TIMEOUT * audits_in(job, &batch);
            let results = match tokio::time::timeout(limit, self.attempt(job, &batch)).await {
                Ok(results) => results,
                Err(_) => batch
                    .iter()
                    .map(|a| {
                        let limit = limit.as_secs();
                        retry(a, format!("did not complete within {limit} s"))
                    })
                    .collect(),
            };
            for (action, result) in batch.iter().zip(results) {
                let result = kept(job, result);
                let at = self.record(job, action, &result).await?;
                recorded.push(Recorded {
                    id: action.id,
                    result,
                    at,
                });
            }
        }
        Ok(recorded)
    }

    /// Logs and records how an attempt ended.
    async fn record(
        &self,
        job: &JobRecord,
        action: &ActionRecord,
        result: &ActionResult,
    ) -> Result<DateTime<Utc>, StoreError> {
        if let ActionResult::Done { .. } = result {
            fault::reached(match action.action {
                HookAction::Create | HookAction::Begin => Point::StagingCreated,
                HookAction::Commit => Point::CommitApplied,
                HookAction::Abort => Point::AbortApplied,
            });
        }
        let (hook, kind) = (action.hook_index, action.action.as_str());
        let counted = match result {
            ActionResult::Done { outcome } => outcome.as_str(),
            ActionResult::Retry { .. } => "retry",
            ActionResult::Quarantined { .. } => "quarantined",
            ActionResult::Failed { .. }
            | ActionResult::Discarded { .. }
            | ActionResult::Vetoed { .. } => "failed",
        };
        self.metrics
            .actions
            .with_label_values(&[kind, counted])
            .inc();
        match result {
            ActionResult::Done { outcome } => {
                tracing::info!(job = %job.id, hook, action = kind, outcome = outcome.as_str(), "hook action done")
            }
            ActionResult::Retry { error, .. } => {
                tracing::warn!(job = %job.id, hook, action = kind, %error, "hook action will be retried")
            }
            ActionResult::Quarantined { error, .. } => {
                tracing::warn!(job = %job.id, hook, action = kind, %error, "commit held back by a failed audit")
            }
            ActionResult::Failed { error }
            | ActionResult::Discarded { error }
            | ActionResult::Vetoed { error } => {
                tracing::warn!(job = %job.id, hook, action = kind, %error, "hook action failed")
            }
        }
        self.store.record_action(action.id, result).await
    }

    /// One attempt at a batch (one action, or the commits that publish
    /// together): a result for each action.
    async fn attempt(&self, job: &JobRecord, batch: &[ActionRecord]) -> Vec<ActionResult> {
        let first = &batch[0];
        let every = |failure: &dyn Fn() -> Failure| -> Vec<ActionResult> {
            batch
                .iter()
                .map(|a| recorded_result(a, Err(failure())))
                .collect()
        };
        let Some(hook) = job.hooks.get(first.hook_index as usize) else {
            let error = format!("job has no hook {}", first.hook_index);
            return every(&|| Failure::Final(error.clone()));
        };
        let catalog = match self.catalog_for(hook).await {
            Ok(catalog) => catalog,
            Err(Failure::Passing(error)) => return every(&|| Failure::Passing(error.clone())),
            Err(Failure::Final(error)) => return every(&|| Failure::Final(error.clone())),
        };
        let mut stagings = Vec::with_capacity(batch.len());
        for action in batch {
            let hook = &job.hooks[action.hook_index as usize];
            match Staging::of(job, action.hook_index, hook) {
                Ok(staging) => stagings.push((staging, hook)),
                Err(error) => return every(&|| Failure::Final(error.clone())),
            }
        }
        if first.action == HookAction::Commit {
            if let Some(held_back) = self
                .audit_gate(job, catalog.as_ref(), batch, &stagings)
                .await
            {
                return held_back;
            }
            return self.commit(catalog.as_ref(), batch, &stagings).await;
        }
        let (staging, hook) = &stagings[0];
        let outcome = match first.action {
            HookAction::Create => {
                match replaces_at_create(catalog.as_ref(), job, first, hook, staging).await {
                    Ok(replace) => catalog
                        .create_table(staging, replace)
                        .await
                        .map(CreateOutcome::outcome),
                    Err(e) => Err(e),
                }
            }
            HookAction::Begin => catalog
                .begin(staging, first.id)
                .await
                .map(BeginOutcome::outcome),
            HookAction::Abort => catalog
                .abort(staging)
                .await
                .map(|()| ActionOutcome::Aborted),
            HookAction::Commit => unreachable!("commits run as a batch above"),
        };
        vec![recorded_result(first, outcome.map_err(Failure::from))]
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
                        Err(e) => {
                            return batch
                                .iter()
                                .map(|a| recorded_result(a, Err(Failure::from(e.clone()))))
                                .collect();
                        }
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
                    outcome: outcome.outcome(),
                },
                Err(
                    conflict @ (CatalogError::TableExists { .. }
                    | CatalogError::TableNotFound { .. }
                    | CatalogError::NotOwned { .. }),
                ) => match catalog.abort(staging).await {
                    Ok(()) => ActionResult::Discarded {
                        error: format!("conflict at commit: {conflict}; staging discarded"),
                    },
                    // The staging itself is not ctasd's: it is left alone.
                    Err(CatalogError::NotOwned { .. }) => ActionResult::Failed {
                        error: format!("conflict at commit: {conflict}; the staging was left"),
                    },
                    Err(e) => retry(action, e.to_string()),
                },
                Err(other) => recorded_result(action, Err(Failure::from(other))),
            };
            results.push(result);
        }
        results
    }

    /// The catalog a hook uses: its snapshot, through the registered
    /// catalog while that one still has the snapshot's options (found in
    /// memory when it is open here, else read from the store).
    async fn catalog_for(&self, hook: &NewHook) -> Result<Arc<dyn Catalog>, Failure> {
        if let Some(open) = self.catalogs.open_with(&hook.catalog).await {
            return Ok(open);
        }
        let registered = self
            .store
            .get_catalog(&hook.catalog.name)
            .await
            .map_err(|e| Failure::Passing(e.to_string()))?;
        Ok(self
            .catalogs
            .for_snapshot(registered.as_ref(), &hook.catalog)
            .await?)
    }
}

/// Whether a streaming `create` drops and creates its target anew: for a
/// replacing kind, once per job (a `CREATED` after a restart keeps the
/// table and its rows), and on a retry only when the table does not already
/// have the declared columns (the first attempt replaced it before a crash
/// could record so).
async fn replaces_at_create(
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

/// How many audits a batch of commits runs before it publishes.
fn audits_in(job: &JobRecord, batch: &[ActionRecord]) -> u32 {
    batch
        .iter()
        .filter(|a| a.action == HookAction::Commit)
        .filter_map(|a| job.hooks.get(a.hook_index as usize))
        .map(|hook| hook.audits.len() as u32)
        .sum()
}

/// Whether two hooks of `job` target the same catalog and database, so
/// their commits can publish together.
fn same_place(job: &JobRecord, a: u32, b: u32) -> bool {
    match (job.hooks.get(a as usize), job.hooks.get(b as usize)) {
        (Some(a), Some(b)) => a.catalog == b.catalog && a.database == b.database,
        _ => false,
    }
}
