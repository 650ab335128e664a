//! The resumer: runs the hook actions that are due, those a crash left
//! behind and those whose last attempt failed and whose backoff has
//! passed; every half second while it finds some, and up to a second apart
//! while it finds none.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::Pace;
use crate::hooks::HookRunner;

/// How often due hook actions are looked for: while there are some, and
/// at the longest when there are none.
const RESUME_PACE: Pace = Pace {
    busy: Duration::from_millis(500),
    idle: Duration::from_secs(1),
};

/// Starts the resumer; it ends when `stop` turns true.
pub fn spawn(hooks: Arc<HookRunner>, stop: watch::Receiver<bool>) -> JoinHandle<()> {
    super::every(RESUME_PACE, None, stop, move || {
        let hooks = hooks.clone();
        async move {
            match hooks.run_due().await {
                Ok(resumed) => resumed > 0,
                Err(error) => {
                    tracing::warn!(%error, "resuming hook actions failed; will retry");
                    false
                }
            }
        }
    })
}
