//! `/v1/engines`: register, read, list, alter and drop the Flink clusters
//! ctasd watches jobs on, with what it last saw of each.
//!
//! The rules (validate, reach the cluster, store) live in
//! [`crate::service`]; here are the routes, their JSON and their answers.

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Authorized, need};
use super::catalogs::{DropParams, PageParams, RegisterParams};
use super::error::{ApiError, Problem, ProblemCode};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::{AppState, page};
use crate::domain::engine::{EngineKind, Reachability};
use crate::domain::{EngineName, non_null};
use crate::service::{EngineAlteration, EngineRegistration, EngineRequest, EngineWithJobs};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_engine, list_engines))
        .routes(routes!(get_engine, alter_engine, drop_engine))
}

/// An engine to register: a Flink cluster's REST endpoint.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "flink-prod",
    "type": "flink",
    "url": "http://flink-jobmanager:8081",
    "missing_job_grace_seconds": 600,
    "comment": "the batch cluster"
}))]
pub struct RegisterEngine {
    /// `[A-Za-z][A-Za-z0-9_-]{0,63}`.
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
    pub name: String,
    #[serde(rename = "type", default = "flink")]
    pub kind: EngineKind,
    /// The JobManager's REST endpoint, `http://host:port`.
    #[schema(example = "http://127.0.0.1:8081")]
    pub url: String,
    /// A Flink HistoryServer, asked about jobs the cluster has forgotten.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub history_url: Option<String>,
    /// How often ctasd polls the cluster, 100 to 3600000 ms (default 1000).
    #[schema(minimum = 100, maximum = 3600000)]
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub poll_interval_ms: Option<u64>,
    /// How long a job the cluster does not know (never ran, or forgot) may
    /// wait before ctasd settles it as FAILED and removes its staging,
    /// 1 s to 30 days (default 600).
    #[schema(minimum = 1, maximum = 2592000)]
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub missing_job_grace_seconds: Option<u64>,
    /// Requests per second to the cluster, all jobs together, 1 to 10000
    /// (default 200: a catch-up of 10,000 jobs in under a minute, at about
    /// a third of one core of a Flink 2.3 JobManager).
    #[schema(minimum = 1, maximum = 10000)]
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub max_requests_per_second: Option<u64>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub comment: Option<String>,
}

fn flink() -> EngineKind {
    EngineKind::Flink
}

/// Whether ctasd reached the engine when it last tried.
#[derive(Debug, Serialize, ToSchema)]
pub struct EngineReachability {
    pub state: Reachability,
    /// Since when the engine has been so.
    #[schema(required = true)]
    pub since: Option<DateTime<Utc>>,
    /// When ctasd last asked.
    #[schema(required = true)]
    pub checked_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed, while unreachable.
    #[schema(required = true)]
    pub last_error: Option<String>,
    /// The version the engine reported (`flink-version`).
    #[schema(required = true)]
    pub engine_version: Option<String>,
}

