//! HTTP only: routing, the layer stack, and the OpenAPI document derived from
//! the same routes. Handlers parse the request, call one use case of
//! [`crate::service`], and map its answer; they hold no rules of their own
//! and reach nothing below the services.

pub mod auth;
pub mod catalog_types;
pub mod catalogs;
pub mod engines;
pub mod error;
pub mod etag;
pub mod extract;
pub mod health;
pub mod idempotency;
pub mod job_views;
pub mod jobs;
pub mod observe;
pub mod openapi;
pub mod overview;
pub mod page;
pub mod statements;
pub mod subscriptions;
pub mod ui;
pub mod whoami;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, HeaderValue, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::ServeSettings;
use crate::domain::engine::printable;
use crate::service::Services;
use auth::{Authorized, need};
use error::{ApiError, ProblemCode};

/// What every handler can reach: the use cases, and the jobs at rest kept
/// rendered.
#[derive(Clone)]
pub struct AppState {
    pub services: Arc<Services>,
    pub job_views: Arc<job_views::JobViews>,
    /// How far ahead of this clock a reported engine time may be.
    pub max_engine_time_ahead: chrono::Duration,
}

impl AppState {
    pub fn new(services: Arc<Services>) -> Self {
        Self {
            services,
            job_views: Arc::default(),
            max_engine_time_ahead: crate::domain::job::MAX_ENGINE_TIME_AHEAD,
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ctasd",
        description = "A control plane for atomic CREATE TABLE ... AS SELECT jobs. \
            Every error is `application/problem+json` with a stable `code`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "catalogs", description = "Register, alter and drop catalogs"),
        (name = "browse", description = "Databases and tables of a live catalog"),
        (name = "engines", description = "Flink clusters ctasd watches jobs on"),
        (name = "jobs", description = "Submit CTAS jobs and report their status"),
        (name = "events", description = "Subscriptions to ctasd's events, signed webhooks in ctasd's format or OpenLineage"),
        (name = "health", description = "Liveness and readiness"),
    ),
    components(schemas(error::ProblemCode, crate::domain::event::CtasdEvent))
)]
struct ApiDoc;

fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(catalog_types::router())
        .merge(catalogs::router())
        .merge(engines::router())
        .merge(statements::router())
        .merge(jobs::router())
        .merge(subscriptions::router())
        .merge(overview::router())
        .merge(whoami::router())
        .merge(health::router())
        .merge(observe::router())
}

/// The OpenAPI document, finished: as `/openapi.json` serves it.
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    let (_, mut api) = routes().split_for_parts();
    // After the routes are merged: for every operation.
    openapi::finish(&mut api);
    api.info.version = env!("CARGO_PKG_VERSION").to_owned();
    api
}

/// The OpenAPI document, as `ctasd openapi` prints it and
/// `openapi/openapi.json` holds it.
pub fn openapi_json() -> String {
    openapi_document()
        .to_pretty_json()
        .expect("the OpenAPI document serializes")
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

pub fn router(mut state: AppState, settings: &ServeSettings, tokens: Arc<auth::Tokens>) -> Router {
    state.max_engine_time_ahead =
        chrono::Duration::seconds(i64::from(settings.max_engine_time_ahead_secs));
    let (router, _) = routes().split_for_parts();
    // Interactive docs from assets inside the binary, and the live document.
    let docs: Router<_> = SwaggerUi::new("/docs")
        .url("/openapi.json", openapi_document())
        .into();
    let router = router.merge(docs.layer(middleware::map_response(docs_headers)));
    // The dashboard, from assets inside the binary.
    let router = router.merge(ui::router());
    let timeout = settings.request_timeout();
    let max_header_bytes = settings.max_header_bytes;
    let loopback_only = tokens.is_empty() && settings.listen.ip().is_loopback();
    let services = state.services.clone();
    let router = router
        .fallback(route_not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state);
    let idempotency = idempotency::Idempotency {
        services: services.clone(),
        lifetime: Duration::from_secs(settings.idempotency_key_lifetime_secs),
        abandoned_after: idempotency::CLAIM_LEASE,
        max_body_bytes: settings.max_body_bytes,
    };
    let router = router
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            idempotency,
            idempotency::idempotent,
        ));
    // Outside the replay of kept answers: a foreign Host or page is refused
    // before any answer is replayed to it.
    let router = if loopback_only {
        router.layer(middleware::from_fn(auth::loopback_hosts_only))
    } else {
        router
    };
    let app = router
        .layer(middleware::from_fn_with_state(tokens, auth::authenticate))
        .layer(middleware::from_fn(move |request, next| time_limit(timeout, request, next)))
        .layer(middleware::from_fn(move |request, next| header_limit(max_header_bytes, request, next)))
        .layer(CatchPanicLayer::custom(panic_answer))
        .layer(middleware::from_fn_with_state(services, observe::observe))
        .layer(TraceLayer::new_for_http().make_span_with(|request: &Request| {
            let id = request.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or_default();
            // The path only: query strings are not logged. Escaped, so that
            // no control or line separator reaches a text log line.
            let path = printable(request.uri().path());
            tracing::info_span!("request", method = %request.method(), path = %path, request_id = %id)
        })
        // `observe` logs the answer, with its latency as a number.
        .on_response(()))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(middleware::from_fn(safe_request_id));
    match settings.cors_allowed_origins.as_slice() {
        [] => app,
        origins => app.layer(cors(origins)),
    }
}

