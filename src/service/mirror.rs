//! An engine's watched jobs as the store last had them, kept by the
//! replica polling it, so that a poll costs what moved rather than what is
//! watched; found by ctasd's id and by Flink's. A poll reads from the
//! store only the jobs that changed since the poll before (a status
//! report, a submission; through an index on the change time) and, for a
//! job Flink moved, that job afresh before acting on it. Every job is read again every minute, a page a poll (no poll
//! waits for all of them), and whole when this replica takes the engine
//! over, so that a change another writer made is never missed for long.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::matching::{Due, Examinee};
use super::{ServiceError, Services};
use crate::domain::EngineName;
use crate::domain::job::JobId;
use crate::domain::job_record::JobWatch;
use crate::store::{WatchedChange, WatchedJob};

/// How often every watched job is read again, whatever changed.
const READ_WHOLE_EVERY: Duration = Duration::from_secs(60);
/// Watched jobs read from the store at once when they are read whole.
const WHOLE_READ_PAGE: usize = 2_000;
/// How far a read of changes reaches back past the previous one: a change
/// committed just after that read, or by a replica whose clock is a little
/// behind, is still found.
const CHANGES_OVERLAP: chrono::Duration = chrono::Duration::seconds(10);

/// The engine's watched jobs, as the store last had them.
pub(super) struct Mirror {
    jobs: HashMap<JobId, Mirrored>,
    /// Flink's JobID of each mirrored job that has one: what a listing's
    /// entry is matched with.
    by_flink: HashMap<Box<str>, JobId>,
    /// The store time the next read of changes starts from.
    changes_since: DateTime<Utc>,
    /// `None` until the first whole read.
    read_whole_at: Option<Instant>,
    /// While a whole read goes a page a poll: the id the next page starts
    /// after (`None` for the first).
    refreshing: Option<Option<JobId>>,
    /// Counts the listings matched, and the whole reads: a job marked with
    /// the current count was found by it.
    listings: u32,
    whole_reads: u32,
}

/// One watched job, and when a poll last found it listed.
pub(super) struct Mirrored {
    pub job: WatchedJob,
    /// Kept in memory only: written when something else about the job is.
    pub listed_at: Option<DateTime<Utc>>,
    found_in_listing: u32,
    found_in_whole_read: u32,
}

impl Mirror {
    /// Not read yet: the first read is whole.
    fn empty(read_at: DateTime<Utc>) -> Self {
        Self {
            jobs: HashMap::new(),
            by_flink: HashMap::new(),
            changes_since: read_at,
            read_whole_at: None,
            refreshing: None,
            listings: 0,
            whole_reads: 0,
        }
    }

    /// Keeps `job`, listed at `listed_at`, else when it was known to be. A
    /// job kept already is changed in place, and only in what differs: what
    /// is kept stays where it was allocated, rather than moving into memory
    /// freed by the poll's passing values, which would keep that memory
    /// from going back to the system.
    fn put(&mut self, job: WatchedJob, listed_at: Option<DateTime<Utc>>) {
        let found_in_whole_read = self.whole_reads;
        if let Some(kept) = self.jobs.get_mut(&job.id) {
            if kept.job.engine_job_id != job.engine_job_id {
                unindex(&mut self.by_flink, &kept.job);
                index(&mut self.by_flink, &job);
                kept.job.engine_job_id = job.engine_job_id;
            }
            kept.job.status = job.status;
            kept.job.engine_applied_until = job.engine_applied_until;
            kept.job.created_at = job.created_at;
            kept.job.updated_at = job.updated_at;
            match (&mut kept.job.watch, job.watch) {
                (Some(kept), Some(watch)) => update_watch(kept, watch),
                (kept, watch) => *kept = watch,
            }
            kept.listed_at = listed_at.or(kept.listed_at);
            kept.found_in_whole_read = found_in_whole_read;
            return;
        }
        index(&mut self.by_flink, &job);
        self.jobs.insert(
            job.id.clone(),
            Mirrored {
                job,
                listed_at,
                found_in_listing: 0,
                found_in_whole_read,
            },
        );
    }

