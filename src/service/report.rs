//! A status report: the move and the actions it implies are stored (and
//! the due ones claimed) in one transaction, the actions run, and the job
//! answers as it then stands, read from the store once.

use super::{ServiceError, Services};
use crate::domain::hook::JobRecord;
use crate::domain::job::{JobId, StatusReport};
use crate::fault::{self, Point};
use crate::hooks::LEASE;

impl Services {
    pub async fn report_status(
        &self,
        job: &JobId,
        report: &StatusReport,
    ) -> Result<JobRecord, ServiceError> {
        let moved = self.store.transition_job(job, report, Some(LEASE)).await?;
        for (_, to) in moved.transition.steps() {
            self.metrics
                .transitions
                .with_label_values(&[to.as_str()])
                .inc();
        }
        tracing::info!(job = %job, status = report.status.as_str(), transition = ?moved.transition, "status reported");
        fault::reached(Point::StatusStored);
        Ok(self.hooks.settle_job(job, moved.claimed).await?)
    }
}
