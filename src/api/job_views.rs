//! Jobs at rest, kept rendered. A job that ended, whose every action is
//! done and that no engine watches changes only when its engine id is set
//! or retention deletes it; its JSON and `ETag` are kept here and answered
//! once the service says the job is still as read (`service::freshness`:
//! with no read of the store when this process is its only user, else one
//! read of `updated_at` gathered with the other reads in flight), instead
//! of three reads, a decryption and a serialization. A job not kept is
//! read as any other. At most [`MAX_BYTES`] are kept.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::etag::Rendered;
use crate::domain::job::JobId;
use crate::service::{ServiceError, Services};

/// The most rendered JSON kept, in bytes.
const MAX_BYTES: usize = 16 * 1024 * 1024;

#[derive(Default)]
pub struct JobViews {
    kept: Mutex<Views>,
}

#[derive(Default)]
struct Views {
    jobs: HashMap<JobId, Kept>,
    bytes: usize,
}

/// A job at rest as rendered, with what tells whether it still is.
#[derive(Clone)]
pub struct Kept {
    /// The service's mark when the job was read.
    pub mark: u64,
    pub updated_at: DateTime<Utc>,
    pub rendered: Rendered,
}

impl JobViews {
    /// The job as kept, if it still stands as it was read; a job deleted
    /// meanwhile is forgotten, and not found.
    pub async fn current(
        &self,
        services: &Services,
        id: &JobId,
    ) -> Result<Option<Rendered>, ServiceError> {
        let Some(kept) = self.get(id) else {
            return Ok(None);
        };
        match services.still_as_read(id, kept.mark, kept.updated_at).await {
            Ok(true) => Ok(Some(kept.rendered)),
            Ok(false) => Ok(None),
            Err(gone) => {
                self.forget(id);
                Err(gone)
            }
        }
    }

    fn get(&self, id: &JobId) -> Option<Kept> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.jobs.get(id).cloned()
    }

    /// Keeps a job at rest as rendered; when full, makes room by dropping
    /// what is kept (the next reads render again).
    pub fn keep(&self, id: JobId, job: Kept) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.bytes + job.rendered.size() > MAX_BYTES {
            kept.jobs.clear();
            kept.bytes = 0;
        }
        kept.bytes += job.rendered.size();
        if let Some(replaced) = kept.jobs.insert(id, job) {
            kept.bytes -= replaced.rendered.size();
        }
    }

    /// Forgets a job (it was deleted).
    fn forget(&self, id: &JobId) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(removed) = kept.jobs.remove(id) {
            kept.bytes -= removed.rendered.size();
        }
    }
}
