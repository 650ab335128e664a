//! The loops that run beside the requests, each on its own schedule: the
//! resumer (due hook actions), the watcher (registered engines' jobs), the
//! events (the outbox fanned out, deliveries sent), the keys (expired
//! idempotency keys) and the retention (ended jobs). They start once the
//! service is ready and stop together, each finishing the round it is in.

mod events;
mod keys;
mod resume;
mod retention;
mod watcher;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use keys::KeyLifetimes;

use crate::hooks::HookRunner;
use crate::service::Services;

/// Runs `round` every `period` (the first at once) until `stop` turns
/// true; a round under way finishes first, so none is cut off half-way.
fn every<F, Round>(
    period: Duration,
    mut stop: watch::Receiver<bool>,
    mut round: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Round + Send + 'static,
    Round: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = ticks.tick() => {}
            }
            if *stop.borrow() {
                break;
            }
            round().await;
        }
    })
}

/// The background loops of one server.
pub struct Background {
    stop: watch::Sender<bool>,
    loops: Vec<JoinHandle<()>>,
}

impl Background {
    /// Starts the resumer, the watcher, the events and the keys' purge,
    /// and the retention when one is configured (`None` keeps every job).
    pub fn start(
        services: Arc<Services>,
        hooks: Arc<HookRunner>,
        keys: KeyLifetimes,
        retention: Option<Duration>,
    ) -> Self {
        let (stop, stopping) = watch::channel(false);
        let mut loops = vec![
            resume::spawn(hooks, stopping.clone()),
            watcher::spawn(services.clone(), stopping.clone()),
            events::spawn(services.clone(), stopping.clone()),
            keys::spawn(services.clone(), keys, stopping.clone()),
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