    /// Takes in what changed in the store: a job that finished is watched
    /// no more; the jobs to read whole are those not kept as they are now
    /// (the overlap of reads of changes finds most kept as they are).
    fn take_in_changes(&mut self, changes: Vec<WatchedChange>) -> Vec<JobId> {
        let mut stale = Vec::new();
        for change in changes {
            if change.status.is_globally_terminal() {
                self.forget(&change.id);
            } else if self
                .jobs
                .get(&change.id)
                .is_none_or(|kept| kept.job.updated_at != change.updated_at)
            {
                stale.push(change.id);
            }
        }
        stale
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
        if let Some(gone) = self.jobs.remove(job) {
            unindex(&mut self.by_flink, &gone.job);
        }
    }

    /// Starts matching a new listing: every job is unfound in it so far.
    pub fn begin_listing(&mut self) {
        self.listings = self.listings.wrapping_add(1);
    }

    /// Whether a job is watched under Flink's JobID `flink_id`.
    pub fn watches(&self, flink_id: &str) -> bool {
        self.by_flink.contains_key(flink_id)
    }

    /// The job watched under `flink_id`, marked found by the listing being
    /// matched; `None` if none is, or it was found already.
    pub fn found(&mut self, flink_id: &str) -> Option<&mut Mirrored> {
        let job = self.by_flink.get(flink_id)?;
        let kept = self.jobs.get_mut(job)?;
        if kept.found_in_listing == self.listings {
            return None;
        }
        kept.found_in_listing = self.listings;
        Some(kept)
    }

    /// A due job as kept, taken to be examined; `None` if it is kept no
    /// more.
    pub fn examinee(&self, due: Due) -> Option<Examinee> {
        let kept = self.jobs.get(&due.id)?;
        Some(Examinee {
            job: kept.job.clone(),
            listed_at: kept.listed_at,
            seen: due.seen,
        })
    }

    /// Notes that a job kept as it is was listed at `at`.
    pub fn note_listed(&mut self, job: &JobId, at: DateTime<Utc>) {
        if let Some(kept) = self.jobs.get_mut(job) {
            kept.listed_at = Some(at);
        }
    }

    /// The jobs the listing being matched did not list.
    pub fn unfound(&self) -> impl Iterator<Item = &Mirrored> {
        let listing = self.listings;
        self.jobs
            .values()
            .filter(move |kept| kept.found_in_listing != listing)
    }

    /// Reads every watched job into the mirror, a page at a time, and
    /// forgets a job the read did not find: all at once the first time,
    /// else a page a poll, so that no poll waits for all of them.
    async fn read_whole(
        &mut self,
        services: &Services,
        name: &EngineName,
        whole: WholeRead,
    ) -> Result<(), ServiceError> {
        loop {
            let after = self.whole_read_goes_on();
            let page = services
                .store
                .watched_jobs(name, after.as_ref(), WHOLE_READ_PAGE)
                .await?;
            if self.take_in_page(page) || matches!(whole, WholeRead::APage) {
                return Ok(());
            }
        }
    }

    /// Where the next page of a whole read starts: after the one before,
    /// or at the start of a new read.
    fn whole_read_goes_on(&mut self) -> Option<JobId> {
        self.refreshing.take().unwrap_or_else(|| {
            self.whole_reads = self.whole_reads.wrapping_add(1);
            None
        })
    }

    /// Takes in a page of a whole read; whether it was the last, and then
    /// forgets the jobs the read did not find. A job put since the read
    /// began (read afresh, or changed) counts as found: it is in the store.
    fn take_in_page(&mut self, page: Vec<WatchedJob>) -> bool {
        let full = page.len() == WHOLE_READ_PAGE;
        let after = page.last().map(|job| job.id.clone());
        for job in page {
            self.put(job, None);
        }
        if full {
            self.refreshing = Some(after);
            return false;
        }
        let read = self.whole_reads;
        let unread: Vec<JobId> = self
            .jobs
            .values()
            .filter(|kept| kept.found_in_whole_read != read)
            .map(|kept| kept.job.id.clone())
            .collect();
        for job in &unread {
            self.forget(job);
        }
        self.read_whole_at = Some(Instant::now());
        true
    }
}

/// How much of a whole read one poll does.
#[derive(Debug, Clone, Copy)]
enum WholeRead {
    AtOnce,
    APage,
}

/// `kept` made `watch`, its note replaced only if it differs.
fn update_watch(kept: &mut JobWatch, watch: JobWatch) {
    let JobWatch {
        engine_status,
        first_seen_at,
        last_seen_at,
        missing_since,
        note,
        examined_until,
    } = watch;
    kept.engine_status = engine_status;
    kept.first_seen_at = first_seen_at;
    kept.last_seen_at = last_seen_at;
    kept.missing_since = missing_since;
    kept.examined_until = examined_until;
    if kept.note != note {
        kept.note = note;
    }
}

