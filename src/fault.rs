//! Crash points, for the crash suite only.
//!
//! `CTASD_FAULT_KILL_AT=<point>:<n>` makes the process send itself SIGKILL
//! the n-th time execution reaches `<point>`: no destructor, no flush, no
//! graceful shutdown, as when the machine loses power. The points sit
//! between steps whose order a crash must not break (a status stored but its
//! actions not run, a commit done but not recorded, ...). Unarmed, reaching a
//! point is one atomic load; built without the `crash-points` feature (any
//! build but the tests'), it is nothing, and the flag does not exist.

use std::str::FromStr;
#[cfg(feature = "crash-points")]
use std::sync::OnceLock;
#[cfg(feature = "crash-points")]
use std::sync::atomic::{AtomicU32, Ordering};

/// A place on the transition path where the process may be killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum Point {
    /// A status change and its actions are stored; none has run.
    StatusStored,
    /// A staging table or directory exists; the ledger does not say so yet.
    StagingCreated,
    /// Part of a publication is done (inside the DDL transaction, or between
    /// a swap and the removal of the replaced table).
    CommitMidway,
    /// The target is published; the ledger does not say so yet.
    CommitApplied,
    /// Part of a staging is removed.
    AbortMidway,
    /// An audit on a staging ran; what it found is not recorded yet.
    AuditRan,
    /// A receiver took an event; that it did is not recorded yet.
    EventPosted,
    /// The staging is gone; the ledger does not say so yet.
    AbortApplied,
}

impl Point {
    pub const ALL: [Point; 8] = [
        Point::StatusStored,
        Point::StagingCreated,
        Point::CommitMidway,
        Point::CommitApplied,
        Point::AbortMidway,
        Point::AbortApplied,
        Point::AuditRan,
        Point::EventPosted,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Kill the process the `nth` time `point` is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KillAt {
    pub point: Point,
    pub nth: u32,
}

impl FromStr for KillAt {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (point, nth) = spec.split_once(':').unwrap_or((spec, "1"));
        let point = Point::ALL
            .into_iter()
            .find(|p| p.as_str() == point)
            .ok_or_else(|| {
                let known: Vec<&str> = Point::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown crash point '{point}'; known: {}", known.join(", "))
            })?;
        let nth = nth
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("'{nth}' is not a positive count"))?;
        Ok(KillAt { point, nth })
    }
}

#[cfg(feature = "crash-points")]
static ARMED: OnceLock<(Point, AtomicU32)> = OnceLock::new();

/// Arms the process-wide crash point; a second call is ignored.
#[cfg(feature = "crash-points")]
pub fn arm(kill_at: KillAt) {
    tracing::warn!(
        point = kill_at.point.as_str(),
        nth = kill_at.nth,
        "FAULT SWITCH ON: this process kills itself at a crash point"
    );
    let _ = ARMED.set((kill_at.point, AtomicU32::new(kill_at.nth)));
}

/// Marks that execution reached `point`; kills the process if it is armed here.
#[cfg(feature = "crash-points")]
pub fn reached(point: Point) {
    if let Some((armed, left)) = ARMED.get()
        && *armed == point
        && left.fetch_sub(1, Ordering::SeqCst) == 1
    {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Without crash points, reaching one is nothing.
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub fn reached(_point: Point) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_point_and_a_positive_count() {
        assert_eq!(
            "commit-applied:3".parse(),
            Ok(KillAt {
                point: Point::CommitApplied,
                nth: 3
            })
        );
        assert_eq!(
            "status-stored".parse(),
            Ok(KillAt {
                point: Point::StatusStored,
                nth: 1
            })
        );
        assert!("commit-applied:0".parse::<KillAt>().is_err());
        let unknown = "nowhere:1".parse::<KillAt>().unwrap_err();
        assert!(unknown.contains("abort-midway"), "{unknown}");
    }
}
