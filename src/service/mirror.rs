//! What a replica remembers between polls of one engine, so that a poll
//! costs what moved rather than what is watched: the engine's request
//! budget (shared by the jobs a poll examines side by side), and its watched jobs as the store last had them. A poll reads
//! from the store only the jobs that changed since the poll before (a
//! status report, a submission; through an index on the change time) and,
//! for a job Flink moved, that job afresh before acting on it. Every job is
//! read again now and then, and when this replica takes the engine over,
//! so that a change another writer made is never missed for long.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::{ServiceError, Services};
use crate::domain::EngineName;
use crate::domain::job::JobId;
use crate::domain::job_record::JobWatch;
use crate::store::WatchedJob;

/// How often every watched job is read again, whatever changed.
const READ_WHOLE_EVERY: Duration = Duration::from_secs(60);
/// How far a read of changes reaches back past the previous one: a change
/// committed just after that read, or by a replica whose clock is a little
/// behind, is still found.
const CHANGES_OVERLAP: chrono::Duration = chrono::Duration::seconds(10);

/// What the watcher keeps of one engine between its polls.
#[derive(Default)]
pub struct EngineWatch {
    pub(super) budget: RequestBudget,
    /// `None` until read, and again whenever another replica held the
    /// engine: what it did meanwhile is read whole.
    pub(super) mirror: Option<Mirror>,
}

/// Requests one engine may still be sent: a bucket of
/// `max_requests_per_second`, refilled continuously, shared by the jobs
/// one poll examines side by side.
#[derive(Default)]
pub(super) struct RequestBudget(Mutex<Bucket>);

struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

impl Default for Bucket {
    fn default() -> Self {
        Self {
            tokens: 1.0,
            refilled_at: Instant::now(),
        }
    }
}

impl RequestBudget {
    /// Takes one request's worth, if there is one.
    pub(super) fn take(&self, per_second: u32) -> bool {
        let mut bucket = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let rate = f64::from(per_second);
        let elapsed = now.duration_since(bucket.refilled_at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.refilled_at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The engine's watched jobs, as the store last had them.
pub(super) struct Mirror {
    pub jobs: HashMap<JobId, Mirrored>,
    /// The store time the next read of changes starts from.
    changes_since: DateTime<Utc>,
    read_whole_at: Instant,
}

/// One watched job, and when a poll last found it listed.
pub(super) struct Mirrored {
    pub job: WatchedJob,
    /// Kept in memory only: written when something else about the job is.
    pub listed_at: Option<DateTime<Utc>>,
}

impl Mirror {
    fn empty(read_at: DateTime<Utc>) -> Self {
        Self {
            jobs: HashMap::new(),
            changes_since: read_at,
            read_whole_at: Instant::now(),
        }
    }

    /// Keeps `job`, listed at `listed_at`, else when it was known to be.
    fn put(&mut self, job: WatchedJob, listed_at: Option<DateTime<Utc>>) {
        let listed_at = listed_at.or_else(|| self.jobs.get(&job.id).and_then(|m| m.listed_at));
        self.jobs
            .insert(job.id.clone(), Mirrored { job, listed_at });
    }

    /// Takes in jobs read from the store; a finished one is watched no more.
    fn merge(&mut self, jobs: Vec<WatchedJob>) {
        for job in jobs {
            match job.status.is_globally_terminal() {
                true => self.forget(&job.id),
                false => self.put(job, None),
            }
        }
    }

    /// Takes in a job as a poll examined it: its watch when written, when
    /// it was listed if it was.
    pub fn update(
        &mut self,
        mut job: WatchedJob,
        written: Option<JobWatch>,
        listed_at: Option<DateTime<Utc>>,
    ) {
        if let Some(watch) = written {
            job.watch = Some(watch);
        }
        self.put(job, listed_at);
    }

    /// Forgets a job the store no longer has, or that finished.
    pub fn forget(&mut self, job: &JobId) {
        self.jobs.remove(job);
    }
}

impl Services {
    /// The watched jobs of engine `name`, brought up to date with the store:
    /// read whole the first time and every [`READ_WHOLE_EVERY`], else only
    /// the jobs that changed since the previous read.
    pub(super) async fn mirror<'m>(
        &self,
        name: &EngineName,
        slot: &'m mut Option<Mirror>,
    ) -> Result<&'m mut Mirror, ServiceError> {
        let read_at = Utc::now();
        match slot {
            Some(mirror) if mirror.read_whole_at.elapsed() < READ_WHOLE_EVERY => {
                let since = mirror.changes_since - CHANGES_OVERLAP;
                let changed = self.store.watched_jobs_changed(name, since).await?;
                mirror.merge(changed);
                mirror.changes_since = read_at;
            }
            _ => {
                // When each job was last listed is known only here.
                let was = slot.take();
                let mut whole = Mirror::empty(read_at);
                for job in self.store.watched_jobs(name).await? {
                    let listed_at = was
                        .as_ref()
                        .and_then(|was| was.jobs.get(&job.id))
                        .and_then(|m| m.listed_at);
                    whole.put(job, listed_at);
                }
                *slot = Some(whole);
            }
        }
        Ok(slot.as_mut().expect("the mirror was just read"))
    }
}
