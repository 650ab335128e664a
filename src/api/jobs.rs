//! `/v1/jobs`: submit CTAS jobs and report their status.
//!
//! The rules (planning hooks against their catalogs, moving jobs, running
//! their actions) live in [`crate::service`]; here are the routes, their
//! JSON and their answers.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Authorized, need};
use super::catalogs::PageParams;
use super::error::{ApiError, Problem, ProblemCode};
use super::etag::{IfMatch, Rendered, Tagged};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::job_views::Kept;
use super::openapi::StringMap;
use super::{AppState, page};
use crate::domain::engine::{EngineObservation, FLINK_FIXED_JOB_ID_KEY, Reachability};
use crate::domain::hook::{HookKind, JobCursor, JobFilter, JobRecord};
use crate::domain::job::{JobId, JobMode, JobStatus};
use crate::domain::ledger::{
    ActionOutcome, ActionRecord, ActionState, Decision, HookAction, Settlement,
};
use crate::domain::options::masked_map;
use crate::domain::table::TableDefinition;
use crate::domain::{WriteLocation, non_null};
use crate::service::{self, HookRequest, JobRequest, Submission, WriteLocations};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(submit_job, list_jobs))
        .routes(routes!(get_job, update_job))
        .routes(routes!(report_status))
        .routes(routes!(job_events))
        .routes(routes!(settle_action))
}

/// A target table: `catalog.database.table`; the catalog's default
/// database when `database` is absent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"catalog": "pg", "database": "analytics", "table": "daily"}))]
pub struct Target {
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
    pub catalog: String,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub database: Option<String>,
    pub table: String,
}

/// A hook's target as the job keeps it, its database resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct HookTarget {
    pub catalog: String,
    pub database: String,
    pub table: String,
}

/// One CTAS target of a job. Give the table either as `table` (JSON) or as
/// `table_properties` (Flink's `CatalogPropertiesUtil` map).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitHook {
    pub kind: HookKind,
    pub target: Target,
    /// With `create_table_as`: an existing target makes the hook do nothing.
    #[serde(default)]
    pub if_not_exists: bool,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub table: Option<TableDefinition>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(value_type = StringMap, nullable = false)]
    pub table_properties: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "orders by day",
    "mode": "batch",
    "statement": "CREATE TABLE pg.analytics.daily AS SELECT ...",
    "hooks": [{
        "kind": "create_table_as",
        "target": {"catalog": "pg", "database": "analytics", "table": "daily"},
        "table": {"columns": [{"name": "day", "type": "DATE NOT NULL"}, {"name": "total", "type": "DECIMAL(12, 2)"}],
                  "primary_key": {"name": "pk_day", "columns": ["day"]}}
    }]
}))]
pub struct SubmitJob {
    /// A Flink job id (32 hex digits); generated when absent.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(pattern = r"^[0-9a-fA-F]{32}$", nullable = false)]
    pub id: Option<String>,
    pub name: String,
    pub mode: JobMode,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub statement: Option<String>,
    /// The engine's own id for the job (Flink's `JobID`), if known now; it
    /// can be attached later with `PATCH /v1/jobs/{job}`. On an `engine`,
    /// it defaults to the job's id, which the Flink job takes by setting
    /// the job's `engine_options`.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub engine_job_id: Option<String>,
    /// A registered engine (`/v1/engines`) ctasd watches the job on: it
    /// follows the job's statuses itself, and nobody reports them. The
    /// staging (batch) or table (streaming) is then prepared at once, before
    /// the engine writes.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$", nullable = false)]
    pub engine: Option<String>,
    pub hooks: Vec<SubmitHook>,
}

