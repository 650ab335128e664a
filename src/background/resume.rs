//! The resumer: every half second, runs the hook actions that are due,
//! those a crash left behind and those whose last attempt failed and whose
//! backoff has passed. The round in progress finishes before it stops, so
//! no attempt is cut off half-way.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::hooks::HookRunner;

/// How often due hook actions are looked for.
const RESUME_EVERY: Duration = Duration::from_millis(500);

/// Starts the resumer; it ends when `stop` turns true.
pub fn spawn(
    hooks: Arc<HookRunner>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(RESUME_EVERY);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stop.changed() => return,
            }
            if let Err(error) = hooks.run_due().await {
                tracing::warn!(%error, "resuming hook actions failed; will retry");
            }
            if *stop.borrow() {
                return;
            }
        }
    })
}
