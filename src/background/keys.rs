//! Keeps the idempotency keys from piling up: every minute, keys past
//! their lifetime and claims whose process died are deleted in short
//! batches. A claim never waits for it (an expired key is claimed afresh
//! in place), so a keyed POST costs the same at a million kept keys as at
//! none. Every replica may run it: deleting what another deleted first
//! deletes nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Pace;
use crate::service::Services;

/// How often expired keys are purged.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// How long keys live.
#[derive(Debug, Clone, Copy)]
pub struct KeyLifetimes {
    /// An answered key is replayed for this long.
    pub lifetime: Duration,
    /// A claim not renewed for this long was left by a process that died.
    pub abandoned_after: Duration,
}

pub fn spawn(
    services: Arc<Services>,
    keys: KeyLifetimes,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    super::every(Pace::steady(PURGE_EVERY), None, stop, move || {
        let services = services.clone();
        async move {
            match services
                .purge_idempotency_keys(keys.lifetime, keys.abandoned_after)
                .await
            {
                Ok(0) => false,
                Ok(purged) => {
                    tracing::debug!(purged, "deleted expired idempotency keys");
                    true
                }
                Err(error) => {
                    tracing::warn!(%error, "purging idempotency keys failed; trying again in a minute");
                    false
                }
            }
        }
    })
}
