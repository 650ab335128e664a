//! A status report. One that plans no action (a streaming job restarting,
//! a batch job starting to run) is written and read back in one statement
//! where the store can (with other jobs' reports made meanwhile); any
//! other, or one the store cannot do so, moves in one transaction with the
//! actions it implies (and claims the due ones), the actions run, and the
//! job answers as it then stands, read once.
//!
//! What mode a job has and whether it is watched never change, so this
//! process remembers them for the jobs it has seen: a report that must
//! plan an action goes straight to the transaction, without trying the
//! one statement first. The statement checks the job's shape itself; a
//! hint that is missing or wrong costs one round trip, never a wrong move.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use super::{ServiceError, Services};
use crate::domain::hook::JobRecord;
use crate::domain::job::{JobId, JobMode, JobStatus, StatusReport, Transition};
use crate::domain::ledger::{Preparation, Shape, moves_without_actions};
use crate::fault::{self, Point};
use crate::hooks::LEASE;

/// Most jobs whose shape is remembered; past it, the hints start afresh.
const MOST_HINTS: usize = 65_536;

/// The mode and preparation of jobs this process has seen.
#[derive(Default)]
pub(super) struct ShapeHints {
    jobs: Mutex<HashMap<JobId, (JobMode, Preparation)>>,
}

impl ShapeHints {
    pub(super) fn learn(&self, job: &JobRecord) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if jobs.len() >= MOST_HINTS {
            jobs.clear();
        }
        let shape = (job.mode, Preparation::of(job.engine.is_some()));
        jobs.insert(job.id.clone(), shape);
    }

    /// The shapes from which reporting `report` moves `job` without
    /// actions, narrowed to its own when it is known.
    fn moves_without_actions(&self, job: &JobId, report: &StatusReport) -> Vec<Shape> {
        let known = self
            .jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(job)
            .copied();
        let mut shapes = moves_without_actions(report.status);
        if let Some((mode, preparation)) = known {
            shapes.retain(|s| s.mode == mode && s.preparation == preparation);
        }
        shapes
    }
}

impl Services {
    pub async fn report_status(
        &self,
        job: &JobId,
        report: &StatusReport,
    ) -> Result<JobRecord, ServiceError> {
        if report.may_be_stale()
            && let Some(stale) = report.stale_run(self.job(job).await?.created_at)
        {
            return Err(ServiceError::StaleRun(stale));
        }
        let report = &self.as_kept(job, report).await?;
        let shapes = self.shapes.moves_without_actions(job, report);
        if let Some(moved) = self
            .store
            .move_without_actions(job, report, &shapes)
            .await?
        {
            self.reported(job, report, &moved.transition);
            self.fold_restarts(job, &moved.transition).await;
            self.shapes.learn(&moved.job);
            return Ok(self.hooks.settle(moved.job, Vec::new()).await?);
        }
        let moved = self.store.transition_job(job, report, Some(LEASE)).await?;
        self.reported(job, report, &moved.transition);
        self.fold_restarts(job, &moved.transition).await;
        let settled = self.hooks.settle_job(job, moved.claimed).await?;
        self.shapes.learn(&settled);
        Ok(settled)
    }

    /// `report` as it is stored: a failure, which comes from outside and
    /// may quote a connection string, with the job's secrets masked and
    /// cut to the limit. Only a report with a failure reads the job.
    async fn as_kept<'r>(
        &self,
        job: &JobId,
        report: &'r StatusReport,
    ) -> Result<Cow<'r, StatusReport>, ServiceError> {
        let Some(failure) = &report.failure else {
            return Ok(Cow::Borrowed(report));
        };
        let record = self.job(job).await?;
        Ok(Cow::Owned(StatusReport {
            failure: Some(record.outside_text(failure)),
            ..report.clone()
        }))
    }

    /// After a move through RESTARTING, the job's older restart cycles are
    /// folded out of its history. The move stands whatever this does.
    async fn fold_restarts(&self, job: &JobId, transition: &Transition) {
        if !transition
            .steps()
            .into_iter()
            .any(|(_, to)| to == JobStatus::Restarting)
        {
            return;
        }
        match self
            .store
            .fold_restarts(job, super::jobs::KEPT_RESTARTS)
            .await
        {
            Ok(0) => {}
            Ok(folded) => tracing::debug!(job = %job, folded, "restart cycles folded"),
            Err(error) => tracing::warn!(job = %job, %error, "restart cycles could not be folded"),
        }
    }

    fn reported(&self, job: &JobId, report: &StatusReport, transition: &Transition) {
        for (_, to) in transition.steps() {
            self.metrics
                .transitions
                .with_label_values(&[to.as_str()])
                .inc();
        }
        tracing::info!(job = %job, status = report.status.as_str(), transition = ?transition, "status reported");
        fault::reached(Point::StatusStored);
    }
}
