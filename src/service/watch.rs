//! Watching a Flink cluster: one poll of one engine. ctasd asks the
//! cluster for every job it knows (one request, however many jobs are
//! watched or listed), compares it with the watched jobs it keeps in
//! memory between polls, and for a job whose state moved, the times it reached each
//! status; it applies them in that order through the same path as
//! `PUT /v1/jobs/{job}/status`, each with Flink's time, so an observation
//! older than one already applied (a second replica's, a late answer)
//! changes nothing. A job the cluster does not know is settled by the
//! engine's rule: its HistoryServer, if one is configured, else FAILED
//! once the grace period has passed, so that no staging stays forever.

use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;

use chrono::{DateTime, Utc};

use super::engine_watch::{EngineWatch, RequestBudget};
use super::matching::{Due, Examinee, Matching, moved};
use super::mirror::Mirror;
use super::{ServiceError, Services};
use crate::domain::EngineName;
use crate::domain::engine::{
    EngineObservation, EngineRecord, MAX_FAILURE_LEN, Reachability, statuses_since, truncate,
};
use crate::domain::job::{JobId, JobStatus, StatusReport};
use crate::domain::job_record::JobWatch;
use crate::engine::{FlinkClient, FlinkError, FlinkJob};
use crate::store::WatchedJob;

/// How often a reachable engine's `checked_at` is written, at most.
const CHECKED_AT_EVERY: Duration = Duration::from_secs(5);
/// Watched jobs examined at once within a poll: Flink's answers overlap,
/// and the store's writes take their turns as they must.
const EXAMINED_AT_ONCE: usize = 8;
/// How long a failed job waits for Flink to show why, at most.
const CAUSE_WAIT: Duration = Duration::from_secs(15);

/// What examining one watched job came to.
enum Examined {
    /// It finished, or is gone: watched no more.
    Done(JobId),
    /// Nothing about it to write or to keep, but when it was listed (a job
    /// waiting for the request budget).
    AsKept { job: JobId, listed: bool },
    Watched {
        job: Box<WatchedJob>,
        watch: JobWatch,
        /// Whether `watch` differs from what is stored.
        changed: bool,
        listed: bool,
    },
}

/// How one poll went, for when to poll again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Polled {
    /// The cluster answered; poll again after `interval`.
    Reachable { interval: Duration },
    /// No answer; back off.
    Unreachable { interval: Duration },
    /// Another replica polls this engine now.
    HeldElsewhere { interval: Duration },
    /// The engine was dropped.
    Gone,
}

impl Services {
    /// The names of every registered engine.
    pub async fn engine_names(&self) -> Result<Vec<EngineName>, ServiceError> {
        let mut names = Vec::new();
        let mut after = None;
        loop {
            let page = self.store.list_engines(after.as_ref(), 500).await?;
            let full = page.len() == 500;
            names.extend(page.into_iter().map(|e| e.descriptor.name));
            if !full {
                return Ok(names);
            }
            after = names.last().cloned();
        }
    }

