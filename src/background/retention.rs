//! Keeps the store from growing for ever: jobs that ended more than the
//! configured retention ago (and have nothing left to do) are deleted with
//! their history, at start and then every hour. Each batch is one short
//! statement, and every replica may run it: deleting what another replica
//! deleted first deletes nothing.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::Pace;
use crate::service::Services;

/// How often the store is purged.
const PURGE_EVERY: Duration = Duration::from_secs(60 * 60);

pub fn spawn(
    services: Arc<Services>,
    retention: Duration,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    super::every(Pace::steady(PURGE_EVERY), None, stop, move || {
        let services = services.clone();
        async move {
            match services.purge_ended_jobs(retention).await {
                Ok(0) => false,
                Ok(purged) => {
                    tracing::info!(
                        purged,
                        retention_days = retention.as_secs() / 86_400,
                        "deleted jobs that ended before the retention"
                    );
                    true
                }
                Err(error) => {
                    tracing::warn!(%error, "purging ended jobs failed; trying again in an hour");
                    false
                }
            }
        }
    })
}
