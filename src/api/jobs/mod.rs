//! `/v1/jobs`: submit CTAS jobs and report their status.
//!
//! The rules (planning hooks against their catalogs, moving jobs, running
//! their actions) live in [`crate::service`]; here are the routes, their
//! JSON and their answers.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Authorized, need};
use super::catalogs::PageParams;
use super::error::{ApiError, Problem};
use super::etag::{IfMatch, Rendered, Tagged};
use super::extract::{ApiJson, ApiQuery, DecisionPath, JobPath};
use super::job_views::Kept;
use super::{AppState, page};
use crate::domain::job_record::{JobCursor, JobRecord};
use crate::domain::ledger::Deciding;
use crate::service::Submission;

mod dto;
mod events;
mod submission;

use dto::{
    DecisionBody, Job, JobPage, JobUpdate, ListJobsParams, StatusOutcome, StatusReport,
    action_view, job_filter, job_view,
};
use events::{JobEvents, page_of_events, parse_event_key};
use submission::SubmitJob;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(submit_job, list_jobs))
        .routes(routes!(get_job, update_job))
        .routes(routes!(report_status))
        .routes(routes!(job_events))
        .routes(routes!(settle_action))
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
        (status = 409, description = "`JOB_EXISTS` (same id, different job), `TABLE_EXISTS`, `TARGET_MISSING`, or `TABLE_NOT_OWNED` (a replace of a table ctasd cannot prove it made)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID`, `JOB_INVALID`, `CATALOG_NOT_FOUND`, `ENGINE_NOT_FOUND`, `DATABASE_NOT_FOUND`, `TABLE_INVALID`, `TABLE_UNSUPPORTED` (the target system would refuse the table), `TARGET_PROTECTED` (a ctasd store)", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`CATALOG_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
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
    )
)]
async fn get_job(
    _: Authorized<need::ReadJobs>,
    State(state): State<AppState>,
    JobPath(id): JobPath,
) -> Result<Rendered, ApiError> {
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
        (status = 409, description = "`TRANSITION_ILLEGAL`: the detail names the legal next statuses; `JOB_WATCHED`: an engine token reported a job ctasd watches on an engine; `STALE_RUN`: the status's time in `timestamps` is before the job was submitted (an earlier run under the same engine job id), so nothing is published or discarded", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID` (e.g. an unknown status)", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn report_status(
    auth: Authorized<need::ReportStatus>,
    State(state): State<AppState>,
    JobPath(id): JobPath,
    ApiJson(report): ApiJson<StatusReport>,
) -> Result<axum::Json<StatusOutcome>, ApiError> {
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

/// List jobs, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/jobs",
    tag = "jobs",
    params(ListJobsParams),
    responses(
        (status = 200, description = "One page of jobs", body = JobPage),
        (status = 400, description = "`QUERY_INVALID` or `PAGE_TOKEN_INVALID`", body = Problem, content_type = "application/problem+json"),
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
    )
)]
async fn job_events(
    _: Authorized<need::ReadJobs>,
    State(state): State<AppState>,
    JobPath(id): JobPath,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<axum::Json<JobEvents>, ApiError> {
    let size = page::page_size(params.page_size)? as usize;
    let after = match params.page_token.as_deref() {
        Some(token) => Some(page::decode_token("v", token, parse_event_key)?),
        None => None,
    };
    let history = state.services.job_events(&id).await?;
    Ok(axum::Json(page_of_events(history, after, size)))
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
        (status = 409, description = "`ENGINE_JOB_ID_TAKEN`: another job has that engine id; `JOB_WATCHED`: an engine token re-pointed a job ctasd watches on an engine", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID` or `JOB_INVALID`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn update_job(
    auth: Authorized<need::UpdateJobs>,
    State(state): State<AppState>,
    JobPath(id): JobPath,
    if_match: IfMatch,
    ApiJson(update): ApiJson<JobUpdate>,
) -> Result<Tagged<Job>, ApiError> {
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
/// too, once its cause is fixed; a commit held back by its audits is
/// audited again); `give-up` fails it and, for a batch hook's begin or
/// commit, discards the staging with an abort, which releases the catalog;
/// `publish-anyway` publishes a staging its audits held back, as a normal
/// commit. Each decision is shown among the job's events, with the token
/// that made it and the `reason` given.
#[utoipa::path(
    post,
    path = "/v1/jobs/{job}/actions/{action}/{decision}",
    tag = "jobs",
    params(
        ("job" = String, Path, description = "Job id (32 hex digits)", pattern = r"^[0-9a-fA-F]{32}$"),
        ("action" = i64, Path, description = "The action's id, from the job's `actions`"),
        ("decision" = String, Path, description = "`retry`, `give-up` or `publish-anyway`", pattern = r"^(retry|give-up|publish-anyway)$"),
    ),
    request_body(content = Option<DecisionBody>, description = "Why, for the job's events (optional)", content_type = "application/json"),
    responses(
        (status = 200, description = "The decision is recorded; the job after the actions it led to ran", body = Job),
        (status = 400, description = "`JOB_ID_INVALID` or `PATH_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`JOB_NOT_FOUND` or `ACTION_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`ACTION_NOT_SETTLEABLE`: done, running right now, followed by a later action of its hook, or (publish-anyway) not a commit held back by its audits", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID`: the reason is too long", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn settle_action(
    operator: Authorized<need::OperateJobs>,
    State(state): State<AppState>,
    DecisionPath {
        job,
        action,
        decision,
    }: DecisionPath,
    body: axum::body::Bytes,
) -> Result<axum::Json<Job>, ApiError> {
    let deciding = Deciding {
        decision,
        by: operator.token().map(|(name, _)| name.to_owned()),
        reason: DecisionBody::read(&body)?.reason,
    };
    let record = state
        .services
        .decide_action(&job, action, &deciding)
        .await?;
    Ok(axum::Json(view(&state, &record)))
}