    /// One poll of engine `name` by the replica `poller`, with what this
    /// replica kept of the engine since its previous poll.
    pub async fn poll_engine(
        &self,
        name: &EngineName,
        poller: &str,
        kept: &mut EngineWatch,
    ) -> Result<Polled, ServiceError> {
        let Some(engine) = self.store.get_engine(name).await? else {
            return Ok(Polled::Gone);
        };
        let settings = &engine.descriptor.settings;
        let interval = settings.poll_interval;
        let lease = (interval * 3).max(Duration::from_secs(5));
        if !kept.holds_lease(engine.created_at) {
            let asked_at = tokio::time::Instant::now();
            if !self.store.lease_engine(name, poller, lease).await? {
                kept.held_elsewhere();
                return Ok(Polled::HeldElsewhere { interval });
            }
            kept.leased(engine.created_at, asked_at + lease / 3);
        }
        let EngineWatch {
            budget,
            mirror: slot,
            ..
        } = kept;
        budget.take(settings.max_requests_per_second);
        let flink = self.flink(&settings.url);
        let mirror = match self.mirror(name, slot).await {
            Ok(mirror) => mirror,
            Err(error) => {
                kept.mirror = None;
                return Err(error);
            }
        };
        let (due, examined_ended) = self.read_listing(&engine, &flink, mirror, budget).await;
        let now = Utc::now();
        let mut writes = Vec::new();
        let mut examined = take_in(examined_ended, mirror, now, &mut writes);
        let (noted, polled) = match due {
            Ok(mut due) => {
                // Those Flink ended first, should any be left (ids are
                // unique: an unstable sort, in place, orders them all).
                due.sort_unstable_by(|a, b| (!a.ended, &a.id).cmp(&(!b.ended, &b.id)));
                // Each copied out of the mirror only as its turn comes.
                let examinees = due.into_iter().filter_map(|due| mirror.examinee(due));
                let outcomes = self
                    .examine(
                        &engine,
                        &flink,
                        futures_util::stream::iter(examinees),
                        budget,
                    )
                    .await;
                examined = examined.and(take_in(outcomes, mirror, now, &mut writes));
                let noted = self.note_reachable(&engine, &flink).await;
                (noted, Polled::Reachable { interval })
            }
            Err(error) => {
                let noted = self.note_unreachable(&engine, &error).await;
                (noted, Polled::Unreachable { interval })
            }
        };
        let written = self.store.record_watches(&writes).await;
        if examined.is_err() || written.is_err() {
            // What the mirror holds may not be what the store has.
            kept.mirror = None;
        }
        examined?;
        written?;
        noted?;
        Ok(polled)
    }

    /// Reads the engine's listing into the mirror: the jobs due once it is
    /// read whole. A job Flink lists as ended is examined as soon as its
    /// entry arrives, while the rest of the listing streams in, so that
    /// however long a cluster's listing takes, it does not hold up the
    /// publication of a table; what examining those came to comes along.
    async fn read_listing(
        &self,
        engine: &EngineRecord,
        flink: &FlinkClient,
        mirror: &mut Mirror,
        budget: &RequestBudget,
    ) -> (
        Result<Vec<Due>, FlinkError>,
        Vec<Result<Examined, ServiceError>>,
    ) {
        let (ended, ended_listed) = mpsc::unbounded_channel();
        let mut matching = Matching::new(mirror, ended);
        let reading = async {
            let read = flink.jobs(&mut matching).await;
            matching.listing_read();
            read
        };
        let examining_ended = self.examine(engine, flink, listed_as_ended(ended_listed), budget);
        let (read, examined_ended) = tokio::join!(reading, examining_ended);
        (read.map(|()| matching.due()), examined_ended)
    }

    /// Examines the watched jobs due (`examinees`), side by side, for at most
    /// a poll interval (the rest wait for the next poll, which is not held
    /// up; counted from here, so that however long the listing took to
    /// read, every poll gets on with the jobs). Every examination started
    /// is let finish, whatever another's error.
    async fn examine(
        &self,
        engine: &EngineRecord,
        flink: &FlinkClient,
        examinees: impl Stream<Item = Examinee>,
        budget: &RequestBudget,
    ) -> Vec<Result<Examined, ServiceError>> {
        let deadline = Instant::now() + engine.descriptor.settings.poll_interval;
        examinees
            .take_while(|_| std::future::ready(Instant::now() < deadline))
            .map(|examinee| self.examine_one(engine, flink, examinee, budget))
            .buffer_unordered(EXAMINED_AT_ONCE)
            .collect()
            .await
    }

