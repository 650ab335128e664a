//! Jobs, their hooks (each with its catalog snapshot, secrets sealed) and
//! what happened to them: written once for both backends.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::ledger::insert_action;
use super::rows::{
    ACTION_COLUMNS, ActionRow, HookRow, InterventionRow, JobRow, TransitionRow, assemble_jobs,
    encode_options, encode_properties, engine_id_taken, job_insert_failed,
};
use super::sql::{Backend, Param, Query, Sql, SqlStore};
use super::{JobStore, Keyring, StoreError};
use crate::domain::EngineName;
use crate::domain::job::{JobId, JobStatus};
use crate::domain::job_record::{JobCursor, JobFilter, JobRecord, NewJob, StatusChange};
use crate::domain::ledger::{Intervention, Preparation, preparation};

/// A job's columns, what the watcher saw of it and of its engine, as
/// [`JobRow`] reads them from `jobs j LEFT JOIN job_watches w LEFT JOIN
/// engines e`.
pub(super) const JOB_COLUMNS: &str = "j.id, j.name, j.mode, j.status, j.statement, j.failure, j.fingerprint, \
     j.engine_job_id, j.engine, j.created_at, j.updated_at, j.moved_at, \
     w.updated_at AS watch_updated_at, w.engine_status AS watch_engine_status, \
     w.first_seen_at AS watch_first_seen_at, w.last_seen_at AS watch_last_seen_at, \
     w.missing_since AS watch_missing_since, w.note AS watch_note, \
     w.examined_until AS watch_examined_until, e.reachability AS engine_reachability, \
     e.reachability_since AS engine_reachability_since, e.checked_at AS engine_checked_at, \
     e.last_error AS engine_last_error, e.engine_version AS engine_version, \
     j.on_audit_failure, j.quarantine_seconds";
const HOOK_COLUMNS: &str = "job_id, hook_index, kind, catalog, database_name, table_name, \
     if_not_exists, skipped, table_properties, catalog_options, catalog_sealed_options, catalog_comment, \
     sealed_table_properties, audits, audit_results";

/// A job with its hooks and actions as JSON arrays of their rows, read in
/// one statement (see [`Dialect::one_statement_jobs`]).
///
/// [`Dialect::one_statement_jobs`]: super::sql::Dialect::one_statement_jobs
#[derive(sqlx::FromRow)]
pub(super) struct JobAsJson {
    #[sqlx(flatten)]
    pub job: JobRow,
    pub hooks: String,
    pub actions: String,
}

/// The columns [`JobAsJson`] reads beside [`JOB_COLUMNS`], for the job
/// whose id is `job` (a parameter or a column).
pub(super) fn children_as_json(job: &str) -> String {
    format!(
        "(SELECT coalesce(json_agg(h ORDER BY h.hook_index), '[]')::text \
          FROM (SELECT {HOOK_COLUMNS} FROM hooks WHERE job_id = {job}) h) AS hooks, \
         (SELECT coalesce(json_agg(a ORDER BY a.id), '[]')::text \
          FROM (SELECT {ACTION_COLUMNS} FROM actions WHERE job_id = {job}) a) AS actions"
    )
}

impl JobAsJson {
    pub fn decode(self, keyring: &Keyring) -> Result<JobRecord, StoreError> {
        let id = self.job.id.clone();
        let unreadable = |what: &str, e: serde_json::Error| {
            StoreError::Internal(format!("the {what} of job {id} read as JSON: {e}"))
        };
        let hooks: Vec<HookRow> =
            serde_json::from_str(&self.hooks).map_err(|e| unreadable("hooks", e))?;
        let actions: Vec<ActionRow> =
            serde_json::from_str(&self.actions).map_err(|e| unreadable("actions", e))?;
        assemble_jobs(vec![self.job], hooks, actions, keyring)?
            .pop()
            .ok_or_else(|| StoreError::JobNotFound(id.clone()))
    }
}

