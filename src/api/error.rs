//! Every failure as `application/problem+json` (RFC 9457) with a stable `code`.
//!
//! Domain, catalog and store errors are mapped here and nowhere else. Server
//! errors are logged with an error id and answered with that id only: their
//! text may name internals, never shown to clients.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::catalog::factory::OpenOrInvalid;
use crate::catalog::{CatalogError, ValidationError};
use crate::domain::NameError;
use crate::domain::OptionsError;
use crate::domain::catalog::AlterError;
use crate::domain::hook::DecisionError;
use crate::store::StoreError;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// One field that failed validation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FieldError {
    /// Where, e.g. `name` or `options.base-url`.
    #[schema(example = "options.base-url")]
    pub field: String,
    #[schema(example = "required option is missing")]
    pub message: String,
}

/// An RFC 9457 problem document.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "type": "urn:ctasd:problem:catalog-not-found",
    "title": "Catalog not found",
    "status": 404,
    "detail": "catalog 'pg' does not exist",
    "code": "CATALOG_NOT_FOUND"
}))]
pub struct Problem {
    /// A URN naming the kind of problem; the same for every occurrence.
    #[serde(rename = "type")]
    pub problem_type: String,
    /// A short summary of the kind of problem.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong this time, in words.
    pub detail: String,
    /// A stable, machine-readable code, e.g. `CATALOG_NOT_FOUND`.
    pub code: String,
    /// Fields that failed validation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// For server errors: the id under which the details were logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_id: Option<String>,
}

#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    title: &'static str,
    detail: String,
    errors: Vec<FieldError>,
    /// Logged, never sent.
    internal: Option<String>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        code: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code,
            title,
            detail: detail.into(),
            errors: Vec::new(),
            internal: None,
        }
    }

    pub fn with_field(mut self, field: impl Into<String>, message: impl Into<String>) -> Self {
        self.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
        self
    }

    pub fn internal(error: impl std::fmt::Display) -> Self {
        Self {
            internal: Some(error.to_string()),
            ..Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "Internal error",
                "the server failed",
            )
        }
    }

    pub fn route_not_found(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "ROUTE_NOT_FOUND",
            "Route not found",
            format!("no route for '{path}'"),
        )
    }

    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "METHOD_NOT_ALLOWED",
            "Method not allowed",
            format!("{method} is not allowed on '{path}'"),
        )
    }

    pub fn catalog_not_found(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "CATALOG_NOT_FOUND",
            "Catalog not found",
            format!("catalog '{name}' does not exist"),
        )
    }

    pub fn timeout(seconds: u64) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "REQUEST_TIMEOUT",
            "Request timeout",
            format!("the request did not complete within {seconds} s"),
        )
    }

    pub fn headers_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "HEADERS_TOO_LARGE",
            "Request headers too large",
            format!("the request's headers exceed {limit} bytes"),
        )
    }

    /// A name in the URL path that breaks the naming rules.
    pub fn bad_path_name(error: NameError) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "NAME_INVALID",
            "Invalid name",
            error.to_string(),
        )
    }

    /// A name in the request body that breaks the naming rules.
    pub fn bad_body_name(field: &str, error: NameError) -> Self {
        let message = error.to_string();
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "NAME_INVALID",
            "Invalid name",
            message.clone(),
        )
        .with_field(field, message)
    }

    fn problem_type(&self) -> String {
        format!(
            "urn:ctasd:problem:{}",
            self.code.to_ascii_lowercase().replace('_', "-")
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let error_id = self
            .status
            .is_server_error()
            .then(|| uuid::Uuid::new_v4().to_string());
        if let Some(id) = &error_id {
            tracing::error!(
                error_id = %id,
                code = self.code,
                detail = %self.detail,
                internal = self.internal.as_deref().unwrap_or(""),
                "request failed"
            );
        }
        let problem = Problem {
            problem_type: self.problem_type(),
            title: self.title.to_owned(),
            status: self.status.as_u16(),
            detail: self.detail,
            code: self.code.to_owned(),
            errors: self.errors,
            error_id,
        };
        let mut response = (self.status, axum::Json(problem)).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        let detail = error.to_string();
        match error {
            StoreError::CatalogExists(_) => Self::new(
                StatusCode::CONFLICT,
                "CATALOG_EXISTS",
                "Catalog already exists",
                detail,
            ),
            StoreError::CatalogNotFound(name) => Self::catalog_not_found(&name),
            StoreError::Decision(DecisionError::NotFound { .. }) => Self::new(
                StatusCode::NOT_FOUND,
                "ACTION_NOT_FOUND",
                "Action not found",
                detail,
            ),
            StoreError::Decision(_) => Self::new(
                StatusCode::CONFLICT,
                "ACTION_NOT_SETTLEABLE",
                "Action cannot be settled so",
                detail,
            ),
            StoreError::EngineJobIdTaken(_) => Self::new(
                StatusCode::CONFLICT,
                "ENGINE_JOB_ID_TAKEN",
                "Engine job id taken",
                detail,
            ),
            StoreError::CatalogInUse { .. } => Self::new(
                StatusCode::CONFLICT,
                "CATALOG_IN_USE",
                "Catalog in use",
                detail,
            ),
            StoreError::JobExists(_) => Self::new(
                StatusCode::CONFLICT,
                "JOB_EXISTS",
                "Job already exists",
                detail,
            ),
            StoreError::JobNotFound(_) => Self::new(
                StatusCode::NOT_FOUND,
                "JOB_NOT_FOUND",
                "Job not found",
                detail,
            ),
            StoreError::Transition(_) => Self::new(
                StatusCode::CONFLICT,
                "TRANSITION_ILLEGAL",
                "Illegal status transition",
                detail,
            ),
            StoreError::ConcurrentModification(_) => Self::new(
                StatusCode::CONFLICT,
                "CATALOG_MODIFIED",
                "Concurrent modification",
                detail,
            ),
            StoreError::NotReady(reason) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "STORE_NOT_READY",
                "Store not ready",
                reason,
            ),
            StoreError::Unavailable(_) => Self {
                internal: Some(detail),
                ..Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "STORE_UNAVAILABLE",
                    "Store unavailable",
                    "the store cannot be reached; retry later",
                )
            },
            StoreError::Secret { .. } | StoreError::InUse(_) | StoreError::Internal(_) => {
                Self::internal(detail)
            }
        }
    }
}

