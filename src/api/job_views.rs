//! Jobs at rest, kept rendered. A job that ended, whose every action is
//! done and that no engine watches changes only when its engine id is set
//! (which moves its `updated_at`) or when retention deletes it; its JSON
//! and `ETag` are kept here and answered after one indexed read of
//! `updated_at`, instead of three reads, a decryption and a serialization.
//! A job not kept is read as any other, with no extra read.
//! The check reads the store every time, so a replica never answers a
//! version that another replica replaced. At most [`MAX_BYTES`] are kept.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use super::etag::Rendered;
use crate::domain::job::JobId;

/// The most rendered JSON kept, in bytes.
const MAX_BYTES: usize = 16 * 1024 * 1024;

#[derive(Default)]
pub struct JobViews {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    jobs: HashMap<JobId, (DateTime<Utc>, Rendered)>,
    bytes: usize,
}

impl JobViews {
    /// The job as kept, with the `updated_at` it had when rendered.
    pub fn get(&self, id: &JobId) -> Option<(DateTime<Utc>, Rendered)> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.jobs.get(id).cloned()
    }

    /// Keeps a job at rest as rendered; when full, makes room by dropping
    /// what is kept (the next reads render again).
    pub fn keep(&self, id: JobId, updated_at: DateTime<Utc>, rendered: Rendered) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.bytes + rendered.size() > MAX_BYTES {
            kept.jobs.clear();
            kept.bytes = 0;
        }
        kept.bytes += rendered.size();
        if let Some((_, replaced)) = kept.jobs.insert(id, (updated_at, rendered)) {
            kept.bytes -= replaced.size();
        }
    }

    /// Forgets a job (it was deleted).
    pub fn forget(&self, id: &JobId) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, removed)) = kept.jobs.remove(id) {
            kept.bytes -= removed.size();
        }
    }
}
