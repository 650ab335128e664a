//! `ETag` on catalogs and jobs, `If-Match` on their changes: a client that
//! read a version can change or drop it only if nobody changed it since
//! (412 otherwise), instead of overwriting a change it never saw.
//!
//! The tag is a digest of the representation itself, so it moves whenever
//! anything a client can see moves (a job's actions too), and it is the
//! same on every replica.

use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::error::{ApiError, ProblemCode};
use crate::service::ServiceError;

/// JSON with its `ETag`.
pub struct Tagged<T>(pub T);

impl<T: Serialize> IntoResponse for Tagged<T> {
    fn into_response(self) -> Response {
        match Rendered::json(&self.0) {
            Ok(rendered) => rendered.into_response(),
            Err(error) => error.into_response(),
        }
    }
}

/// A JSON body rendered once, with its `ETag`: cheap to clone and to send
/// again.
#[derive(Clone)]
pub struct Rendered {
    body: axum::body::Bytes,
    tag: HeaderValue,
}

impl Rendered {
    pub fn json(value: &impl Serialize) -> Result<Self, ApiError> {
        let body = serde_json::to_vec(value)
            .map_err(|e| ApiError::internal(ProblemCode::Internal, e, "the server failed"))?;
        let tag = HeaderValue::from_str(&tag_of(&body)).expect("hex is a header value");
        Ok(Self {
            body: body.into(),
            tag,
        })
    }

    /// Its size in bytes, for bounding what is kept.
    pub fn size(&self) -> usize {
        self.body.len()
    }
}

impl IntoResponse for Rendered {
    fn into_response(self) -> Response {
        let json = HeaderValue::from_static("application/json");
        (
            [(header::ETAG, self.tag), (header::CONTENT_TYPE, json)],
            self.body,
        )
            .into_response()
    }
}

/// `"<16 hex digits>"`: the first 8 bytes of the body's SHA-256.
pub(super) fn tag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// The tag the representation of `current` has.
fn current_tag(current: &impl Serialize) -> Result<String, ApiError> {
    serde_json::to_vec(current)
        .map(|body| tag_of(&body))
        .map_err(|e| ApiError::internal(ProblemCode::Internal, e, "the server failed"))
}

/// The request's `If-Match`, if it sent one.
pub struct IfMatch(Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.headers.get(header::IF_MATCH) {
            None => Ok(Self(None)),
            Some(value) => value
                .to_str()
                .map(|v| Self(Some(v.to_owned())))
                .map_err(|_| {
                    ApiError::new(ProblemCode::PreconditionFailed, "If-Match is not ASCII")
                }),
        }
    }
}

impl IfMatch {
    pub fn is_given(&self) -> bool {
        self.0.is_some()
    }

    /// A change that found its target modified after the check passed: with
    /// `If-Match`, that is the precondition failing too (412).
    pub fn stale_if_modified<T>(&self, outcome: Result<T, ServiceError>) -> Result<T, ApiError> {
        match outcome {
            Err(ServiceError::CatalogModified(name)) if self.is_given() => Err(ApiError::new(
                ProblemCode::PreconditionFailed,
                format!("catalog '{name}' changed since it was read; read it again"),
            )),
            other => other.map_err(ApiError::from),
        }
    }

    /// Passes without `If-Match`, with `*`, or when one of its tags is the
    /// current one (strong comparison: a weak `W/` tag never matches).
    pub fn check(&self, what: &str, current: &impl Serialize) -> Result<(), ApiError> {
        let Some(wanted) = &self.0 else {
            return Ok(());
        };
        let tag = current_tag(current)?;
        let matches = wanted
            .split(',')
            .map(str::trim)
            .any(|candidate| candidate == "*" || candidate == tag);
        if matches {
            Ok(())
        } else {
            Err(ApiError::new(
                ProblemCode::PreconditionFailed,
                format!("{what} changed since it was read (its ETag is now {tag}); read it again"),
            ))
        }
    }
}
