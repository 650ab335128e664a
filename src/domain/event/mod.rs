//! Events out: what ctasd tells other systems (orchestrators, lineage
//! tools, alerting) when a job moves, and how. A subscription names a
//! receiver, the event types it wants, optional catalog and engine
//! filters, a format, and the secret its deliveries are signed with.
//!
//! Events come from the outbox, which the ledger's own writes fill in
//! their transactions; here are the words for them, the rule that turns
//! one outbox row into the event types it stands for, and the Standard
//! Webhooks signature (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature`: HMAC-SHA256 over `id.timestamp.body`).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

mod envelope;

pub use envelope::{CtasdEvent, EventData, EventJob, EventTarget, counted_rows, ctasd_event};

use super::SubscriptionName;
use super::engine::EngineUrl;
use super::ledger::{ActionOutcome, ActionState, HookAction};

/// What a subscriber can ask to hear of.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
pub enum EventType {
    /// The job moved to another status (one event per step).
    #[serde(rename = "job.status_changed")]
    #[strum(serialize = "job.status_changed")]
    JobStatusChanged,
    /// A hook's table is published: a batch commit, or a streaming
    /// table created.
    #[serde(rename = "table.published")]
    #[strum(serialize = "table.published")]
    TablePublished,
    /// A hook's staging was removed unpublished (the job failed or was
    /// cancelled, an audit vetoed it, a conflict discarded it).
    #[serde(rename = "staging.discarded")]
    #[strum(serialize = "staging.discarded")]
    StagingDiscarded,
    /// An action failed for good and waits for an operator.
    #[serde(rename = "action.failed")]
    #[strum(serialize = "action.failed")]
    ActionFailed,
    /// An operator gave up on an action.
    #[serde(rename = "action.given_up")]
    #[strum(serialize = "action.given_up")]
    ActionGivenUp,
    /// A hook's audits ran on its staging; what each found.
    #[serde(rename = "audits.ran")]
    #[strum(serialize = "audits.ran")]
    AuditsRan,
}

impl EventType {
    pub fn all() -> &'static [EventType] {
        <EventType as strum::VariantArray>::VARIANTS
    }
}

/// How a subscription's events are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum EventFormat {
    /// ctasd's own JSON envelope (`CtasdEvent` in the OpenAPI document).
    #[default]
    Ctasd,
    /// OpenLineage RunEvents: START when the job runs, COMPLETE when its
    /// tables are published, FAIL or ABORT otherwise.
    Openlineage,
}

/// One outbox row: what a ledger write recorded, as it was then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboxEntry {
    Status {
        from: Option<String>,
        to: String,
        failure: Option<String>,
    },
    Action {
        hook_index: u32,
        action_id: i64,
        action: HookAction,
        state: ActionState,
        outcome: Option<ActionOutcome>,
        error: Option<String>,
    },
    Intervention {
        action_id: i64,
        decision: String,
        reason: Option<String>,
        by: Option<String>,
    },
    Audits {
        hook_index: u32,
        /// The hook's audit results, as JSON.
        results: String,
    },
}

/// An outbox row with its place and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    pub id: i64,
    pub job_id: String,
    pub entry: OutboxEntry,
    pub at: Option<DateTime<Utc>>,
}

impl OutboxEntry {
    /// The event type this row stands for, if any: most action moves
    /// (a staging made, a retry scheduled) are nobody's business outside.
    pub fn event_type(&self) -> Option<EventType> {
        match self {
            OutboxEntry::Status { .. } => Some(EventType::JobStatusChanged),
            OutboxEntry::Audits { .. } => Some(EventType::AuditsRan),
            OutboxEntry::Intervention { decision, .. } => {
                (decision == "give_up").then_some(EventType::ActionGivenUp)
            }
            OutboxEntry::Action {
                action,
                state,
                outcome,
                ..
            } => match (action, state, outcome) {
                (
                    HookAction::Commit,
                    ActionState::Done,
                    Some(ActionOutcome::Committed | ActionOutcome::AlreadyCommitted),
                )
                | (
                    HookAction::Create,
                    ActionState::Done,
                    Some(ActionOutcome::Created | ActionOutcome::Replaced),
                ) => Some(EventType::TablePublished),
                (HookAction::Abort, ActionState::Done, _)
                | (
                    HookAction::Commit,
                    ActionState::Failed,
                    Some(ActionOutcome::Vetoed | ActionOutcome::Discarded),
                ) => Some(EventType::StagingDiscarded),
                // Given up: told by the intervention, with who and why.
                (
                    _,
                    ActionState::Failed,
                    Some(ActionOutcome::GivenUp | ActionOutcome::Superseded),
                ) => None,
                (_, ActionState::Failed, _) => Some(EventType::ActionFailed),
                _ => None,
            },
        }
    }
}

/// A subscription as registered: everything but its secret, which the
/// store keeps sealed and hands out only to the deliverer.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub name: SubscriptionName,
    pub url: ReceiverUrl,
    pub format: EventFormat,
    /// The event types wanted (all of them for OpenLineage, whose run
    /// events are made from them).
    pub events: Vec<EventType>,
    /// Only jobs with a hook on one of these catalogs (empty: any).
    pub catalogs: Vec<String>,
    /// Only jobs watched on one of these engines (empty: any job).
    pub engines: Vec<String>,
    /// Failed attempts before a delivery is parked.
    pub max_attempts: u32,
    pub comment: Option<String>,
}

