//! `/v1/subscriptions`: who hears of ctasd's events, and how the
//! deliveries to each stand (the rules are in [`crate::service`]).

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Authorized, need};
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::{AppState, page};
use crate::domain::event::{DeliveryRecord, DeliveryState, EventFormat, EventType};
use crate::domain::{SubscriptionName, non_null};
use crate::service::{SubscriptionAlteration, SubscriptionRequest, SubscriptionWithCounts};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_subscription, list_subscriptions))
        .routes(routes!(
            get_subscription,
            alter_subscription,
            drop_subscription
        ))
        .routes(routes!(list_deliveries))
        .routes(routes!(redeliver_delivery))
}

/// A subscription to register.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "orchestrator", "url": "http://airflow-hooks:8080/ctasd",
    "events": ["table.published", "staging.discarded"], "catalogs": ["pg"]
}))]
pub struct RegisterSubscription {
    /// `[A-Za-z][A-Za-z0-9_-]{0,63}`.
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
    pub name: String,
    /// Where events are posted: an `http://` URL, held to
    /// `--engine-allowed-hosts` as engines are.
    pub url: String,
    /// `ctasd` (default) or `openlineage`.
    #[serde(default)]
    pub format: EventFormat,
    /// The event types wanted (default: all); not with `openlineage`, whose
    /// run events come from all of them.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub events: Option<Vec<EventType>>,
    /// Only jobs with a hook on one of these catalogs (default: any).
    #[serde(default)]
    pub catalogs: Vec<String>,
    /// Only jobs watched on one of these engines (default: any job).
    #[serde(default)]
    pub engines: Vec<String>,
    /// The signing secret, `whsec_` and base64 of 24 to 64 bytes; made by
    /// ctasd when left out. Shown once, in this request's answer.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub secret: Option<String>,
    /// Failed attempts before a delivery is parked, 1 to 100 (default 15:
    /// about half an hour of backoff).
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false, minimum = 1, maximum = 100)]
    pub max_attempts: Option<u32>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub comment: Option<String>,
}

/// How a subscription's deliveries stand.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryCounts {
    pub pending: u64,
    pub delivered: u64,
    pub parked: u64,
}

/// A subscription (its secret is never shown after registration).
#[derive(Debug, Serialize, ToSchema)]
pub struct Subscription {
    pub name: String,
    pub url: String,
    pub format: EventFormat,
    pub events: Vec<EventType>,
    pub catalogs: Vec<String>,
    pub engines: Vec<String>,
    pub max_attempts: u32,
    #[schema(required = true)]
    pub comment: Option<String>,
    pub deliveries: DeliveryCounts,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&SubscriptionWithCounts> for Subscription {
    fn from(counted: &SubscriptionWithCounts) -> Self {
        let record = &counted.record;
        let subscription = &record.subscription;
        Self {
            name: subscription.name.to_string(),
            url: subscription.url.as_str().to_owned(),
            format: subscription.format,
            events: subscription.events.clone(),
            catalogs: subscription.catalogs.clone(),
            engines: subscription.engines.clone(),
            max_attempts: subscription.max_attempts,
            comment: subscription.comment.clone(),
            deliveries: DeliveryCounts {
                pending: counted.pending,
                delivered: counted.delivered,
                parked: counted.parked,
            },
            created_at: record.created_at,
            updated_at: record.updated_at,
        }
    }
}

/// A subscription just registered, with its signing secret: the only time
/// it is shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct RegisteredSubscription {
    #[serde(flatten)]
    pub subscription: Subscription,
    /// Verify each delivery's `webhook-signature` with it (Standard
    /// Webhooks); keep it: it is not shown again.
    pub secret: String,
}

/// Every subscription, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriptionList {
    pub subscriptions: Vec<Subscription>,
}

/// ALTER SUBSCRIPTION: each field given replaces the current value; `null`
/// clears the comment. The name, format and secret stay.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"events": ["table.published"], "max_attempts": 30}))]
pub struct AlterSubscription {
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub url: Option<String>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub events: Option<Vec<EventType>>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub catalogs: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub engines: Option<Vec<String>>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false, minimum = 1, maximum = 100)]
    pub max_attempts: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub comment: Option<Option<String>>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// One event for one subscription.