impl From<SubmitJob> for JobRequest {
    fn from(job: SubmitJob) -> Self {
        JobRequest {
            id: job.id,
            name: job.name,
            mode: job.mode,
            statement: job.statement,
            engine_job_id: job.engine_job_id,
            engine: job.engine,
            hooks: job
                .hooks
                .into_iter()
                .map(|hook| HookRequest {
                    kind: hook.kind,
                    catalog: hook.target.catalog,
                    database: hook.target.database,
                    table: hook.target.table,
                    if_not_exists: hook.if_not_exists,
                    definition: hook.table,
                    properties: hook.table_properties,
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Hook {
    pub index: u32,
    pub kind: HookKind,
    pub target: HookTarget,
    pub if_not_exists: bool,
    /// The target existed at submission and `if_not_exists` was set: nothing happens.
    pub skipped: bool,
    pub table: TableDefinition,
    /// The table as Flink's property map, exactly as stored.
    #[schema(value_type = StringMap)]
    pub table_properties: BTreeMap<String, String>,
    /// Where the engine writes; `null` for a skipped hook.
    #[schema(required = true)]
    pub write_location: Option<WriteLocation>,
}

/// One entry of the action ledger.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": 1, "hook": 0, "action": "begin", "trigger": "CREATED", "state": "done", "attempts": 1,
    "in_progress": false, "outcome": "staged", "last_error": null,
    "created_at": "2026-12-03T12:00:00Z", "updated_at": "2026-12-03T12:00:00.120Z"
}))]
pub struct LedgerAction {
    pub id: i64,
    pub hook: u32,
    pub action: HookAction,
    /// The status whose arrival recorded it.
    pub trigger: JobStatus,
    pub state: ActionState,
    pub attempts: u32,
    pub in_progress: bool,
    /// What it found or did, once done (or superseded, or given up).
    #[schema(required = true)]
    pub outcome: Option<ActionOutcome>,
    #[schema(required = true)]
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A failed action that counts against the job.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionFailure {
    pub action_id: i64,
    pub hook: u32,
    pub action: HookAction,
    /// Why, in the words of the system that refused (or `given up`).
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "1b49f930063d45d6be461c4744606de0", "name": "daily totals", "mode": "batch",
    "status": "FINISHED", "settlement": "settled", "failures": [], "statement": null,
    "engine_job_id": null, "engine": null, "engine_options": {}, "watch": null, "failure": null,
    "hooks": [{"index": 0, "kind": "create_table_as",
               "target": {"catalog": "pg", "database": "test", "table": "daily_totals"},
               "if_not_exists": false, "skipped": false,
               "table": {"columns": [{"name": "day", "type": "DATE NOT NULL"}]},
               "table_properties": {"schema.0.name": "day", "schema.0.data-type": "DATE NOT NULL"},
               "write_location": {"kind": "table", "name": "__ctasd_stg_1b49f930063d45d6be461c4744606de0_0",
                                  "url": "jdbc:postgresql://127.0.0.1:5432/test", "path": null,
                                  "sink_options": {"connector": "jdbc"}, "sink_statement": "CREATE TEMPORARY TABLE ..."}}],
    "actions": [],
    "created_at": "2026-12-03T12:00:00Z", "updated_at": "2026-12-03T12:00:01Z"
}))]
pub struct Job {
    pub id: String,
    pub name: String,
    pub mode: JobMode,
    pub status: JobStatus,
    /// Where everything ctasd had to do for the job stands: a failed commit
    /// shows here, not only in its action.
    pub settlement: Settlement,
    /// The actions behind a `failed` settlement.
    pub failures: Vec<ActionFailure>,
    #[schema(required = true)]
    pub statement: Option<String>,
    /// The engine's own id for the job.
    #[schema(required = true)]
    pub engine_job_id: Option<String>,
    /// The engine ctasd watches the job on, if it does.
    #[schema(required = true)]
    pub engine: Option<String>,
    /// Settings the engine's job must have for ctasd to find it: on Flink,
    /// `$internal.pipeline.job-id` (set it in the job's configuration).
    #[schema(value_type = StringMap)]
    pub engine_options: BTreeMap<String, String>,
    /// What ctasd's watcher last saw of the job and its engine.
    #[schema(required = true)]
    pub watch: Option<Watch>,
    /// Why the job failed: the reporter's words, or the root cause the
    /// watcher copied from the engine.
    #[schema(required = true)]
    pub failure: Option<String>,
    pub hooks: Vec<Hook>,
    /// Every action, oldest first.
    pub actions: Vec<LedgerAction>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What ctasd's watcher last saw of a job and of its engine.
#[derive(Debug, Serialize, ToSchema)]
pub struct Watch {
    /// Whether ctasd reached the engine when it last tried.
    pub engine_reachability: Reachability,
    /// Since when the engine has been so.
    #[schema(required = true)]
    pub engine_reachability_since: Option<DateTime<Utc>>,
    /// Why ctasd cannot reach the engine, while it cannot.
    #[schema(required = true)]
    pub engine_error: Option<String>,
    /// The job's status as the engine last gave it.
    #[schema(required = true)]
    pub engine_status: Option<JobStatus>,
    #[schema(required = true)]
    pub first_seen_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Since when the engine, reachable, has not known the job.
    #[schema(required = true)]
    pub missing_since: Option<DateTime<Utc>>,
    /// What the watcher waits for, or why it settled the job, in words.
    #[schema(required = true)]
    pub note: Option<String>,
}

fn watch_view(job: &JobRecord) -> Option<Watch> {
    job.engine.as_ref()?;
    let engine = job
        .engine_observation
        .clone()
        .unwrap_or_else(EngineObservation::unknown);
    let watch = job.watch.clone().unwrap_or_default();
    Some(Watch {
        engine_reachability: engine.reachability,
        engine_reachability_since: engine.since,
        engine_error: engine.last_error,
        engine_status: watch.engine_status,
        first_seen_at: watch.first_seen_at,
        last_seen_at: watch.last_seen_at,
        missing_since: watch.missing_since,
        note: watch.note,
    })
}

/// The settings an engine's job takes so that ctasd finds it.
fn engine_options(job: &JobRecord) -> BTreeMap<String, String> {
    match (&job.engine, &job.engine_job_id) {
        (Some(_), Some(id)) => [(FLINK_FIXED_JOB_ID_KEY.to_owned(), id.clone())].into(),
        _ => BTreeMap::new(),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "FINISHED", "timestamps": {"CREATED": 1764763200000_i64, "RUNNING": 1764763200120_i64, "FINISHED": 1764763200410_i64}}))]
