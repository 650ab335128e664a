//! Extractors whose rejections are problem+json like every other error, so a
//! malformed body, a wrong content type or a bad query string gets the same
//! shape of answer as a missing catalog.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use std::collections::HashMap;

use super::error::{ApiError, ProblemCode};
use crate::domain::job::JobId;
use crate::domain::ledger::Decision;

/// `axum::Json` with problem+json rejections.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            ProblemCode::ContentTypeUnsupported,
            "the request body must be JSON, sent with 'Content-Type: application/json'",
        ),
        JsonRejection::JsonSyntaxError(e) => {
            ApiError::new(ProblemCode::BodyMalformed, strip_prefix(&e.body_text()))
        }
        JsonRejection::JsonDataError(e) => {
            let message = strip_prefix(&e.body_text());
            // serde_path_to_error writes `path.to.field: what went wrong`.
            let field = message
                .split_once(": ")
                .filter(|(path, _)| !path.contains(' '));
            let error = ApiError::new(ProblemCode::BodyInvalid, message.clone());
            match field {
                Some((path, what)) => error.with_field(path, what),
                None => error,
            }
        }
        JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::new(
                ProblemCode::BodyTooLarge,
                "the request body is larger than the configured limit (CTASD_MAX_BODY_BYTES)",
            )
        }
        other => ApiError::new(ProblemCode::BodyUnreadable, other.body_text()),
    }
}

/// axum prefixes serde's message with a sentence of its own; keep serde's.
fn strip_prefix(text: &str) -> String {
    text.split_once("target type: ")
        .or_else(|| text.split_once("parse the request body as JSON: "))
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_else(|| text.to_owned())
}

/// `axum::extract::Query` with problem+json rejections.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => {
                let message = e.body_text();
                let message = message
                    .split_once("Query string: ")
                    .map(|(_, m)| m)
                    .unwrap_or(&message)
                    .to_owned();
                Err(ApiError::new(ProblemCode::QueryInvalid, message))
            }
            Err(other) => Err(ApiError::new(ProblemCode::QueryInvalid, other.body_text())),
        }
    }
}

/// `axum::extract::Path` with problem+json rejections.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Self(value))
            .map_err(|e| ApiError::new(ProblemCode::PathInvalid, e.body_text()))
    }
}

/// A job's id from the path (`/v1/jobs/{job}…`): 32 hex digits, else
/// `400 JOB_ID_INVALID`.
pub struct JobPath(pub JobId);

impl<S: Send + Sync> FromRequestParts<S> for JobPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ApiPath(params) =
            ApiPath::<HashMap<String, String>>::from_request_parts(parts, state).await?;
        let job = params.get("job").map(String::as_str).unwrap_or_default();
        job_id(job).map(Self)
    }
}

/// An operator's decision about one action, from
/// `/v1/jobs/{job}/actions/{action}/{decision}`.
pub struct DecisionPath {
    pub job: JobId,
    pub action: i64,
    pub decision: Decision,
}

impl<S: Send + Sync> FromRequestParts<S> for DecisionPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let ApiPath((job, action, decision)) =
            ApiPath::<(String, i64, String)>::from_request_parts(parts, state).await?;
        let decision = match decision.as_str() {
            "retry" => Decision::Retry,
            "give-up" => Decision::GiveUp,
            "publish-anyway" => Decision::PublishAnyway,
            other => {
                let detail =
                    format!("'{other}' is not a decision; use retry, give-up or publish-anyway");
                return Err(ApiError::new(ProblemCode::PathInvalid, detail));
            }
        };
        Ok(Self {
            job: job_id(&job)?,
            action,
            decision,
        })
    }
}

fn job_id(text: &str) -> Result<JobId, ApiError> {
    JobId::parse(text).map_err(|e| ApiError::new(ProblemCode::JobIdInvalid, e.to_string()))
}