#[derive(Debug, Serialize, ToSchema)]
pub struct Delivery {
    pub id: i64,
    /// The event's id, sent as `webhook-id`.
    pub event_id: String,
    pub event_type: String,
    pub job_id: String,
    pub state: DeliveryState,
    pub attempts: u32,
    /// When it is tried next, while pending.
    #[schema(required = true)]
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub last_error: Option<String>,
    /// The receiver's last HTTP status.
    #[schema(required = true)]
    pub last_status: Option<u16>,
    /// The event as posted.
    #[schema(value_type = Object)]
    pub body: serde_json::Value,
    pub created_at: DateTime<Utc>,
    #[schema(required = true)]
    pub delivered_at: Option<DateTime<Utc>>,
}

impl From<DeliveryRecord> for Delivery {
    fn from(d: DeliveryRecord) -> Self {
        Self {
            id: d.id,
            body: serde_json::from_str(&d.body).unwrap_or(serde_json::Value::Null),
            event_id: d.event_id,
            event_type: d.event_type,
            job_id: d.job_id,
            state: d.state,
            attempts: d.attempts,
            next_attempt_at: d.next_attempt_at,
            last_error: d.last_error,
            last_status: d.last_status,
            created_at: d.created_at,
            delivered_at: d.delivered_at,
        }
    }
}

/// A page of deliveries, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryPage {
    pub deliveries: Vec<Delivery>,
    /// Pass as `page_token` for older ones; `null` on the last page.
    #[schema(required = true)]
    pub next_page_token: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeliveryParams {
    /// Only deliveries in this state.
    pub state: Option<DeliveryState>,
    /// Deliveries per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub page_size: Option<u32>,
    /// `next_page_token` of the previous page.
    pub page_token: Option<String>,
}

fn path_name(name: &str) -> Result<SubscriptionName, ApiError> {
    SubscriptionName::parse(name).map_err(ApiError::bad_path_name)
}

/// Subscribe a receiver to ctasd's events; the answer holds the signing
/// secret, shown this once.
#[utoipa::path(
    post,
    path = "/v1/subscriptions",
    tag = "events",
    request_body = RegisterSubscription,
    responses(
        (status = 201, description = "Registered; `secret` is shown only now", body = RegisteredSubscription,
            headers(("location" = String, description = "The subscription's URL"))),
        (status = 400, description = "`BODY_MALFORMED`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`SUBSCRIPTION_EXISTS`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID`, `NAME_INVALID` or `SUBSCRIPTION_INVALID`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn register_subscription(
    _: Authorized<need::ManageSubscriptions>,
    State(state): State<AppState>,
    ApiJson(request): ApiJson<RegisterSubscription>,
) -> Result<Response, ApiError> {
    let request = SubscriptionRequest {
        name: request.name,
        url: request.url,
        format: request.format,
        events: request.events,
        catalogs: request.catalogs,
        engines: request.engines,
        secret: request.secret,
        max_attempts: request.max_attempts,
        comment: request.comment,
    };
    let (registered, secret) = state.services.register_subscription(request).await?;
    let subscription = Subscription::from(&registered);
    let location = format!("/v1/subscriptions/{}", subscription.name);
    let location = HeaderValue::from_str(&location).expect("subscription names are URL-safe");
    let body = axum::Json(RegisteredSubscription {
        subscription,
        secret,
    });
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], body).into_response())
}

/// Every subscription, with how its deliveries stand.
#[utoipa::path(
    get,
    path = "/v1/subscriptions",
    tag = "events",
    responses((status = 200, description = "Every subscription, by name", body = SubscriptionList))
)]
async fn list_subscriptions(
    _: Authorized<need::ManageSubscriptions>,
    State(state): State<AppState>,
) -> Result<axum::Json<SubscriptionList>, ApiError> {
    let subscriptions = state.services.list_subscriptions().await?;
    Ok(axum::Json(SubscriptionList {
        subscriptions: subscriptions.iter().map(Subscription::from).collect(),
    }))
}

