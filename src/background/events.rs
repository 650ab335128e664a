//! Events out, beside the requests: every quarter second the outbox the
//! ledger filled is fanned out into deliveries, and the due deliveries are
//! posted. Every replica runs it: the fan-out makes each delivery once,
//! and a claim leases each delivery to one replica at a time.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::service::Services;

/// How often the outbox is drained and deliveries are sent.
const EVENTS_EVERY: Duration = Duration::from_millis(250);

pub fn spawn(services: Arc<Services>, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    super::every(EVENTS_EVERY, stop, move || {
        let services = services.clone();
        async move {
            if let Err(error) = services.fan_out_events().await {
                tracing::warn!(%error, "fanning out events failed; trying again shortly");
            }
            if let Err(error) = services.deliver_due_events().await {
                tracing::warn!(%error, "delivering events failed; trying again shortly");
            }
        }
    })
}