    /// Examines one watched job that is due.
    async fn examine_one(
        &self,
        engine: &EngineRecord,
        flink: &FlinkClient,
        examinee: Examinee,
        budget: &RequestBudget,
    ) -> Result<Examined, ServiceError> {
        let Examinee {
            job,
            listed_at,
            seen,
        } = examinee;
        let seen = seen.as_ref();
        let per_second = engine.descriptor.settings.max_requests_per_second;
        let mut budgeted = false;
        let job = match seen {
            // The detail read's budget first, so that a job left waiting for
            // it costs nothing more; then acted on as the store has it now.
            Some(seen) if job.engine_job_id.is_some() && moved(&job, seen.listed()) => {
                budgeted = budget.take(per_second);
                match budgeted {
                    true => match self.store.watched_job(&job.id).await? {
                        Some(fresh) if !fresh.status.is_globally_terminal() => fresh,
                        _ => return Ok(Examined::Done(job.id)),
                    },
                    false => job,
                }
            }
            _ => job,
        };
        let before = job.watch.clone().unwrap_or_default();
        let watch = match (job.engine_job_id.as_deref(), seen) {
            (None, _) => JobWatch {
                note: Some("no engine job id: attach Flink's JobID to watch the job".into()),
                ..before.clone()
            },
            (Some(_), Some(seen)) => {
                self.follow(engine, flink, &job, seen, budgeted, budget)
                    .await?
            }
            (Some(flink_id), None) => {
                let watch = self
                    .conclude_missing(engine, &job, flink_id, budget)
                    .await?;
                JobWatch {
                    last_seen_at: listed_at.max(before.last_seen_at),
                    ..watch
                }
            }
        };
        // A note quotes the engine; it is bounded like a failure.
        let watch = JobWatch {
            note: watch.note.map(|note| truncate(&note, MAX_FAILURE_LEN)),
            ..watch
        };
        let changed = worth_writing(&before, &watch);
        if !changed && !budgeted {
            // Not read again from the store: just as the mirror keeps it.
            return Ok(Examined::AsKept {
                job: job.id,
                listed: seen.is_some(),
            });
        }
        Ok(Examined::Watched {
            changed,
            listed: seen.is_some(),
            job: Box::new(job),
            watch,
        })
    }

    /// A job the cluster knows: when its state moved, the statuses it
    /// passed through are applied in order, once the budget allowed
    /// reading its details (`budgeted`).
    async fn follow(
        &self,
        engine: &EngineRecord,
        flink: &FlinkClient,
        job: &WatchedJob,
        seen: &FlinkJob,
        budgeted: bool,
        budget: &RequestBudget,
    ) -> Result<JobWatch, ServiceError> {
        let now = Utc::now();
        let before = job.watch.clone().unwrap_or_default();
        let mut watch = JobWatch {
            engine_status: Some(seen.state),
            first_seen_at: before.first_seen_at.or(Some(now)),
            last_seen_at: Some(now),
            missing_since: None,
            note: None,
            examined_until: before.examined_until,
        };
        if !moved(job, seen.listed()) {
            return Ok(watch);
        }
        if !budgeted {
            watch.note = Some("waiting for the engine's request budget".into());
            return Ok(watch);
        }
        let per_second = engine.descriptor.settings.max_requests_per_second;
        let details = match flink.job(&seen.id).await {
            Ok(details) => details,
            Err(error) => {
                watch.note = Some(error.to_string());
                return Ok(watch);
            }
        };
        let statuses = statuses_since(
            &details.timestamps,
            seen.state,
            seen.last_modification,
            job.engine_applied_until,
        );
        let failed_at = statuses.iter().find(|(s, _)| failed(*s)).map(|(_, at)| *at);
        let failure = match failed_at {
            Some(at) => match self.cause(flink, &seen.id, budget, per_second).await {
                Some(cause) => Some(cause),
                // Flink serves the history from a cache a few seconds old.
                None if now.timestamp_millis() < at + CAUSE_WAIT.as_millis() as i64 => {
                    watch.note = Some("waiting for Flink's failure cause".into());
                    return Ok(watch);
                }
                None => None,
            },
            None => None,
        };
        watch.note = self.apply(job, &statuses, failure).await?;
        if watch.note.is_none() {
            watch.examined_until = Some(seen.last_modification);
        }
        Ok(watch)
    }

