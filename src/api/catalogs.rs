//! `/v1/catalogs`: register, read, list, alter and drop catalogs, and browse
//! the databases and tables of a live catalog.
//!
//! The rules (validate, open, store, install) live in
//! [`crate::service`]; here are the routes, their JSON and their answers.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Authorized, need};
use super::error::{ApiError, Problem, ProblemCode};
use super::etag::{IfMatch, Tagged};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::openapi::{CatalogTypeName, StringMap};
use super::{AppState, page};
use crate::domain::{CatalogAlteration, CatalogName, CatalogRecord, ObjectName, non_null};
use crate::service::Registration;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_catalog, list_catalogs))
        .routes(routes!(get_catalog, alter_catalog, drop_catalog))
        .routes(routes!(list_databases))
        .routes(routes!(list_tables))
        .routes(routes!(get_table, drop_table))
}

/// A catalog to register.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "pg",
    "options": {
        "type": "jdbc",
        "base-url": "jdbc:postgresql://127.0.0.1:5432",
        "default-database": "analytics",
        "username": "ctas",
        "password": "s3cret-Value"
    },
    "comment": "warehouse on PostgreSQL"
}))]
pub struct RegisterCatalog {
    /// `[A-Za-z][A-Za-z0-9_-]{0,63}`.
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
    pub name: String,
    /// Flat string options; `type` picks the factory (see `GET /v1/catalog-types`).
    #[schema(value_type = StringMap)]
    pub options: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub comment: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RegisterParams {
    /// Answer 200 with the existing catalog instead of 409 when the name is taken.
    #[serde(default)]
    pub if_not_exists: bool,
}

/// A registered catalog. Sensitive option values are shown as `******`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "name": "pg",
    "type": "jdbc",
    "options": {
        "base-url": "jdbc:postgresql://127.0.0.1:5432",
        "default-database": "analytics",
        "password": "******",
        "type": "jdbc",
        "username": "ctas"
    },
    "comment": "warehouse on PostgreSQL",
    "created_at": "2026-12-02T12:00:00Z",
    "updated_at": "2026-12-02T12:00:00Z"
}))]
pub struct Catalog {
    pub name: String,
    #[serde(rename = "type")]
    #[schema(value_type = CatalogTypeName)]
    pub catalog_type: String,
    #[schema(value_type = StringMap)]
    pub options: BTreeMap<String, String>,
    #[schema(required = true)]
    pub comment: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&CatalogRecord> for Catalog {
    fn from(record: &CatalogRecord) -> Self {
        let options = &record.descriptor.options;
        Self {
            name: record.descriptor.name.to_string(),
            catalog_type: options.catalog_type().unwrap_or_default().to_owned(),
            options: options.masked(),
            comment: record.descriptor.comment.clone(),
            created_at: record.created_at,
            updated_at: record.updated_at,
        }
    }
}

/// One page of catalogs, ordered by name.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "catalogs": [{
        "name": "mem",
        "type": "generic_in_memory",
        "options": {"type": "generic_in_memory"},
        "comment": null,
        "created_at": "2026-12-02T12:00:00Z",
        "updated_at": "2026-12-02T12:00:00Z"
    }],
    "next_page_token": "YzE6bWVt"
}))]
pub struct CatalogPage {
    pub catalogs: Vec<Catalog>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_page_token: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageParams {
    /// Items per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub page_size: Option<u32>,
    /// `next_page_token` of the previous page.
    pub page_token: Option<String>,
}

/// ALTER CATALOG: options to set, options to reset, a new comment.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"set": {"password": "n3w-s3cret"}, "reset": ["property-version"], "comment": "rotated"}))]
pub struct AlterCatalog {
    /// Options to add or change. `type` may only be set to its current value.
    #[serde(default)]
    #[schema(value_type = StringMap)]
    pub set: BTreeMap<String, String>,
    /// Option keys to remove. `type` cannot be reset.
    #[serde(default)]
    pub reset: Vec<String>,
    /// The new comment; an empty string clears it.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub comment: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DropParams {
    /// Answer 204 instead of 404 when the catalog does not exist.
    #[serde(default)]
    pub if_exists: bool,
}

/// A database of a live catalog.
#[derive(Debug, Serialize, ToSchema)]
pub struct Database {
    pub name: String,
    /// Whether this is the catalog's `default-database`.
    pub default: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"databases": [{"name": "analytics", "default": true}, {"name": "staging", "default": false}]}))]
