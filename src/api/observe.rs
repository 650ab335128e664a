//! What operators see of the HTTP side: one log line per answer (status,
//! latency in milliseconds as a number; health probes only at debug level,
//! so that a load balancer's polling does not drown the log), request
//! counters and latency histograms by route template, and `GET /metrics`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Authorized, need};
use super::error::ApiError;
use crate::service::Services;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_metrics))
}

pub async fn observe(
    State(services): State<Arc<Services>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    // Any other method is one label value, so no client can add series.
    let method = match *request.method() {
        Method::GET
        | Method::POST
        | Method::PUT
        | Method::PATCH
        | Method::DELETE
        | Method::HEAD => request.method().as_str().to_owned(),
        _ => "other".to_owned(),
    };
    let response = next.run(request).await;
    let seconds = started.elapsed().as_secs_f64();
    let status = response.status().as_u16();
    let metrics = services.metrics();
    metrics
        .http_requests
        .with_label_values(&[route.as_str(), method.as_str(), &status.to_string()])
        .inc();
    metrics
        .http_seconds
        .with_label_values(&[route.as_str(), method.as_str()])
        .observe(seconds);
    let latency_ms = seconds * 1000.0;
    if matches!(route.as_str(), "/healthz" | "/readyz") {
        tracing::debug!(status, latency_ms, "finished processing request");
    } else {
        tracing::info!(status, latency_ms, "finished processing request");
    }
    response
}

/// Prometheus metrics: requests by route, method and status, with latency
/// histograms; job transitions by status; action attempts by action and
/// result; pending and failed actions; the store's connections.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    responses((status = 200, description = "The Prometheus text format", body = String, content_type = "text/plain; version=0.0.4"))
)]
async fn get_metrics(
    _: Authorized<need::Authenticated>,
    State(state): State<AppState>,
) -> Result<Response, ApiError> {
    let text = state.services.metrics_text().await?;
    let format = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    Ok(([(header::CONTENT_TYPE, format)], text).into_response())
}
