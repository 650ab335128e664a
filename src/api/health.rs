//! `GET /healthz` (the process answers), `GET /readyz` (the store is
//! reachable, migrated and whole) and `GET /v1/version`. None needs
//! authentication: their handlers ask for no permission.

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
        .routes(routes!(get_version))
}

/// What is running.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"name": "ctasd", "version": "0.1.0", "api": "v1"}))]
pub struct Version {
    pub name: String,
    /// The server's version (also `info.version` of the OpenAPI document).
    pub version: String,
    /// The API's major version, the prefix of its routes.
    pub api: String,
}

/// The server's version.
#[utoipa::path(get, path = "/v1/version", tag = "health", security(()), responses((status = 200, description = "The running version", body = Version)))]
async fn get_version() -> axum::Json<Version> {
    axum::Json(Version {
        name: env!("CARGO_PKG_NAME").into(),
        version: env!("CARGO_PKG_VERSION").into(),
        api: "v1".into(),
    })
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
