//! Events out, as stored: subscriptions (their secret sealed), the outbox
//! the ledger's triggers fill, and deliveries. Written once for both
//! backends.
//!
//! The fan-out turns outbox rows into deliveries and deletes the rows in
//! one transaction; a delivery is unique per subscription and event id,
//! so two replicas fanning out the same rows make each delivery once.
//! Deliveries are claimed under leases, oldest first, and one waits while
//! an older one of the same job and subscription is pending: each
//! receiver hears of a job in order.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::{Backend, Query, Sql, SqlStore};
use super::{EventStore, StoreError};
use crate::domain::SubscriptionName;
use crate::domain::engine::EngineUrl;
use crate::domain::event::{
    DeliveryRecord, DeliveryResult, DeliveryState, EventFormat, EventType, NewDelivery,
    OutboxEntry, OutboxRow, Subscription, SubscriptionRecord,
};
use crate::domain::ledger::{ActionOutcome, ActionState, HookAction};

const SUBSCRIPTION_COLUMNS: &str = "name, url, format, events, catalogs, engines, sealed_secret, \
     max_attempts, comment, version, created_at, updated_at";

const DELIVERY_COLUMNS: &str = "id, subscription, dedupe_key, job_id, event_type, body, state, \
     attempts, not_before, last_error, last_status, created_at, delivered_at";

/// What the secret is sealed as: the key's associated data.
pub(super) const SECRET_KEY: &str = "subscription.secret";

#[derive(sqlx::FromRow)]
struct SubscriptionRow {
    name: String,
    url: String,
    format: String,
    events: String,
    catalogs: String,
    engines: String,
    sealed_secret: String,
    max_attempts: i64,
    comment: Option<String>,
    version: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl SubscriptionRow {
    fn decode(self) -> Result<(SubscriptionRecord, String), StoreError> {
        let corrupt = |what: &str| {
            StoreError::Internal(format!("stored subscription '{}' has {what}", self.name))
        };
        let list = |text: &str| serde_json::from_str::<Vec<String>>(text);
        let events = list(&self.events)
            .map_err(|_| corrupt("unreadable events"))?
            .iter()
            .map(|e| EventType::parse(e).ok_or_else(|| corrupt("an unknown event type")))
            .collect::<Result<_, _>>()?;
        let record = SubscriptionRecord {
            subscription: Subscription {
                name: SubscriptionName::parse(&self.name).map_err(|_| corrupt("a bad name"))?,
                url: EngineUrl::parse("url", &self.url).map_err(|_| corrupt("a bad url"))?,
                format: EventFormat::parse(&self.format).ok_or_else(|| corrupt("a bad format"))?,
                events,
                catalogs: list(&self.catalogs).map_err(|_| corrupt("unreadable catalogs"))?,
                engines: list(&self.engines).map_err(|_| corrupt("unreadable engines"))?,
                max_attempts: u32::try_from(self.max_attempts)
                    .map_err(|_| corrupt("a bad max_attempts"))?,
                comment: self.comment.clone(),
            },
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        };
        Ok((record, self.sealed_secret))
    }
}

#[derive(sqlx::FromRow)]
struct OutboxSqlRow {
    id: i64,
    job_id: String,
    kind: String,
    hook_index: Option<i64>,
    from_status: Option<String>,
    to_status: Option<String>,
    action_id: Option<i64>,
    action: Option<String>,
    state: Option<String>,
    outcome: Option<String>,
    detail: Option<String>,
    actor: Option<String>,
    at: Option<DateTime<Utc>>,
}

impl OutboxSqlRow {
    fn decode(self) -> Result<OutboxRow, StoreError> {
        let corrupt = || StoreError::Internal(format!("outbox row {} is unreadable", self.id));
        let hook_index = || {
            self.hook_index
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(corrupt)
        };
        let entry = match self.kind.as_str() {
            "status" => OutboxEntry::Status {
                from: self.from_status.clone(),
                to: self.to_status.clone().ok_or_else(corrupt)?,
                failure: self.detail.clone(),
            },
            "action" => OutboxEntry::Action {
                hook_index: hook_index()?,
                action_id: self.action_id.ok_or_else(corrupt)?,
                action: self
                    .action
                    .as_deref()
                    .and_then(HookAction::parse)
                    .ok_or_else(corrupt)?,
                state: self
                    .state
                    .as_deref()
                    .and_then(ActionState::parse)
                    .ok_or_else(corrupt)?,
                outcome: self.outcome.as_deref().and_then(ActionOutcome::parse),
                error: self.detail.clone(),
            },
            "intervention" => OutboxEntry::Intervention {
                action_id: self.action_id.ok_or_else(corrupt)?,
                decision: self.outcome.clone().ok_or_else(corrupt)?,
                reason: self.detail.clone(),
                by: self.actor.clone(),
            },
            "audits" => OutboxEntry::Audits {
                hook_index: hook_index()?,
                results: self.detail.clone().unwrap_or_else(|| "[]".into()),
            },
            _ => return Err(corrupt()),
        };
        Ok(OutboxRow {
            id: self.id,
            job_id: self.job_id,
            entry,
            at: self.at,
        })
    }
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    subscription: String,
    dedupe_key: String,
    job_id: String,
    event_type: String,
    body: String,
    state: String,
    attempts: i64,
    not_before: i64,
    last_error: Option<String>,
    last_status: Option<i64>,
    created_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
}

impl DeliveryRow {
    fn decode(self) -> Result<DeliveryRecord, StoreError> {
        let state = DeliveryState::parse(&self.state)
            .ok_or_else(|| StoreError::Internal(format!("delivery {} has a bad state", self.id)))?;
        Ok(DeliveryRecord {
            id: self.id,
            subscription: self.subscription,
            event_id: self.dedupe_key,
            job_id: self.job_id,
            event_type: self.event_type,
            body: self.body,
            state,
            attempts: u32::try_from(self.attempts).unwrap_or(u32::MAX),
            next_attempt_at: (state == DeliveryState::Pending)
                .then(|| DateTime::from_timestamp_millis(self.not_before))
                .flatten(),
            last_error: self.last_error,
            last_status: self.last_status.and_then(|s| u16::try_from(s).ok()),
            created_at: self.created_at,
            delivered_at: self.delivered_at,
        })
    }
}

/// A subscription's events, catalogs and engines, as their JSON columns.
fn lists(subscription: &Subscription) -> (String, String, String) {
    let json = |list: serde_json::Result<String>| list.expect("a list of names serializes");
    (
        json(serde_json::to_string(&subscription.events)),
        json(serde_json::to_string(&subscription.catalogs)),
        json(serde_json::to_string(&subscription.engines)),
    )
}

fn insert_failed(name: &SubscriptionName, error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::SubscriptionExists(name.to_string())
        }
        _ => StoreError::from_sqlx(error),
    }
}

