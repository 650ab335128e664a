//! What a replica keeps of one engine between its polls: the poll lease
//! it holds, the engine's request budget (shared by the jobs a poll
//! examines side by side), and the mirror of its watched jobs
//! ([`super::mirror`]).

use std::sync::Mutex;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::mirror::Mirror;

/// What the watcher keeps of one engine between its polls.
#[derive(Default)]
pub struct EngineWatch {
    pub(super) budget: RequestBudget,
    /// The poll lease this replica holds, while it holds one.
    lease: Option<HeldLease>,
    /// `None` until read, and again whenever another replica held the
    /// engine: what it did meanwhile is read whole.
    pub(super) mirror: Option<Mirror>,
}

impl EngineWatch {
    /// Whether this replica holds the lease on the engine registered at
    /// `engine_created_at` with no need to renew it yet.
    pub(super) fn holds_lease(&self, engine_created_at: DateTime<Utc>) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|held| held.holds(engine_created_at))
    }

    /// The lease was taken or renewed; it is renewed again from `renew_at`.
    pub(super) fn leased(&mut self, engine_created_at: DateTime<Utc>, renew_at: Instant) {
        self.lease = Some(HeldLease {
            engine_created_at,
            renew_at,
        });
    }

    /// Another replica holds the engine: what it does meanwhile is read
    /// whole once this one polls it again.
    pub(super) fn held_elsewhere(&mut self) {
        self.lease = None;
        self.mirror = None;
    }
}

/// A poll lease held on an engine: renewed once a third of it has passed,
/// not at every poll (an engine polled twice a second would otherwise
/// write to the store twice a second for it), so that two thirds of it are
/// always left. Held on the engine as registered when it was taken: one
/// dropped and registered again under its name is leased afresh.
struct HeldLease {
    engine_created_at: DateTime<Utc>,
    renew_at: Instant,
}

impl HeldLease {
    /// Whether the lease still holds for `engine` without a renewal.
    fn holds(&self, engine_created_at: DateTime<Utc>) -> bool {
        self.engine_created_at == engine_created_at && Instant::now() < self.renew_at
    }
}

/// Requests one engine may still be sent: a bucket of
/// `max_requests_per_second`, refilled continuously, shared by the jobs
/// one poll examines side by side.
#[derive(Default)]
pub(super) struct RequestBudget(Mutex<Bucket>);

struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

impl Default for Bucket {
    fn default() -> Self {
        Self {
            tokens: 1.0,
            refilled_at: Instant::now(),
        }
    }
}

impl RequestBudget {
    /// Takes one request's worth, if there is one.
    pub(super) fn take(&self, per_second: u32) -> bool {
        let mut bucket = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        let rate = f64::from(per_second);
        let elapsed = now.duration_since(bucket.refilled_at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.refilled_at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_held_lease_is_renewed_once_a_third_of_it_passed_and_for_an_engine_registered_again()
    {
        let created_at = Utc::now();
        let lease = Duration::from_secs(6);
        let held = HeldLease {
            engine_created_at: created_at,
            renew_at: Instant::now() + lease / 3,
        };
        assert!(held.holds(created_at));
        let again = created_at + chrono::Duration::seconds(1);
        assert!(
            !held.holds(again),
            "dropped and registered again: leased afresh"
        );
        tokio::time::advance(Duration::from_millis(1_999)).await;
        assert!(held.holds(created_at));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!held.holds(created_at), "renewed with two thirds left");
    }
}
