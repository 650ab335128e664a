//! Events out: subscriptions (register, read, alter, drop), the fan-out
//! that turns the outbox into deliveries, and the deliverer that posts
//! them, signed, until the receiver takes them or they are parked.
//!
//! Receivers are held to the engines' host policy (`--engine-allowed-hosts`)
//! and get `http://` only, as engines do. A delivery's body is fixed when
//! it is made, so every attempt sends the same bytes under the same
//! `webhook-id`; only `webhook-timestamp` and the signature are new.

use std::collections::HashMap;
use std::time::Duration;

use chrono::Utc;

use super::{ServiceError, Services};
use crate::domain::engine::{EngineSettingError, EngineUrl};
use crate::domain::event::{
    DEFAULT_ATTEMPTS, DELIVERY_TIMEOUT, DeliveryRecord, DeliveryResult, DeliveryState, EventFormat,
    EventType, MOST_ATTEMPTS, NewDelivery, OutboxRow, Subscription, SubscriptionRecord,
    after_failure, ctasd_event, generate_secret, secret_key, signature,
};
use crate::domain::job::JobId;
use crate::domain::job_record::JobRecord;
use crate::domain::{CatalogName, EngineName, SubscriptionName};

/// Outbox rows fanned out in one round.
const FAN_OUT_BATCH: u32 = 500;
/// Deliveries sent at once.
const DELIVERY_BATCH: u32 = 16;
/// How long a claimed delivery is held: longer than one attempt may take.
const DELIVERY_LEASE: Duration = Duration::from_secs(30);
/// Rounds of claims in one call, each after the last one's deliveries.
const DELIVERY_ROUNDS: usize = 20;
const MAX_COMMENT_LEN: usize = 2048;