pub struct StatusReport {
    /// The status the engine reports. Statuses it passed through since the
    /// last report (a poller misses short ones) are applied first, in order.
    pub status: JobStatus,
    /// Why the job failed, for `FAILED`/`FAILING`.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub failure: Option<String>,
    /// When the engine says the job reached each status, in milliseconds
    /// since the epoch, as Flink's `/jobs/<id>` gives them (0: not reached).
    /// Recorded in the history beside ctasd's own times.
    #[serde(default)]
    pub timestamps: BTreeMap<JobStatus, i64>,
}

/// A span ahead, in the largest unit that says it.
fn humanize_ahead(ahead: chrono::Duration) -> String {
    match ahead.num_days() {
        days if days >= 365 => format!("{} years", days / 365),
        days if days >= 1 => format!("{days} days"),
        _ => format!("{} minutes", ahead.num_minutes()),
    }
}

impl StatusReport {
    /// The report as the domain takes it; a time more than `max_ahead`
    /// ahead of this clock is refused.
    fn into_domain(
        self,
        max_ahead: chrono::Duration,
    ) -> Result<crate::domain::job::StatusReport, ApiError> {
        let mut engine_times = BTreeMap::new();
        for (status, millis) in self.timestamps.into_iter().filter(|(_, m)| *m > 0) {
            let invalid = |message: String| {
                ApiError::new(ProblemCode::BodyInvalid, message.clone())
                    .with_field(format!("timestamps.{status}"), message)
            };
            let at = DateTime::from_timestamp_millis(millis).ok_or_else(|| {
                invalid(format!(
                    "{millis} is not a time in milliseconds since the epoch"
                ))
            })?;
            let latest = Utc::now() + max_ahead;
            if at > latest {
                return Err(invalid(format!(
                    "{millis} is {} ahead of ctasd's clock, more than the {} s a clock may be; \
                     times are milliseconds since the epoch (is it in microseconds?)",
                    humanize_ahead(at - Utc::now()),
                    max_ahead.num_seconds()
                )));
            }
            engine_times.insert(status, at);
        }
        Ok(crate::domain::job::StatusReport {
            status: self.status,
            failure: self.failure,
            engine_times,
        })
    }
}

/// The job after a status report, and the actions that status implied.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "actions_taken": [{
        "id": 2, "hook": 0, "action": "commit", "trigger": "FINISHED", "state": "done", "attempts": 1,
        "in_progress": false, "outcome": "committed", "last_error": null,
        "created_at": "2026-12-03T12:01:00Z", "updated_at": "2026-12-03T12:01:00.050Z"
    }],
    "job": {"id": "1b49f930063d45d6be461c4744606de0", "status": "FINISHED", "settlement": "settled", "...": "..."}
}))]
pub struct StatusOutcome {
    /// The actions the report's move recorded (for every status it passed
    /// through), with their results.
    pub actions_taken: Vec<LedgerAction>,
    pub job: Job,
}

