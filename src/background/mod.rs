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

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use keys::KeyLifetimes;

use crate::hooks::HookRunner;
use crate::service::Services;

/// How a loop paces its rounds, counted from the start of one to the
/// start of the next.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// The wait after a round that found work, and the shortest wait when
    /// nudged.
    busy: Duration,
    /// The longest wait: each round in a row that found nothing waits
    /// twice as long as the one before, up to this, so that an idle
    /// service does not ask its store several times a second for work
    /// there is none of.
    idle: Duration,
}

impl Pace {
    /// The same wait whatever a round found.
    const fn steady(period: Duration) -> Self {
        Self {
            busy: period,
            idle: period,
        }
    }

    fn after(self, waited: Duration, found_work: bool) -> Duration {
        match found_work {
            true => self.busy,
            false => (waited * 2).clamp(self.busy, self.idle),
        }
    }
}

/// Runs `round` (the first at once, each saying whether it found work) at
/// `pace` until `stop` turns true; a `nudge` (work made in this process)
/// brings the next round forward to the busy wait. A round under way
/// finishes first, so none is cut off half-way.
fn every<F, Round>(
    pace: Pace,
    nudge: Option<Arc<Notify>>,
    mut stop: watch::Receiver<bool>,
    mut round: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Round + Send + 'static,
    Round: Future<Output = bool> + Send,
{
    tokio::spawn(async move {
        let mut started = Instant::now();
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep_until(started + wait) => {}
                _ = nudged(nudge.as_deref()), if wait > pace.busy => {
                    wait = pace.busy;
                    continue;
                }
            }
            if *stop.borrow() {
                break;
            }
            started = Instant::now();
            let found_work = round().await;
            wait = pace.after(wait, found_work);
        }
    })
}

async fn nudged(nudge: Option<&Notify>) {
    match nudge {
        Some(nudge) => nudge.notified().await,
        None => std::future::pending().await,
    }
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    const PACE: Pace = Pace {
        busy: Duration::from_millis(250),
        idle: Duration::from_secs(1),
    };

    /// Runs a loop at `PACE` whose rounds find work while `finding` says
    /// so; the times of its rounds, in ms from its start, so far.
    fn rounds_of(
        finding: Arc<AtomicBool>,
        nudge: Arc<Notify>,
    ) -> (Arc<Mutex<Vec<u128>>>, watch::Sender<bool>) {
        let (stop, stopping) = watch::channel(false);
        let times = Arc::new(Mutex::new(Vec::new()));
        let (seen, start) = (times.clone(), Instant::now());
        every(PACE, Some(nudge), stopping, move || {
            seen.lock().unwrap().push(start.elapsed().as_millis());
            let found = finding.load(Ordering::SeqCst);
            async move { found }
        });
        (times, stop)
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_that_find_nothing_slow_to_the_idle_pace_and_a_nudge_or_work_brings_the_busy_one_back()
     {
        let (finding, nudge) = (Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
        let (times, _stop) = rounds_of(finding.clone(), nudge.clone());
        tokio::time::sleep(Duration::from_millis(3_100)).await;
        assert_eq!(*times.lock().unwrap(), [0, 250, 750, 1_750, 2_750]);

        // Work made here: the next round at once (the last was more than
        // the busy wait ago), then slowing down again.
        nudge.notify_one();
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert_eq!(times.lock().unwrap()[5..], [3_100, 3_600]);

        // Rounds that find work keep the busy pace.
        finding.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        assert_eq!(times.lock().unwrap()[7..], [4_600, 4_850, 5_100]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_nudge_never_brings_rounds_closer_than_the_busy_pace() {
        let (finding, nudge) = (Arc::new(AtomicBool::new(true)), Arc::new(Notify::new()));
        let (times, _stop) = rounds_of(finding, nudge.clone());
        for _ in 0..10 {
            nudge.notify_one();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(*times.lock().unwrap(), [0, 250]);
    }
}
