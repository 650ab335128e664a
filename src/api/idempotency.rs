//! `Idempotency-Key` on every POST, as the Iceberg REST spec has it: the
//! first final answer (2xx, or a 4xx that a retry would get again) is kept
//! for the key's lifetime and replayed, with `Idempotent-Replayed: true`,
//! to a retry of the same request; the same key on a different request is
//! 422, and while the first request runs, 409. Answers that a retry may
//! change (401, 403, 408, 429, 5xx) are not kept.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::auth::caller_name;
use super::error::{ApiError, ProblemCode};
use crate::service::{KeyClaim, Services, StoredAnswer};

pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
const MAX_KEY_LEN: usize = 255;
/// Larger answers are not kept (none of ctasd's POST answers comes near).
const MAX_KEPT_ANSWER: usize = 4 * 1024 * 1024;

#[derive(Clone)]
pub struct Idempotency {
    pub services: Arc<Services>,
    pub lifetime: Duration,
    /// A claim unanswered for this long was left by a process that died.
    pub abandoned_after: Duration,
    pub max_body_bytes: usize,
}

pub async fn idempotent(
    State(settings): State<Idempotency>,
    request: Request,
    next: Next,
) -> Response {
    let Some(key) = request.headers().get(&IDEMPOTENCY_KEY).cloned() else {
        return next.run(request).await;
    };
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    match keep_first_answer(&settings, key, request, next).await {
        Ok(response) | Err(response) => response,
    }
}

async fn keep_first_answer(
    settings: &Idempotency,
    key: HeaderValue,
    request: Request,
    next: Next,
) -> Result<Response, Response> {
    let key = valid_key(&key).map_err(IntoResponse::into_response)?;
    let caller = caller_name(request.extensions());
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, settings.max_body_bytes).await.map_err(|_| {
        let detail = format!("the request body exceeds {} bytes", settings.max_body_bytes);
        ApiError::new(ProblemCode::BodyTooLarge, detail).into_response()
    })?;
    let digest = request_digest(&parts.method, &parts.uri, &body);
    let services = &settings.services;
    let claim = services
        .claim_idempotency_key(
            &caller,
            &key,
            &digest,
            settings.lifetime,
            settings.abandoned_after,
        )
        .await
        .map_err(|e| ApiError::from(e).into_response())?;
    match claim {
        KeyClaim::Claimed => {}
        KeyClaim::Replay(answer) => return Ok(replay(answer)),
        KeyClaim::Running => {
            let detail = format!("a request with Idempotency-Key '{key}' is running; retry later");
            return Err(ApiError::new(ProblemCode::IdempotencyKeyInUse, detail).into_response());
        }
        KeyClaim::Unreadable(why) => {
            let detail = format!(
                "the answer kept for Idempotency-Key '{key}' cannot be read ({why}); check \
                 whether the first request took effect, then use a new key"
            );
            return Err(
                ApiError::new(ProblemCode::IdempotentAnswerUnreadable, detail).into_response(),
            );
        }
        KeyClaim::Mismatch => {
            let detail = format!("Idempotency-Key '{key}' was used for a different request");
            return Err(ApiError::new(ProblemCode::IdempotencyKeyReused, detail).into_response());
        }
    }
    let response = renewing_the_claim(
        services,
        &caller,
        &key,
        next.run(Request::from_parts(parts, Body::from(body))),
    )
    .await;
    let (answer, response) = keepable(response).await;
    if let Err(error) = services
        .finish_idempotency_key(&caller, &key, answer.as_ref())
        .await
    {
        tracing::warn!(%error, "the answer to an idempotent request could not be kept");
    }
    Ok(response)
}

/// How long a claim lives without renewal: the claim of a process that died
/// mid-request is given up after this, on every replica.
pub const CLAIM_LEASE: Duration = Duration::from_secs(10);
/// How often a running request renews its claim.
const RENEW_EVERY: Duration = Duration::from_secs(3);

/// Runs `request`, renewing the key's claim every [`RENEW_EVERY`] while it
/// runs, so that only a claim whose process is gone lapses.
async fn renewing_the_claim(
    services: &Services,
    caller: &str,
    key: &str,
    request: impl std::future::Future<Output = Response>,
) -> Response {
    tokio::pin!(request);
    let mut renew =
        tokio::time::interval_at(tokio::time::Instant::now() + RENEW_EVERY, RENEW_EVERY);
    loop {
        tokio::select! {
            response = &mut request => return response,
            _ = renew.tick() => {
                if let Err(error) = services.renew_idempotency_claim(caller, key).await {
                    tracing::warn!(%error, "an idempotency key's claim could not be renewed");
                }
            }
        }
    }
}

fn valid_key(key: &HeaderValue) -> Result<String, ApiError> {
    match key.to_str() {
        Ok(k)
            if !k.is_empty()
                && k.len() <= MAX_KEY_LEN
                && k.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Ok(k.to_owned())
        }
        _ => Err(ApiError::new(
            ProblemCode::IdempotencyKeyInvalid,
            format!(
                "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters, e.g. a UUID"
            ),
        )),
    }
}

fn request_digest(method: &Method, uri: &axum::http::Uri, body: &[u8]) -> String {
    let mut hasher = Sha256::new();
    for part in [method.as_str(), uri.path(), uri.query().unwrap_or("")] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hasher.update(body);
    hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A final answer to keep (and the response, rebuilt), or none.
async fn keepable(response: Response) -> (Option<StoredAnswer>, Response) {
    let status = response.status();
    let transient = status.is_server_error()
        || matches!(
            status,
            StatusCode::UNAUTHORIZED
                | StatusCode::FORBIDDEN
                | StatusCode::REQUEST_TIMEOUT
                | StatusCode::TOO_MANY_REQUESTS
        );
    if transient {
        return (None, response);
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, MAX_KEPT_ANSWER).await else {
        let failed = ApiError::internal(
            ProblemCode::Internal,
            "an answer too large to keep",
            "the server failed",
        );
        return (None, failed.into_response());
    };
    let text = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let answer = String::from_utf8(bytes.to_vec())
        .ok()
        .map(|body| StoredAnswer {
            status: status.as_u16(),
            content_type: text(header::CONTENT_TYPE),
            location: text(header::LOCATION),
            body,
        });
    (answer, Response::from_parts(parts, Body::from(bytes)))
}

fn replay(answer: StoredAnswer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, answer.body).into_response();
    let headers = response.headers_mut();
    let pairs = [
        (header::CONTENT_TYPE, answer.content_type),
        (header::LOCATION, answer.location),
    ];
    for (name, value) in pairs {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}
