//! Every failure as `application/problem+json` (RFC 9457) with a stable
//! `code`.
//!
//! [`ProblemCode`] is the one place codes are spelled, each with its HTTP
//! status and title; [`ApiError::from`] maps the services' errors to them,
//! and nothing else does. Server errors are logged with an error id and
//! answered with that id only: their text may name internals.
//!
//! Codes are stable: once published, a code keeps its meaning. New codes
//! may be added at any time; clients treat a code they do not know by its
//! HTTP status.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::job::{JobStatus, TransitionError};
use crate::domain::ledger::DecisionError;
use crate::domain::options::ValidationError;
use crate::service::ServiceError;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// Declares [`ProblemCode`] from one table: each code with its HTTP status
/// and its title, so a new code is one line here (and its mapping from a
/// service error).
macro_rules! problem_codes {
    ($($code:ident => $status:ident, $title:literal;)*) => {
        /// Every problem ctasd answers with, by its stable code. Policy: a
        /// published code keeps its meaning and is never removed or renamed; new
        /// codes may be added in any version.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum ProblemCode {
            $($code,)*
        }

        impl ProblemCode {
            pub fn status(self) -> StatusCode {
                match self {
                    $(ProblemCode::$code => StatusCode::$status,)*
                }
            }

            pub fn title(self) -> &'static str {
                match self {
                    $(ProblemCode::$code => $title,)*
                }
            }
        }
    };
}

problem_codes! {
    BodyMalformed => BAD_REQUEST, "Malformed JSON";
    BodyInvalid => UNPROCESSABLE_ENTITY, "Invalid request body";
    BodyTooLarge => PAYLOAD_TOO_LARGE, "Request body too large";
    BodyUnreadable => UNPROCESSABLE_ENTITY, "Request body unreadable";
    ContentTypeUnsupported => UNSUPPORTED_MEDIA_TYPE, "Unsupported content type";
    QueryInvalid => BAD_REQUEST, "Invalid query string";
    PathInvalid => BAD_REQUEST, "Invalid path";
    PageTokenInvalid => BAD_REQUEST, "Invalid page token";
    NameInvalid => UNPROCESSABLE_ENTITY, "Invalid name";
    RouteNotFound => NOT_FOUND, "Route not found";
    MethodNotAllowed => METHOD_NOT_ALLOWED, "Method not allowed";
    RequestTimeout => REQUEST_TIMEOUT, "Request timeout";
    HeadersTooLarge => REQUEST_HEADER_FIELDS_TOO_LARGE, "Request headers too large";
    Unauthenticated => UNAUTHORIZED, "Authentication required";
    Forbidden => FORBIDDEN, "Forbidden";
    HostNotAllowed => FORBIDDEN, "Host not allowed";
    TooManyConnections => SERVICE_UNAVAILABLE, "Too many connections";
    StatementSyntax => BAD_REQUEST, "SQL syntax error";
    CatalogNotFound => NOT_FOUND, "Catalog not found";
    CatalogExists => CONFLICT, "Catalog already exists";
    CatalogModified => CONFLICT, "Concurrent modification";
    CatalogInUse => CONFLICT, "Catalog in use";
    CatalogTypeMissing => UNPROCESSABLE_ENTITY, "Catalog type missing";
    CatalogTypeUnknown => UNPROCESSABLE_ENTITY, "Unknown catalog type";
    CatalogOptionsMissing => UNPROCESSABLE_ENTITY, "Required options missing";
    CatalogOptionsUnsupported => UNPROCESSABLE_ENTITY, "Unsupported options";
    CatalogOptionInvalid => UNPROCESSABLE_ENTITY, "Invalid option value";
    CatalogSecretsRequired => UNPROCESSABLE_ENTITY, "Secrets required";
    OptionsInvalid => UNPROCESSABLE_ENTITY, "Invalid options";
    CatalogTypeImmutable => UNPROCESSABLE_ENTITY, "Catalog type cannot change";
    CommentInvalid => UNPROCESSABLE_ENTITY, "Invalid comment";
    CatalogOpenFailed => UNPROCESSABLE_ENTITY, "Catalog cannot be opened";
    CatalogUnavailable => BAD_GATEWAY, "Catalog unavailable";
    CatalogRefused => BAD_GATEWAY, "The catalog's system refused";
    DatabaseNotFound => NOT_FOUND, "Database not found";
    TableNotFound => NOT_FOUND, "Table not found";
    TableExists => CONFLICT, "Table already exists";
    TargetMissing => CONFLICT, "Table to replace does not exist";
    TableNotOwned => CONFLICT, "Table not ctasd's to replace";
    TargetProtected => UNPROCESSABLE_ENTITY, "Target is protected";
    TableInvalid => UNPROCESSABLE_ENTITY, "Invalid table";
    TableUnsupported => UNPROCESSABLE_ENTITY, "Table not supported";
    StagingMissing => CONFLICT, "Staging missing";
    JobInvalid => UNPROCESSABLE_ENTITY, "Invalid job";
    JobIdInvalid => BAD_REQUEST, "Invalid job id";
    JobExists => CONFLICT, "Job already exists";
    JobNotFound => NOT_FOUND, "Job not found";
    TransitionIllegal => CONFLICT, "Illegal status transition";
    StaleRun => CONFLICT, "Status of an earlier run";
    ActionNotFound => NOT_FOUND, "Action not found";
    ActionNotSettleable => CONFLICT, "Action cannot be settled so";
    PreconditionFailed => PRECONDITION_FAILED, "Precondition failed";
    IdempotencyKeyInvalid => BAD_REQUEST, "Invalid idempotency key";
    IdempotencyKeyReused => UNPROCESSABLE_ENTITY, "Idempotency key used for another request";
    IdempotencyKeyInUse => CONFLICT, "Idempotency key in use";
    IdempotentAnswerUnreadable => CONFLICT, "Idempotent answer unreadable";
    TableInUse => CONFLICT, "Table in use";
    EngineJobIdTaken => CONFLICT, "Engine job id taken";
    JobWatched => CONFLICT, "Job watched by its engine";
    EngineNotFound => NOT_FOUND, "Engine not found";
    EngineExists => CONFLICT, "Engine already exists";
    EngineInUse => CONFLICT, "Engine in use";
    EngineModified => CONFLICT, "Concurrent modification";
    EngineSettingInvalid => UNPROCESSABLE_ENTITY, "Invalid engine setting";
    EngineUnreachable => UNPROCESSABLE_ENTITY, "Engine cannot be reached";
    SubscriptionInvalid => UNPROCESSABLE_ENTITY, "Invalid subscription";
    SubscriptionNotFound => NOT_FOUND, "Subscription not found";
    SubscriptionExists => CONFLICT, "Subscription already exists";
    SubscriptionModified => CONFLICT, "Concurrent modification";
    DeliveryNotFound => NOT_FOUND, "Delivery not found";
    StoreUnavailable => SERVICE_UNAVAILABLE, "Store unavailable";
    StoreNotReady => SERVICE_UNAVAILABLE, "Store not ready";
    Internal => INTERNAL_SERVER_ERROR, "Internal error";
}

