//! Registered engines, what the watcher saw of them and of their jobs, and
//! the lease that lets one replica poll an engine at a time: written once
//! for both backends. A drop and a job submission that names the engine
//! are serialized, as for catalogs.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::{Backend, Deletion, Query, Sql, SqlStore};
use super::{EngineStore, StoreError, WatchedChange, WatchedJob};
use crate::domain::EngineName;
use crate::domain::engine::{
    EngineDescriptor, EngineKind, EngineObservation, EngineRecord, EngineSettings, Reachability,
};
use crate::domain::job::JobId;
use crate::domain::job_record::JobWatch;

const ENGINE_COLUMNS: &str = "name, kind, url, history_url, poll_interval_ms, missing_job_grace_s, \
     max_requests_per_second, comment, version, created_at, updated_at, reachability, \
     reachability_since, checked_at, last_error, engine_version";

/// The statuses no job leaves.
const UNFINISHED: &str = "status NOT IN ('FINISHED', 'FAILED', 'CANCELED')";

/// A watched job and what the watcher last wrote of it, `WHERE` to follow.
fn watched_select(through_index: &str) -> String {
    format!(
        "SELECT j.id, j.status, j.engine_job_id, j.engine_applied_until, j.created_at, \
         j.updated_at, w.updated_at AS watch_updated_at, w.engine_status, w.first_seen_at, w.last_seen_at, \
         w.missing_since, w.note, w.examined_until \
         FROM jobs j{through_index} LEFT JOIN job_watches w ON w.job_id = j.id"
    )
}

/// How many jobs' watches one statement writes: a batch goes in
/// statements of these sizes, largest first. Each size is one statement
/// text, which each connection keeps prepared; a statement per batch size
/// would keep up to a hundred per connection, some of hundreds of rows
/// (measured: 9 MB of compiled statements at 10,000 watched jobs, growing
/// with the catch-ups' batches). 256 rows are 1,793 parameters, well within
/// both backends' limit.
const WATCHES_PER_STATEMENT: [usize; 5] = [256, 64, 16, 4, 1];

/// `items` cut into chunks of the `sizes` given, largest first, as many of
/// each as fit; `sizes` ends with 1.
fn chunks_sized<'a, T>(mut items: &'a [T], sizes: &'a [usize]) -> impl Iterator<Item = &'a [T]> {
    sizes.iter().flat_map(move |&size| {
        let whole = items.len() / size * size;
        let (chunks, rest) = items.split_at(whole);
        items = rest;
        chunks.chunks(size)
    })
}

#[derive(sqlx::FromRow)]
struct EngineRow {
    name: String,
    kind: String,
    url: String,
    history_url: Option<String>,
    poll_interval_ms: i64,
    missing_job_grace_s: i64,
    max_requests_per_second: i64,
    comment: Option<String>,
    version: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    reachability: String,
    reachability_since: Option<DateTime<Utc>>,
    checked_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    engine_version: Option<String>,
}

