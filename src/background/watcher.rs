//! The watcher: polls every registered engine on its own schedule, one
//! poll per engine at a time, and stops when told. A reachable engine is
//! polled every `poll_interval`, counted from the start of the poll before
//! (a poll that took longer is followed at once); an unreachable one ever
//! less often (up to every 30 s) until it answers again; an engine another
//! replica holds is left to it, and taken over when that replica's lease
//! runs out. The watcher sleeps until the next poll is due, so a poll
//! starts on time rather than at the next tick of a clock.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::domain::EngineName;
use crate::domain::ledger::backoff;
use crate::service::{EngineWatch, Polled, Services};

/// How often the list of engines is read again (and tried again, when it
/// could not be read).
const RELIST_EVERY: Duration = Duration::from_secs(2);

struct Schedule {
    due: Instant,
    failures: u32,
    /// What this replica keeps of the engine; taken while a poll runs.
    kept: Option<EngineWatch>,
}

/// Starts the watcher for this replica; it ends when `stop` turns true.
pub fn spawn(
    services: Arc<Services>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let replica = uuid::Uuid::new_v4().simple().to_string();
    tokio::spawn(async move {
        let mut schedules: HashMap<EngineName, Schedule> = HashMap::new();
        let mut polls: JoinSet<(EngineName, EngineWatch, Instant, Result<Polled, String>)> =
            JoinSet::new();
        let mut relist_at = Instant::now();
        loop {
            let next = schedules
                .values()
                .filter(|schedule| schedule.kept.is_some())
                .map(|schedule| schedule.due)
                .fold(relist_at, Instant::min);
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep_until(next) => {}
                Some(done) = polls.join_next(), if !polls.is_empty() => {
                    if let Ok((name, kept, started, outcome)) = done {
                        reschedule(&mut schedules, name, kept, started, outcome);
                    }
                    continue;
                }
            }
            if *stop.borrow() {
                break;
            }
            if relist_at <= Instant::now() {
                // Read again in a while, whether or not it is read now.
                relist_at = Instant::now() + RELIST_EVERY;
                match services.engine_names().await {
                    Ok(names) => {
                        schedules.retain(|name, _| names.contains(name));
                        for name in names {
                            schedules.entry(name).or_insert_with(|| Schedule {
                                due: Instant::now(),
                                failures: 0,
                                kept: Some(EngineWatch::default()),
                            });
                        }
                    }
                    Err(error) => tracing::warn!(%error, "could not list engines; will retry"),
                }
            }
            let now = Instant::now();
            for (name, schedule) in schedules.iter_mut() {
                if schedule.due > now {
                    continue;
                }
                // Taken while the poll runs: the engine is not polled twice at once.
                let Some(mut kept) = schedule.kept.take() else {
                    continue;
                };
                let (services, name, replica) = (services.clone(), name.clone(), replica.clone());
                polls.spawn(async move {
                    let started = Instant::now();
                    let outcome = services
                        .poll_engine(&name, &replica, &mut kept)
                        .await
                        .map_err(|e| e.to_string());
                    (name, kept, started, outcome)
                });
            }
        }
        polls.shutdown().await;
        tracing::info!("engine watcher stopped");
    })
}

fn reschedule(
    schedules: &mut HashMap<EngineName, Schedule>,
    name: EngineName,
    kept: EngineWatch,
    started: Instant,
    outcome: Result<Polled, String>,
) {
    let Some(schedule) = schedules.get_mut(&name) else {
        return;
    };
    schedule.kept = Some(kept);
    let wait = match outcome {
        Ok(Polled::Reachable { interval } | Polled::HeldElsewhere { interval }) => {
            schedule.failures = 0;
            schedule.due = started + interval;
            return;
        }
        Ok(Polled::Unreachable { interval }) => {
            schedule.failures += 1;
            interval.max(backoff(schedule.failures))
        }
        Ok(Polled::Gone) => {
            schedules.remove(&name);
            return;
        }
        Err(error) => {
            schedule.failures += 1;
            tracing::warn!(engine = %name, %error, "polling the engine failed; will retry");
            backoff(schedule.failures)
        }
    };
    schedule.due = Instant::now() + wait;
}