    /// The root cause of the job's failure, as Flink words it.
    async fn cause(
        &self,
        flink: &FlinkClient,
        flink_id: &str,
        budget: &RequestBudget,
        per_second: u32,
    ) -> Option<String> {
        if !budget.take(per_second) {
            return None;
        }
        match flink.failure(flink_id).await {
            Ok(cause) => cause,
            Err(error) => {
                tracing::debug!(%error, flink_job = flink_id, "no failure cause yet");
                None
            }
        }
    }

    /// A job the cluster does not know: its HistoryServer may, else it is
    /// settled as FAILED once it has been missing for the grace period.
    async fn conclude_missing(
        &self,
        engine: &EngineRecord,
        job: &WatchedJob,
        flink_id: &str,
        budget: &RequestBudget,
    ) -> Result<JobWatch, ServiceError> {
        let now = Utc::now();
        let before = job.watch.clone().unwrap_or_default();
        let settings = &engine.descriptor.settings;
        let mut watch = JobWatch {
            missing_since: before.missing_since.or(Some(now)),
            ..before.clone()
        };
        if let Some(history) = &settings.history_url
            && budget.take(settings.max_requests_per_second)
        {
            let archive = self.flink(history);
            match archive.job(flink_id).await {
                Ok(details) => {
                    let last = details.timestamps.values().copied().max().unwrap_or(0);
                    let statuses = statuses_since(
                        &details.timestamps,
                        details.state,
                        last,
                        job.engine_applied_until,
                    );
                    let failure = if failed(details.state) {
                        archive.failure(flink_id).await.ok().flatten()
                    } else {
                        None
                    };
                    watch.engine_status = Some(details.state);
                    watch.note = self.apply(job, &statuses, failure).await?;
                    return Ok(watch);
                }
                Err(FlinkError::JobNotFound(_)) => {}
                Err(error) => {
                    watch.note = Some(format!("history server: {error}"));
                    return Ok(watch);
                }
            }
        }
        let missing_since = watch.missing_since.unwrap_or(now);
        let grace =
            chrono::Duration::from_std(settings.missing_job_grace).unwrap_or(chrono::Duration::MAX);
        let settle_at = missing_since + grace;
        let why = match before.last_seen_at {
            None => format!(
                "Flink has not run job {flink_id} (engine '{}') within {} s of ctasd watching for it",
                engine.descriptor.name,
                settings.missing_job_grace.as_secs()
            ),
            Some(last) => format!(
                "Flink no longer knows job {flink_id} (engine '{}', last seen {}): it forgets \
                 finished jobs after jobstore.expiration-time, and a cluster restarted without \
                 high availability forgets every job; its final status is unknown, so nothing \
                 is published",
                engine.descriptor.name,
                last.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        };
        if now < settle_at {
            watch.note = Some(format!(
                "{why}; settled as FAILED at {} unless it appears",
                settle_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ));
            return Ok(watch);
        }
        let report = StatusReport {
            failure: Some(why.clone()),
            ..StatusReport::new(JobStatus::Failed)
        };
        match self.report_status(&job.id, &report).await {
            Ok(_) => {
                tracing::warn!(job = %job.id, engine = %engine.descriptor.name, flink_job = flink_id, "job settled as FAILED: {why}");
                watch.note = Some(why);
            }
            Err(error) => watch.note = Some(error.to_string()),
        }
        Ok(watch)
    }

    /// Applies `statuses` to the job in order, each with the engine's time,
    /// the failure on the failing ones; a note when one was refused.
    async fn apply(
        &self,
        job: &WatchedJob,
        statuses: &[(JobStatus, i64)],
        failure: Option<String>,
    ) -> Result<Option<String>, ServiceError> {
        for (status, at) in statuses {
            let Some(at) = DateTime::<Utc>::from_timestamp_millis(*at) else {
                continue;
            };
            let report = StatusReport {
                status: *status,
                failure: failed(*status).then(|| failure.clone()).flatten(),
                engine_times: [(*status, at)].into(),
            };
            match self.report_status(&job.id, &report).await {
                Ok(_) => {}
                Err(ServiceError::Transition(refused)) => {
                    tracing::warn!(job = %job.id, %refused, "the engine's status was refused");
                    return Ok(Some(refused.to_string()));
                }
                Err(ServiceError::StaleRun(stale)) => {
                    tracing::warn!(job = %job.id, %stale, "an earlier run's status was ignored");
                    return Ok(Some(stale.to_string()));
                }
                Err(error) => return Err(error),
            }
        }
        Ok(None)
    }

    async fn note_unreachable(
        &self,
        engine: &EngineRecord,
        error: &FlinkError,
    ) -> Result<(), ServiceError> {
        let now = Utc::now();
        let was = &engine.observation;
        if was.reachability != Reachability::Unreachable {
            tracing::warn!(engine = %engine.descriptor.name, %error, "engine unreachable");
        }
        let seen = EngineObservation {
            reachability: Reachability::Unreachable,
            since: match was.reachability {
                Reachability::Unreachable => was.since,
                _ => Some(now),
            },
            checked_at: Some(now),
            last_error: Some(truncate(&error.to_string(), 1024)),
            version: was.version.clone(),
        };
        Ok(self
            .store
            .record_engine_seen(&engine.descriptor.name, &seen)
            .await?)
    }

    async fn note_reachable(
        &self,
        engine: &EngineRecord,
        flink: &FlinkClient,
    ) -> Result<(), ServiceError> {
        let now = Utc::now();
        let was = &engine.observation;
        let fresh = was.checked_at.is_some_and(|at| {
            now.signed_duration_since(at).to_std().unwrap_or_default() < CHECKED_AT_EVERY
        });
        if was.reachability == Reachability::Reachable && fresh {
            return Ok(());
        }
        let back = was.reachability != Reachability::Reachable;
        if back {
            tracing::info!(engine = %engine.descriptor.name, "engine reachable");
        }
        let seen = EngineObservation {
            reachability: Reachability::Reachable,
            since: if back { Some(now) } else { was.since },
            checked_at: Some(now),
            last_error: None,
            version: match back {
                true => flink.version().await.ok().or(was.version.clone()),
                false => was.version.clone(),
            },
        };
        Ok(self
            .store
            .record_engine_seen(&engine.descriptor.name, &seen)
            .await?)
    }
}

/// The jobs sent as listed ended, until the listing is read.
fn listed_as_ended(mut ended: mpsc::UnboundedReceiver<Examinee>) -> impl Stream<Item = Examinee> {
    futures_util::stream::poll_fn(move |cx| ended.poll_recv(cx))
}

/// Takes what examining jobs came to into the mirror (listed ones as listed
/// at `now`), and what is to be written into `writes`; the first error.
fn take_in(
    outcomes: Vec<Result<Examined, ServiceError>>,
    mirror: &mut Mirror,
    now: DateTime<Utc>,
    writes: &mut Vec<(JobId, JobWatch)>,
) -> Result<(), ServiceError> {
    let mut failed = None;
    for outcome in outcomes {
        match outcome {
            Ok(Examined::Done(id)) => mirror.forget(&id),
            Ok(Examined::AsKept { job, listed }) => {
                if listed {
                    mirror.note_listed(&job, now);
                }
            }
            Ok(Examined::Watched {
                job,
                watch,
                changed,
                listed,
            }) => {
                if changed {
                    writes.push((job.id.clone(), watch.clone()));
                }
                mirror.update(*job, changed.then_some(watch), listed.then_some(now));
            }
            Err(error) => {
                failed.get_or_insert(error);
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

fn failed(status: JobStatus) -> bool {
    matches!(status, JobStatus::Failing | JobStatus::Failed)
}

/// Whether what the watcher saw differs from what is stored: anything but
/// `last_seen_at`, which is written only along with something else (while
/// a job is listed, its engine's latest check says when it was seen).
fn worth_writing(before: &JobWatch, after: &JobWatch) -> bool {
    before.engine_status != after.engine_status
        || before.first_seen_at != after.first_seen_at
        || before.missing_since != after.missing_since
        || before.note != after.note
        || before.examined_until != after.examined_until
}