/// A registered engine.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "flink-prod", "type": "flink", "url": "http://flink-jobmanager:8081",
    "history_url": null, "poll_interval_ms": 1000, "missing_job_grace_seconds": 600,
    "max_requests_per_second": 20, "comment": "the batch cluster",
    "reachability": {"state": "reachable", "since": "2026-12-03T12:00:00Z",
                     "checked_at": "2026-12-03T12:05:00Z", "last_error": null, "engine_version": "2.3.0"},
    "watched_jobs": 3,
    "created_at": "2026-12-03T12:00:00Z", "updated_at": "2026-12-03T12:00:00Z"
}))]
pub struct Engine {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: EngineKind,
    pub url: String,
    #[schema(required = true)]
    pub history_url: Option<String>,
    pub poll_interval_ms: u64,
    pub missing_job_grace_seconds: u64,
    pub max_requests_per_second: u32,
    #[schema(required = true)]
    pub comment: Option<String>,
    pub reachability: EngineReachability,
    /// Unfinished jobs ctasd watches on this engine.
    pub watched_jobs: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&EngineWithJobs> for Engine {
    fn from(engine: &EngineWithJobs) -> Self {
        let record = &engine.engine;
        let settings = &record.descriptor.settings;
        let seen = &record.observation;
        Self {
            name: record.descriptor.name.to_string(),
            kind: record.descriptor.kind,
            url: settings.url.as_str().to_owned(),
            history_url: settings.history_url.as_ref().map(|u| u.as_str().to_owned()),
            poll_interval_ms: settings.poll_interval.as_millis() as u64,
            missing_job_grace_seconds: settings.missing_job_grace.as_secs(),
            max_requests_per_second: settings.max_requests_per_second,
            comment: record.descriptor.comment.clone(),
            reachability: EngineReachability {
                state: seen.reachability,
                since: seen.since,
                checked_at: seen.checked_at,
                last_error: seen.last_error.clone(),
                engine_version: seen.version.clone(),
            },
            watched_jobs: engine.watched_jobs,
            created_at: record.created_at,
            updated_at: record.updated_at,
        }
    }
}

/// One page of engines, ordered by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct EnginePage {
    pub engines: Vec<Engine>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_page_token: Option<String>,
}

/// ALTER ENGINE: each field given replaces the current value; `null`
/// clears `history_url` and `comment`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "http://flink-jobmanager-2:8081", "poll_interval_ms": 2000}))]
pub struct AlterEngine {
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub url: Option<String>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub history_url: Option<Option<String>>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false, minimum = 100, maximum = 3600000)]
    pub poll_interval_ms: Option<u64>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false, minimum = 1, maximum = 2592000)]
    pub missing_job_grace_seconds: Option<u64>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false, minimum = 1, maximum = 10000)]
    pub max_requests_per_second: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub comment: Option<Option<String>>,
}

/// A field that was given, `null` or not: `Some(None)` for `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

fn path_engine_name(name: &str) -> Result<EngineName, ApiError> {
    EngineName::parse(name).map_err(ApiError::bad_path_name)
}