pub struct DatabaseList {
    pub databases: Vec<Database>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TableSummary {
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"database": "analytics", "tables": [{"name": "orders"}]}))]
pub struct TableList {
    pub database: String,
    pub tables: Vec<TableSummary>,
}

/// A column as the external system reports it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Column {
    pub name: String,
    /// The system's own type, e.g. `character varying(20)` or `bigint(20)`.
    pub data_type: String,
    pub nullable: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "catalog": "pg", "database": "analytics", "name": "orders",
    "columns": [{"name": "id", "data_type": "bigint", "nullable": false},
                {"name": "note", "data_type": "character varying(20)", "nullable": true}]
}))]
pub struct Table {
    pub catalog: String,
    pub database: String,
    pub name: String,
    pub columns: Vec<Column>,
    /// Flink connector options that read the table (no secrets).
    #[schema(value_type = StringMap)]
    pub options: BTreeMap<String, String>,
}

/// Where a table is, as its routes' path names it.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct TablePath {
    /// Catalog name
    #[param(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
    pub catalog: String,
    /// Database name
    pub database: String,
    /// Table name
    pub table: String,
}

/// DROP TABLE: only a table ctasd can prove it published (its marker,
/// naming this installation, on the table: a `filesystem` table's
/// `_ctasd_commit`, a PostgreSQL table's row type, a SQLite table's DDL),
/// and none an unfinished job targets.
#[utoipa::path(
    delete,
    path = "/v1/catalogs/{catalog}/databases/{database}/tables/{table}",
    tag = "browse",
    params(TablePath),
    responses(
        (status = 204, description = "Dropped"),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`CATALOG_NOT_FOUND`, `DATABASE_NOT_FOUND` or `TABLE_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`TABLE_NOT_OWNED` (ctasd cannot prove it published it) or `TABLE_IN_USE`", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`CATALOG_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn drop_table(
    _: Authorized<need::ManageCatalogs>,
    State(state): State<AppState>,
    ApiPath((catalog, database, table)): ApiPath<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let database = path_object_name("database name", &database)?;
    let table = path_object_name("table name", &table)?;
    let name = path_catalog_name(&catalog)?;
    state.services.drop_table(&name, &database, &table).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn path_catalog_name(name: &str) -> Result<CatalogName, ApiError> {
    CatalogName::parse(name).map_err(ApiError::bad_path_name)
}

fn path_object_name(what: &'static str, name: &str) -> Result<ObjectName, ApiError> {
    ObjectName::parse(what, name).map_err(ApiError::bad_path_name)
}

fn created(record: &CatalogRecord) -> Response {
    let mut headers = HeaderMap::new();
    let location = format!("/v1/catalogs/{}", record.descriptor.name);
    headers.insert(
        header::LOCATION,
        HeaderValue::from_str(&location).expect("catalog names are URL-safe"),
    );
    (
        StatusCode::CREATED,
        headers,
        axum::Json(Catalog::from(record)),
    )
        .into_response()
}

/// Register a catalog: validate its options, open it, store it.
#[utoipa::path(
    post,
    path = "/v1/catalogs",
    tag = "catalogs",
    params(RegisterParams),
    request_body = RegisterCatalog,
    responses(
        (status = 201, description = "Registered; the catalog was opened", body = Catalog,
            headers(("location" = String, description = "The catalog's URL"))),
        (status = 200, description = "`if_not_exists=true` and the name is taken: the existing catalog, unchanged", body = Catalog),
        (status = 400, description = "Malformed JSON or query string", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`CATALOG_EXISTS`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body, name or options (`NAME_INVALID`, `CATALOG_TYPE_MISSING`, \
            `CATALOG_TYPE_UNKNOWN`, `CATALOG_OPTIONS_MISSING`, `CATALOG_OPTIONS_UNSUPPORTED`, `CATALOG_OPTION_INVALID`, \
            `OPTIONS_INVALID`), or the catalog cannot be opened (`CATALOG_OPEN_FAILED`)",
            body = Problem, content_type = "application/problem+json",
            example = json!({
                "type": "urn:ctasd:problem:catalog-options-missing",
                "title": "Required options missing",
                "status": 422,
                "detail": "One or more required options are missing.\n\nMissing required options are:\n\nbase-url",
                "code": "CATALOG_OPTIONS_MISSING",
                "errors": [{"field": "options.base-url", "message": "required option is missing"}]
            })),
    )
)]
async fn register_catalog(
    _: Authorized<need::ManageCatalogs>,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<RegisterParams>,
    ApiJson(request): ApiJson<RegisterCatalog>,
) -> Result<Response, ApiError> {
    let registration = state
        .services
        .register_catalog(
            &request.name,
            request.options,
            request.comment,
            params.if_not_exists,
        )
        .await?;
    Ok(match registration {
        Registration::Created(record) => created(&record),
        Registration::Existing(record) => axum::Json(Catalog::from(&record)).into_response(),
    })
}