/// The client the deliverer posts with.
pub(super) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(DELIVERY_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("ctasd/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("an HTTP client with no TLS configuration builds")
}

/// A subscription as requested.
pub struct SubscriptionRequest {
    pub name: String,
    pub url: String,
    pub format: EventFormat,
    /// `None`: every event type.
    pub events: Option<Vec<EventType>>,
    pub catalogs: Vec<String>,
    pub engines: Vec<String>,
    /// `None`: one is made and shown once.
    pub secret: Option<String>,
    pub max_attempts: Option<u32>,
    pub comment: Option<String>,
}

/// A change to a subscription: each field present replaces the current
/// value (`Some(None)` clears the comment).
#[derive(Debug, Clone, Default)]
pub struct SubscriptionAlteration {
    pub url: Option<String>,
    pub events: Option<Vec<EventType>>,
    pub catalogs: Option<Vec<String>>,
    pub engines: Option<Vec<String>>,
    pub max_attempts: Option<u32>,
    pub comment: Option<Option<String>>,
}

/// A subscription and how its deliveries stand.
pub struct SubscriptionWithCounts {
    pub record: SubscriptionRecord,
    pub pending: u64,
    pub delivered: u64,
    pub parked: u64,
}

fn invalid(field: &str, message: impl Into<String>) -> ServiceError {
    ServiceError::SubscriptionInvalid {
        field: field.into(),
        message: message.into(),
    }
}

impl Services {
    /// Registers a subscription; its secret (the one given, or a new one)
    /// is in the answer, and never again.
    pub async fn register_subscription(
        &self,
        request: SubscriptionRequest,
    ) -> Result<(SubscriptionWithCounts, String), ServiceError> {
        let name = SubscriptionName::parse(&request.name)
            .map_err(|e| ServiceError::name_invalid("name", e))?;
        let secret = match request.secret {
            Some(secret) if secret_key(&secret).is_none() => {
                return Err(invalid(
                    "secret",
                    "secret must be 'whsec_' followed by the base64 of 24 to 64 random bytes \
                     (or left out, and ctasd makes one)",
                ));
            }
            Some(secret) => secret,
            None => generate_secret(),
        };
        let subscription = Subscription {
            name,
            url: self.receiver_url(&request.url)?,
            format: request.format,
            events: events_for(request.format, request.events)?,
            catalogs: names("catalogs", request.catalogs, CatalogName::parse)?,
            engines: names("engines", request.engines, EngineName::parse)?,
            max_attempts: max_attempts(request.max_attempts)?,
            comment: comment(request.comment)?,
        };
        let record = self
            .store
            .insert_subscription(&subscription, &secret)
            .await?;
        tracing::info!(subscription = %record.subscription.name, url = record.subscription.url.as_str(), "subscription registered");
        Ok((with_no_deliveries(record), secret))
    }

    pub async fn subscription(
        &self,
        name: &SubscriptionName,
    ) -> Result<SubscriptionWithCounts, ServiceError> {
        let record = self
            .store
            .get_subscription(name)
            .await?
            .ok_or_else(|| ServiceError::SubscriptionNotFound(name.to_string()))?;
        Ok(self.counted(vec![record]).await?.remove(0))
    }

    pub async fn list_subscriptions(&self) -> Result<Vec<SubscriptionWithCounts>, ServiceError> {
        let records = self.store.list_subscriptions().await?;
        self.counted(records).await
    }

    pub async fn alter_subscription(
        &self,
        name: &SubscriptionName,
        change: SubscriptionAlteration,
        expected_version: Option<i64>,
    ) -> Result<SubscriptionWithCounts, ServiceError> {
        let current = self.subscription(name).await?.record.subscription;
        let format = current.format;
        let altered = Subscription {
            url: match change.url {
                Some(url) => self.receiver_url(&url)?,
                None => current.url,
            },
            events: match change.events {
                Some(events) => events_for(format, Some(events))?,
                None => current.events,
            },
            catalogs: match change.catalogs {
                Some(catalogs) => names("catalogs", catalogs, CatalogName::parse)?,
                None => current.catalogs,
            },
            engines: match change.engines {
                Some(engines) => names("engines", engines, EngineName::parse)?,
                None => current.engines,
            },
            max_attempts: match change.max_attempts {
                Some(n) => max_attempts(Some(n))?,
                None => current.max_attempts,
            },
            comment: match change.comment {
                Some(text) => comment(text)?,
                None => current.comment,
            },
            ..current
        };
        let record = self
            .store
            .update_subscription(&altered, expected_version)
            .await?;
        Ok(self.counted(vec![record]).await?.remove(0))
    }

    pub async fn drop_subscription(&self, name: &SubscriptionName) -> Result<(), ServiceError> {
        match self.store.delete_subscription(name).await? {
            true => Ok(()),
            false => Err(ServiceError::SubscriptionNotFound(name.to_string())),
        }
    }

    /// A subscription's deliveries, newest first.
    pub async fn deliveries(
        &self,
        name: &SubscriptionName,
        state: Option<DeliveryState>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, ServiceError> {
        self.subscription(name).await?;
        Ok(self
            .store
            .list_deliveries(name, state, before, limit)
            .await?)
    }

    /// Sends a delivery again (a parked one, or one already delivered):
    /// pending now, its attempts counted from zero.
    pub async fn redeliver(
        &self,
        name: &SubscriptionName,
        id: i64,
    ) -> Result<DeliveryRecord, ServiceError> {
        self.subscription(name).await?;
        self.store.redeliver(name, id).await?.ok_or_else(|| {
            ServiceError::DeliveryNotFound(format!("subscription '{name}' has no delivery {id}"))
        })
    }

    /// Turns the oldest outbox rows into deliveries for the subscriptions
    /// that want them, and drains them; how many rows.
    pub async fn fan_out_events(&self) -> Result<usize, ServiceError> {
        let rows = self.store.outbox_batch(FAN_OUT_BATCH).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let subscriptions = self.store.list_subscriptions().await?;
        let mut jobs: HashMap<String, Option<JobRecord>> = HashMap::new();
        let mut deliveries = Vec::new();
        for row in rows.iter().filter(|_| !subscriptions.is_empty()) {
            if !jobs.contains_key(&row.job_id) {
                let job = match JobId::parse(&row.job_id) {
                    Ok(id) => self.store.get_job(&id).await?,
                    Err(_) => None,
                };
                jobs.insert(row.job_id.clone(), job);
            }
            let Some(job) = &jobs[&row.job_id] else {
                continue;
            };
            for record in &subscriptions {
                deliveries.extend(deliveries_for(&record.subscription, row, job));
            }
        }
        let drained: Vec<i64> = rows.iter().map(|r| r.id).collect();
        self.store.fan_out(&deliveries, &drained).await?;
        Ok(rows.len())
    }

    /// Posts the due deliveries, each the oldest pending one of its job for
    /// its subscription, and records what each came to; how many.
    pub async fn deliver_due_events(&self) -> Result<usize, ServiceError> {
        let mut sent = 0;
        for _ in 0..DELIVERY_ROUNDS {
            let claimed = self
                .store
                .claim_deliveries(DELIVERY_LEASE, DELIVERY_BATCH)
                .await?;
            if claimed.is_empty() {
                break;
            }
            let subscriptions: HashMap<String, (SubscriptionRecord, String)> = self
                .store
                .subscriptions_with_secrets()
                .await?
                .into_iter()
                .map(|(record, secret)| (record.subscription.name.to_string(), (record, secret)))
                .collect();
            let attempts = claimed.iter().filter_map(|delivery| {
                let (record, secret) = subscriptions.get(&delivery.subscription)?;
                Some(self.deliver(delivery, &record.subscription, secret))
            });
            sent += futures_util::future::join_all(attempts).await.len();
        }
        Ok(sent)
    }

    /// One attempt of one delivery, recorded.
    async fn deliver(&self, delivery: &DeliveryRecord, subscription: &Subscription, secret: &str) {
        let result = match self.post_event(delivery, subscription, secret).await {
            Ok(status) => {
                crate::fault::reached(crate::fault::Point::EventPosted);
                DeliveryResult::Delivered { status }
            }
            Err((error, status)) => after_failure(
                delivery.attempts,
                subscription.max_attempts,
                error,
                status,
                delivery.id as u64 ^ u64::from(delivery.attempts),
            ),
        };
        let verdict = match &result {
            DeliveryResult::Delivered { .. } => "delivered",
            DeliveryResult::Failed { retry_at: None, .. } => "parked",
            DeliveryResult::Failed { .. } => "failed",
        };
        self.metrics.deliveries.with_label_values(&[verdict]).inc();
        match &result {
            DeliveryResult::Failed {
                error, retry_at, ..
            } => tracing::warn!(
                subscription = %subscription.name, delivery = delivery.id, event = %delivery.event_id,
                attempts = delivery.attempts, parked = retry_at.is_none(), %error, "event delivery failed"
            ),
            DeliveryResult::Delivered { .. } => tracing::debug!(
                subscription = %subscription.name, delivery = delivery.id, event = %delivery.event_id, "event delivered"
            ),
        }
        if let Err(error) = self.store.record_delivery(delivery.id, &result).await {
            // Its lease runs out and it is sent again: the receiver dedupes.
            tracing::warn!(delivery = delivery.id, %error, "a delivery's result was not recorded");
        }
    }

    /// Posts the event, signed; the receiver's status, or why it failed.
    async fn post_event(
        &self,
        delivery: &DeliveryRecord,
        subscription: &Subscription,
        secret: &str,
    ) -> Result<u16, (String, Option<u16>)> {
        if !self.engines_http.allows(&subscription.url) {
            return Err((
                "the receiver's host is not one --engine-allowed-hosts allows".into(),
                None,
            ));
        }
        let key = secret_key(secret).ok_or(("the signing secret is unreadable".into(), None))?;
        let timestamp = Utc::now().timestamp();
        let signed = signature(
            &key,
            &delivery.event_id,
            timestamp,
            delivery.body.as_bytes(),
        );
        let answer = self
            .events_http
            .post(subscription.url.as_str())
            .header("content-type", "application/json")
            .header("webhook-id", &delivery.event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signed)
            .body(delivery.body.clone())
            .send()
            .await
            .map_err(|e| (format!("the receiver could not be reached: {e}"), None))?;
        let status = answer.status().as_u16();
        match answer.status().is_success() {
            true => Ok(status),
            false => Err((format!("the receiver answered {status}"), Some(status))),
        }
    }

    fn receiver_url(&self, url: &str) -> Result<EngineUrl, ServiceError> {
        let url = EngineUrl::parse("url", url).map_err(|e| match e {
            EngineSettingError::Https { .. } => invalid(
                "url",
                "url uses https://, which this build does not speak; give an http:// receiver \
                 (e.g. a relay inside your network)",
            ),
            other => invalid("url", other.to_string()),
        })?;
        if !self.engines_http.allows(&url) {
            return Err(invalid(
                "url",
                "url names a host that --engine-allowed-hosts does not allow",
            ));
        }
        Ok(url)
    }

    async fn counted(
        &self,
        records: Vec<SubscriptionRecord>,
    ) -> Result<Vec<SubscriptionWithCounts>, ServiceError> {
        let counts = self.store.delivery_counts().await?;
        let count = |name: &SubscriptionName, state: DeliveryState| {
            counts
                .iter()
                .find(|(n, s, _)| n == name.as_str() && *s == state)
                .map_or(0, |(_, _, c)| *c)
        };
        Ok(records
            .into_iter()
            .map(|record| {
                let name = &record.subscription.name;
                SubscriptionWithCounts {
                    pending: count(name, DeliveryState::Pending),
                    delivered: count(name, DeliveryState::Delivered),
                    parked: count(name, DeliveryState::Parked),
                    record,
                }
            })
            .collect())
    }
}

/// The deliveries one outbox row makes for one subscription.
fn deliveries_for(
    subscription: &Subscription,
    row: &OutboxRow,
    job: &JobRecord,
) -> Vec<NewDelivery> {
    let catalogs: Vec<&str> = job.hooks.iter().map(|h| h.catalog.name.as_str()).collect();
    let engine = job.engine.as_ref().map(EngineName::as_str);
    if !subscription.covers(&catalogs, engine) {
        return Vec::new();
    }
    let events = match subscription.format {
        EventFormat::Ctasd => ctasd_event(row, job)
            .filter(|event| subscription.events.contains(&event.event_type))
            .map(|event| {
                let body = serde_json::to_string(&event).expect("an event serializes");
                (event.id, event.event_type.as_str().to_owned(), body)
            })
            .into_iter()
            .collect(),
        EventFormat::Openlineage => super::lineage::run_events(row, job),
    };
    events
        .into_iter()
        .map(|(event_id, event_type, body)| NewDelivery {
            subscription: subscription.name.clone(),
            event_id,
            job_id: row.job_id.clone(),
            event_type,
            body,
        })
        .collect()
}

fn with_no_deliveries(record: SubscriptionRecord) -> SubscriptionWithCounts {
    SubscriptionWithCounts {
        record,
        pending: 0,
        delivered: 0,
        parked: 0,
    }
}

/// The event types of a subscription: for ctasd's format, those asked
/// (every one by default); OpenLineage's run events come from all of them.
fn events_for(
    format: EventFormat,
    events: Option<Vec<EventType>>,
) -> Result<Vec<EventType>, ServiceError> {
    match (format, events) {
        (EventFormat::Openlineage, Some(_)) => Err(invalid(
            "events",
            "an openlineage subscription gets every run event (START, COMPLETE, FAIL, ABORT); \
             leave events out",
        )),
        (_, None) => Ok(EventType::all().to_vec()),
        (_, Some(events)) if events.is_empty() => Err(invalid(
            "events",
            "events must name at least one event type (or be left out for all)",
        )),
        (_, Some(mut events)) => {
            events.sort();
            events.dedup();
            Ok(events)
        }
    }
}

/// Catalog or engine names of a filter, each checked.
fn names<T, E: std::fmt::Display>(
    field: &str,
    names: Vec<String>,
    parse: fn(&str) -> Result<T, E>,
) -> Result<Vec<String>, ServiceError> {
    if names.len() > 100 {
        return Err(invalid(field, format!("{field} names at most 100")));
    }
    for (index, name) in names.iter().enumerate() {
        parse(name).map_err(|e| invalid(&format!("{field}[{index}]"), e.to_string()))?;
    }
    Ok(names)
}

fn max_attempts(requested: Option<u32>) -> Result<u32, ServiceError> {
    match requested.unwrap_or(DEFAULT_ATTEMPTS) {
        n @ 1..=MOST_ATTEMPTS => Ok(n),
        _ => Err(invalid(
            "max_attempts",
            format!("max_attempts must be between 1 and {MOST_ATTEMPTS}"),
        )),
    }
}

fn comment(comment: Option<String>) -> Result<Option<String>, ServiceError> {
    match comment {
        Some(text) if text.chars().count() > MAX_COMMENT_LEN => Err(invalid(
            "comment",
            format!("the comment is longer than {MAX_COMMENT_LEN} characters"),
        )),
        other => Ok(other),
    }
}
