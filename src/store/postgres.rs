//! The PostgreSQL store, for production and for several replicas sharing one
//! database. JSON columns are `jsonb`; names sort with `COLLATE "C"` so that
//! keyset pages match SQLite's bytewise order.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::codec::{
    APPLIED_MIGRATIONS, CatalogRow, encode_options, insert_failed, migration_failed, readiness,
    update_missed,
};
use super::codec::{
    ActionRow, HookRow, InterventionRow, JobRow, TransitionRow, abort_after_giving_up,
    assemble_jobs, catalogs_of, check_transition, engine_id_taken, first_missing, history_rows,
    in_use, job_insert_failed, planned_actions,
};
use super::{Keyring, OpenStoreError, Store, StoreError};
use crate::domain::hook::{
    ActionRecord, ActionResult, Decision, DecisionError, Intervention, JobFilter, JobRecord,
    NewJob, StatusChange, decide,
};
use crate::domain::job::{HookAction, JobId, JobMode, JobStatus, StatusReport, Transition};
use crate::domain::{CatalogDescriptor, CatalogName, CatalogRecord};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// The action columns as [`ActionRow`] reads them.
/// Reads jobs whose id matches `$matches` (SQL, binding `$ids` as `$1`)
/// with their hooks and actions; a macro, so the queries stay literals.
macro_rules! read_jobs {
    ($store:expr, $matches:literal, $ids:expr) => {{
        let jobs: Vec<JobRow> = sqlx::query_as(concat!(
            "SELECT id, name, mode, status, statement, failure, fingerprint, engine_job_id, created_at, updated_at, moved_at \
             FROM jobs WHERE id ",
            $matches,
            " ORDER BY id"
        ))
        .bind($ids)
        .fetch_all(&$store.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        let hooks: Vec<HookRow> = sqlx::query_as(concat!(
            "SELECT job_id, hook_index::bigint AS hook_index, kind, catalog, database_name, table_name, \
             if_not_exists, skipped, table_properties::text AS table_properties, \
             catalog_options::text AS catalog_options, \
             catalog_sealed_options::text AS catalog_sealed_options, catalog_comment \
             FROM hooks WHERE job_id ",
            $matches,
            " ORDER BY job_id, hook_index"
        ))
        .bind($ids)
        .fetch_all(&$store.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        let actions: Vec<ActionRow> = sqlx::query_as(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE job_id ",
            $matches,
            " ORDER BY id"
        ))
        .bind($ids)
        .fetch_all(&$store.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        assemble_jobs(jobs, hooks, actions, &$store.keyring)
    }};
}

macro_rules! action_columns {
    () => {
        "id, job_id, hook_index::bigint AS hook_index, action, trigger, state, attempts::bigint AS attempts, (lease_until IS NOT NULL AND lease_until > now()) AS in_progress, \
         last_error, outcome, created_at, updated_at"
    };
}

/// The catalog columns as [`CatalogRow`] reads them (a macro, so queries stay literals).
macro_rules! catalog_columns {
    () => {
        "name, options::text AS options, sealed_options::text AS sealed_options, comment, version, created_at, updated_at"
    };
}

pub struct PostgresStore {
    pool: PgPool,
    description: String,
    keyring: Arc<Keyring>,
}

impl PostgresStore {
    pub async fn open_url(url: &str, keyring: Arc<Keyring>) -> Result<Self, OpenStoreError> {
        // Never log the URL itself: it may carry a password.
        let options = PgConnectOptions::from_str(url).map_err(|_| {
            OpenStoreError::InvalidUrl(
                "expected postgres://user[:password]@host[:port]/database".into(),
            )
        })?;
        let description = format!(
            "PostgreSQL at {}:{}, database '{}'",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("(default)")
        );
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("{description}: {e}")))?;
        Ok(Self {
            pool,
            description,
            keyring,
        })
    }

    fn decode(&self, row: CatalogRow) -> Result<CatalogRecord, StoreError> {
        row.decode(&self.keyring)
    }

    /// The jobs with these ids, ordered by id: three queries for any number
    /// (`= $1` for one, which the planner serves faster than `= ANY($1)`).
    async fn load_jobs(&self, ids: &[&str]) -> Result<Vec<JobRecord>, StoreError> {
        match ids {
            [id] => read_jobs!(self, "= $1", *id),
            _ => read_jobs!(self, "= ANY($1)", ids),
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn local_files(&self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await.map_err(migration_failed)
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        let applied = sqlx::query_scalar(APPLIED_MIGRATIONS)
            .fetch_one(&self.pool)
            .await;
        let tables = sqlx::query_scalar(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()",
        )
        .fetch_all(&self.pool)
        .await;
        readiness(applied, tables, &MIGRATOR)
    }

    async fn insert_catalog(
        &self,
        catalog: &CatalogDescriptor,
    ) -> Result<CatalogRecord, StoreError> {
        let (options, sealed) = encode_options(&catalog.options, &self.keyring);
        let row: CatalogRow = sqlx::query_as(concat!(
            "INSERT INTO catalogs (name, options, sealed_options, comment, version, created_at, updated_at) \
             VALUES ($1, $2::jsonb, $3::jsonb, $4, 1, $5, $5) RETURNING ",
            catalog_columns!()
        ))
        .bind(catalog.name.as_str())
        .bind(options)
        .bind(sealed)
        .bind(&catalog.comment)
        .bind(Utc::now())
        .fetch_one(&self.pool)
        .await
        .map_err(|e| insert_failed(&catalog.name, e))?;
        self.decode(row)
    }

    async fn get_catalog(&self, name: &CatalogName) -> Result<Option<CatalogRecord>, StoreError> {
        let row: Option<CatalogRow> = sqlx::query_as(concat!(
            "SELECT ",
            catalog_columns!(),
            " FROM catalogs WHERE name = $1"
        ))
        .bind(name.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        row.map(|r| self.decode(r)).transpose()
    }

    async fn list_catalogs(
        &self,
        after: Option<&CatalogName>,
        limit: u32,
    ) -> Result<Vec<CatalogRecord>, StoreError> {
        let rows: Vec<CatalogRow> = sqlx::query_as(concat!(
            "SELECT ",
            catalog_columns!(),
            " FROM catalogs WHERE name > $1 ORDER BY name LIMIT $2"
        ))
        .bind(after.map(CatalogName::as_str).unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        rows.into_iter().map(|r| self.decode(r)).collect()
    }

    async fn update_catalog(
        &self,
        catalog: &CatalogDescriptor,
        expected_version: i64,
    ) -> Result<CatalogRecord, StoreError> {
        let (options, sealed) = encode_options(&catalog.options, &self.keyring);
        let row: Option<CatalogRow> = sqlx::query_as(concat!(
            "UPDATE catalogs SET options = $2::jsonb, sealed_options = $3::jsonb, comment = $4, \
             version = version + 1, updated_at = $5 WHERE name = $1 AND version = $6 RETURNING ",
            catalog_columns!()
        ))
        .bind(catalog.name.as_str())
        .bind(options)
        .bind(sealed)
        .bind(&catalog.comment)
        .bind(Utc::now())
        .bind(expected_version)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        match row {
            Some(row) => self.decode(row),
            None => Err(update_missed(
                &catalog.name,
                self.get_catalog(&catalog.name).await?,
            )),
        }
    }

    async fn delete_catalog(&self, name: &CatalogName) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        let exists: Option<bool> =
            sqlx::query_scalar("SELECT TRUE FROM catalogs WHERE name = $1 FOR UPDATE")
                .bind(name.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?;
        if exists.is_none() {
            return Ok(false);
        }
        let unfinished: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs j \
             WHERE EXISTS (SELECT 1 FROM hooks h WHERE h.job_id = j.id AND h.catalog = $1) \
               AND (j.status NOT IN ('FINISHED', 'FAILED', 'CANCELED') \
                    OR EXISTS (SELECT 1 FROM actions a WHERE a.job_id = j.id AND a.state = 'pending'))",
        )
        .bind(name.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        in_use(name, unfinished)?;
        sqlx::query("DELETE FROM catalogs WHERE name = $1")
            .bind(name.as_str())
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(true)
    }

    async fn insert_job(&self, job: &NewJob) -> Result<JobRecord, StoreError> {
        let now = Utc::now();
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        // Held until the commit: a drop of one of these catalogs waits for
        // this job, then sees it; one that went first makes this fail.
        let catalogs = catalogs_of(job);
        let present: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM catalogs WHERE name = ANY($1) ORDER BY name FOR SHARE",
        )
        .bind(&catalogs)
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        first_missing(&catalogs, &present)?;
        sqlx::query(
            "INSERT INTO jobs (id, name, mode, status, statement, failure, fingerprint, created_at, updated_at, moved_at, engine_job_id) \
             VALUES ($1, $2, $3, 'INITIALIZING', $4, NULL, $5, $6, $6, $6, $7)",
        )
        .bind(job.id.as_str())
        .bind(&job.name)
        .bind(job.mode.as_str())
        .bind(&job.statement)
        .bind(&job.fingerprint)
        .bind(now)
        .bind(job.engine_job_id.as_deref())
        .execute(&mut *tx)
        .await
        .map_err(|e| job_insert_failed(job, e))?;
        sqlx::query(
            "INSERT INTO job_transitions (job_id, from_status, to_status, failure, at) \
             VALUES ($1, NULL, 'INITIALIZING', NULL, $2)",
        )
        .bind(job.id.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        for (index, hook) in job.hooks.iter().enumerate() {
            let (plain, sealed) = encode_options(&hook.catalog.options, &self.keyring);
            sqlx::query(
                "INSERT INTO hooks (job_id, hook_index, kind, catalog, database_name, table_name, if_not_exists, \
                 skipped, table_properties, catalog_options, catalog_sealed_options, catalog_comment) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10::jsonb, $11::jsonb, $12)",
            )
            .bind(job.id.as_str())
            .bind(index as i32)
            .bind(hook.kind.as_str())
            .bind(hook.catalog.name.as_str())
            .bind(&hook.database)
            .bind(&hook.table)
            .bind(hook.if_not_exists)
            .bind(hook.skipped)
            .bind(serde_json::to_string(&hook.table_properties).expect("a string map serializes"))
            .bind(plain)
            .bind(sealed)
            .bind(&hook.catalog.comment)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        }
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        self.get_job(&job.id)
            .await?
            .ok_or_else(|| StoreError::JobNotFound(job.id.to_string()))
    }

    async fn get_job(&self, id: &JobId) -> Result<Option<JobRecord>, StoreError> {
        let mut jobs = self.load_jobs(&[id.as_str()]).await?;
        Ok(jobs.pop())
    }

    async fn transition_job(
        &self,
        id: &JobId,
        report: &StatusReport,
    ) -> Result<(JobRecord, Transition), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        let (status, mode): (String, String) =
            sqlx::query_as("SELECT status, mode FROM jobs WHERE id = $1 FOR UPDATE")
                .bind(id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?
                .ok_or_else(|| StoreError::JobNotFound(id.to_string()))?;
        let transition = check_transition(id, &status, report.status)?;
        if let Transition::Move { .. } = transition {
            let now = Utc::now();
            sqlx::query("UPDATE jobs SET status = $2, failure = coalesce($3, failure), updated_at = $4, moved_at = $4 WHERE id = $1")
                .bind(id.as_str())
                .bind(report.status.as_str())
                .bind(report.failure.as_deref())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?;
            for row in history_rows(&transition, report) {
                sqlx::query(
                    "INSERT INTO job_transitions (job_id, from_status, to_status, failure, at, inferred, engine_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(id.as_str())
                .bind(row.from.as_str())
                .bind(row.to.as_str())
                .bind(row.failure)
                .bind(now)
                .bind(row.inferred)
                .bind(row.engine_at)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?;
            }
            let hooks: Vec<(i64, bool)> = sqlx::query_as(
                "SELECT hook_index::bigint, skipped FROM hooks WHERE job_id = $1 ORDER BY hook_index",
            )
            .bind(id.as_str())
            .fetch_all(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
            let mode = JobMode::parse(&mode)
                .ok_or_else(|| StoreError::Internal(format!("job {id} has mode {mode}")))?;
            for (hook_index, action, trigger) in planned_actions(mode, &transition, &hooks) {
                if action == HookAction::Abort {
                    // The job ended: a begin or create still waiting (not
                    // running right now) would only make what the abort
                    // removes, so it gives way.
                    sqlx::query(
"UPDATE actions SET state = 'failed', outcome = 'superseded', \
                         last_error = 'superseded: the job ended before it ran', updated_at = $3 \
                         WHERE job_id = $1 AND hook_index = $2 AND state = 'pending' \
                           AND action IN ('begin', 'create') AND (lease_until IS NULL OR lease_until < $4)",
                    )
                    .bind(id.as_str())
                    .bind(hook_index as i32)
                    .bind(now)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::from_sqlx)?;
                }
                sqlx::query(
                    "INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, not_before, \
                     created_at, updated_at) VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6, $6)",
                )
                .bind(id.as_str())
                .bind(hook_index as i32)
                .bind(action.as_str())
                .bind(trigger.as_str())
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?;
            }
        }
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        let job = self
            .get_job(id)
            .await?
            .ok_or_else(|| StoreError::JobNotFound(id.to_string()))?;
        Ok((job, transition))
    }

    async fn release_orphaned_leases(&self) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn renew_leases(&self, ids: &[i64], lease: Duration) -> Result<(), StoreError> {
        let lease_until =
            Utc::now() + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        sqlx::query(
            "UPDATE actions SET lease_until = $1 \
             WHERE id = ANY($2) AND state = 'pending' AND lease_until IS NOT NULL",
        )
        .bind(lease_until)
        .bind(ids)
        .execute(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        Ok(())
    }

    async fn claim_due_actions(
        &self,
        job: Option<&JobId>,
        lease: Duration,
        limit: u32,
        untried_grace: Duration,
    ) -> Result<Vec<ActionRecord>, StoreError> {
        let now = Utc::now();
        let untried_due_by =
            now - chrono::Duration::from_std(untried_grace).unwrap_or(chrono::Duration::MAX);
        let lease_until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        let rows: Vec<ActionRow> = sqlx::query_as(concat!(
            "UPDATE actions SET lease_until = $1, attempts = attempts + 1, updated_at = $3 WHERE id IN ( \
               SELECT a.id FROM actions a WHERE a.state = 'pending' AND a.not_before <= $2 \
                 AND (a.lease_until IS NULL OR a.lease_until < $2) AND ($5::text IS NULL OR a.job_id = $5) \
                 AND (a.attempts > 0 OR a.not_before <= $6) \
                 AND NOT EXISTS (SELECT 1 FROM actions b WHERE b.job_id = a.job_id AND b.hook_index = a.hook_index \
                                 AND b.state = 'pending' AND b.id < a.id) \
               ORDER BY a.id LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING ",
            action_columns!()
        ))
        .bind(lease_until)
        .bind(now)
        .bind(now)
        .bind(i64::from(limit))
        .bind(job.map(JobId::as_str))
        .bind(untried_due_by)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        let mut actions: Vec<ActionRecord> = rows
            .into_iter()
            .map(ActionRow::decode)
            .collect::<Result<_, _>>()?;
        actions.sort_by_key(|a| a.id);
        Ok(actions)
    }

    async fn record_action(&self, id: i64, result: &ActionResult) -> Result<(), StoreError> {
        let now = Utc::now();
        let query = match result {
            ActionResult::Done { outcome } => sqlx::query(
                "UPDATE actions SET state = 'done', outcome = $2, last_error = NULL, lease_until = NULL, \
                 updated_at = $3 WHERE id = $1",
            )
            .bind(id)
            .bind(outcome)
            .bind(now),
            ActionResult::Retry { error, retry_at } => sqlx::query(
                "UPDATE actions SET last_error = $2, not_before = $3, lease_until = NULL, updated_at = $4 WHERE id = $1",
            )
            .bind(id)
            .bind(error)
            .bind(retry_at)
            .bind(now),
            ActionResult::Failed { error } => sqlx::query(
                "UPDATE actions SET state = 'failed', last_error = $2, lease_until = NULL, updated_at = $3 WHERE id = $1",
            )
            .bind(id)
            .bind(error)
            .bind(now),
        };
        query
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(())
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT j.id FROM jobs j WHERE j.id > $1 \
               AND ($2::text IS NULL OR j.status = $2) \
               AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM hooks h WHERE h.job_id = j.id AND h.catalog = $3)) \
               AND ($5::text IS NULL OR j.engine_job_id = $5) \
             ORDER BY j.id LIMIT $4",
        )
        .bind(after.map(JobId::as_str).unwrap_or(""))
        .bind(filter.status.map(JobStatus::as_str))
        .bind(filter.catalog.as_deref())
        .bind(i64::from(limit))
        .bind(filter.engine_job_id.as_deref())
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        // A job deleted meanwhile is simply not listed.
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        self.load_jobs(&ids).await
    }

    async fn status_history(&self, id: &JobId) -> Result<Vec<StatusChange>, StoreError> {
        let rows: Vec<TransitionRow> = sqlx::query_as(
            "SELECT from_status, to_status, failure, at, inferred, engine_at FROM job_transitions WHERE job_id = $1 ORDER BY id",
        )
        .bind(id.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        rows.into_iter().map(TransitionRow::decode).collect()
    }

    async fn settle_action(
        &self,
        job: &JobId,
        action: i64,
        decision: Decision,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::from_sqlx)?;
        let (status, mode): (String, String) =
            sqlx::query_as("SELECT status, mode FROM jobs WHERE id = $1 FOR UPDATE")
                .bind(job.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?
                .ok_or_else(|| StoreError::JobNotFound(job.to_string()))?;
        let actions: Vec<ActionRecord> = sqlx::query_as::<_, ActionRow>(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE job_id = $1 ORDER BY id"
        ))
        .bind(job.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?
        .into_iter()
        .map(ActionRow::decode)
        .collect::<Result<_, _>>()?;
        let target = actions.iter().find(|a| a.id == action).ok_or_else(|| {
            StoreError::Decision(DecisionError::NotFound {
                job: job.to_string(),
                action,
            })
        })?;
        let later = actions
            .iter()
            .any(|a| a.hook_index == target.hook_index && a.id > target.id);
        decide(target, later, decision).map_err(StoreError::Decision)?;
        let now = Utc::now();
        match decision {
            Decision::Retry => sqlx::query(
                "UPDATE actions SET state = 'pending', outcome = NULL, not_before = $2, updated_at = $3 \
                 WHERE id = $1",
            )
            .bind(action)
            .bind(now)
            .bind(now),
            Decision::GiveUp => sqlx::query(
                "UPDATE actions SET state = 'failed', outcome = 'given up', \
                 last_error = coalesce(last_error, 'given up by an operator'), lease_until = NULL, \
                 updated_at = $2 WHERE id = $1",
            )
            .bind(action)
            .bind(now),
        }
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        let mode = JobMode::parse(&mode)
            .ok_or_else(|| StoreError::Internal(format!("job {job} has mode {mode}")))?;
        if decision == Decision::GiveUp && abort_after_giving_up(mode, target, &actions) {
            sqlx::query(
                "INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, not_before, \
                 created_at, updated_at) VALUES ($1, $2, 'abort', $3, 'pending', 0, $4, $5, $5)",
            )
            .bind(job.as_str())
            .bind(target.hook_index as i32)
            .bind(&status)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        }
        sqlx::query(
            "INSERT INTO job_interventions (job_id, action_id, decision, at) VALUES ($1, $2, $3, $4)",
        )
        .bind(job.as_str())
        .bind(action)
        .bind(decision.as_str())
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)
    }

    async fn interventions(&self, job: &JobId) -> Result<Vec<Intervention>, StoreError> {
        let rows: Vec<InterventionRow> = sqlx::query_as(
            "SELECT action_id, decision, at FROM job_interventions WHERE job_id = $1 ORDER BY id",
        )
        .bind(job.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        rows.into_iter().map(InterventionRow::decode).collect()
    }

    async fn set_engine_job_id(
        &self,
        job: &JobId,
        engine_job_id: Option<&str>,
    ) -> Result<(), StoreError> {
        let updated =
            sqlx::query("UPDATE jobs SET engine_job_id = $2, updated_at = $3 WHERE id = $1")
                .bind(job.as_str())
                .bind(engine_job_id)
                .bind(Utc::now())
                .execute(&self.pool)
                .await
                .map_err(|e| engine_id_taken(engine_job_id, e))?;
        if updated.rows_affected() == 0 {
            return Err(StoreError::JobNotFound(job.to_string()));
        }
        Ok(())
    }
}