fn action_view(action: &ActionRecord) -> LedgerAction {
    LedgerAction {
        id: action.id,
        hook: action.hook_index,
        action: action.action,
        trigger: action.trigger,
        state: action.state,
        attempts: action.attempts,
        in_progress: action.in_progress,
        outcome: action.outcome,
        last_error: action.last_error.clone(),
        created_at: action.created_at,
        updated_at: action.updated_at,
    }
}

fn job_view(job: &JobRecord, locations: WriteLocations) -> Job {
    let hooks = job
        .hooks
        .iter()
        .zip(locations)
        .enumerate()
        .map(|(index, (hook, location))| Hook {
            index: index as u32,
            kind: hook.kind,
            target: HookTarget {
                catalog: hook.catalog.name.to_string(),
                database: hook.database.clone(),
                table: hook.table.clone(),
            },
            if_not_exists: hook.if_not_exists,
            skipped: hook.skipped,
            table: TableDefinition::from_properties(&masked_map(&hook.table_properties))
                .expect("stored properties were validated at submission"),
            table_properties: masked_map(&hook.table_properties),
            write_location: location,
        })
        .collect();
    Job {
        id: job.id.to_string(),
        name: job.name.clone(),
        mode: job.mode,
        status: job.status,
        settlement: job.settlement(),
        failures: job
            .failures()
            .map(|a| ActionFailure {
                action_id: a.id,
                hook: a.hook_index,
                action: a.action,
                error: a
                    .last_error
                    .clone()
                    .or_else(|| a.outcome.map(|o| o.as_str().to_owned()))
                    .unwrap_or_default(),
            })
            .collect(),
        statement: job.statement.clone(),
        engine_job_id: job.engine_job_id.clone(),
        engine: job.engine.as_ref().map(ToString::to_string),
        engine_options: engine_options(job),
        watch: watch_view(job),
        failure: job.failure.clone(),
        hooks,
        actions: job.actions.iter().map(action_view).collect(),
        created_at: job.created_at,
        updated_at: job.updated_at,
    }
}

