//! The resumer: every half second, runs the hook actions that are due,
//! those a crash left behind and those whose last attempt failed and whose
//! backoff has passed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::hooks::HookRunner;

/// How often due hook actions are looked for.
const RESUME_EVERY: Duration = Duration::from_millis(500);

/// Starts the resumer; it ends when `stop` turns true.
pub fn spawn(hooks: Arc<HookRunner>, stop: watch::Receiver<bool>) -> JoinHandle<()> {
    super::every(RESUME_EVERY, stop, move || {
        let hooks = hooks.clone();
        async move {
            if let Err(error) = hooks.run_due().await {
                tracing::warn!(%error, "resuming hook actions failed; will retry");
            }
        }
    })
}