/// A subscription.
#[utoipa::path(
    get,
    path = "/v1/subscriptions/{subscription}",
    tag = "events",
    params(("subscription" = String, Path, description = "Subscription name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    responses(
        (status = 200, description = "The subscription", body = Subscription),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`SUBSCRIPTION_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_subscription(
    _: Authorized<need::ManageSubscriptions>,
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<axum::Json<Subscription>, ApiError> {
    let subscription = state.services.subscription(&path_name(&name)?).await?;
    Ok(axum::Json(Subscription::from(&subscription)))
}

/// ALTER SUBSCRIPTION: where events go, which ones, for which jobs, how
/// many attempts.
#[utoipa::path(
    patch,
    path = "/v1/subscriptions/{subscription}",
    tag = "events",
    params(("subscription" = String, Path, description = "Subscription name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    request_body = AlterSubscription,
    responses(
        (status = 200, description = "Altered", body = Subscription),
        (status = 400, description = "`BODY_MALFORMED` or `NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`SUBSCRIPTION_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`SUBSCRIPTION_MODIFIED`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`BODY_INVALID` or `SUBSCRIPTION_INVALID`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn alter_subscription(
    _: Authorized<need::ManageSubscriptions>,
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<AlterSubscription>,
) -> Result<axum::Json<Subscription>, ApiError> {
    let change = SubscriptionAlteration {
        url: request.url,
        events: request.events,
        catalogs: request.catalogs,
        engines: request.engines,
        max_attempts: request.max_attempts,
        comment: request.comment,
    };
    let altered = state
        .services
        .alter_subscription(&path_name(&name)?, change, None)
        .await?;
    Ok(axum::Json(Subscription::from(&altered)))
}

/// Drop a subscription and its deliveries; nothing more is sent to it.
#[utoipa::path(
    delete,
    path = "/v1/subscriptions/{subscription}",
    tag = "events",
    params(("subscription" = String, Path, description = "Subscription name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")),
    responses(
        (status = 204, description = "Dropped"),
        (status = 400, description = "`NAME_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`SUBSCRIPTION_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn drop_subscription(
    _: Authorized<need::ManageSubscriptions>,
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    state.services.drop_subscription(&path_name(&name)?).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A subscription's deliveries, newest first: attempts, the last error,
/// the parked ones.
#[utoipa::path(
    get,
    path = "/v1/subscriptions/{subscription}/deliveries",
    tag = "events",
    params(("subscription" = String, Path, description = "Subscription name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"), DeliveryParams),
    responses(
        (status = 200, description = "One page of deliveries", body = DeliveryPage),
        (status = 400, description = "`NAME_INVALID`, `QUERY_INVALID` or `PAGE_TOKEN_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`SUBSCRIPTION_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_deliveries(
    _: Authorized<need::ManageSubscriptions>,
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(params): ApiQuery<DeliveryParams>,
) -> Result<axum::Json<DeliveryPage>, ApiError> {
    let size = page::page_size(params.page_size)?;
    let before = match params.page_token.as_deref() {
        Some(token) => Some(page::decode_token("d", token, |n| n.parse::<i64>().ok())?),
        None => None,
    };
    let mut deliveries = state
        .services
        .deliveries(&path_name(&name)?, params.state, before, size + 1)
        .await?;
    let more = deliveries.len() > size as usize;
    deliveries.truncate(size as usize);
    let next_page_token = more
        .then(|| {
            deliveries
                .last()
                .map(|d| page::encode_token("d", &d.id.to_string()))
        })
        .flatten();
    Ok(axum::Json(DeliveryPage {
        deliveries: deliveries.into_iter().map(Delivery::from).collect(),
        next_page_token,
    }))
}

/// Send a delivery again (a parked one, or one the receiver lost): due at
/// once, its attempts counted from zero, under the same `webhook-id`.
#[utoipa::path(
    post,
    path = "/v1/subscriptions/{subscription}/deliveries/{delivery}/redeliver",
    tag = "events",
    params(
        ("subscription" = String, Path, description = "Subscription name", pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"),
        ("delivery" = i64, Path, description = "Delivery id"),
    ),
    responses(
        (status = 200, description = "Pending again", body = Delivery),
        (status = 400, description = "`NAME_INVALID` or `PATH_INVALID`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`SUBSCRIPTION_NOT_FOUND` or `DELIVERY_NOT_FOUND`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn redeliver_delivery(
    _: Authorized<need::ManageSubscriptions>,
    State(state): State<AppState>,
    ApiPath((name, delivery)): ApiPath<(String, i64)>,
) -> Result<axum::Json<Delivery>, ApiError> {
    let delivery = state
        .services
        .redeliver(&path_name(&name)?, delivery)
        .await?;
    Ok(axum::Json(Delivery::from(delivery)))
}
