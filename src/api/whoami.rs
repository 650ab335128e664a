//! `GET /v1/whoami`: the caller's token name, role and permissions, so a
//! client (the dashboard) shows only what the caller may do. The server
//! still checks every request; this only saves a user from buttons that
//! would answer 403.

use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Authorized, Permission, Role, need};
use super::error::ApiError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_caller))
}

/// Who is calling.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "dashboard",
    "role": "reader",
    "tokens_required": true,
    "permissions": ["authenticated", "read_catalogs", "read_engines", "read_jobs"]
}))]
pub struct Caller {
    /// The token's name; `null` when ctasd runs without tokens.
    #[schema(required = true)]
    pub name: Option<String>,
    /// The token's role; `admin` when ctasd runs without tokens.
    pub role: Role,
    /// Whether ctasd asks every request for a token.
    pub tokens_required: bool,
    /// Everything the caller may do.
    pub permissions: Vec<Permission>,
}

/// The caller's token, role and permissions.
#[utoipa::path(
    get,
    path = "/v1/whoami",
    operation_id = "get_caller",
    tag = "health",
    responses((status = 200, description = "The caller", body = Caller))
)]
async fn get_caller(
    caller: Authorized<need::Authenticated>,
) -> Result<axum::Json<Caller>, ApiError> {
    let (name, role) = match caller.token() {
        Some((name, role)) => (Some(name.to_owned()), role),
        None => (None, Role::Admin),
    };
    Ok(axum::Json(Caller {
        name,
        role,
        tokens_required: caller.token().is_some(),
        permissions: caller.permissions(),
    }))
}
