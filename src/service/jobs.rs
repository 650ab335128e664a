//! Reading jobs, their histories and where they write; attaching an
//! engine's job id; operators settling stuck or failed actions; deleting
//! jobs that ended long ago.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::submit::{check_engine_job_id, check_watched_engine_job_id};
use super::{ServiceError, Services, WriteLocations};
use crate::domain::Staging;
use crate::domain::job::{JobId, JobMode};
use crate::domain::job_record::{JobCursor, JobFilter, JobRecord, StatusChange};
use crate::domain::ledger::{Deciding, Intervention};

/// A job's history: the statuses it reached and operators' decisions.
pub struct JobEvents {
    pub job: JobRecord,
    pub statuses: Vec<StatusChange>,
    pub interventions: Vec<Intervention>,
    /// Restart cycles folded out of `statuses` (see [`KEPT_RESTARTS`]).
    pub folded_restarts: u64,
}

/// Restart cycles a job's history keeps: a streaming job in a restart loop
/// never ends (so retention never reaches it), and each cycle would
/// otherwise add to its history for ever. Older cycles are folded into a
/// count.
pub const KEPT_RESTARTS: u32 = 20;

impl Services {
    pub async fn job(&self, id: &JobId) -> Result<JobRecord, ServiceError> {
        self.store
            .get_job(id)
            .await?
            .ok_or_else(|| ServiceError::JobNotFound(id.to_string()))
    }

    pub async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<&JobCursor>,
        limit: u32,
    ) -> Result<Vec<JobRecord>, ServiceError> {
        Ok(self.store.list_jobs(filter, after, limit).await?)
    }

    pub async fn job_events(&self, id: &JobId) -> Result<JobEvents, ServiceError> {
        let job = self.job(id).await?;
        Ok(JobEvents {
            statuses: self.store.status_history(id).await?,
            interventions: self.store.interventions(id).await?,
            folded_restarts: self.store.folded_restarts(id).await?,
            job,
        })
    }

    /// Refuses a job ctasd watches on an engine to an engine's token: its
    /// status comes from that engine alone (a token reporting FINISHED while
    /// Flink still runs the job would publish a partial staging), and its
    /// engine job id stays the one ctasd follows. An operator can still
    /// retry or give up its actions.
    pub async fn refuse_watched_to_engine_tokens(&self, id: &JobId) -> Result<(), ServiceError> {
        match self.job(id).await?.engine {
            Some(engine) => Err(ServiceError::JobWatched(format!(
                "job '{id}' is watched on engine '{engine}': its status comes from that engine \
                 alone, so an engine token may neither report it nor re-point it; an operator \
                 may retry or give up its actions"
            ))),
            None => Ok(()),
        }
    }

    pub async fn set_engine_job_id(
        &self,
        id: &JobId,
        engine_job_id: Option<&str>,
    ) -> Result<JobRecord, ServiceError> {
        if let Some(engine_job_id) = engine_job_id {
            check_engine_job_id(engine_job_id)?;
        }
        let watched = self.job(id).await?.engine.is_some();
        let engine_job_id = match engine_job_id {
            Some(given) if watched => Some(check_watched_engine_job_id(given)?),
            None if watched => {
                return Err(ServiceError::job_invalid(
                    "engine_job_id",
                    "a job watched on an engine keeps its engine job id; it cannot be cleared",
                ));
            }
            other => other.map(str::to_owned),
        };
        self.changing_jobs_at_rest(self.store.set_engine_job_id(id, engine_job_id.as_deref()))
            .await?;
        self.job(id).await
    }

    /// An operator's decision about an action; the actions it leads to run
    /// at once, and the job answers as it then stands.
    pub async fn decide_action(
        &self,
        id: &JobId,
        action: i64,
        deciding: &Deciding,
    ) -> Result<JobRecord, ServiceError> {
        if let Some(reason) = &deciding.reason
            && (reason.chars().count() > 1000 || reason.chars().any(char::is_control))
        {
            return Err(ServiceError::job_invalid(
                "reason",
                "a reason is at most 1000 characters, without control characters",
            ));
        }
        self.store.decide_action(id, action, deciding).await?;
        tracing::info!(job = %id, action, decision = deciding.decision.as_str(), by = ?deciding.by, "operator decided about an action");
        Ok(self.hooks.run_job_actions(id, Vec::new()).await?)
    }

    /// Where the engine writes each hook's rows (none for a skipped hook).
    pub fn write_locations(&self, job: &JobRecord) -> WriteLocations {
        let registry = self.catalogs.registry();
        job.hooks
            .iter()
            .enumerate()
            .map(|(index, hook)| {
                let staging = Staging::of(job, index as u32, hook).ok()?;
                if hook.skipped {
                    return None;
                }
                let staged = job.mode == JobMode::Batch;
                registry.write_location(&hook.catalog.options, &staging, staged)
            })
            .collect()
    }

    /// Deletes the jobs that ended more than `retention` ago, with nothing
    /// left to do, in batches of [`PURGE_BATCH`] (each its own short
    /// statement, so status reports are not held up); how many.
    pub async fn purge_ended_jobs(&self, retention: Duration) -> Result<u64, ServiceError> {
        let ended_before = chrono::Duration::from_std(retention)
            .ok()
            .and_then(|age| Utc::now().checked_sub_signed(age))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        let mut purged = 0;
        loop {
            let batch = self
                .changing_jobs_at_rest(self.store.purge_ended_jobs(ended_before, PURGE_BATCH))
                .await?;
            purged += batch;
            if batch < u64::from(PURGE_BATCH) {
                return Ok(purged);
            }
            tokio::task::yield_now().await;
        }
    }
}

/// Jobs deleted by one statement of a purge.
pub const PURGE_BATCH: u32 = 1000;