impl EngineRow {
    fn decode(self) -> Result<EngineRecord, StoreError> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            StoreError::Internal(format!("stored engine '{}' has {what}: {e}", self.name))
        };
        let positive = |v: i64| u64::try_from(v).ok();
        let settings = EngineSettings::new(
            &self.url,
            self.history_url.as_deref(),
            positive(self.poll_interval_ms),
            positive(self.missing_job_grace_s),
            positive(self.max_requests_per_second),
        )
        .map_err(|e| corrupt("unreadable settings", &e))?;
        Ok(EngineRecord {
            descriptor: EngineDescriptor {
                name: EngineName::parse(&self.name).map_err(|e| corrupt("a bad name", &e))?,
                kind: EngineKind::parse(&self.kind)
                    .ok_or_else(|| corrupt("an unknown kind", &self.kind))?,
                settings,
                comment: self.comment.clone(),
            },
            version: self.version,
            observation: EngineObservation {
                reachability: Reachability::parse(&self.reachability)
                    .ok_or_else(|| corrupt("an unknown reachability", &self.reachability))?,
                since: self.reachability_since,
                checked_at: self.checked_at,
                last_error: self.last_error.clone(),
                version: self.engine_version.clone(),
            },
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
struct WatchedRow {
    id: String,
    status: String,
    engine_job_id: Option<String>,
    engine_applied_until: Option<i64>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    watch_updated_at: Option<DateTime<Utc>>,
    engine_status: Option<String>,
    first_seen_at: Option<DateTime<Utc>>,
    last_seen_at: Option<DateTime<Utc>>,
    missing_since: Option<DateTime<Utc>>,
    note: Option<String>,
    examined_until: Option<i64>,
}

impl WatchedRow {
    fn decode(self) -> Result<WatchedJob, StoreError> {
        let corrupt =
            |what: &str| StoreError::Internal(format!("job {} has a bad {what}", self.id));
        Ok(WatchedJob {
            id: JobId::parse(&self.id).map_err(|_| corrupt("id"))?,
            status: self.status.parse().map_err(|_| corrupt("status"))?,
            engine_job_id: self.engine_job_id.clone(),
            engine_applied_until: self.engine_applied_until,
            created_at: self.created_at,
            updated_at: self.updated_at,
            watch: match self.watch_updated_at {
                None => None,
                Some(_) => Some(JobWatch {
                    engine_status: self
                        .engine_status
                        .as_deref()
                        .map(str::parse)
                        .transpose()
                        .map_err(|_| corrupt("engine status"))?,
                    first_seen_at: self.first_seen_at,
                    last_seen_at: self.last_seen_at,
                    missing_since: self.missing_since,
                    note: self.note.clone(),
                    examined_until: self.examined_until,
                }),
            },
        })
    }
}

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn insert_failed(name: &EngineName, error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::EngineExists(name.to_string())
        }
        _ => StoreError::from_sqlx(error),
    }
}

/// Binds a descriptor's columns as `$1` … `$8`.
fn descriptor_params<'a>(query: Query<'a>, engine: &'a EngineDescriptor) -> Query<'a> {
    let settings = &engine.settings;
    query
        .text(engine.name.as_str())
        .text(engine.kind.as_str())
        .text(settings.url.as_str())
        .opt_text(settings.history_url.as_ref().map(|u| u.as_str()))
        .int(settings.poll_interval.as_millis() as i64)
        .int(settings.missing_job_grace.as_secs() as i64)
        .int(i64::from(settings.max_requests_per_second))
        .opt_text(engine.comment.as_deref())
}

/// Binds an observation's columns as the next five parameters.
fn observation_params<'a>(query: Query<'a>, seen: &'a EngineObservation) -> Query<'a> {
    query
        .text(seen.reachability.as_str())
        .opt_time(seen.since)
        .opt_time(seen.checked_at)
        .opt_text(seen.last_error.as_deref())
        .opt_text(seen.version.as_deref())
}

#[async_trait]
impl<B: Backend> EngineStore for SqlStore<B> {
    async fn insert_engine(
        &self,
        engine: &EngineDescriptor,
        seen: &EngineObservation,
    ) -> Result<EngineRecord, StoreError> {
        let query = Query::new(format!(
            "INSERT INTO engines (name, kind, url, history_url, poll_interval_ms, missing_job_grace_s, \
             max_requests_per_second, comment, reachability, reachability_since, checked_at, \
             last_error, engine_version, version, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 1, $14, $14) \
             RETURNING {ENGINE_COLUMNS}"
        ));
        let query = observation_params(descriptor_params(query, engine), seen).time(Utc::now());
        let row: Option<EngineRow> = self
            .pool()
            .row(query)
            .await
            .map_err(|e| insert_failed(&engine.name, e))?;
        row.ok_or_else(|| StoreError::Internal("an insert returned no row".into()))?
            .decode()
    }