/// Register an engine: its URL is checked by asking the cluster for its
/// version (`GET /config`); from then on ctasd watches the jobs that name it.
#[utoipa::path(
    post,
    path = "/v1/engines",
    tag = "engines",
    params(RegisterParams),
    request_body = RegisterEngine,
    responses(
        (status = 201, description = "Registered; the cluster answered", body = Engine,
            headers(("location" = String, description = "The engine's URL"))),
        (status = 200, description = "`if_not_exists=true` and the name is taken: the existing engine, unchanged", body = Engine),
        (status = 400, description = "`BODY_MALFORMED` or `QUERY_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`ENGINE_EXISTS`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID`, `NAME_INVALID`, `ENGINE_SETTING_INVALID`, or `ENGINE_UNREACHABLE` (the cluster did not answer as Flink)", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn register_engine(
    _: Authorized<need::ManageEngines>,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<RegisterParams>,
    ApiJson(request): ApiJson<RegisterEngine>,
) -> Result<Response, ApiError> {
    let request = EngineRequest {
        name: request.name,
        kind: request.kind,
        url: request.url,
        history_url: request.history_url,
        poll_interval_ms: request.poll_interval_ms,
        missing_job_grace_seconds: request.missing_job_grace_seconds,
        max_requests_per_second: request.max_requests_per_second,
        comment: request.comment,
    };
    let registration = state
        .services
        .register_engine(request, params.if_not_exists)
        .await?;
    Ok(match registration {
        EngineRegistration::Created(engine) => {
            let location = format!("/v1/engines/{}", engine.engine.descriptor.name);
            let location = HeaderValue::from_str(&location).expect("engine names are URL-safe");
            let body = axum::Json(Engine::from(&engine));
            (StatusCode::CREATED, [(header::LOCATION, location)], body).into_response()
        }
        EngineRegistration::Existing(engine) => axum::Json(Engine::from(&engine)).into_response(),
    })
}

/// List engines by name, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/engines",
    tag = "engines",
    params(PageParams),
    responses(
        (status = 200, description = "One page of engines", body = EnginePage),
        (status = 400, description = "`QUERY_INVALID` or `PAGE_TOKEN_INVALID`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_engines(
    _: Authorized<need::ReadEngines>,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    let size = page::page_size(params.page_size)?;
    let after = match params.page_token.as_deref() {
        Some(token) => Some(page::decode_token("e", token, |n| {
            EngineName::parse(n).ok()
        })?),
        None => None,
    };
    let mut page = page::BoundedPage::new("e", size, after);
    while let Some((after, limit)) = page.wants() {
        let engines = state.services.list_engines(after.as_ref(), limit).await?;
        page.take(
            engines,
            |e| e.engine.descriptor.name.clone(),
            |e| Engine::from(e),
        )?;
    }
    page.into_response("engines")
}

/// An engine: its settings, whether ctasd reaches it, how many jobs it watches there.
#[utoipa::path(
    get,
    path = "/v1/engines/{engine}",
    tag = "engines",
    params(("engine" = String, Path, description = "Engine name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    responses(
        (status = 200, description = "The engine", body = Engine),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`ENGINE_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_engine(
    _: Authorized<need::ReadEngines>,
    State(state): State<AppState>,
    ApiPath(engine): ApiPath<String>,
) -> Result<axum::Json<Engine>, ApiError> {
    let engine = state.services.engine(&path_engine_name(&engine)?).await?;
    Ok(axum::Json(Engine::from(&engine)))
}

/// ALTER ENGINE: a new URL (or HistoryServer) is checked against the
/// cluster before it replaces the stored one.
#[utoipa::path(
    patch,
    path = "/v1/engines/{engine}",
    tag = "engines",
    params(("engine" = String, Path, description = "Engine name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    request_body = AlterEngine,
    responses(
        (status = 200, description = "Altered", body = Engine),
        (status = 400, description = "`BODY_MALFORMED` or `NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`ENGINE_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`ENGINE_MODIFIED`: altered by another request meanwhile", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID`, `ENGINE_SETTING_INVALID` or `ENGINE_UNREACHABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn alter_engine(
    _: Authorized<need::ManageEngines>,
    State(state): State<AppState>,
    ApiPath(engine): ApiPath<String>,
    ApiJson(request): ApiJson<AlterEngine>,
) -> Result<axum::Json<Engine>, ApiError> {
    let alteration = EngineAlteration {
        url: request.url,
        history_url: request.history_url,
        poll_interval_ms: request.poll_interval_ms,
        missing_job_grace_seconds: request.missing_job_grace_seconds,
        max_requests_per_second: request.max_requests_per_second,
        comment: request.comment,
    };
    let name = path_engine_name(&engine)?;
    let engine = state.services.alter_engine(&name, alteration).await?;
    Ok(axum::Json(Engine::from(&engine)))
}

/// DROP ENGINE: refused while it watches unfinished jobs.
#[utoipa::path(
    delete,
    path = "/v1/engines/{engine}",
    tag = "engines",
    params(("engine" = String, Path, description = "Engine name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"), DropParams),
    responses(
        (status = 204, description = "Dropped (or absent, with `if_exists=true`)"),
        (status = 400, description = "`NAME_INVALID` or `QUERY_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`ENGINE_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`ENGINE_IN_USE`: it watches unfinished jobs", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn drop_engine(
    _: Authorized<need::ManageEngines>,
    State(state): State<AppState>,
    ApiPath(engine): ApiPath<String>,
    ApiQuery(params): ApiQuery<DropParams>,
) -> Result<StatusCode, ApiError> {
    let name = path_engine_name(&engine)?;
    if !state.services.drop_engine(&name).await? && !params.if_exists {
        let detail = format!("engine '{name}' does not exist");
        return Err(ApiError::new(ProblemCode::EngineNotFound, detail));
    }
    Ok(StatusCode::NO_CONTENT)
}