impl ProblemCode {
    /// `CATALOG_NOT_FOUND`.
    pub fn as_str(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

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
    #[schema(schema_with = super::openapi::problem_code_or_newer)]
    pub code: ProblemCode,
    /// Fields that failed validation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// For `TRANSITION_ILLEGAL`: the statuses the job may move to.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub legal_next: Option<Vec<JobStatus>>,
    /// For server errors: the id under which the details were logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "5b0b6c3e-3f4f-4c55-9f43-2f5d2a8a5e61")]
    pub error_id: Option<String>,
    /// For `STATEMENT_SYNTAX`: the line (from 1) where the statement stops
    /// making sense.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub line: Option<u32>,
    /// For `STATEMENT_SYNTAX`: the column (from 1) on that line.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub column: Option<u32>,
}

#[derive(Debug)]
pub struct ApiError {
    code: ProblemCode,
    /// Where the code's own status is not the one: a catalog or database
    /// named in a request body and missing is the request's fault (422).
    status: Option<StatusCode>,
    detail: String,
    errors: Vec<FieldError>,
    legal_next: Option<Vec<JobStatus>>,
    /// Line and column in a statement.
    position: Option<(u32, u32)>,
    /// Logged, never sent.
    internal: Option<String>,
}

impl ApiError {
    pub fn new(code: ProblemCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            status: None,
            detail: detail.into(),
            errors: Vec::new(),
            legal_next: None,
            position: None,
            internal: None,
        }
    }

    /// A statement that does not parse, pointing at where.
    pub fn syntax(error: crate::domain::flink::statement::SyntaxError) -> Self {
        Self {
            position: Some((clamp(error.line), clamp(error.column))),
            ..Self::new(ProblemCode::StatementSyntax, error.to_string())
                .with_field("statement", error.to_string())
        }
    }

    pub fn with_field(mut self, field: impl Into<String>, message: impl Into<String>) -> Self {
        self.errors.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
        self
    }

    /// With the field at fault, when there is one; the message is the detail.
    fn at(self, field: Option<String>) -> Self {
        match field {
            Some(field) => {
                let message = self.detail.clone();
                self.with_field(field, message)
            }
            None => self,
        }
    }