/// List catalogs by name, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/catalogs",
    tag = "catalogs",
    params(PageParams),
    responses(
        (status = 200, description = "One page of catalogs", body = CatalogPage),
        (status = 400, description = "`QUERY_INVALID` or `PAGE_TOKEN_INVALID`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_catalogs(
    _: Authorized<need::ReadCatalogs>,
    State(state): State<AppState>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    let size = page::page_size(params.page_size)?;
    let after = match params.page_token.as_deref() {
        Some(token) => Some(page::decode_token("c", token, |name| {
            CatalogName::parse(name).ok()
        })?),
        None => None,
    };
    let mut page = page::BoundedPage::new("c", size, after);
    while let Some((after, limit)) = page.wants() {
        let records = state.services.list_catalogs(after.as_ref(), limit).await?;
        page.take(records, |r| r.descriptor.name.clone(), |r| Catalog::from(r))?;
    }
    page.into_response("catalogs")
}

/// A catalog's descriptor; secrets are shown as `******`.
#[utoipa::path(
    get,
    path = "/v1/catalogs/{catalog}",
    tag = "catalogs",
    params(("catalog" = String, Path, description = "Catalog name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    responses(
        (status = 200, description = "The catalog", body = Catalog, headers(("etag" = String, description = "The representation's tag, for `If-Match`"))),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`CATALOG_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_catalog(
    _: Authorized<need::ReadCatalogs>,
    State(state): State<AppState>,
    ApiPath(catalog): ApiPath<String>,
) -> Result<Tagged<Catalog>, ApiError> {
    let record = state
        .services
        .catalog(&path_catalog_name(&catalog)?)
        .await?;
    Ok(Tagged(Catalog::from(&record)))
}

/// ALTER CATALOG: set and reset options, change the comment. The result is
/// validated and opened before it replaces the stored catalog.
#[utoipa::path(
    patch,
    path = "/v1/catalogs/{catalog}",
    tag = "catalogs",
    params(("If-Match" = Option<String>, Header, description = "Change only the version with this `ETag` (412 otherwise)"), ("catalog" = String, Path, description = "Catalog name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    request_body = AlterCatalog,
    responses(
        (status = 200, description = "Altered and reopened", body = Catalog, headers(("etag" = String, description = "The representation's tag, for `If-Match`"))),
        (status = 412, description = "`PRECONDITION_FAILED`: `If-Match` names a version that is no longer current", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "Malformed JSON or `NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`CATALOG_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`CATALOG_MODIFIED`: altered by another request meanwhile", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`CATALOG_TYPE_IMMUTABLE`, invalid options, `CATALOG_SECRETS_REQUIRED` (where the catalog connects changes, and its secrets were not given again), or `CATALOG_OPEN_FAILED`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn alter_catalog(
    _: Authorized<need::ManageCatalogs>,
    State(state): State<AppState>,
    ApiPath(catalog): ApiPath<String>,
    if_match: IfMatch,
    ApiJson(request): ApiJson<AlterCatalog>,
) -> Result<Tagged<Catalog>, ApiError> {
    let alteration = CatalogAlteration {
        set: request.set,
        reset: request.reset,
        comment: request.comment,
    };
    let current = state
        .services
        .catalog(&path_catalog_name(&catalog)?)
        .await?;
    if_match.check("the catalog", &Catalog::from(&current))?;
    let altered = state
        .services
        .alter_catalog_as_read(current, alteration)
        .await;
    let record = if_match.stale_if_modified(altered)?;
    Ok(Tagged(Catalog::from(&record)))
}

/// DROP CATALOG.
#[utoipa::path(
    delete,
    path = "/v1/catalogs/{catalog}",
    tag = "catalogs",
    params(("If-Match" = Option<String>, Header, description = "Change only the version with this `ETag` (412 otherwise)"), ("catalog" = String, Path, description = "Catalog name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"), DropParams),
    responses(
        (status = 204, description = "Dropped (or absent, with `if_exists=true`)"),
        (status = 412, description = "`PRECONDITION_FAILED`: `If-Match` names a version that is no longer current", body = Problem, content_type = "application/problem+json"),
        (status = 400, description = "`NAME_INVALID` or `QUERY_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`CATALOG_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`CATALOG_IN_USE`: unfinished jobs use it", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn drop_catalog(
    _: Authorized<need::ManageCatalogs>,
    State(state): State<AppState>,
    ApiPath(catalog): ApiPath<String>,
    if_match: IfMatch,
    ApiQuery(params): ApiQuery<DropParams>,
) -> Result<StatusCode, ApiError> {
    let name = path_catalog_name(&catalog)?;
    let mut version = None;
    if if_match.is_given() {
        let current = state.services.catalog(&name).await?;
        if_match.check("the catalog", &Catalog::from(&current))?;
        version = Some(current.version);
    }
    let dropped = state.services.drop_catalog_as_read(&name, version).await;
    if !if_match.stale_if_modified(dropped)? && !params.if_exists {
        return Err(ApiError::new(
            ProblemCode::CatalogNotFound,
            format!("catalog '{name}' does not exist"),
        ));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// The databases of a live catalog.
#[utoipa::path(
    get,
    path = "/v1/catalogs/{catalog}/databases",
    tag = "browse",
    params(("catalog" = String, Path, description = "Catalog name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    responses(
        (status = 200, description = "Databases, by name", body = DatabaseList),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`CATALOG_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`CATALOG_UNAVAILABLE`: the external system failed", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_databases(
    _: Authorized<need::ReadCatalogs>,
    State(state): State<AppState>,
    ApiPath(catalog): ApiPath<String>,
) -> Result<axum::Json<DatabaseList>, ApiError> {
    let name = path_catalog_name(&catalog)?;
    let (databases, default) = state.services.databases(&name).await?;
    let databases = databases
        .into_iter()
        .map(|name| Database {
            default: name == default,
            name,
        })
        .collect();
    Ok(axum::Json(DatabaseList { databases }))
}

/// The tables of one database of a live catalog.
#[utoipa::path(
    get,
    path = "/v1/catalogs/{catalog}/databases/{database}/tables",
    tag = "browse",
    params(
        ("catalog" = String, Path, description = "Catalog name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"),
        ("database" = String, Path, description = "Database name"),
    ),
    responses(
        (status = 200, description = "Tables, by name", body = TableList),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`CATALOG_NOT_FOUND` or `DATABASE_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`CATALOG_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_tables(
    _: Authorized<need::ReadCatalogs>,
    State(state): State<AppState>,
    ApiPath((catalog, database)): ApiPath<(String, String)>,
) -> Result<axum::Json<TableList>, ApiError> {
    let database = path_object_name("database name", &database)?;
    let name = path_catalog_name(&catalog)?;
    let tables = state.services.tables(&name, &database).await?;
    Ok(axum::Json(TableList {
        database: database.to_string(),
        tables: tables
            .into_iter()
            .map(|name| TableSummary { name })
            .collect(),
    }))
}

/// One table of a live catalog, with its columns.
#[utoipa::path(
    get,
    path = "/v1/catalogs/{catalog}/databases/{database}/tables/{table}",
    tag = "browse",
    params(TablePath),
    responses(
        (status = 200, description = "The table and its columns, in order", body = Table),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`CATALOG_NOT_FOUND`, `DATABASE_NOT_FOUND` or `TABLE_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 502, description = "`CATALOG_UNAVAILABLE`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_table(
    _: Authorized<need::ReadCatalogs>,
    State(state): State<AppState>,
    ApiPath((catalog, database, table)): ApiPath<(String, String, String)>,
) -> Result<axum::Json<Table>, ApiError> {
    let database = path_object_name("database name", &database)?;
    let table = path_object_name("table name", &table)?;
    let name = path_catalog_name(&catalog)?;
    let info = state.services.table(&name, &database, &table).await?;
    Ok(axum::Json(Table {
        catalog,
        database: info.database,
        name: info.name,
        columns: info
            .columns
            .into_iter()
            .map(|c| Column {
                name: c.name,
                data_type: c.data_type,
                nullable: c.nullable,
            })
            .collect(),
        options: info.options,
    }))
}