/// A stored subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionRecord {
    pub subscription: Subscription,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Subscription {
    /// Whether a job with hooks on `catalogs`, watched on `engine`, is
    /// this subscription's business.
    pub fn covers(&self, catalogs: &[&str], engine: Option<&str>) -> bool {
        let catalog_ok = self.catalogs.is_empty()
            || catalogs
                .iter()
                .any(|c| self.catalogs.iter().any(|w| w == c));
        let engine_ok =
            self.engines.is_empty() || engine.is_some_and(|e| self.engines.iter().any(|w| w == e));
        catalog_ok && engine_ok
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its turn or its next attempt.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// Failed `max_attempts` times; waits for an operator to redeliver it.
    Parked,
}

/// An event made for a subscription, before it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    pub subscription: SubscriptionName,
    /// The event's id (`webhook-id`): one delivery per subscription and id.
    pub event_id: String,
    pub job_id: String,
    pub event_type: String,
    pub body: String,
}

/// A stored delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub id: i64,
    pub subscription: String,
    pub event_id: String,
    pub job_id: String,
    pub event_type: String,
    pub body: String,
    pub state: DeliveryState,
    pub attempts: u32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub last_status: Option<u16>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryResult {
    Delivered {
        status: u16,
    },
    /// Failed; tried again at `retry_at`, or parked when `None`.
    Failed {
        error: String,
        status: Option<u16>,
        retry_at: Option<DateTime<Utc>>,
    },
}

/// Longest wait between two attempts of a delivery.
pub const MOST_DELIVERY_BACKOFF: Duration = Duration::from_secs(300);

/// How long to wait after `attempts` failed ones: 0.5 s, doubling, up to
/// [`MOST_DELIVERY_BACKOFF`] (the default 15 attempts span about half an
/// hour; 100 about eight).
pub fn delivery_backoff(attempts: u32) -> Duration {
    let exponent = attempts.saturating_sub(1).min(12);
    (Duration::from_millis(500) * 2u32.pow(exponent)).min(MOST_DELIVERY_BACKOFF)
}

/// What one failed attempt leads to: the next try, jittered, or, after
/// `max_attempts`, parking.
pub fn after_failure(
    attempts: u32,
    max_attempts: u32,
    error: String,
    status: Option<u16>,
    seed: u64,
) -> DeliveryResult {
    let retry_at = (attempts < max_attempts).then(|| {
        let wait = super::ledger::jittered(delivery_backoff(attempts), seed);
        Utc::now() + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX)
    });
    DeliveryResult::Failed {
        error,
        status,
        retry_at,
    }
}

/// Where a subscription's events go: an `http://` receiver, by the same
/// rule and host policy as engines.
pub type ReceiverUrl = EngineUrl;

/// Most deliveries of one event before it is parked, and the default.
pub const MOST_ATTEMPTS: u32 = 100;
pub const DEFAULT_ATTEMPTS: u32 = 15;

/// How long one delivery may take, connection to answer.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Prefix of a signing secret, as Standard Webhooks writes them.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new signing secret: `whsec_` and 32 random bytes in base64.
pub fn generate_secret() -> String {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("the operating system's random source");
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The key a secret stands for; `None` if it is not `whsec_` and base64
/// of 24 to 64 bytes.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    let key = STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()?;
    (24..=64).contains(&key.len()).then_some(key)
}

/// The `webhook-signature` header for a message: `v1,` and the base64 of
/// HMAC-SHA256 over `{id}.{timestamp}.{body}` with the secret's key.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_matches_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn generated_secrets_are_standard_and_distinct() {
        let (a, b) = (generate_secret(), generate_secret());
        assert_ne!(a, b);
        assert_eq!(secret_key(&a).unwrap().len(), 32);
        assert!(secret_key("whsec_short").is_none());
        assert!(secret_key("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_none());
    }

    #[test]
    fn only_what_matters_outside_becomes_an_event() {
        let action = |action, state, outcome| OutboxEntry::Action {
            hook_index: 0,
            action_id: 1,
            action,
            state,
            outcome,
            error: None,
        };
        use ActionOutcome as O;
        use ActionState as S;
        use HookAction as A;
        assert_eq!(
            action(A::Commit, S::Done, Some(O::Committed)).event_type(),
            Some(EventType::TablePublished)
        );
        assert_eq!(
            action(A::Abort, S::Done, Some(O::Aborted)).event_type(),
            Some(EventType::StagingDiscarded)
        );
        assert_eq!(
            action(A::Commit, S::Failed, Some(O::Vetoed)).event_type(),
            Some(EventType::StagingDiscarded)
        );
        assert_eq!(
            action(A::Commit, S::Failed, None).event_type(),
            Some(EventType::ActionFailed)
        );
        assert_eq!(
            action(A::Begin, S::Done, Some(O::Staged)).event_type(),
            None
        );
        assert_eq!(
            action(A::Commit, S::Pending, Some(O::Quarantined)).event_type(),
            None
        );
        assert_eq!(
            action(A::Commit, S::Failed, Some(O::GivenUp)).event_type(),
            None
        );
    }
}
