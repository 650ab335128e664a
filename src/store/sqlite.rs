//! The embedded store: one SQLite file in WAL mode.
//!
//! WAL lets readers proceed while the single writer commits; `busy_timeout`
//! makes concurrent writers queue instead of failing.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::SqlitePool;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::codec::{
    APPLIED_MIGRATIONS, CatalogRow, encode_options, insert_failed, migration_failed, readiness,
    update_missed,
};
use super::codec::{
    ActionRow, HookRow, InterventionRow, JobRow, TransitionRow, abort_after_giving_up,
    assemble_jobs, catalogs_of, check_transition, engine_id_taken, first_missing, history_rows,
    in_use, job_insert_failed, planned_actions,
};
use super::{Keyring, Store, StoreError};
use crate::domain::hook::{
    ActionRecord, ActionResult, Decision, DecisionError, Intervention, JobFilter, JobRecord,
    NewJob, StatusChange, decide,
};
use crate::domain::job::{HookAction, JobId, JobMode, JobStatus, StatusReport, Transition};
use crate::domain::{CatalogDescriptor, CatalogName, CatalogRecord};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

/// Reads jobs whose id matches `$matches` (SQL, binding `$ids` as `?1`)
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
            "SELECT job_id, hook_index, kind, catalog, database_name, table_name, if_not_exists, skipped, \
             table_properties, catalog_options, catalog_sealed_options, catalog_comment \
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

/// The action columns as [`ActionRow`] reads them.
macro_rules! action_columns {
    () => {
        "id, job_id, hook_index, action, trigger, state, attempts, (lease_until IS NOT NULL AND lease_until > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) AS in_progress, last_error, outcome, created_at, updated_at"
    };
}

/// The catalog columns as [`CatalogRow`] reads them (a macro, so queries stay literals).
macro_rules! catalog_columns {
    () => {
        "name, options, sealed_options, comment, version, created_at, updated_at"
    };
}

pub struct SqliteStore {
    pool: SqlitePool,
    description: String,
    file: std::path::PathBuf,
    keyring: Arc<Keyring>,
    /// Held while the store is open: one process per file, so that leases
    /// left in it at start belong to a process that is gone.
    _lock: Option<std::fs::File>,
}

impl SqliteStore {
    pub async fn open_file(path: &Path, keyring: Arc<Keyring>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new().filename(path);
        Self::open(options, format!("SQLite at {}", path.display()), keyring).await
    }

    pub async fn open_url(url: &str, keyring: Arc<Keyring>) -> Result<Self, StoreError> {
        let options =
            SqliteConnectOptions::from_str(url).map_err(|e| StoreError::Internal(e.to_string()))?;
        let description = format!("SQLite at {}", options.get_filename().display());
        Self::open(options, description, keyring).await
    }

    async fn open(
        options: SqliteConnectOptions,
        description: String,
        keyring: Arc<Keyring>,
    ) -> Result<Self, StoreError> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let file = options.get_filename().to_owned();
        let lock = lock_exclusively(&file, &description)?;
        make_private(&file, &description)?;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("{description}: {e}")))?;
        Ok(Self {
            pool,
            description,
            file,
            keyring,
            _lock: lock,
        })
    }

    fn decode(&self, row: CatalogRow) -> Result<CatalogRecord, StoreError> {
        row.decode(&self.keyring)
    }

    /// The jobs with these ids, ordered by id: three queries for any number
    /// (`= ?1` for one, a JSON array of ids for a page).
    async fn load_jobs(&self, ids: &[&str]) -> Result<Vec<JobRecord>, StoreError> {
        match ids {
            [id] => read_jobs!(self, "= ?1", *id),
            _ => {
                let ids =
                    serde_json::to_string(ids).map_err(|e| StoreError::Internal(e.to_string()))?;
                read_jobs!(self, "IN (SELECT value FROM json_each(?1))", &ids)
            }
        }
    }
}

/// Creates the database file readable by this user only (0600), or makes
/// an existing one and its WAL and shared-memory files so: SQLite creates
/// those with the database file's own mode.
fn make_private(database: &Path, description: &str) -> Result<(), StoreError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if database.as_os_str().is_empty() || database == Path::new(":memory:") {
        return Ok(());
    }
    let failed = |e: std::io::Error| StoreError::Unavailable(format!("{description}: {e}"));
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(database)
        .map_err(failed)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut path = database.as_os_str().to_owned();
        path.push(suffix);
        match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
            _ => {}
        }
    }
    Ok(())
}

