//! `GET /healthz` (the process answers) and `GET /readyz` (the store is
//! reachable, migrated and whole). Neither needs authentication: their
//! handlers ask for no permission.

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::{ApiError, Problem};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", operation_id = "check_liveness", tag = "health", security(()), responses((status = 200, description = "Alive", body = Health)))]
async fn healthz() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".into(),
    })
}

/// Readiness: the store is reachable, every migration is applied and every
/// table of its schema is there.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "check_readiness",
    tag = "health",
    security(()),
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "`STORE_UNAVAILABLE`, or `STORE_NOT_READY` (migrations missing, or the store's schema damaged)", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn readyz(State(state): State<AppState>) -> Result<axum::Json<Health>, ApiError> {
    state.services.ready().await?;
    Ok(axum::Json(Health {
        status: "ready".into(),
    }))
}