/// Submit a job: its hooks are checked against the live catalogs; nothing is
/// created yet, unless the job names an `engine`: then its staging (batch)
/// or table (streaming) is prepared before the answer.
#[utoipa::path(
    post,
    path = "/v1/jobs",
    tag = "jobs",
    request_body = SubmitJob,
    responses(
        (status = 201, description = "Submitted; each hook says where the engine writes", body = Job,
            headers(("location" = String, description = "The job's URL"))),
        (status = 200, description = "The same submission again: the existing job", body = Job),
        (status = 400, description = "`BODY_MALFORMED`", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "`REQUEST_TIMEOUT`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`JOB_EXISTS` (same id, different job), `TABLE_EXISTS`, `TARGET_MISSING`, or `TABLE_NOT_OWNED` (a replace of a table ctasd cannot prove it made)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`BODY_TOO_LARGE`", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "`CONTENT_TYPE_UNSUPPORTED`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID`, `JOB_INVALID`, `CATALOG_NOT_FOUND`, `ENGINE_NOT_FOUND`, `DATABASE_NOT_FOUND`, `TABLE_INVALID`, `TABLE_UNSUPPORTED` (the target system would refuse the table), `TARGET_PROTECTED` (a ctasd store)", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`CATALOG_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`STORE_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn submit_job(
    _: Authorized<need::SubmitJobs>,
    State(state): State<AppState>,
    ApiJson(request): ApiJson<SubmitJob>,
) -> Result<Response, ApiError> {
    let submission = state.services.submit_job(request.into()).await?;
    Ok(match submission {
        Submission::Created(record) => {
            let location = format!("/v1/jobs/{}", record.id);
            let location = HeaderValue::from_str(&location).expect("job ids are hex");
            let body = axum::Json(view(&state, &record));
            (StatusCode::CREATED, [(header::LOCATION, location)], body).into_response()
        }
        Submission::Existing(record) => axum::Json(view(&state, &record)).into_response(),
    })
}

fn path_job_id(job: &str) -> Result<JobId, ApiError> {
    JobId::parse(job).map_err(|e| ApiError::new(ProblemCode::JobIdInvalid, e.to_string()))
}

/// The job as clients see it, with where its hooks write.
fn view(state: &AppState, job: &JobRecord) -> Job {
    job_view(job, state.services.write_locations(job))
}

/// A job: its hooks, where the engine writes, and its action ledger.
#[utoipa::path(
    get,
    path = "/v1/jobs/{job}",
    tag = "jobs",
    params(("job" = String, Path, description = "Job id (32 hex digits)", pattern = r"^[0-9a-fA-F]{32}$")),
    responses(
        (status = 200, description = "The job", body = Job, headers(("etag" = String, description = "The representation's tag, for `If-Match`"))),
        (status = 400, description = "`JOB_ID_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`JOB_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "`REQUEST_TIMEOUT`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`STORE_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_job(
    _: Authorized<need::ReadJobs>,
    State(state): State<AppState>,
    ApiPath(job): ApiPath<String>,
) -> Result<Rendered, ApiError> {
    let id = path_job_id(&job)?;
    if let Some(kept) = state.job_views.current(&state.services, &id).await? {
        return Ok(kept);
    }
    let mark = state.services.at_rest_mark();
    let record = state.services.job(&id).await?;
    let rendered = Rendered::json(&view(&state, &record))?;
    if record.is_at_rest() {
        state.job_views.keep(
            id,
            Kept {
                mark,
                updated_at: record.updated_at,
                rendered: rendered.clone(),
            },
        );
    }
    Ok(rendered)
}

/// Report a status change: moves the job, then runs the actions the status
/// implies (create, begin, commit, abort) and answers with their results.
/// Reporting the current status again changes nothing and answers the same.
#[utoipa::path(
    put,
    path = "/v1/jobs/{job}/status",
    tag = "jobs",
    params(("job" = String, Path, description = "Job id (32 hex digits)", pattern = r"^[0-9a-fA-F]{32}$")),
    request_body = StatusReport,
    responses(
        (status = 200, description = "The job and the actions its status implied", body = StatusOutcome),
        (status = 400, description = "`JOB_ID_INVALID` or `BODY_MALFORMED`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`JOB_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "`REQUEST_TIMEOUT`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`TRANSITION_ILLEGAL`: the detail names the legal next statuses; `JOB_WATCHED`: an engine token reported a job ctasd watches on an engine; `STALE_RUN`: the status's time in `timestamps` is before the job was submitted (an earlier run under the same engine job id), so nothing is published or discarded", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "`CONTENT_TYPE_UNSUPPORTED`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID` (e.g. an unknown status)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`STORE_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn report_status(
    auth: Authorized<need::ReportStatus>,
    State(state): State<AppState>,
    ApiPath(job): ApiPath<String>,
    ApiJson(report): ApiJson<StatusReport>,
) -> Result<axum::Json<StatusOutcome>, ApiError> {
    let id = path_job_id(&job)?;
    if auth.is_engine() {
        state.services.refuse_watched_to_engine_tokens(&id).await?;
    }
    let record = state
        .services
        .report_status(&id, &report.into_domain(state.max_engine_time_ahead)?)
        .await?;
    Ok(axum::Json(StatusOutcome {
        actions_taken: record.actions_of_last_move().map(action_view).collect(),
        job: view(&state, &record),
    }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListJobsParams {
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only jobs with a hook on this catalog.
    pub catalog: Option<String>,
    /// Only the job the engine knows by this id.
    pub engine_job_id: Option<String>,
    /// Only jobs watched on this engine.
    pub engine: Option<String>,
    /// Only jobs created at or after this time (RFC 3339).
    pub created_after: Option<DateTime<Utc>>,
    /// Only jobs created before this time (RFC 3339).
    pub created_before: Option<DateTime<Utc>>,
    /// Only jobs whose id starts with this text or whose name contains it
    /// (ignoring ASCII case); at most 200 characters.
    #[param(max_length = 200)]
    pub search: Option<String>,
    /// Jobs per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub page_size: Option<u32>,
    /// `next_page_token` of the previous page.
    pub page_token: Option<String>,
}

/// One page of jobs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobPage {
    pub jobs: Vec<Job>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_page_token: Option<String>,
}

/// List jobs, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/jobs",
    tag = "jobs",
    params(ListJobsParams),
    responses(
        (status = 200, description = "One page of jobs", body = JobPage),
        (status = 400, description = "`QUERY_INVALID` or `PAGE_TOKEN_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "`REQUEST_TIMEOUT`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`STORE_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_jobs(
    _: Authorized<need::ReadJobs>,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<ListJobsParams>,
) -> Result<Response, ApiError> {
    let size = page::page_size(params.page_size)?;
    let after = match params.page_token.as_deref() {
        Some(token) => Some(page::decode_token("j", token, JobCursor::parse)?),
        None => None,
    };
    let filter = job_filter(params)?;
    let mut page = page::BoundedPage::new("j", size, after);
    while let Some((after, limit)) = page.wants() {
        let jobs = state
            .services
            .list_jobs(&filter, after.as_ref(), limit)
            .await?;
        page.take(jobs, JobCursor::of, |job| view(&state, job))?;
    }
    page.into_response("jobs")
}

/// The longest `search` text, in characters.
const MAX_SEARCH_CHARS: usize = 200;

fn job_filter(params: ListJobsParams) -> Result<JobFilter, ApiError> {
    let search = params.search.filter(|s| !s.is_empty());
    if search
        .as_ref()
        .is_some_and(|s| s.chars().count() > MAX_SEARCH_CHARS)
    {
        return Err(ApiError::new(
            ProblemCode::QueryInvalid,
            format!("search: at most {MAX_SEARCH_CHARS} characters"),
        ));
    }
    Ok(JobFilter {
        status: params.status,
        catalog: params.catalog,
        engine_job_id: params.engine_job_id,
        engine: params.engine,
        created_after: params.created_after,
        created_before: params.created_before,
        search,
    })
}

/// One event in a job's history, told apart by `kind`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[schema(discriminator(property_name = "kind", mapping(
    ("status" = "#/components/schemas/StatusEvent"),
    ("action" = "#/components/schemas/ActionEvent"),
    ("intervention" = "#/components/schemas/InterventionEvent"),
)))]
pub enum JobEvent {
    Status(StatusEvent),
    Action(ActionEvent),
    Intervention(InterventionEvent),
}

/// The kind of a [`StatusEvent`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusEventKind {
    Status,
}

/// The kind of an [`ActionEvent`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionEventKind {
    Action,
}

/// The kind of an [`InterventionEvent`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InterventionEventKind {
    Intervention,
}

/// The job reached a status.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"kind": "status", "at": "2026-12-03T12:00:00Z", "from": "CREATED", "to": "RUNNING",
                          "failure": null, "inferred": true, "engine_at": "2026-12-03T11:59:59.912Z"}))]
pub struct StatusEvent {
    pub kind: StatusEventKind,
    pub at: DateTime<Utc>,
    /// `null` for the status the job was submitted with.
    #[schema(required = true)]
    pub from: Option<JobStatus>,
    pub to: JobStatus,
    #[schema(required = true)]
    pub failure: Option<String>,
    /// Passed over between two reports: a later status was reported.
    pub inferred: bool,
    /// When the engine says the job reached it, if it said.
    #[schema(required = true)]
    pub engine_at: Option<DateTime<Utc>>,
}

/// An action was recorded (pending) or finished (done, failed).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"kind": "action", "at": "2026-12-03T12:00:01Z", "hook": 0, "action": "commit",
                          "state": "done", "attempts": 1, "outcome": "committed", "last_error": null}))]
pub struct ActionEvent {
    pub kind: ActionEventKind,
    pub at: DateTime<Utc>,
    pub hook: u32,
    pub action: HookAction,
    pub state: ActionState,
    pub attempts: u32,
    #[schema(required = true)]
    pub outcome: Option<ActionOutcome>,
    #[schema(required = true)]
    pub last_error: Option<String>,
}

/// An operator decided about an action: retry it now, or give up.
#[derive(Debug, Serialize, ToSchema)]
pub struct InterventionEvent {
    pub kind: InterventionEventKind,
    pub at: DateTime<Utc>,
    pub action_id: i64,
    pub decision: Decision,
}

/// One page of a job's events, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobEvents {
    pub events: Vec<JobEvent>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_page_token: Option<String>,
    /// Earlier restart cycles (a `RESTARTING` and the statuses up to the
    /// next one) folded out of the history, which keeps the latest 20.
    pub folded_restarts: u64,
}

/// Where an event stands in a job's history: its time, then a status
/// before the actions it recorded, then the decisions about them.
type EventKey = (DateTime<Utc>, u8, i64);

fn event_token(key: &EventKey) -> String {
    let (at, kind, id) = key;
    let nanos = at.timestamp_nanos_opt().unwrap_or(i64::MAX);
    page::encode_token("v", &format!("{nanos}.{kind}.{id}"))
}

fn parse_event_key(text: &str) -> Option<EventKey> {
    let mut parts = text.splitn(3, '.');
    let nanos: i64 = parts.next()?.parse().ok()?;
    let kind: u8 = parts.next()?.parse().ok()?;
    let id: i64 = parts.next()?.parse().ok()?;
    Some((DateTime::from_timestamp_nanos(nanos), kind, id))
}

/// A job's status history and action results, oldest first, a page at a
/// time.
#[utoipa::path(
    get,
    path = "/v1/jobs/{job}/events",
    tag = "jobs",
    operation_id = "list_job_events",
    params(("job" = String, Path, description = "Job id (32 hex digits)", pattern = r"^[0-9a-fA-F]{32}$"), PageParams),
    responses(
        (status = 200, description = "One page of events, oldest first", body = JobEvents),
        (status = 400, description = "`JOB_ID_INVALID`, `QUERY_INVALID` or `PAGE_TOKEN_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`JOB_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "`REQUEST_TIMEOUT`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`STORE_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn job_events(
    _: Authorized<need::ReadJobs>,
    State(state): State<AppState>,
    ApiPath(job): ApiPath<String>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<axum::Json<JobEvents>, ApiError> {
    let size = page::page_size(params.page_size)? as usize;
    let after = match params.page_token.as_deref() {
        Some(token) => Some(page::decode_token("v", token, parse_event_key)?),
        None => None,
    };
    let history = state.services.job_events(&path_job_id(&job)?).await?;
    Ok(axum::Json(page_of_events(history, after, size)))
}

/// The `size` events after `after` (from the first without it).
fn page_of_events(history: service::JobEvents, after: Option<EventKey>, size: usize) -> JobEvents {
    let folded_restarts = history.folded_restarts;
    let mut events = keyed_events(history)
        .into_iter()
        .filter(|(key, _)| after.is_none_or(|after| *key > after))
        .peekable();
    let mut page = Vec::with_capacity(size.min(events.size_hint().0));
    let mut last = None;
    while page.len() < size
        && let Some((key, event)) = events.next()
    {
        page.push(event);
        last = Some(key);
    }
    let next_page_token = events
        .peek()
        .is_some()
        .then(|| last.as_ref().map(event_token))
        .flatten();
    JobEvents {
        events: page,
        next_page_token,
        folded_restarts,
    }
}

/// Statuses, actions and decisions, oldest first; at one instant, a status
/// before the actions it recorded.
fn keyed_events(history: service::JobEvents) -> Vec<(EventKey, JobEvent)> {
    {
        let mut events: Vec<(DateTime<Utc>, u8, i64, JobEvent)> = Vec::new();
        for (i, change) in history.statuses.into_iter().enumerate() {
            let event = JobEvent::Status(StatusEvent {
                kind: StatusEventKind::Status,
                at: change.at,
                from: change.from,
                to: change.to,
                failure: change.failure,
                inferred: change.inferred,
                engine_at: change.engine_at,
            });
            events.push((change.at, 0, i as i64, event));
        }
        for action in &history.job.actions {
            let at = if action.state == ActionState::Pending {
                action.created_at
            } else {
                action.updated_at
            };
            let event = JobEvent::Action(ActionEvent {
                kind: ActionEventKind::Action,
                at,
                hook: action.hook_index,
                action: action.action,
                state: action.state,
                attempts: action.attempts,
                outcome: action.outcome,
                last_error: action.last_error.clone(),
            });
            events.push((at, 1, action.id, event));
        }
        for intervention in history.interventions {
            let event = JobEvent::Intervention(InterventionEvent {
                kind: InterventionEventKind::Intervention,
                at: intervention.at,
                action_id: intervention.action_id,
                decision: intervention.decision,
            });
            events.push((intervention.at, 2, intervention.action_id, event));
        }
        events.sort_by_key(|e| (e.0, e.1, e.2));
        events
            .into_iter()
            .map(|(at, kind, id, event)| ((at, kind, id), event))
            .collect()
    }
}

/// What may change about a job after submission.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"engine_job_id": "fd72014d4c864993a2e5a9287b4a9c5d"}))]
pub struct JobUpdate {
    /// The engine's own id for the job; `null` clears it.
    pub engine_job_id: Option<String>,
}

/// Attach the engine's id to a job (or clear it), so the engine's id finds it.
#[utoipa::path(
    patch,
    path = "/v1/jobs/{job}",
    tag = "jobs",
    params(("If-Match" = Option<String>, Header, description = "Change only the version with this `ETag` (412 otherwise)"), ("job" = String, Path, description = "Job id (32 hex digits)", pattern = r"^[0-9a-fA-F]{32}$")),
    request_body = JobUpdate,
    responses(
        (status = 200, description = "The job, updated", body = Job, headers(("etag" = String, description = "The representation's tag, for `If-Match`"))),
        (status = 412, description = "`PRECONDITION_FAILED`: `If-Match` names a version that is no longer current", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "`JOB_ID_INVALID` or `BODY_MALFORMED`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`JOB_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "`REQUEST_TIMEOUT`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`ENGINE_JOB_ID_TAKEN`: another job has that engine id; `JOB_WATCHED`: an engine token re-pointed a job ctasd watches on an engine", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`BODY_TOO_LARGE`", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "`CONTENT_TYPE_UNSUPPORTED`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID` or `JOB_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`STORE_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn update_job(
    auth: Authorized<need::UpdateJobs>,
    State(state): State<AppState>,
    ApiPath(job): ApiPath<String>,
    if_match: IfMatch,
    ApiJson(update): ApiJson<JobUpdate>,
) -> Result<Tagged<Job>, ApiError> {
    let id = path_job_id(&job)?;
    if auth.is_engine() {
        state.services.refuse_watched_to_engine_tokens(&id).await?;
    }
    if if_match.is_given() {
        let current = state.services.job(&id).await?;
        if_match.check("the job", &view(&state, &current))?;
    }
    let engine_job_id = update.engine_job_id.as_deref();
    let record = state.services.set_engine_job_id(&id, engine_job_id).await?;
    Ok(Tagged(view(&state, &record)))
}

/// Settle a stuck or failed action: `retry` runs it again now (a failed one
/// too, once its cause is fixed); `give-up` fails it and, for a batch
/// hook's begin or commit, discards the staging with an abort, which
/// releases the catalog. Each decision is shown among the job's events.
#[utoipa::path(
    post,
    path = "/v1/jobs/{job}/actions/{action}/{decision}",
    tag = "jobs",
    params(
        ("job" = String, Path, description = "Job id (32 hex digits)", pattern = r"^[0-9a-fA-F]{32}$"),
        ("action" = i64, Path, description = "The action's id, from the job's `actions`"),
        ("decision" = String, Path, description = "`retry` or `give-up`", pattern = r"^(retry|give-up)$"),
    ),
    responses(
        (status = 200, description = "The decision is recorded; the job after the actions it led to ran", body = Job),
        (status = 400, description = "`JOB_ID_INVALID` or `PATH_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`JOB_NOT_FOUND` or `ACTION_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 408, description = "`REQUEST_TIMEOUT`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`ACTION_NOT_SETTLEABLE`: done, running right now, or followed by a later action of its hook", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`STORE_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn settle_action(
    _: Authorized<need::OperateJobs>,
    State(state): State<AppState>,
    ApiPath((job, action, decision)): ApiPath<(String, i64, String)>,
) -> Result<axum::Json<Job>, ApiError> {
    let id = path_job_id(&job)?;
    let decision = match decision.as_str() {
        "retry" => Decision::Retry,
        "give-up" => Decision::GiveUp,
        other => {
            let detail = format!("'{other}' is not a decision; use retry or give-up");
            return Err(ApiError::new(ProblemCode::PathInvalid, detail));
        }
    };
    let record = state.services.settle_action(&id, action, decision).await?;
    Ok(axum::Json(view(&state, &record)))
}