/// The jobs with these ids, ordered by id, with their hooks and actions:
/// three queries for any number of jobs (`= $1` for one, which planners
/// serve faster than a list), or one for one job where the dialect can
/// (see [`JobAsJson`]).
pub(crate) async fn read_jobs(
    sql: &mut impl Sql,
    keyring: &Keyring,
    ids: &[&str],
) -> Result<Vec<JobRecord>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    if let ([id], true) = (ids, sql.dialect().one_statement_jobs) {
        return read_job_in_one_statement(sql, keyring, id).await;
    }
    let in_list = sql.dialect().in_list;
    let matches = |column: &str| match ids {
        [_] => format!("{column} = $1"),
        _ => in_list(column, 1),
    };
    let bind = |query: Query<'static>| -> Query<'_> {
        match ids {
            [id] => query.text(id),
            _ => query.texts(ids.to_vec()),
        }
    };
    let jobs: Vec<JobRow> = sql
        .rows(bind(Query::new(format!(
            "SELECT {JOB_COLUMNS} FROM jobs j LEFT JOIN job_watches w ON w.job_id = j.id \
             LEFT JOIN engines e ON e.name = j.engine WHERE {} ORDER BY j.id",
            matches("j.id")
        ))))
        .await?;
    let hooks: Vec<HookRow> = sql
        .rows(bind(Query::new(format!(
            "SELECT {HOOK_COLUMNS} FROM hooks WHERE {} ORDER BY job_id, hook_index",
            matches("job_id")
        ))))
        .await?;
    let actions: Vec<ActionRow> = sql
        .rows(bind(Query::new(format!(
            "SELECT {ACTION_COLUMNS} FROM actions WHERE {} ORDER BY id",
            matches("job_id")
        ))))
        .await?;
    assemble_jobs(jobs, hooks, actions, keyring)
}

/// The fast path of [`read_jobs`] for one job, where the dialect can: the
/// job, its hooks and its actions in one statement (see [`JobAsJson`]),
/// one round trip instead of three (docs/fast-paths.md).
async fn read_job_in_one_statement(
    sql: &mut impl Sql,
    keyring: &Keyring,
    id: &str,
) -> Result<Vec<JobRecord>, StoreError> {
    let job: Option<JobAsJson> = sql
        .row(
            Query::new(format!(
                "SELECT {JOB_COLUMNS}, {} FROM jobs j \
                 LEFT JOIN job_watches w ON w.job_id = j.id \
                 LEFT JOIN engines e ON e.name = j.engine WHERE j.id = $1",
                children_as_json("$1")
            ))
            .text(id),
        )
        .await?;
    job.map(|job| job.decode(keyring)).into_iter().collect()
}