impl From<OptionsError> for ApiError {
    fn from(error: OptionsError) -> Self {
        let field = match &error {
            OptionsError::BadValue(key) | OptionsError::MaskAsValue(key) => {
                format!("options.{key}")
            }
            _ => "options".to_owned(),
        };
        let message = error.to_string();
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "OPTIONS_INVALID",
            "Invalid options",
            message.clone(),
        )
        .with_field(field, message)
    }
}

impl From<ValidationError> for ApiError {
    fn from(error: ValidationError) -> Self {
        let detail = error.to_string();
        let invalid = |code, title| {
            Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                code,
                title,
                detail.clone(),
            )
        };
        match &error {
            ValidationError::MissingType => invalid("CATALOG_TYPE_MISSING", "Catalog type missing")
                .with_field("options.type", "required option is missing"),
            ValidationError::UnknownType { available, .. } => {
                invalid("CATALOG_TYPE_UNKNOWN", "Unknown catalog type").with_field(
                    "options.type",
                    format!("unknown catalog type; available: {}", available.join(", ")),
                )
            }
            ValidationError::MissingOptions { missing } => missing.iter().fold(
                invalid("CATALOG_OPTIONS_MISSING", "Required options missing"),
                |e, key| e.with_field(format!("options.{key}"), "required option is missing"),
            ),
            ValidationError::UnsupportedOptions { unsupported, .. } => unsupported.iter().fold(
                invalid("CATALOG_OPTIONS_UNSUPPORTED", "Unsupported options"),
                |e, key| e.with_field(format!("options.{key}"), "unsupported option"),
            ),
            ValidationError::InvalidValue { key, reason } => {
                invalid("CATALOG_OPTION_INVALID", "Invalid option value")
                    .with_field(format!("options.{key}"), reason.clone())
            }
            ValidationError::SecretsRequired { missing, .. } => missing.iter().fold(
                invalid("CATALOG_SECRETS_REQUIRED", "Secrets required"),
                |e, key| {
                    e.with_field(
                        format!("set.{key}"),
                        "give it again: the catalog is pointed somewhere new",
                    )
                },
            ),
        }
    }
}

impl From<OpenOrInvalid> for ApiError {
    fn from(error: OpenOrInvalid) -> Self {
        match error {
            OpenOrInvalid::Invalid(e) => e.into(),
            OpenOrInvalid::Open(e) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "CATALOG_OPEN_FAILED",
                "Catalog cannot be opened",
                e.to_string(),
            ),
        }
    }
}

impl From<AlterError> for ApiError {
    fn from(error: AlterError) -> Self {
        match error {
            AlterError::Options(e) => e.into(),
            AlterError::TypeReset | AlterError::TypeChanged { .. } => {
                let message = error.to_string();
                Self::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "CATALOG_TYPE_IMMUTABLE",
                    "Catalog type cannot change",
                    message.clone(),
                )
                .with_field("options.type", message)
            }
            AlterError::CommentTooLong => {
                let message = error.to_string();
                Self::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "COMMENT_INVALID",
                    "Invalid comment",
                    message.clone(),
                )
                .with_field("comment", message)
            }
        }
    }
}

impl From<CatalogError> for ApiError {
    fn from(error: CatalogError) -> Self {
        let detail = error.to_string();
        match error {
            CatalogError::DatabaseNotFound(_) => Self::new(
                StatusCode::NOT_FOUND,
                "DATABASE_NOT_FOUND",
                "Database not found",
                detail,
            ),
            CatalogError::TableNotFound { .. } => Self::new(
                StatusCode::NOT_FOUND,
                "TABLE_NOT_FOUND",
                "Table not found",
                detail,
            ),
            CatalogError::TableExists { .. } => Self::new(
                StatusCode::CONFLICT,
                "TABLE_EXISTS",
                "Table already exists",
                detail,
            ),
            CatalogError::StagingMissing { .. } => Self::new(
                StatusCode::CONFLICT,
                "STAGING_MISSING",
                "Staging missing",
                detail,
            ),
            CatalogError::Unsupported(_) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "TABLE_UNSUPPORTED",
                "Table not supported",
                detail,
            ),
            CatalogError::NotOwned { .. } => Self::new(
                StatusCode::CONFLICT,
                "TABLE_NOT_OWNED",
                "Table not ctasd's to replace",
                detail,
            ),
            CatalogError::Protected(_) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "TARGET_PROTECTED",
                "Target is protected",
                detail,
            ),
            CatalogError::Unavailable(_) => Self::new(
                StatusCode::BAD_GATEWAY,
                "CATALOG_UNAVAILABLE",
                "Catalog unavailable",
                detail,
            ),
            CatalogError::Refused(_) => Self::new(
                StatusCode::BAD_GATEWAY,
                "CATALOG_REFUSED",
                "The catalog's system refused",
                detail,
            ),
        }
    }
}