    /// A name in the URL path that breaks the naming rules.
    pub fn bad_path_name(error: crate::domain::NameError) -> Self {
        Self {
            status: Some(StatusCode::BAD_REQUEST),
            ..Self::new(ProblemCode::NameInvalid, error.to_string())
        }
    }

    /// A server-side failure: the client sees a generic text and an id.
    pub fn internal(code: ProblemCode, internal: impl std::fmt::Display, detail: &str) -> Self {
        Self {
            internal: Some(internal.to_string()),
            ..Self::new(code, detail)
        }
    }

    pub fn code(&self) -> ProblemCode {
        self.code
    }

    fn problem_type(&self) -> String {
        format!(
            "urn:ctasd:problem:{}",
            self.code.as_str().to_ascii_lowercase().replace('_', "-")
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status.unwrap_or(self.code.status());
        let error_id = status
            .is_server_error()
            .then(|| uuid::Uuid::new_v4().to_string());
        if let Some(id) = &error_id {
            tracing::error!(
                error_id = %id,
                code = %self.code.as_str(),
                detail = %self.detail,
                internal = self.internal.as_deref().unwrap_or(""),
                "request failed"
            );
        }
        let problem = Problem {
            problem_type: self.problem_type(),
            title: self.code.title().to_owned(),
            status: status.as_u16(),
            detail: self.detail,
            code: self.code,
            errors: self.errors,
            legal_next: self.legal_next,
            error_id,
            line: self.position.map(|(line, _)| line),
            column: self.position.map(|(_, column)| column),
        };
        let mut response = (status, axum::Json(problem)).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        use ProblemCode as C;
        let detail = error.to_string();
        match error {
            ServiceError::NameInvalid { field, message } => {
                Self::new(C::NameInvalid, detail).with_field(field, message)
            }
            ServiceError::Options(e) => {
                let field = match &e {
                    crate::domain::OptionsError::BadValue(key)
                    | crate::domain::OptionsError::MaskAsValue(key) => format!("options.{key}"),
                    _ => "options".to_owned(),
                };
                Self::new(C::OptionsInvalid, detail.clone()).with_field(field, detail)
            }
            ServiceError::Validation(e) => validation(e),
            ServiceError::Alter(e) => {
                let (code, field) = match e {
                    crate::domain::catalog::AlterError::CommentTooLong => {
                        (C::CommentInvalid, "comment")
                    }
                    _ => (C::CatalogTypeImmutable, "options.type"),
                };
                Self::new(code, detail.clone()).with_field(field, detail)
            }
            ServiceError::CatalogOpenFailed(_) => Self::new(C::CatalogOpenFailed, detail),
            ServiceError::CatalogNotFound {
                field: Some(field), ..
            } => Self::new(C::CatalogNotFound, detail)
                .at(Some(field))
                .unprocessable(),
            ServiceError::CatalogNotFound { field: None, .. } => {
                Self::new(C::CatalogNotFound, detail)
            }
            ServiceError::CatalogExists(_) => Self::new(C::CatalogExists, detail),
            ServiceError::CatalogInUse(_) => Self::new(C::CatalogInUse, detail),
            ServiceError::CatalogModified(_) => Self::new(C::CatalogModified, detail),
            ServiceError::CatalogUnavailable(_) => Self::new(C::CatalogUnavailable, detail),
            ServiceError::CatalogRefused(_) => Self::new(C::CatalogRefused, detail),
            ServiceError::DatabaseNotFound {
                field: Some(field), ..
            } => Self::new(C::DatabaseNotFound, detail)
                .at(Some(field))
                .unprocessable(),
            ServiceError::DatabaseNotFound { field: None, .. } => {
                Self::new(C::DatabaseNotFound, detail)
            }
            ServiceError::TableNotFound(_) => Self::new(C::TableNotFound, detail),
            ServiceError::TableExists { field, .. } => {
                Self::new(C::TableExists, detail).with_field(field, "already exists")
            }
            ServiceError::TargetMissing { field, .. } => {
                Self::new(C::TargetMissing, detail).with_field(field, "does not exist")
            }
            ServiceError::TableNotOwned { field, .. } => match field {
                Some(field) => {
                    Self::new(C::TableNotOwned, detail).with_field(field, "not ctasd's to replace")
                }
                None => Self::new(C::TableNotOwned, detail),
            },
            ServiceError::TargetProtected { field, .. } => {
                Self::new(C::TargetProtected, detail).at(Some(field))
            }
            ServiceError::TableInvalid { field, .. } => {
                Self::new(C::TableInvalid, detail).at(Some(field))
            }
            ServiceError::TableUnsupported { field, .. } => {
                Self::new(C::TableUnsupported, detail).at(field)
            }
            ServiceError::StagingMissing(_) => Self::new(C::StagingMissing, detail),
            ServiceError::JobInvalid { field, .. } => {
                Self::new(C::JobInvalid, detail).at(Some(field))
            }
            ServiceError::JobExists(_) => Self::new(C::JobExists, detail),
            ServiceError::JobNotFound(_) => Self::new(C::JobNotFound, detail),
            ServiceError::Transition(e) => {
                let from = match e {
                    TransitionError::Terminal { from, .. }
                    | TransitionError::Illegal { from, .. } => from,
                };
                Self {
                    legal_next: Some(from.legal_next().to_vec()),
                    ..Self::new(C::TransitionIllegal, detail)
                }
            }
            ServiceError::StaleRun(_) => Self::new(C::StaleRun, detail),
            ServiceError::Decision(DecisionError::NotFound { .. }) => {
                Self::new(C::ActionNotFound, detail)
            }
            ServiceError::Decision(_) => Self::new(C::ActionNotSettleable, detail),
            ServiceError::EngineJobIdTaken(_) => Self::new(C::EngineJobIdTaken, detail),
            ServiceError::JobWatched(_) => Self::new(C::JobWatched, detail),
            ServiceError::EngineSetting(e) => {
                Self::new(C::EngineSettingInvalid, detail.clone()).with_field(e.field(), detail)
            }
            ServiceError::EngineUnreachable(_) => Self::new(C::EngineUnreachable, detail),
            ServiceError::TableInUse(_) => Self::new(C::TableInUse, detail),
            ServiceError::EngineNotFound {
                field: Some(field), ..
            } => Self::new(C::EngineNotFound, detail)
                .at(Some(field))
                .unprocessable(),
            ServiceError::EngineNotFound { field: None, .. } => {
                Self::new(C::EngineNotFound, detail)
            }
            ServiceError::EngineExists(_) => Self::new(C::EngineExists, detail),
            ServiceError::EngineInUse(_) => Self::new(C::EngineInUse, detail),
            ServiceError::EngineModified(_) => Self::new(C::EngineModified, detail),
            ServiceError::SubscriptionInvalid { field, .. } => {
                Self::new(C::SubscriptionInvalid, detail).at(Some(field))
            }
            ServiceError::SubscriptionNotFound(_) => Self::new(C::SubscriptionNotFound, detail),
            ServiceError::SubscriptionExists(_) => Self::new(C::SubscriptionExists, detail),
            ServiceError::SubscriptionModified(_) => Self::new(C::SubscriptionModified, detail),
            ServiceError::DeliveryNotFound(_) => Self::new(C::DeliveryNotFound, detail),
            ServiceError::StoreUnavailable(_) => Self::internal(
                C::StoreUnavailable,
                detail,
                "the store cannot be reached; retry later",
            ),
            ServiceError::StoreNotReady(reason) => Self::new(C::StoreNotReady, reason),
            ServiceError::Internal(_) => Self::internal(C::Internal, detail, "the server failed"),
        }
    }
}

fn clamp(position: usize) -> u32 {
    u32::try_from(position).unwrap_or(u32::MAX)
}

impl ApiError {
    /// A missing catalog or database named in a request body is the
    /// request's fault: 422, not 404.
    fn unprocessable(self) -> Self {
        Self {
            status: Some(StatusCode::UNPROCESSABLE_ENTITY),
            ..self
        }
    }
}

fn validation(error: ValidationError) -> ApiError {
    use ProblemCode as C;
    let detail = error.to_string();
    let invalid = |code| ApiError::new(code, detail.clone());
    match &error {
        ValidationError::MissingType => {
            invalid(C::CatalogTypeMissing).with_field("options.type", "required option is missing")
        }
        ValidationError::UnknownType { available, .. } => invalid(C::CatalogTypeUnknown)
            .with_field(
                "options.type",
                format!("unknown catalog type; available: {}", available.join(", ")),
            ),
        ValidationError::MissingOptions { missing } => missing
            .iter()
            .fold(invalid(C::CatalogOptionsMissing), |e, key| {
                e.with_field(format!("options.{key}"), "required option is missing")
            }),
        ValidationError::UnsupportedOptions { unsupported, .. } => unsupported
            .iter()
            .fold(invalid(C::CatalogOptionsUnsupported), |e, key| {
                e.with_field(format!("options.{key}"), "unsupported option")
            }),
        ValidationError::InvalidValue { key, reason } => {
            invalid(C::CatalogOptionInvalid).with_field(format!("options.{key}"), reason.clone())
        }
        ValidationError::SecretsRequired { missing, .. } => {
            missing
                .iter()
                .fold(invalid(C::CatalogSecretsRequired), |e, key| {
                    e.with_field(
                        format!("set.{key}"),
                        "give it again: the catalog is pointed somewhere new",
                    )
                })
        }
    }
}
