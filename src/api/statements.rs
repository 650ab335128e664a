//! `POST /v1/statements`: Flink's catalog statements over HTTP, for people
//! who think in `CREATE CATALOG ... WITH (...)`. Parsed in
//! [`crate::domain::flink::statement`], run by the same use cases as
//! `/v1/catalogs`.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Authorized, Permission, need};
use super::error::{ApiError, Problem, ProblemCode};
use super::extract::ApiJson;
use crate::domain::flink::statement;
use crate::service::ServiceError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(run_statement))
}

/// One catalog statement; a trailing `;` is allowed.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "statement": "CREATE CATALOG mem COMMENT 'scratch' WITH ('type' = 'generic_in_memory')"
}))]
pub struct Statement {
    pub statement: String,
}

/// The statement's answer as a table: `result` = `OK` for a change;
/// `catalog name` rows for `SHOW CATALOGS`; `info name` and `info value`
/// rows for `DESCRIBE CATALOG`; the statement text for `SHOW CREATE CATALOG`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "columns": ["info name", "info value"],
    "rows": [["name", "pg"], ["type", "jdbc"], ["comment", "warehouse"], ["option:password", "******"]]
}))]
pub struct StatementResult {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Run a catalog statement: `CREATE CATALOG [IF NOT EXISTS] c [COMMENT '…']
/// WITH ('k' = 'v', …)`, `ALTER CATALOG c SET (…)` / `RESET ('k', …)` /
/// `COMMENT '…'`, `DROP CATALOG [IF EXISTS] c`, `SHOW CATALOGS`,
/// `DESCRIBE CATALOG [EXTENDED] c`, `SHOW CREATE CATALOG c`. Secrets are
/// shown as `******`. Reading needs the right to read catalogs, changing
/// them the right to manage them.
#[utoipa::path(
    post,
    path = "/v1/statements",
    tag = "catalogs",
    request_body = Statement,
    responses(
        (status = 200, description = "The statement ran", body = StatementResult),
        (status = 400, description = "`STATEMENT_SYNTAX` (with `line` and `column`) or malformed JSON",
            body = Problem, content_type = "application/problem+json",
            example = json!({
                "type": "urn:ctasd:problem:statement-syntax",
                "title": "SQL syntax error",
                "status": 400,
                "detail": "SQL parse failed. Encountered \"CATALOGUE\" at line 1, column 6.\nWas expecting:\n    CATALOG ...",
                "code": "STATEMENT_SYNTAX",
                "errors": [{"field": "statement", "message": "SQL parse failed. ..."}],
                "line": 1,
                "column": 6
            })),
        (status = 404, description = "`CATALOG_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`CATALOG_EXISTS`, `CATALOG_IN_USE` or `CATALOG_MODIFIED`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid name or options, as for `POST /v1/catalogs`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn run_statement(
    caller: Authorized<need::ReadCatalogs>,
    State(state): State<AppState>,
    ApiJson(request): ApiJson<Statement>,
) -> Result<axum::Json<StatementResult>, ApiError> {
    let parsed = statement::parse(&request.statement).map_err(ApiError::syntax)?;
    if parsed.writes() {
        caller.require(Permission::ManageCatalogs, "change catalogs")?;
    }
    let result = state
        .services
        .run_statement(parsed)
        .await
        .map_err(in_flinks_words)?;
    Ok(axum::Json(StatementResult {
        columns: result.columns.into_iter().map(Into::into).collect(),
        rows: result.rows,
    }))
}

/// A catalog that is there or not, worded as Flink's `CatalogManager` says
/// it; everything else as for the JSON routes.
fn in_flinks_words(error: ServiceError) -> ApiError {
    match &error {
        ServiceError::CatalogExists(name) => ApiError::new(
            ProblemCode::CatalogExists,
            format!("Catalog {name} already exists."),
        ),
        ServiceError::CatalogNotFound { name, .. } => ApiError::new(
            ProblemCode::CatalogNotFound,
            format!("Catalog {name} does not exist."),
        ),
        _ => ApiError::from(error),
    }
}
