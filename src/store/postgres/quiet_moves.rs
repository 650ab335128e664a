//! Status reports that plan no action, moved many at a time: reports that
//! arrive while a batch is being written wait, then go together in one
//! statement and one commit (a group commit). Under load, most of what a
//! statement costs the server (the round trip, the plan, the commit) is
//! then shared. A report that arrives alone waits for no one.
//!
//! The statement checks each job as a single move would: its shape, its
//! engine time, and that its row is still the version the statement read,
//! so the hooks and actions it reads back go with the row as moved. It
//! never waits for a row another transaction holds: that job moves
//! nothing here, and the caller's transaction waits its turn. So one job
//! cannot hold up the others' reports, and batches of two replicas never
//! deadlock. A job is in at most one batch at a time, and its reports move
//! it in the order they came.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use chrono::{SecondsFormat, Utc};
use serde_json::json;
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::domain::job::{JobId, StatusReport, Transition};
use crate::domain::ledger::{Preparation, Shape};
use crate::store::jobs::{JOB_COLUMNS, JobAsJson, children_as_json};
use crate::store::rows::job_status;
use crate::store::sql::{Param, Query, Sql};
use crate::store::{Keyring, MovedJob, StoreError};

/// Most batch statements under way at once.
const MOST_RUNNERS: usize = 1;

/// Most reports in one statement.
const MOST_IN_BATCH: usize = 64;

/// Moves jobs, each only from the shapes its report allows, in one
/// statement: `$1` the reports as a JSON array, `$2` the time. `seen` is
/// each row in the statement's snapshot, `free` the rows it could lock
/// without waiting, as they are now; a job moves only if the two are the
/// same version (no change committed since the snapshot).
static MOVE_JOBS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH report AS MATERIALIZED ( \
           SELECT * FROM json_to_recordset(CAST($1 AS json)) AS r(id text, status text, \
             failure text, engine_ms bigint, engine_at timestamptz, shapes text[])), \
         seen AS MATERIALIZED ( \
           SELECT j.id, j.xmin AS version, j.status FROM jobs j JOIN report r ON r.id = j.id), \
         free AS MATERIALIZED ( \
           SELECT j.id, j.xmin AS version FROM jobs j WHERE j.id IN (SELECT id FROM report) \
           FOR NO KEY UPDATE SKIP LOCKED), \
         moved AS ( \
           UPDATE jobs j SET status = r.status, failure = coalesce(r.failure, j.failure), \
             updated_at = $2, moved_at = $2, \
             engine_applied_until = coalesce(r.engine_ms, j.engine_applied_until) \
           FROM seen s JOIN free f ON f.id = s.id AND f.version = s.version \
             JOIN report r ON r.id = s.id \
           WHERE j.id = s.id AND j.xmin = s.version \
             AND (j.status || '/' || j.mode || '/' || CAST(j.engine IS NOT NULL AS text)) = ANY(r.shapes) \
             AND (r.engine_ms IS NULL OR j.engine_applied_until IS NULL \
                  OR j.engine_applied_until < r.engine_ms) \
           RETURNING j.*, s.status AS from_status, r.failure AS reported_failure, \
             r.engine_at AS reported_engine_at), \
         noted AS ( \
           INSERT INTO job_transitions (job_id, from_status, to_status, failure, at, inferred, engine_at) \
           SELECT id, from_status, status, reported_failure, $2, false, reported_engine_at FROM moved) \
         SELECT {JOB_COLUMNS}, {children}, j.from_status \
         FROM moved j LEFT JOIN job_watches w ON w.job_id = j.id \
         LEFT JOIN engines e ON e.name = j.engine",
        children = children_as_json("j.id"),
    )
});

/// A job as the statement returns it, and the status it left.
#[derive(sqlx::FromRow)]
struct MovedRow {
    #[sqlx(flatten)]
    job: JobAsJson,
    from_status: String,
}

/// A shape as the statement compares it: `status/mode/watched`.
fn shape_text(shape: &Shape) -> String {
    let watched = shape.preparation == Preparation::OnSubmission;
    format!(
        "{}/{}/{watched}",
        shape.status.as_str(),
        shape.mode.as_str()
    )
}

type Answer = Result<Option<MovedJob>, StoreError>;

struct Request {
    job: JobId,
    report: StatusReport,
    shapes: Vec<Shape>,
    answer: oneshot::Sender<Answer>,
    /// Where the report was made (a request, say), for the log.
    span: tracing::Span,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Request>,
    /// Jobs in a batch under way.
    in_flight: HashSet<JobId>,
    runners: usize,
}

struct Shared<P> {
    pool: P,
    keyring: Arc<Keyring>,
    queue: Mutex<Queue>,
}

/// The batches of one store. Runners are tasks started when reports wait
/// and fewer than [`MOST_RUNNERS`] run; each ends when nothing waits.
pub(crate) struct QuietMoves<P> {
    shared: Arc<Shared<P>>,
}

