//! Events out, beside the requests: the outbox the ledger filled is fanned
//! out into deliveries, and the due deliveries are posted, every quarter
//! second while there are some; rounds that find none wait longer, up to a
//! second, until a status moves in this process. Every replica runs it:
//! the fan-out makes each delivery once, and a claim leases each delivery
//! to one replica at a time.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Pace;
use crate::service::Services;

/// How often the outbox is drained and deliveries are sent: while there
/// are some, and at the longest when there are none.
const EVENTS_PACE: Pace = Pace {
    busy: Duration::from_millis(250),
    idle: Duration::from_secs(1),
};

pub fn spawn(services: Arc<Services>, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    let nudge = Some(services.events_nudge());
    super::every(EVENTS_PACE, nudge, stop, move || {
        let services = services.clone();
        async move {
            let fanned_out = services.fan_out_events().await.unwrap_or_else(|error| {
                tracing::warn!(%error, "fanning out events failed; trying again shortly");
                0
            });
            let delivered = services.deliver_due_events().await.unwrap_or_else(|error| {
                tracing::warn!(%error, "delivering events failed; trying again shortly");
                0
            });
            fanned_out + delivered > 0
        }
    })
}