/// What Swagger UI needs and no more: its own scripts, styles (it sets
/// some inline), images and the document, from ctasd only; never framed.
const DOCS_CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
     connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// `/docs` and `/openapi.json` with the dashboard's protections: a
/// Content-Security-Policy, no framing by any site, no type sniffing.
async fn docs_headers(mut answer: Response) -> Response {
    ui::protect_page(answer.headers_mut(), DOCS_CONTENT_SECURITY_POLICY);
    answer
}

/// Longest `X-Request-Id` kept from a client.
const MAX_REQUEST_ID_LEN: usize = 128;

/// Keeps a client's `X-Request-Id` only when it is a safe token (letters,
/// digits, `-`, `_`, `.`, `:`; at most [`MAX_REQUEST_ID_LEN`]); any other
/// is dropped, and ctasd makes one, so no log field can be forged.
async fn safe_request_id(mut request: Request, next: Next) -> Response {
    let safe = |value: &HeaderValue| {
        let bytes = value.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID_LEN
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    };
    let ids = request.headers().get_all(&REQUEST_ID);
    let one_safe = ids.iter().count() == 1 && ids.iter().all(safe);
    if !one_safe {
        request.headers_mut().remove(&REQUEST_ID);
    }
    next.run(request).await
}

/// CORS for the configured origins (none: no CORS headers at all). A
/// preflight is answered here, before authentication, as browsers send it
/// without credentials.
fn cors(origins: &[String]) -> CorsLayer {
    let allowed = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o.trim()).ok()),
        )
    };
    let header = HeaderName::from_static;
    CorsLayer::new()
        .allow_origin(allowed)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers([
            header("authorization"),
            header("content-type"),
            header("if-match"),
            idempotency::IDEMPOTENCY_KEY,
        ])
        .expose_headers([
            header("etag"),
            header("location"),
            idempotency::REPLAYED,
            REQUEST_ID,
        ])
        .max_age(Duration::from_secs(600))
}

/// Needs a token, so that a 404 reveals nothing to a stranger.
async fn route_not_found(_: Authorized<need::Authenticated>, uri: Uri) -> ApiError {
    ApiError::new(
        ProblemCode::RouteNotFound,
        format!("no route for '{}'", uri.path()),
    )
}

async fn method_not_allowed(
    _: Authorized<need::Authenticated>,
    method: Method,
    uri: Uri,
) -> ApiError {
    ApiError::new(
        ProblemCode::MethodNotAllowed,
        format!("{method} is not allowed on '{}'", uri.path()),
    )
}

/// Hyper's own limit is far higher and answers without a body; this one
/// answers with a problem.
async fn header_limit(limit: usize, request: Request, next: Next) -> Response {
    let size: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if size > limit {
        let detail = format!("the request's headers exceed {limit} bytes");
        return ApiError::new(ProblemCode::HeadersTooLarge, detail).into_response();
    }
    next.run(request).await
}

/// A handler that panics answers 500 problem+json (the log has the panic,
/// under the answer's `error_id`) instead of dropping the connection.
fn panic_answer(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    ApiError::internal(
        ProblemCode::Internal,
        format!("handler panicked: {message}"),
        "the server failed",
    )
    .into_response()
}

async fn time_limit(limit: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let detail = format!("the request did not complete within {} s", limit.as_secs());
            ApiError::new(ProblemCode::RequestTimeout, detail).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn boom() -> &'static str {
        panic!("boom")
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_500_problem_json_instead_of_dropping_the_connection() {
        let app = Router::new()
            .route("/boom", axum::routing::get(boom))
            .layer(CatchPanicLayer::custom(panic_answer));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let reply = reqwest::get(format!("http://{addr}/boom")).await.unwrap();

        assert_eq!(reply.status(), 500);
        assert_eq!(reply.headers()["content-type"], error::PROBLEM_JSON);
        let body: serde_json::Value = reply.json().await.unwrap();
        assert_eq!(body["code"], "INTERNAL");
        assert!(body["error_id"].is_string());
        assert!(
            !body.to_string().contains("boom"),
            "no internals in the answer"
        );
    }
}