impl<P: Sql + Clone + Sync + 'static> QuietMoves<P> {
    pub(crate) fn new(pool: P, keyring: Arc<Keyring>) -> Self {
        Self {
            shared: Arc::new(Shared {
                pool,
                keyring,
                queue: Mutex::default(),
            }),
        }
    }

    /// Moves `job` as `report` says if it is in one of `shapes`, with the
    /// reports waiting beside it; `None` if it did not move.
    pub(crate) async fn submit(
        &self,
        job: &JobId,
        report: &StatusReport,
        shapes: &[Shape],
    ) -> Answer {
        let (answer, answered) = oneshot::channel();
        let start_runner = {
            let mut queue = self.shared.queue();
            queue.waiting.push_back(Request {
                job: job.clone(),
                report: report.clone(),
                shapes: shapes.to_vec(),
                answer,
                span: tracing::Span::current(),
            });
            let start = queue.runners < MOST_RUNNERS;
            queue.runners += usize::from(start);
            start
        };
        if start_runner {
            tokio::spawn(run(self.shared.clone()));
        }
        answered.await.unwrap_or_else(|_| {
            Err(StoreError::Internal(
                "the batch holding this status report ended without an answer".into(),
            ))
        })
    }
}

impl<P> Shared<P> {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The waiting reports whose jobs are in no batch, oldest first, one
    /// per job; none, and the runner ends, if there are none.
    fn take_batch(&self) -> Vec<Request> {
        let mut queue = self.queue();
        let mut batch = Vec::new();
        let mut kept = VecDeque::new();
        while let Some(request) = queue.waiting.pop_front() {
            if batch.len() < MOST_IN_BATCH && queue.in_flight.insert(request.job.clone()) {
                batch.push(request);
            } else {
                kept.push_back(request);
            }
        }
        queue.waiting = kept;
        if batch.is_empty() {
            queue.runners -= 1;
        }
        batch
    }
}

/// The jobs of a batch under way, freed for the next batch when it ends
/// (and, should the runner panic, its place with them).
struct Taken<'a, P> {
    shared: &'a Shared<P>,
    jobs: Vec<JobId>,
}

impl<P> Drop for Taken<'_, P> {
    fn drop(&mut self) {
        let mut queue = self.shared.queue();
        for job in &self.jobs {
            queue.in_flight.remove(job);
        }
        if std::thread::panicking() {
            queue.runners -= 1;
        }
    }
}

/// Takes batches until none waits.
async fn run<P: Sql + Clone + Sync>(shared: Arc<Shared<P>>) {
    loop {
        let batch = shared.take_batch();
        if batch.is_empty() {
            return;
        }
        let taken = Taken {
            shared: &shared,
            jobs: batch.iter().map(|r| r.job.clone()).collect(),
        };
        // The statement is logged as part of the oldest report's span.
        let span =
            tracing::info_span!(parent: &batch[0].span, "quiet_moves", reports = batch.len());
        let mut answers = move_batch(&shared, &batch).instrument(span).await;
        drop(taken);
        for request in batch {
            let answer = match &mut answers {
                Ok(moved) => moved.remove(request.job.as_str()).transpose(),
                Err(error) => Err(error.clone()),
            };
            // A caller that went away has nothing to be told.
            let _ = request.answer.send(answer);
        }
    }
}

type BatchAnswers = Result<HashMap<String, Result<MovedJob, StoreError>>, StoreError>;

/// One statement for `batch`: the jobs that moved, by id; or why the
/// statement failed, for every report.
async fn move_batch<P: Sql + Clone>(shared: &Shared<P>, batch: &[Request]) -> BatchAnswers {
    let reports: Vec<_> = batch
        .iter()
        .map(|r| {
            let engine_at = r.report.engine_times.get(&r.report.status).copied();
            json!({
                "id": r.job.as_str(),
                "status": r.report.status.as_str(),
                "failure": r.report.failure,
                "engine_ms": engine_at.map(|at| at.timestamp_millis()),
                // Microseconds, as the driver binds a time.
                "engine_at": engine_at.map(|at| at.to_rfc3339_opts(SecondsFormat::Micros, true)),
                "shapes": r.shapes.iter().map(shape_text).collect::<Vec<_>>(),
            })
        })
        .collect();
    let query = Query::new(MOVE_JOBS.as_str())
        .bind(Param::Owned(serde_json::Value::Array(reports).to_string()))
        .time(Utc::now());
    let rows: Vec<MovedRow> = shared.pool.clone().rows(query).await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let id = row.job.job.id.clone();
            let moved = job_status(&row.from_status).and_then(|from| {
                let job = row.job.decode(&shared.keyring)?;
                Ok(MovedJob {
                    transition: Transition::Move {
                        from,
                        path: vec![job.status],
                    },
                    job,
                })
            });
            (id, moved)
        })
        .collect())
}