    async fn get_engine(&self, name: &EngineName) -> Result<Option<EngineRecord>, StoreError> {
        let row: Option<EngineRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "SELECT {ENGINE_COLUMNS} FROM engines WHERE name = $1"
                ))
                .text(name.as_str()),
            )
            .await?;
        row.map(EngineRow::decode).transpose()
    }

    async fn list_engines(
        &self,
        after: Option<&EngineName>,
        limit: u32,
    ) -> Result<Vec<EngineRecord>, StoreError> {
        let rows: Vec<EngineRow> = self
            .pool()
            .rows(
                Query::new(format!(
                    "SELECT {ENGINE_COLUMNS} FROM engines WHERE name > $1 ORDER BY name LIMIT CAST($2 AS BIGINT)"
                ))
                .text(after.map(EngineName::as_str).unwrap_or(""))
                .int(i64::from(limit)),
            )
            .await?;
        rows.into_iter().map(EngineRow::decode).collect()
    }

    async fn update_engine(
        &self,
        engine: &EngineDescriptor,
        seen: &EngineObservation,
        expected_version: i64,
    ) -> Result<EngineRecord, StoreError> {
        let query = Query::new(format!(
            "UPDATE engines SET kind = $2, url = $3, history_url = $4, poll_interval_ms = $5, \
             missing_job_grace_s = $6, max_requests_per_second = $7, comment = $8, \
             reachability = $9, reachability_since = $10, checked_at = $11, last_error = $12, \
             engine_version = $13, version = version + 1, updated_at = $14 \
             WHERE name = $1 AND version = $15 RETURNING {ENGINE_COLUMNS}"
        ));
        let query = observation_params(descriptor_params(query, engine), seen)
            .time(Utc::now())
            .int(expected_version);
        let row: Option<EngineRow> = self.pool().row(query).await?;
        match row {
            Some(row) => row.decode(),
            None => match self.get_engine(&engine.name).await? {
                Some(_) => Err(StoreError::EngineModified(engine.name.to_string())),
                None => Err(StoreError::EngineNotFound(engine.name.to_string())),
            },
        }
    }

    async fn delete_engine(&self, name: &EngineName) -> Result<bool, StoreError> {
        let users = format!("SELECT count(*) FROM jobs WHERE engine = $1 AND {UNFINISHED}");
        match self
            .delete_unless_used("engines", name.as_str(), None, &users)
            .await?
        {
            Deletion::Deleted => Ok(true),
            Deletion::Missing => Ok(false),
            Deletion::Changed => Err(StoreError::EngineModified(name.to_string())),
            Deletion::InUse(jobs) => Err(StoreError::EngineInUse {
                engine: name.to_string(),
                jobs,
            }),
        }
    }

    async fn lease_engine(
        &self,
        name: &EngineName,
        poller: &str,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let now = Utc::now();
        let until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        let taken = self
            .pool()
            .execute(
                Query::new(
                    "UPDATE engines SET poller = $2, poll_lease_until = $3 WHERE name = $1 \
                     AND (poller = $2 OR poll_lease_until IS NULL OR poll_lease_until < $4)",
                )
                .text(name.as_str())
                .text(poller)
                .int(millis(until))
                .int(millis(now)),
            )
            .await?;
        Ok(taken == 1)
    }

    async fn record_engine_seen(
        &self,
        name: &EngineName,
        seen: &EngineObservation,
    ) -> Result<(), StoreError> {
        let query = Query::new(
            "UPDATE engines SET reachability = $2, reachability_since = $3, checked_at = $4, \
             last_error = $5, engine_version = $6 WHERE name = $1",
        )
        .text(name.as_str());
        self.pool().execute(observation_params(query, seen)).await?;
        Ok(())
    }

    async fn watched_jobs(
        &self,
        name: &EngineName,
        after: Option<&JobId>,
        limit: usize,
    ) -> Result<Vec<WatchedJob>, StoreError> {
        let mut pool = self.pool();
        // In the index's order, so a page reads its rows and no others.
        let by_engine_and_id = (pool.dialect().through_index)("watched_jobs_by_id");
        let rows: Vec<WatchedRow> = pool
            .rows(
                Query::new(format!(
                    "{} WHERE j.engine = $1 AND j.id > $2 AND j.{UNFINISHED} \
                     ORDER BY j.id LIMIT CAST($3 AS BIGINT)",
                    watched_select(&by_engine_and_id)
                ))
                .text(name.as_str())
                .text(after.map_or("", JobId::as_str))
                .int(i64::try_from(limit).unwrap_or(i64::MAX)),
            )
            .await?;
        rows.into_iter().map(WatchedRow::decode).collect()
    }

    async fn watched_changes(
        &self,
        name: &EngineName,
        since: DateTime<Utc>,
    ) -> Result<Vec<WatchedChange>, StoreError> {
        let rows: Vec<(String, String, DateTime<Utc>)> = self
            .pool()
            .rows(
                Query::new(
                    "SELECT id, status, updated_at FROM jobs WHERE engine = $1 AND updated_at >= $2",
                )
                .text(name.as_str())
                .time(since),
            )
            .await?;
        rows.into_iter()
            .map(|(id, status, updated_at)| {
                let corrupt =
                    |what: &str| StoreError::Internal(format!("job {id} has a bad {what}"));
                Ok(WatchedChange {
                    id: JobId::parse(&id).map_err(|_| corrupt("id"))?,
                    status: status.parse().map_err(|_| corrupt("status"))?,
                    updated_at,
                })
            })
            .collect()
    }

    async fn watched_jobs_among(&self, ids: &[&str]) -> Result<Vec<WatchedJob>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pool = self.pool();
        let among = (pool.dialect().in_list)("j.id", 1);
        let rows: Vec<WatchedRow> = pool
            .rows(Query::new(format!("{} WHERE {among}", watched_select(""))).texts(ids.to_vec()))
            .await?;
        rows.into_iter().map(WatchedRow::decode).collect()
    }

    async fn watched_job(&self, job: &JobId) -> Result<Option<WatchedJob>, StoreError> {
        let row: Option<WatchedRow> = self
            .pool()
            .row(Query::new(format!("{} WHERE j.id = $1", watched_select(""))).text(job.as_str()))
            .await?;
        row.map(WatchedRow::decode).transpose()
    }

    async fn watched_counts(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let rows: Vec<(String, i64)> = self
            .pool()
            .rows(Query::new(format!(
                "SELECT engine, count(*) FROM jobs WHERE engine IS NOT NULL AND {UNFINISHED} \
                 GROUP BY engine"
            )))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(name, count)| (name, count.max(0) as u64))
            .collect())
    }

    async fn record_watches(&self, watches: &[(JobId, JobWatch)]) -> Result<(), StoreError> {
        let now = Utc::now();
        for chunk in chunks_sized(watches, &WATCHES_PER_STATEMENT) {
            let rows: Vec<String> = (0..chunk.len())
                .map(|i| {
                    let n = i * 7;
                    format!(
                        "(${}, ${}, ${}, ${}, ${}, ${}, ${}, $1)",
                        n + 2,
                        n + 3,
                        n + 4,
                        n + 5,
                        n + 6,
                        n + 7,
                        n + 8
                    )
                })
                .collect();
            let mut query = Query::new(format!(
                "INSERT INTO job_watches (job_id, engine_status, first_seen_at, last_seen_at, \
                 missing_since, note, examined_until, updated_at) VALUES {} \
                 ON CONFLICT (job_id) DO UPDATE SET engine_status = excluded.engine_status, \
                 first_seen_at = excluded.first_seen_at, last_seen_at = excluded.last_seen_at, \
                 missing_since = excluded.missing_since, note = excluded.note, \
                 examined_until = excluded.examined_until, updated_at = excluded.updated_at",
                rows.join(", ")
            ))
            .time(now);
            for (job, watch) in chunk {
                query = query
                    .text(job.as_str())
                    .opt_text(watch.engine_status.map(|s| s.as_str()))
                    .opt_time(watch.first_seen_at)
                    .opt_time(watch.last_seen_at)
                    .opt_time(watch.missing_since)
                    .opt_text(watch.note.as_deref())
                    .opt_int(watch.examined_until);
            }
            self.pool().execute(query).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_of_watches_goes_whole_in_statements_of_a_few_sizes() {
        for n in [0, 1, 3, 4, 5, 63, 255, 256, 257, 700, 1000] {
            let batch: Vec<usize> = (0..n).collect();
            let chunks: Vec<&[usize]> = chunks_sized(&batch, &WATCHES_PER_STATEMENT).collect();
            assert_eq!(chunks.concat(), batch, "{n}: each once, in order");
            assert!(
                chunks
                    .iter()
                    .all(|c| WATCHES_PER_STATEMENT.contains(&c.len())),
                "{n}: only the statement sizes"
            );
            let below_largest = chunks.iter().filter(|c| c.len() < 256).count();
            assert!(below_largest <= 12, "{n}: {below_largest} small statements");
        }
    }
}