/// The catalogs of a job's hooks, each once, sorted (so that concurrent
/// submissions lock them in one order).
fn catalogs_of(job: &NewJob) -> Vec<&str> {
    let mut names: Vec<&str> = job.hooks.iter().map(|h| h.catalog.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

#[async_trait]
impl<B: Backend> JobStore for SqlStore<B> {
    async fn insert_job(&self, job: &NewJob) -> Result<JobRecord, StoreError> {
        let now = Utc::now();
        let mut tx = self.begin().await?;
        // Held until the commit: a drop of one of these catalogs waits for
        // this job, then sees it; one that went first makes this fail.
        let catalogs = catalogs_of(job);
        let for_share = tx.dialect().for_share;
        let present: Vec<(String,)> = tx
            .rows(
                Query::new(format!(
                    "SELECT name FROM catalogs WHERE {} ORDER BY name{for_share}",
                    (tx.dialect().in_list)("name", 1)
                ))
                .texts(catalogs.clone()),
            )
            .await?;
        if let Some(missing) = catalogs
            .iter()
            .find(|name| !present.iter().any(|(p,)| p == *name))
        {
            return Err(StoreError::CatalogNotFound((*missing).to_owned()));
        }
        if let Some(engine) = &job.engine {
            // Held until the commit, as the catalogs are: a drop of the
            // engine waits for this job, then sees it.
            let found: Option<(String,)> = tx
                .row(
                    Query::new(format!(
                        "SELECT name FROM engines WHERE name = $1{for_share}"
                    ))
                    .text(engine.as_str()),
                )
                .await?;
            if found.is_none() {
                return Err(StoreError::EngineNotFound(engine.to_string()));
            }
        }
        tx.execute(
            Query::new(
                "INSERT INTO jobs (id, name, mode, status, statement, failure, fingerprint, \
                 created_at, updated_at, moved_at, engine_job_id, engine, on_audit_failure, \
                 quarantine_seconds) \
                 VALUES ($1, $2, $3, 'INITIALIZING', $4, NULL, $5, $6, $6, $6, $7, $8, $9, $10)",
            )
            .text(job.id.as_str())
            .text(&job.name)
            .text(job.mode.as_str())
            .opt_text(job.statement.as_deref())
            .text(&job.fingerprint)
            .time(now)
            .opt_text(job.engine_job_id.as_deref())
            .opt_text(job.engine.as_ref().map(EngineName::as_str))
            .text(job.audit_policy.on_failure.as_str())
            .int(i64::try_from(job.audit_policy.quarantine.as_secs()).unwrap_or(i64::MAX)),
        )
        .await
        .map_err(|e| job_insert_failed(job, e))?;
        tx.execute(
            Query::new(
                "INSERT INTO job_transitions (job_id, from_status, to_status, failure, at) \
                 VALUES ($1, NULL, 'INITIALIZING', NULL, $2)",
            )
            .text(job.id.as_str())
            .time(now),
        )
        .await?;
        for (index, hook) in job.hooks.iter().enumerate() {
            let (plain, sealed) = encode_options(&hook.catalog.options, &self.keyring);
            let (properties, sealed_properties) =
                encode_properties(&hook.table_properties, &self.keyring);
            let audits = serde_json::to_string(&hook.audits)
                .map_err(|e| StoreError::Internal(format!("hook audits as JSON: {e}")))?;
            tx.execute(
                Query::new(format!(
                    "INSERT INTO hooks ({HOOK_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
                ))
                .text(job.id.as_str())
                .int(index as i64)
                .text(hook.kind.as_str())
                .text(hook.catalog.name.as_str())
                .text(&hook.database)
                .text(&hook.table)
                .flag(hook.if_not_exists)
                .flag(hook.skipped)
                .text(&properties)
                .text(&plain)
                .text(&sealed)
                .opt_text(hook.catalog.comment.as_deref())
                .text(&sealed_properties)
                .text(&audits)
                .text("[]"),
            )
            .await?;
        }
        let preparing = preparation(job.mode, Preparation::of(job.engine.is_some()));
        for (index, _) in job.hooks.iter().enumerate().filter(|(_, h)| !h.skipped) {
            let Some(action) = preparing else { break };
            insert_action(
                &mut tx,
                &job.id,
                index as i64,
                action,
                JobStatus::Initializing,
                now,
            )
            .await?;
        }
        let mut inserted = read_jobs(&mut tx, &self.keyring, &[job.id.as_str()]).await?;
        self.commit(tx).await?;
        inserted
            .pop()
            .ok_or_else(|| StoreError::JobNotFound(job.id.to_string()))
    }

    async fn get_job(&self, id: &JobId) -> Result<Option<JobRecord>, StoreError> {
        Ok(read_jobs(&mut self.pool(), &self.keyring, &[id.as_str()])
            .await?
            .pop())
    }

    async fn jobs_updated_at(
        &self,
        ids: &[&str],
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        let mut pool = self.pool();
        let query = match ids {
            [] => return Ok(Vec::new()),
            [id] => Query::new("SELECT id, updated_at FROM jobs WHERE id = $1").text(id),
            _ => Query::new(format!(
                "SELECT id, updated_at FROM jobs WHERE {}",
                (pool.dialect().in_list)("id", 1)
            ))
            .texts(ids.to_vec()),
        };
        pool.rows(query).await.map_err(StoreError::from_sqlx)
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<&JobCursor>,
        limit: u32,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut pool = self.pool();
        let ids: Vec<(String,)> = pool.rows(list_query(filter, after, limit)).await?;
        // A job deleted meanwhile is simply not listed.
        let ids: Vec<&str> = ids.iter().map(|(id,)| id.as_str()).collect();
        let mut jobs = read_jobs(&mut pool, &self.keyring, &ids).await?;
        jobs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        Ok(jobs)
    }

    async fn purge_ended_jobs(
        &self,
        ended_before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let ended: Vec<String> = JobStatus::ALL
            .into_iter()
            .filter(|s| s.is_globally_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        // Oldest first, read from the index `ended_jobs_by_age`, whose
        // condition names these statuses in this order: SQLite without
        // statistics would sort every ended job for each batch instead.
        // Everything else about a job goes with it (ON DELETE CASCADE).
        let mut pool = self.pool();
        let ended_by_age = (pool.dialect().through_index)("ended_jobs_by_age");
        pool.execute(
            Query::new(format!(
                "DELETE FROM jobs WHERE id IN (\
                       SELECT j.id FROM jobs j{ended_by_age} \
                       WHERE j.status IN ({}) AND j.updated_at < $1 \
                         AND NOT EXISTS (SELECT 1 FROM actions a \
                                         WHERE a.job_id = j.id AND a.state = 'pending') \
                       ORDER BY j.updated_at LIMIT CAST($2 AS BIGINT))",
                ended.join(", ")
            ))
            .time(ended_before)
            .int(i64::from(limit)),
        )
        .await
        .map_err(StoreError::from_sqlx)
    }

    async fn status_history(&self, id: &JobId) -> Result<Vec<StatusChange>, StoreError> {
        let rows: Vec<TransitionRow> = self
            .pool()
            .rows(
                Query::new(
                    "SELECT from_status, to_status, failure, at, inferred, engine_at \
                     FROM job_transitions WHERE job_id = $1 ORDER BY id",
                )
                .text(id.as_str()),
            )
            .await?;
        rows.into_iter().map(TransitionRow::decode).collect()
    }

    async fn fold_restarts(&self, job: &JobId, keep: u32) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let restarts: Vec<(i64,)> = tx
            .rows(
                Query::new(
                    "SELECT id FROM job_transitions WHERE job_id = $1 AND to_status = 'RESTARTING' \
                     ORDER BY id DESC",
                )
                .text(job.as_str()),
            )
            .await?;
        let keep = keep.max(1) as usize;
        if restarts.len() <= keep {
            return Ok(0);
        }
        let (oldest, kept_from) = (restarts[restarts.len() - 1].0, restarts[keep - 1].0);
        // Another replica folding the same job at once deletes nothing
        // here, and so counts nothing.
        let folded: Vec<(String,)> = tx
            .rows(
                Query::new(
                    "DELETE FROM job_transitions WHERE job_id = $1 AND id >= $2 AND id < $3 \
                     RETURNING to_status",
                )
                .text(job.as_str())
                .int(oldest)
                .int(kept_from),
            )
            .await?;
        let cycles = folded.iter().filter(|(s,)| s == "RESTARTING").count() as i64;
        tx.execute(
            Query::new("UPDATE jobs SET folded_restarts = folded_restarts + $2 WHERE id = $1")
                .text(job.as_str())
                .int(cycles),
        )
        .await?;
        self.commit(tx).await?;
        Ok(cycles as u64)
    }

    async fn jobs_on_table(
        &self,
        catalog: &str,
        database: &str,
        table: &str,
    ) -> Result<u64, StoreError> {
        let row: Option<(i64,)> = self
            .pool()
            .row(
                Query::new(
                    "SELECT count(*) FROM jobs j \
                     WHERE EXISTS (SELECT 1 FROM hooks h WHERE h.job_id = j.id AND h.catalog = $1 \
                                   AND h.database_name = $2 AND h.table_name = $3) \
                       AND (j.status NOT IN ('FINISHED', 'FAILED', 'CANCELED') \
                            OR EXISTS (SELECT 1 FROM actions a WHERE a.job_id = j.id \
                                       AND a.state = 'pending'))",
                )
                .text(catalog)
                .text(database)
                .text(table),
            )
            .await?;
        Ok(row.map_or(0, |(n,)| n.max(0) as u64))
    }

    async fn folded_restarts(&self, job: &JobId) -> Result<u64, StoreError> {
        let row: Option<(i64,)> = self
            .pool()
            .row(Query::new("SELECT folded_restarts FROM jobs WHERE id = $1").text(job.as_str()))
            .await?;
        Ok(row.map_or(0, |(n,)| n.max(0) as u64))
    }

    async fn interventions(&self, job: &JobId) -> Result<Vec<Intervention>, StoreError> {
        let rows: Vec<InterventionRow> = self
            .pool()
            .rows(
                Query::new(
                    "SELECT action_id, decision, at, decided_by, reason FROM job_interventions \
                     WHERE job_id = $1 ORDER BY id",
                )
                .text(job.as_str()),
            )
            .await?;
        rows.into_iter().map(InterventionRow::decode).collect()
    }

    async fn set_engine_job_id(
        &self,
        job: &JobId,
        engine_job_id: Option<&str>,
    ) -> Result<(), StoreError> {
        let updated = self
            .pool()
            .execute(
                Query::new("UPDATE jobs SET engine_job_id = $2, updated_at = $3 WHERE id = $1")
                    .text(job.as_str())
                    .opt_text(engine_job_id)
                    .time(Utc::now()),
            )
            .await
            .map_err(|e| engine_id_taken(engine_job_id, e))?;
        if updated == 0 {
            return Err(StoreError::JobNotFound(job.to_string()));
        }
        Ok(())
    }
}

/// The ids of a page of jobs, newest first. Only the filters given become
/// conditions (no `$n IS NULL OR …`), so each database can walk the index
/// that fits: SQLite would otherwise scan every newer job to reach a deep
/// page.
fn list_query<'a>(filter: &'a JobFilter, after: Option<&'a JobCursor>, limit: u32) -> Query<'a> {
    let mut conditions: Vec<String> = Vec::new();
    let mut params: Vec<Param<'a>> = Vec::new();
    let mut bind = |param: Param<'a>| {
        params.push(param);
        params.len()
    };
    if let Some(after) = after {
        let (at, id) = (
            bind(Param::Time(after.created_at)),
            bind(Param::Text(after.id.as_str())),
        );
        conditions.push(format!("(j.created_at, j.id) < (${at}, ${id})"));
    }
    if let Some(status) = filter.status {
        conditions.push(format!(
            "j.status = ${}",
            bind(Param::Text(status.as_str()))
        ));
    }
    if let Some(catalog) = filter.catalog.as_deref() {
        let n = bind(Param::Text(catalog));
        // The `LIMIT` keeps PostgreSQL from turning this into a join over
        // every hook of the catalog: it checks the newest jobs one by one.
        conditions.push(format!(
            "EXISTS (SELECT 1 FROM hooks h WHERE h.job_id = j.id AND h.catalog = ${n} LIMIT 1)"
        ));
    }
    if let Some(engine_job_id) = filter.engine_job_id.as_deref() {
        conditions.push(format!(
            "j.engine_job_id = ${}",
            bind(Param::Text(engine_job_id))
        ));
    }
    if let Some(engine) = filter.engine.as_deref() {
        conditions.push(format!("j.engine = ${}", bind(Param::Text(engine))));
    }
    if filter.quarantined {
        conditions.push(
            "EXISTS (SELECT 1 FROM actions a WHERE a.job_id = j.id AND a.state = 'pending' \
             AND a.outcome = 'quarantined')"
                .to_owned(),
        );
    }
    if let Some(from) = filter.created_after {
        conditions.push(format!("j.created_at >= ${}", bind(Param::Time(from))));
    }
    if let Some(before) = filter.created_before {
        conditions.push(format!("j.created_at < ${}", bind(Param::Time(before))));
    }
    if let Some((id_prefix, name_part)) = filter.search_patterns() {
        let (id, name) = (bind(Param::Owned(id_prefix)), bind(Param::Owned(name_part)));
        conditions.push(format!(
            "(j.id LIKE ${id} ESCAPE '\\' OR lower(j.name) LIKE ${name} ESCAPE '\\')"
        ));
    }
    let limit = bind(Param::Int(i64::from(limit)));
    let conditions = match conditions.is_empty() {
        true => String::new(),
        false => format!("WHERE {} ", conditions.join(" AND ")),
    };
    let mut query = Query::new(format!(
        "SELECT j.id FROM jobs j {conditions}ORDER BY j.created_at DESC, j.id DESC LIMIT CAST(${limit} AS BIGINT)"
    ));
    query.params = params;
    query
}