#[async_trait]
impl<B: Backend> EventStore for SqlStore<B> {
    async fn insert_subscription(
        &self,
        subscription: &Subscription,
        secret: &str,
    ) -> Result<SubscriptionRecord, StoreError> {
        let sealed = self.keyring.seal(SECRET_KEY, secret);
        let (events, catalogs, engines) = lists(subscription);
        let row: Option<SubscriptionRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "INSERT INTO subscriptions ({SUBSCRIPTION_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $10, $10) \
                     RETURNING {SUBSCRIPTION_COLUMNS}"
                ))
                .text(subscription.name.as_str())
                .text(subscription.url.as_str())
                .text(subscription.format.as_str())
                .text(&events)
                .text(&catalogs)
                .text(&engines)
                .text(&sealed)
                .int(i64::from(subscription.max_attempts))
                .opt_text(subscription.comment.as_deref())
                .time(Utc::now()),
            )
            .await
            .map_err(|e| insert_failed(&subscription.name, e))?;
        let row = row.ok_or_else(|| StoreError::Internal("an insert returned no row".into()))?;
        Ok(row.decode()?.0)
    }

    async fn get_subscription(
        &self,
        name: &SubscriptionName,
    ) -> Result<Option<SubscriptionRecord>, StoreError> {
        let row: Option<SubscriptionRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions WHERE name = $1"
                ))
                .text(name.as_str()),
            )
            .await?;
        Ok(row
            .map(SubscriptionRow::decode)
            .transpose()?
            .map(|(r, _)| r))
    }

    async fn list_subscriptions(&self) -> Result<Vec<SubscriptionRecord>, StoreError> {
        Ok(self
            .subscriptions_with_secrets()
            .await?
            .into_iter()
            .map(|(record, _)| record)
            .collect())
    }

    async fn subscriptions_with_secrets(
        &self,
    ) -> Result<Vec<(SubscriptionRecord, String)>, StoreError> {
        let rows: Vec<SubscriptionRow> = self
            .pool()
            .rows(Query::new(format!(
                "SELECT {SUBSCRIPTION_COLUMNS} FROM subscriptions ORDER BY name"
            )))
            .await?;
        rows.into_iter()
            .map(|row| {
                let name = row.name.clone();
                let (record, sealed) = row.decode()?;
                let secret = self.keyring.open(SECRET_KEY, &sealed).map_err(|source| {
                    StoreError::Internal(format!(
                        "the secret of subscription '{name}' cannot be opened: {source}"
                    ))
                })?;
                Ok((record, secret))
            })
            .collect()
    }

    async fn update_subscription(
        &self,
        subscription: &Subscription,
        expected_version: Option<i64>,
    ) -> Result<SubscriptionRecord, StoreError> {
        let (events, catalogs, engines) = lists(subscription);
        let row: Option<SubscriptionRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "UPDATE subscriptions SET url = $2, format = $3, events = $4, catalogs = $5, \
                     engines = $6, max_attempts = $7, comment = $8, version = version + 1, \
                     updated_at = $9 \
                     WHERE name = $1 AND (CAST($10 AS BIGINT) IS NULL OR version = $10) \
                     RETURNING {SUBSCRIPTION_COLUMNS}"
                ))
                .text(subscription.name.as_str())
                .text(subscription.url.as_str())
                .text(subscription.format.as_str())
                .text(&events)
                .text(&catalogs)
                .text(&engines)
                .int(i64::from(subscription.max_attempts))
                .opt_text(subscription.comment.as_deref())
                .time(Utc::now())
                .opt_int(expected_version),
            )
            .await?;
        match row {
            Some(row) => Ok(row.decode()?.0),
            None => Err(match self.get_subscription(&subscription.name).await? {
                Some(_) => StoreError::SubscriptionModified(subscription.name.to_string()),
                None => StoreError::SubscriptionNotFound(subscription.name.to_string()),
            }),
        }
    }

    async fn delete_subscription(&self, name: &SubscriptionName) -> Result<bool, StoreError> {
        let deleted = self
            .pool()
            .execute(Query::new("DELETE FROM subscriptions WHERE name = $1").text(name.as_str()))
            .await?;
        Ok(deleted > 0)
    }

    async fn outbox_batch(&self, limit: u32) -> Result<Vec<OutboxRow>, StoreError> {
        let rows: Vec<OutboxSqlRow> = self
            .pool()
            .rows(
                Query::new(
                    "SELECT id, job_id, kind, hook_index, from_status, to_status, action_id, \
                     action, state, outcome, detail, actor, at FROM outbox ORDER BY id LIMIT CAST($1 AS BIGINT)",
                )
                .int(i64::from(limit)),
            )
            .await?;
        rows.into_iter().map(OutboxSqlRow::decode).collect()
    }

    async fn fan_out(&self, deliveries: &[NewDelivery], drained: &[i64]) -> Result<(), StoreError> {
        let now = Utc::now();
        let mut tx = self.begin().await?;
        for delivery in deliveries {
            tx.execute(
                Query::new(
                    "INSERT INTO deliveries (subscription, dedupe_key, job_id, event_type, body, \
                     state, attempts, not_before, created_at) \
                     VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $7) \
                     ON CONFLICT (subscription, dedupe_key) DO NOTHING",
                )
                .text(delivery.subscription.as_str())
                .text(&delivery.event_id)
                .text(&delivery.job_id)
                .text(&delivery.event_type)
                .text(&delivery.body)
                .int(now.timestamp_millis())
                .time(now),
            )
            .await?;
        }
        if !drained.is_empty() {
            let ids_in = (tx.dialect().in_list)("id", 1);
            tx.execute(
                Query::new(format!("DELETE FROM outbox WHERE {ids_in}")).ints(drained.to_vec()),
            )
            .await?;
        }
        self.commit(tx).await
    }

    async fn claim_deliveries(
        &self,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let now = Utc::now();
        let lease_until = now + chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
        let mut pool = self.pool();
        let skip_locked = pool.dialect().skip_locked;
        let rows: Vec<DeliveryRow> = pool
            .rows(
                Query::new(format!(
                    "UPDATE deliveries SET lease_until = $1, attempts = attempts + 1 WHERE id IN ( \
                       SELECT d.id FROM deliveries d WHERE d.state = 'pending' AND d.not_before <= $2 \
                         AND (d.lease_until IS NULL OR d.lease_until < $2) \
                         AND NOT EXISTS (SELECT 1 FROM deliveries e WHERE e.state = 'pending' \
                                         AND e.subscription = d.subscription AND e.job_id = d.job_id \
                                         AND e.id < d.id) \
                       ORDER BY d.id LIMIT CAST($3 AS BIGINT){skip_locked}) RETURNING {DELIVERY_COLUMNS}"
                ))
                .int(lease_until.timestamp_millis())
                .int(now.timestamp_millis())
                .int(i64::from(limit)),
            )
            .await?;
        let mut claimed: Vec<DeliveryRecord> = rows
            .into_iter()
            .map(DeliveryRow::decode)
            .collect::<Result<_, _>>()?;
        claimed.sort_by_key(|d| d.id);
        Ok(claimed)
    }

    async fn record_delivery(&self, id: i64, result: &DeliveryResult) -> Result<(), StoreError> {
        let now = Utc::now();
        let query = match result {
            DeliveryResult::Delivered { status } => Query::new(
                "UPDATE deliveries SET state = 'delivered', last_status = $2, lease_until = NULL, \
                 delivered_at = $3 WHERE id = $1",
            )
            .int(id)
            .int(i64::from(*status))
            .time(now),
            DeliveryResult::Failed {
                error,
                status,
                retry_at,
            } => Query::new(
                "UPDATE deliveries SET state = $2, last_error = $3, last_status = $4, \
                 not_before = $5, lease_until = NULL WHERE id = $1",
            )
            .int(id)
            .text(match retry_at {
                Some(_) => "pending",
                None => "parked",
            })
            .text(error)
            .opt_int(status.map(i64::from))
            .int(retry_at.unwrap_or(now).timestamp_millis()),
        };
        self.pool().execute(query).await?;
        Ok(())
    }

    async fn list_deliveries(
        &self,
        subscription: &SubscriptionName,
        state: Option<DeliveryState>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<DeliveryRecord>, StoreError> {
        let rows: Vec<DeliveryRow> = self
            .pool()
            .rows(
                Query::new(format!(
                    "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE subscription = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR state = $2) \
                     AND (CAST($3 AS BIGINT) IS NULL OR id < $3) ORDER BY id DESC LIMIT CAST($4 AS BIGINT)"
                ))
                .text(subscription.as_str())
                .opt_text(state.map(DeliveryState::as_str))
                .opt_int(before)
                .int(i64::from(limit)),
            )
            .await?;
        rows.into_iter().map(DeliveryRow::decode).collect()
    }

    async fn redeliver(
        &self,
        subscription: &SubscriptionName,
        id: i64,
    ) -> Result<Option<DeliveryRecord>, StoreError> {
        let row: Option<DeliveryRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "UPDATE deliveries SET state = 'pending', attempts = 0, not_before = $3, \
                     lease_until = NULL WHERE subscription = $1 AND id = $2 \
                     RETURNING {DELIVERY_COLUMNS}"
                ))
                .text(subscription.as_str())
                .int(id)
                .int(Utc::now().timestamp_millis()),
            )
            .await?;
        row.map(DeliveryRow::decode).transpose()
    }

    async fn delivery_counts(&self) -> Result<Vec<(String, DeliveryState, u64)>, StoreError> {
        let rows: Vec<(String, String, i64)> = self
            .pool()
            .rows(Query::new(
                "SELECT subscription, state, COUNT(*) FROM deliveries GROUP BY subscription, state \
                 ORDER BY subscription, state",
            ))
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(name, state, n)| {
                Some((name, DeliveryState::parse(&state)?, u64::try_from(n).ok()?))
            })
            .collect())
    }
}
