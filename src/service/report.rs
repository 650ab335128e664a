//! A status report. The plain path: the job moves in one transaction with
//! the actions the move implies (claiming the due ones), the actions run,
//! and the job answers as it then stands, read once.
//!
//! The fast path beside it, [`Services::report_quietly`]: a report that
//! plans no action (a streaming job restarting, a batch job starting to
//! run) is written and read back in one statement where the store can,
//! with other jobs' reports made meanwhile. What mode a job has and
//! whether it is watched never change, so this process remembers them for
//! the jobs it has seen, and a report that must plan an action skips the
//! fast path. The statement checks the job's shape itself, so a hint that
//! is missing or wrong costs one round trip, never a wrong move
//! (docs/fast-paths.md).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;

use super::{ServiceError, Services};
use crate::domain::job::{JobId, JobMode, JobStatus, StatusReport, Transition};
use crate::domain::job_record::JobRecord;
use crate::domain::ledger::{Preparation, Shape, moves_without_actions};
use crate::fault::{self, Point};
use crate::hooks::LEASE;

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
        if let Some(moved) = self.report_quietly(job, report).await? {
            return Ok(moved);
        }
        let moved = self.store.transition_job(job, report, Some(LEASE)).await?;
        self.moved(job, report, &moved.transition).await;
        let answered = self.hooks.run_job_actions(job, moved.claimed).await?;
        self.shapes.learn(&answered);
        Ok(answered)
    }

    /// The fast path: a report that plans no action, moved in one
    /// statement with others; `None` when it does not apply, and the plain
    /// path then moves the job.
    async fn report_quietly(
        &self,
        job: &JobId,
        report: &StatusReport,
    ) -> Result<Option<JobRecord>, ServiceError> {
        let shapes = self.shapes.moves_without_actions(job, report);
        let Some(moved) = self
            .store
            .move_without_actions(job, report, &shapes)
            .await?
        else {
            return Ok(None);
        };
        self.moved(job, report, &moved.transition).await;
        self.shapes.learn(&moved.job);
        Ok(Some(
            self.hooks
                .run_read_job_actions(moved.job, Vec::new())
                .await?,
        ))
    }

    /// What follows every stored move, whichever path made it.
    async fn moved(&self, job: &JobId, report: &StatusReport, transition: &Transition) {
        self.events_nudge.notify_one();
        self.reported(job, report, transition);
        self.fold_restarts(job, transition).await;
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
