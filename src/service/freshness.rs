//! Telling whether a job at rest read earlier is still as it was, at the
//! least cost the store allows.
//!
//! A job at rest (see [`JobRecord::is_at_rest`]) changes only when its
//! engine id is set or retention deletes it. Each such change made by this
//! process moves a mark, before and after the write, and a view kept under
//! an older mark is read again. When this process is the only one that can
//! open the store (SQLite), that is all there is to check. Otherwise another
//! replica may have made the change, and the job's `updated_at` is read:
//! checks that arrive while one is in flight wait for the next, which reads
//! all of their jobs in one statement, so that a burst of reads costs a few
//! round trips to the store rather than one each. A check always starts
//! after the request it answers arrived, so no replica's change that was
//! answered before the request is missed.
//!
//! [`JobRecord::is_at_rest`]: crate::domain::job_record::JobRecord::is_at_rest

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tracing::Instrument;

use super::{ServiceError, Services};
use crate::domain::job::JobId;
use crate::store::Store;

/// Most jobs one check reads.
const MOST_PER_CHECK: usize = 256;

/// What a check read: each job that exists with its `updated_at`, or the
/// store's error (each waiting request then reads its job on its own).
type Found = Result<HashMap<String, DateTime<Utc>>, String>;

#[derive(Default)]
pub(super) struct Freshness {
    /// Moved by every change this process makes to a job at rest.
    mark: AtomicU64,
    /// The check that has not started yet, if any.
    gathering: Arc<Mutex<Option<Gathering>>>,
    /// Held while a check reads the store: one at a time.
    reading: Arc<tokio::sync::Mutex<()>>,
}

/// The next check, gathering the jobs it will read.
struct Gathering {
    ids: Vec<String>,
    found: watch::Receiver<Option<Arc<Found>>>,
}

impl Freshness {
    pub(super) fn mark(&self) -> u64 {
        self.mark.load(Ordering::SeqCst)
    }

    pub(super) fn moved(&self) {
        self.mark.fetch_add(1, Ordering::SeqCst);
    }

    /// When `id` last changed (`None`: it does not exist), read by the next
    /// check.
    pub(super) async fn updated_at(
        &self,
        store: &Arc<dyn Store>,
        id: &JobId,
    ) -> Result<Option<DateTime<Utc>>, ServiceError> {
        let read = match self.join_next_check(store, id) {
            Some(mut found) => match found.wait_for(Option::is_some).await {
                Ok(read) => read.clone(),
                Err(_) => None,
            },
            None => None,
        };
        match read.as_deref() {
            Some(Ok(jobs)) => Ok(jobs.get(id.as_str()).copied()),
            Some(Err(error)) => {
                tracing::debug!(%error, "a gathered check failed; reading the job alone");
                self.read_alone(store, id).await
            }
            None => self.read_alone(store, id).await,
        }
    }

    async fn read_alone(
        &self,
        store: &Arc<dyn Store>,
        id: &JobId,
    ) -> Result<Option<DateTime<Utc>>, ServiceError> {
        let read = store.jobs_updated_at(&[id.as_str()]).await?;
        Ok(read.first().map(|(_, at)| *at))
    }

    /// Adds `id` to the check that has not started yet, or gathers a new
    /// one, read as soon as no other check is in flight; `None` when the
    /// next check is full.
    fn join_next_check(
        &self,
        store: &Arc<dyn Store>,
        id: &JobId,
    ) -> Option<watch::Receiver<Option<Arc<Found>>>> {
        let mut gathering = self.gathering.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(next) = gathering.as_mut() {
            if next.ids.len() >= MOST_PER_CHECK {
                return None;
            }
            next.ids.push(id.to_string());
            return Some(next.found.clone());
        }
        let (publish, found) = watch::channel(None);
        *gathering = Some(Gathering {
            ids: vec![id.to_string()],
            found: found.clone(),
        });
        drop(gathering);
        let (store, gathering, reading) =
            (store.clone(), self.gathering.clone(), self.reading.clone());
        // Only this task empties `gathering`, and a new check is gathered
        // only once it is empty: what it takes is its own.
        let check = async move {
            let _turn = reading.lock().await;
            let ids = gathering
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .map(|g| g.ids)
                .unwrap_or_default();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let read = store
                .jobs_updated_at(&ids)
                .await
                .map(|rows| rows.into_iter().collect())
                .map_err(|e| e.to_string());
            let _ = publish.send(Some(Arc::new(read)));
        };
        // Logged within the request that gathered it.
        tokio::spawn(check.instrument(tracing::Span::current()));
        Some(found)
    }
}

impl Services {
    /// The mark to keep with a job at rest read from now on: see
    /// [`Services::still_as_read`].
    pub fn at_rest_mark(&self) -> u64 {
        self.freshness.mark()
    }

    /// Whether a job at rest, read under `mark` when it had changed last at
    /// `updated_at`, is still as read; [`ServiceError::JobNotFound`] when
    /// it was deleted.
    pub async fn still_as_read(
        &self,
        id: &JobId,
        mark: u64,
        updated_at: DateTime<Utc>,
    ) -> Result<bool, ServiceError> {
        if mark != self.freshness.mark() {
            return Ok(false);
        }
        if self.store.sole_process() {
            return Ok(true);
        }
        match self.freshness.updated_at(&self.store, id).await? {
            Some(now) => Ok(now == updated_at),
            None => Err(ServiceError::JobNotFound(id.to_string())),
        }
    }

    /// Runs `change` to jobs at rest with the mark moved before and after,
    /// so that no view read before it ends is taken for current.
    pub(super) async fn changing_jobs_at_rest<T>(
        &self,
        change: impl std::future::Future<Output = T>,
    ) -> T {
        self.freshness.moved();
        let changed = change.await;
        self.freshness.moved();
        changed
    }
}
