//! A listing matched with the mirror as it is read: each entry of a
//! watched job is looked up by Flink's JobID as it arrives. A job listed
//! just as the mirror has it is marked listed and costs nothing more; a job
//! Flink lists as ended is handed on at once, to be examined while the rest
//! of the listing streams in; the others are due once the listing is read,
//! with every job it did not list.

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::mirror::Mirror;
use crate::domain::job::JobId;
use crate::engine::{FlinkJob, ListedJob, ListingReader};
use crate::store::WatchedJob;

/// A watched job a poll has to examine: moved, missing or not yet seen.
/// It is known by its id until its turn comes (during a catch-up, most
/// wait for a later poll, and a copy of each would be made for nothing).
pub(super) struct Due {
    /// Whether Flink lists it ended: those are examined first.
    pub ended: bool,
    pub id: JobId,
    /// As Flink lists it, if it does.
    pub seen: Option<FlinkJob>,
}

/// A due job as the mirror keeps it, taken to be examined.
pub(super) struct Examinee {
    pub job: WatchedJob,
    pub listed_at: Option<DateTime<Utc>>,
    /// As Flink lists it, if it does.
    pub seen: Option<FlinkJob>,
}

/// A listing matched with the mirror as it is read: a job listed just as
/// the mirror has it is marked listed and costs nothing more; the others
/// are due, and so is every job the listing did not list.
pub(super) struct Matching<'m> {
    mirror: &'m mut Mirror,
    now: DateTime<Utc>,
    due: Vec<Due>,
    /// Where a job Flink lists as ended goes at once, to be examined while
    /// the rest of the listing is read; `None` once the listing is.
    ended: Option<mpsc::UnboundedSender<Examinee>>,
}

impl<'m> Matching<'m> {
    pub fn new(mirror: &'m mut Mirror, ended: mpsc::UnboundedSender<Examinee>) -> Self {
        mirror.begin_listing();
        Self {
            mirror,
            now: Utc::now(),
            due: Vec::new(),
            ended: Some(ended),
        }
    }

    /// Says the listing has been read: the examination of the jobs it
    /// listed as ended gets no more, and ends.
    pub fn listing_read(&mut self) {
        self.ended = None;
    }

    /// The jobs due, once the whole listing was read.
    pub fn due(self) -> Vec<Due> {
        let mut due = self.due;
        due.extend(self.mirror.unfound().map(|kept| Due {
            ended: false,
            id: kept.job.id.clone(),
            seen: None,
        }));
        due
    }
}

impl ListingReader for Matching<'_> {
    fn watches(&self, id: &str) -> bool {
        self.mirror.watches(id)
    }

    fn read(&mut self, seen: ListedJob<'_>) {
        let Some(kept) = self.mirror.found(seen.id) else {
            return;
        };
        if as_mirrored(&kept.job, seen) {
            kept.listed_at = Some(self.now);
            return;
        }
        let seen = FlinkJob::from(seen);
        let ended = seen.state.is_globally_terminal();
        match &self.ended {
            Some(sender) if ended => {
                let examinee = Examinee {
                    job: kept.job.clone(),
                    listed_at: kept.listed_at,
                    seen: Some(seen),
                };
                if let Err(unsent) = sender.send(examinee) {
                    let Examinee { job, seen, .. } = unsent.0;
                    self.due.push(Due {
                        ended,
                        id: job.id,
                        seen,
                    });
                }
            }
            _ => self.due.push(Due {
                ended,
                id: kept.job.id.clone(),
                seen: Some(seen),
            }),
        }
    }
}

/// Whether Flink's listing shows a change the job has not been examined
/// for: another state, or a later `last-modification`.
pub(super) fn moved(job: &WatchedJob, seen: ListedJob<'_>) -> bool {
    let examined_until = job.watch.as_ref().and_then(|w| w.examined_until);
    seen.state != job.status || seen.last_modification > examined_until.unwrap_or(0)
}

/// Whether a listed job is just as mirrored: not moved, and nothing about
/// it to write (seen before, not missing, no note to clear).
fn as_mirrored(job: &WatchedJob, seen: ListedJob<'_>) -> bool {
    let Some(watch) = &job.watch else {
        return false;
    };
    !moved(job, seen)
        && watch.engine_status == Some(seen.state)
        && watch.first_seen_at.is_some()
        && watch.missing_since.is_none()
        && watch.note.is_none()
}