fn index(by_flink: &mut HashMap<Box<str>, JobId>, job: &WatchedJob) {
    if let Some(flink_id) = &job.engine_job_id {
        by_flink.insert(flink_id.as_str().into(), job.id.clone());
    }
}

fn unindex(by_flink: &mut HashMap<Box<str>, JobId>, job: &WatchedJob) {
    if let Some(flink_id) = job.engine_job_id.as_deref()
        && let Entry::Occupied(entry) = by_flink.entry(flink_id.into())
        && entry.get() == &job.id
    {
        entry.remove();
    }
}

impl Services {
    /// The watched jobs of engine `name`, brought up to date with the store:
    /// read whole the first time; then the jobs that changed since the
    /// previous read, and every [`READ_WHOLE_EVERY`] all of them again, a
    /// page a poll.
    pub(super) async fn mirror<'m>(
        &self,
        name: &EngineName,
        slot: &'m mut Option<Mirror>,
    ) -> Result<&'m mut Mirror, ServiceError> {
        let read_at = Utc::now();
        let mirror = slot.get_or_insert_with(|| Mirror::empty(read_at));
        let Some(read_whole_at) = mirror.read_whole_at else {
            mirror.read_whole(self, name, WholeRead::AtOnce).await?;
            mirror.changes_since = read_at;
            return Ok(mirror);
        };
        let since = mirror.changes_since - CHANGES_OVERLAP;
        let changes = self.store.watched_changes(name, since).await?;
        let stale = mirror.take_in_changes(changes);
        for ids in stale.chunks(WHOLE_READ_PAGE) {
            let ids: Vec<&str> = ids.iter().map(JobId::as_str).collect();
            mirror.merge(self.store.watched_jobs_among(&ids).await?);
        }
        if mirror.refreshing.is_some() || read_whole_at.elapsed() >= READ_WHOLE_EVERY {
            mirror.read_whole(self, name, WholeRead::APage).await?;
        }
        mirror.changes_since = read_at;
        Ok(mirror)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::job::JobStatus;

    fn job(id: &JobId, flink_id: Option<&str>) -> WatchedJob {
        WatchedJob {
            id: id.clone(),
            status: JobStatus::Running,
            engine_job_id: flink_id.map(str::to_owned),
            engine_applied_until: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
            watch: None,
        }
    }

    #[test]
    fn a_job_is_found_by_flinks_id_as_long_as_it_is_watched_under_it() {
        let (a, b) = (JobId::generate(), JobId::generate());
        let mut mirror = Mirror::empty(Utc::now());
        mirror.put(job(&a, Some("f1")), None);
        mirror.put(job(&b, None), None);
        assert!(mirror.watches("f1"));

        // Attached again, to another Flink job: only the new id finds it.
        mirror.put(job(&a, Some("f2")), None);
        mirror.put(job(&b, Some("f3")), None);
        assert!(!mirror.watches("f1"));
        assert!(mirror.watches("f2") && mirror.watches("f3"));

        mirror.forget(&a);
        assert!(!mirror.watches("f2"));
        assert!(mirror.watches("f3"));
        assert_eq!(mirror.jobs.len(), 1);
        assert_eq!(mirror.by_flink.len(), 1);
    }

    #[test]
    fn changes_ask_for_a_whole_read_only_of_jobs_not_kept_as_they_are_now() {
        let ids: Vec<JobId> = (0..4).map(|_| JobId::generate()).collect();
        let [same, moved, new, ended] = &ids[..] else {
            unreachable!()
        };
        let mut mirror = Mirror::empty(Utc::now());
        let kept = job(same, Some("f-same"));
        let stamp = kept.updated_at;
        mirror.put(kept, None);
        mirror.put(job(moved, Some("f-moved")), None);
        mirror.put(job(ended, Some("f-ended")), None);
        let change = |id: &JobId, status, updated_at| WatchedChange {
            id: id.clone(),
            status,
            updated_at,
        };
        let later = stamp + chrono::Duration::milliseconds(1);

        let stale = mirror.take_in_changes(vec![
            change(same, JobStatus::Running, stamp),
            change(moved, JobStatus::Running, later),
            change(new, JobStatus::Running, stamp),
            change(ended, JobStatus::Finished, later),
        ]);
        assert_eq!(stale, [moved.clone(), new.clone()]);
        assert!(
            !mirror.watches("f-ended"),
            "a finished job is watched no more"
        );
        assert!(mirror.watches("f-same") && mirror.watches("f-moved"));
    }

    #[test]
    fn a_whole_read_page_by_page_forgets_only_the_jobs_neither_read_nor_put_meanwhile() {
        let mut mirror = Mirror::empty(Utc::now());
        let first: Vec<WatchedJob> = (0..WHOLE_READ_PAGE)
            .map(|n| job(&JobId::generate(), Some(&format!("f{n}"))))
            .collect();
        let (last, gone, new) = (JobId::generate(), JobId::generate(), JobId::generate());
        for kept in first.iter().cloned() {
            mirror.put(kept, None);
        }
        mirror.put(job(&last, Some("f-last")), None);
        mirror.put(job(&gone, Some("f-gone")), None);

        assert_eq!(mirror.whole_read_goes_on(), None, "a read starts");
        assert!(
            !mirror.take_in_page(first.clone()),
            "a full page is not the last"
        );
        // Between two polls' pages: a job submitted (read as changed).
        mirror.put(job(&new, Some("f-new")), None);
        let after = first.last().map(|job| job.id.clone());
        assert_eq!(
            mirror.whole_read_goes_on(),
            after,
            "it goes on after its page"
        );
        assert!(mirror.take_in_page(vec![job(&last, Some("f-last"))]));

        assert!(!mirror.watches("f-gone"), "not in the store: forgotten");
        assert!(mirror.watches("f-new") && mirror.watches("f-last") && mirror.watches("f0"));
        assert_eq!(mirror.jobs.len(), WHOLE_READ_PAGE + 2);
        assert_eq!(
            mirror.whole_read_goes_on(),
            None,
            "the next read starts afresh"
        );
    }

    #[test]
    fn a_listing_finds_each_job_once_and_leaves_the_others_unfound() {
        let (a, b, c) = (JobId::generate(), JobId::generate(), JobId::generate());
        let mut mirror = Mirror::empty(Utc::now());
        mirror.put(job(&a, Some("fa")), None);
        mirror.put(job(&b, Some("fb")), None);
        mirror.put(job(&c, None), None);

        for _ in 0..2 {
            mirror.begin_listing();
            assert_eq!(
                mirror.found("fa").map(|m| m.job.id.clone()),
                Some(a.clone())
            );
            assert!(mirror.found("fa").is_none(), "listed twice, found once");
            assert!(mirror.found("unknown").is_none());
            let mut unfound: Vec<JobId> = mirror.unfound().map(|m| m.job.id.clone()).collect();
            unfound.sort();
            let mut expected = vec![b.clone(), c.clone()];
            expected.sort();
            assert_eq!(unfound, expected);
        }
    }

    #[test]
    fn a_job_put_again_takes_what_changed() {
        let a = JobId::generate();
        let mut mirror = Mirror::empty(Utc::now());
        mirror.put(job(&a, Some("fa")), None);
        let mut moved = job(&a, Some("fa"));
        moved.status = JobStatus::Failing;
        moved.engine_applied_until = Some(7);
        moved.watch = Some(JobWatch {
            note: Some("waiting for Flink's failure cause".into()),
            examined_until: Some(5),
            ..JobWatch::default()
        });
        mirror.put(moved.clone(), None);
        assert_eq!(mirror.jobs[&a].job, moved);

        let mut settled = moved.clone();
        settled.watch = Some(JobWatch {
            examined_until: Some(9),
            ..JobWatch::default()
        });
        mirror.put(settled.clone(), None);
        assert_eq!(mirror.jobs[&a].job, settled, "the note cleared");
    }

    #[test]
    fn when_a_job_was_listed_is_kept_when_the_store_says_nothing_of_it() {
        let a = JobId::generate();
        let mut mirror = Mirror::empty(Utc::now());
        let listed = Utc::now();
        mirror.put(job(&a, Some("fa")), Some(listed));
        mirror.merge(vec![job(&a, Some("fa"))]);
        assert_eq!(mirror.jobs[&a].listed_at, Some(listed));

        let mut finished = job(&a, Some("fa"));
        finished.status = JobStatus::Finished;
        mirror.merge(vec![finished]);
        assert!(mirror.jobs.is_empty() && mirror.by_flink.is_empty());
    }
}