/// Takes `<database>.lock` with `flock`, which the kernel releases when the
/// process ends, however it ends. SQLite's own locks are `fcntl` locks on the
/// database file and are not touched. An in-memory database needs none.
fn lock_exclusively(
    database: &Path,
    description: &str,
) -> Result<Option<std::fs::File>, StoreError> {
    use rustix::fs::{FlockOperation, flock};
    use std::os::unix::fs::OpenOptionsExt;
    if database.as_os_str().is_empty() || database == Path::new(":memory:") {
        return Ok(None);
    }
    let mut path = database.as_os_str().to_owned();
    path.push(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| StoreError::Unavailable(format!("{description}: lock file: {e}")))?;
    match flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(file)),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError::InUse(description.to_owned())),
        Err(e) => Err(StoreError::Unavailable(format!(
            "{description}: lock file: {e}"
        ))),
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn local_files(&self) -> Vec<std::path::PathBuf> {
        let in_memory = self.file.as_os_str().is_empty() || self.file == Path::new(":memory:");
        if in_memory {
            Vec::new()
        } else {
            vec![self.file.clone()]
        }
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await.map_err(migration_failed)
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        let applied = sqlx::query_scalar(APPLIED_MIGRATIONS)
            .fetch_one(&self.pool)
            .await;
        let tables = sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&self.pool)
            .await;
        readiness(applied, tables, &MIGRATOR)
    }

    async fn insert_catalog(
        &self,
        catalog: &CatalogDescriptor,
    ) -> Result<CatalogRecord, StoreError> {
        let (options, sealed) = encode_options(&catalog.options, &self.keyring);
        let now = Utc::now();
        let row: CatalogRow = sqlx::query_as(concat!(
            "INSERT INTO catalogs (name, options, sealed_options, comment, version, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5) RETURNING ",
            catalog_columns!()
        ))
        .bind(catalog.name.as_str())
        .bind(options)
        .bind(sealed)
        .bind(&catalog.comment)
        .bind(now)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| insert_failed(&catalog.name, e))?;
        self.decode(row)
    }

    async fn get_catalog(&self, name: &CatalogName) -> Result<Option<CatalogRecord>, StoreError> {
        let row: Option<CatalogRow> = sqlx::query_as(concat!(
            "SELECT ",
            catalog_columns!(),
            " FROM catalogs WHERE name = ?1"
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
            " FROM catalogs WHERE name > ?1 ORDER BY name LIMIT ?2"
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
            "UPDATE catalogs SET options = ?2, sealed_options = ?3, comment = ?4, version = version + 1, updated_at = ?5 \
             WHERE name = ?1 AND version = ?6 RETURNING ",
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
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from_sqlx)?;
        let exists: Option<bool> = sqlx::query_scalar("SELECT TRUE FROM catalogs WHERE name = ?1")
            .bind(name.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        if exists.is_none() {
            return Ok(false);
        }
        let unfinished: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs j \
             WHERE EXISTS (SELECT 1 FROM hooks h WHERE h.job_id = j.id AND h.catalog = ?1) \
               AND (j.status NOT IN ('FINISHED', 'FAILED', 'CANCELED') \
                    OR EXISTS (SELECT 1 FROM actions a WHERE a.job_id = j.id AND a.state = 'pending'))",
        )
        .bind(name.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        in_use(name, unfinished)?;
        sqlx::query("DELETE FROM catalogs WHERE name = ?1")
            .bind(name.as_str())
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        tx.commit().await.map_err(StoreError::from_sqlx)?;
        Ok(true)
    }

    async fn insert_job(&self, job: &NewJob) -> Result<JobRecord, StoreError> {
        let now = Utc::now();
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from_sqlx)?;
        let catalogs = catalogs_of(job);
        let present: Vec<String> = sqlx::query_scalar(
            "SELECT name FROM catalogs WHERE name IN (SELECT value FROM json_each(?1))",
        )
        .bind(serde_json::to_string(&catalogs).expect("names serialize"))
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::from_sqlx)?;
        first_missing(&catalogs, &present)?;
        sqlx::query(
            "INSERT INTO jobs (id, name, mode, status, statement, failure, fingerprint, created_at, updated_at, moved_at, engine_job_id) \
             VALUES (?1, ?2, ?3, 'INITIALIZING', ?4, NULL, ?5, ?6, ?6, ?6, ?7)",
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
             VALUES (?1, NULL, 'INITIALIZING', NULL, ?2)",
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
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .bind(job.id.as_str())
            .bind(index as i64)
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
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from_sqlx)?;
        let (status, mode): (String, String) =
            sqlx::query_as("SELECT status, mode FROM jobs WHERE id = ?1")
                .bind(id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?
                .ok_or_else(|| StoreError::JobNotFound(id.to_string()))?;
        let transition = check_transition(id, &status, report.status)?;
        if let Transition::Move { .. } = transition {
            let now = Utc::now();
            sqlx::query("UPDATE jobs SET status = ?2, failure = coalesce(?3, failure), updated_at = ?4, moved_at = ?4 WHERE id = ?1")
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
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
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
                "SELECT hook_index, skipped FROM hooks WHERE job_id = ?1 ORDER BY hook_index",
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
                         last_error = 'superseded: the job ended before it ran', updated_at = ?3 \
                         WHERE job_id = ?1 AND hook_index = ?2 AND state = 'pending' \
                           AND action IN ('begin', 'create') AND (lease_until IS NULL OR lease_until < ?4)",
                    )
                    .bind(id.as_str())
                    .bind(hook_index)
                    .bind(now)
                    .bind(now.timestamp_millis())
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::from_sqlx)?;
                }
                sqlx::query(
                    "INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, not_before, \
                     created_at, updated_at) VALUES (?1, ?2, ?3, ?4, 'pending', 0, ?5, ?6, ?6)",
                )
                .bind(id.as_str())
                .bind(hook_index)
                .bind(action.as_str())
                .bind(trigger.as_str())
                .bind(now.timestamp_millis())
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
        let released = sqlx::query(
            "UPDATE actions SET lease_until = NULL WHERE state = 'pending' AND lease_until IS NOT NULL",
        )
        .execute(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        Ok(released.rows_affected())
    }

    async fn renew_leases(&self, ids: &[i64], lease: Duration) -> Result<(), StoreError> {
        let lease_until =
            Utc::now() + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        let ids = serde_json::to_string(ids).map_err(|e| StoreError::Internal(e.to_string()))?;
        sqlx::query(
            "UPDATE actions SET lease_until = ?1 \
             WHERE id IN (SELECT value FROM json_each(?2)) AND state = 'pending' AND lease_until IS NOT NULL",
        )
        .bind(lease_until.timestamp_millis())
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
            "UPDATE actions SET lease_until = ?1, attempts = attempts + 1, updated_at = ?3 WHERE id IN ( \
               SELECT a.id FROM actions a WHERE a.state = 'pending' AND a.not_before <= ?2 \
                 AND (a.lease_until IS NULL OR a.lease_until < ?2) AND (?5 IS NULL OR a.job_id = ?5) \
                 AND (a.attempts > 0 OR a.not_before <= ?6) \
                 AND NOT EXISTS (SELECT 1 FROM actions b WHERE b.job_id = a.job_id AND b.hook_index = a.hook_index \
                                 AND b.state = 'pending' AND b.id < a.id) \
               ORDER BY a.id LIMIT ?4) RETURNING ",
            action_columns!()
        ))
        .bind(lease_until.timestamp_millis())
        .bind(now.timestamp_millis())
        .bind(now)
        .bind(i64::from(limit))
        .bind(job.map(JobId::as_str))
        .bind(untried_due_by.timestamp_millis())
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
                "UPDATE actions SET state = 'done', outcome = ?2, last_error = NULL, lease_until = NULL, \
                 updated_at = ?3 WHERE id = ?1",
            )
            .bind(id)
            .bind(outcome)
            .bind(now),
            ActionResult::Retry { error, retry_at } => sqlx::query(
                "UPDATE actions SET last_error = ?2, not_before = ?3, lease_until = NULL, updated_at = ?4 WHERE id = ?1",
            )
            .bind(id)
            .bind(error)
            .bind(retry_at.timestamp_millis())
            .bind(now),
            ActionResult::Failed { error } => sqlx::query(
                "UPDATE actions SET state = 'failed', last_error = ?2, lease_until = NULL, updated_at = ?3 WHERE id = ?1",
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
            "SELECT j.id FROM jobs j WHERE j.id > ?1 \
               AND (?2 IS NULL OR j.status = ?2) \
               AND (?3 IS NULL OR EXISTS (SELECT 1 FROM hooks h WHERE h.job_id = j.id AND h.catalog = ?3)) \
               AND (?5 IS NULL OR j.engine_job_id = ?5) \
             ORDER BY j.id LIMIT ?4",
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
            "SELECT from_status, to_status, failure, at, inferred, engine_at FROM job_transitions WHERE job_id = ?1 ORDER BY id",
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
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from_sqlx)?;
        let (status, mode): (String, String) =
            sqlx::query_as("SELECT status, mode FROM jobs WHERE id = ?1")
                .bind(job.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(StoreError::from_sqlx)?
                .ok_or_else(|| StoreError::JobNotFound(job.to_string()))?;
        let actions: Vec<ActionRecord> = sqlx::query_as::<_, ActionRow>(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE job_id = ?1 ORDER BY id"
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
                "UPDATE actions SET state = 'pending', outcome = NULL, not_before = ?2, updated_at = ?3 \
                 WHERE id = ?1",
            )
            .bind(action)
            .bind(now.timestamp_millis())
            .bind(now),
            Decision::GiveUp => sqlx::query(
                "UPDATE actions SET state = 'failed', outcome = 'given up', \
                 last_error = coalesce(last_error, 'given up by an operator'), lease_until = NULL, \
                 updated_at = ?2 WHERE id = ?1",
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
                 created_at, updated_at) VALUES (?1, ?2, 'abort', ?3, 'pending', 0, ?4, ?5, ?5)",
            )
            .bind(job.as_str())
            .bind(target.hook_index)
            .bind(&status)
            .bind(now.timestamp_millis())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::from_sqlx)?;
        }
        sqlx::query(
            "INSERT INTO job_interventions (job_id, action_id, decision, at) VALUES (?1, ?2, ?3, ?4)",
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
            "SELECT action_id, decision, at FROM job_interventions WHERE job_id = ?1 ORDER BY id",
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
            sqlx::query("UPDATE jobs SET engine_job_id = ?2, updated_at = ?3 WHERE id = ?1")
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
