//! `GET /v1/overview`: how many jobs are in each status and how many
//! actions wait or failed, in one small answer: the dashboard's header,
//! and a quick look for anyone at a terminal.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Authorized, need};
use super::error::ApiError;
use crate::domain::job::JobStatus;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_overview))
}

/// Counts across the store, read now.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "jobs": [{"status": "CREATED", "jobs": 0}, {"status": "RUNNING", "jobs": 2}, {"status": "FINISHED", "jobs": 40}],
    "pending_actions": 1,
    "failed_actions": 0
}))]
pub struct Overview {
    /// Every status, in Flink's order, with how many jobs are in it.
    pub jobs: Vec<StatusCount>,
    /// Actions recorded and not yet done.
    pub pending_actions: i64,
    /// Actions that failed for good and count against their job.
    pub failed_actions: i64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatusCount {
    pub status: JobStatus,
    pub jobs: i64,
}

/// Jobs by status, and the pending and failed actions.
#[utoipa::path(
    get,
    path = "/v1/overview",
    tag = "jobs",
    responses(
        (status = 200, description = "Counts, read now", body = Overview),
    )
)]
async fn get_overview(
    _: Authorized<need::ReadJobs>,
    State(state): State<AppState>,
) -> Result<axum::Json<Overview>, ApiError> {
    let overview = state.services.overview().await?;
    Ok(axum::Json(Overview {
        jobs: overview
            .jobs_by_status
            .into_iter()
            .map(|(status, jobs)| StatusCount { status, jobs })
            .collect(),
        pending_actions: overview.pending_actions,
        failed_actions: overview.failed_actions,
    }))
}
