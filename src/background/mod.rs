//! The loops that run beside the requests, each on its own schedule: the
//! resumer (due hook actions), the watcher (registered engines' jobs) and
//! the retention (ended jobs). They start once the service is ready and
//! stop together, each finishing the round it is in.

mod resume;
mod retention;
mod watcher;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::hooks::HookRunner;
use crate::service::Services;

/// The background loops of one server.
pub struct Background {
    stop: watch::Sender<bool>,
    loops: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts the resumer and the watcher, and the retention when one is
    /// configured (`None` keeps every job).
    pub fn start(
        services: Arc<Services>,
        hooks: Arc<HookRunner>,
        retention: Option<Duration>,
    ) -> Self {
        let (stop, stopping) = watch::channel(false);
        let mut loops = vec![
            resume::spawn(hooks, stopping.clone()),
            watcher::spawn(services.clone(), stopping.clone()),
        ];
        if let Some(retention) = retention {
            loops.push(retention::spawn(services, retention, stopping));
        }
        Self { stop, loops }
    }

    /// Tells every loop to stop and waits for each to finish its round.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for running in self.loops {
            let _ = running.await;
        }
    }
}
