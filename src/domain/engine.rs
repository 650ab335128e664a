//! Engines: the clusters ctasd watches jobs on (a Flink cluster's REST
//! URL), their settings and what ctasd last saw of them; and the rules that
//! turn what Flink says about a job into the statuses ctasd applies.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::job::JobStatus;
use super::name::EngineName;

/// How often an engine is polled unless its settings say otherwise.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long a job Flink does not know may stay unsettled by default.
pub const DEFAULT_MISSING_JOB_GRACE: Duration = Duration::from_secs(600);
/// Requests per second to one engine by default, all jobs together.
pub const DEFAULT_MAX_REQUESTS_PER_SECOND: u32 = 200;
/// The longest failure text copied from an engine.
pub const MAX_FAILURE_LEN: usize = 4096;

/// The kinds of engine ctasd can watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum EngineKind {
    /// An Apache Flink cluster, through its REST API.
    Flink,
}

/// How ctasd watches one engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSettings {
    /// The REST endpoint, `http://host:port` (and a path prefix, if any).
    pub url: EngineUrl,
    /// A Flink HistoryServer to ask about jobs the cluster has forgotten.
    pub history_url: Option<EngineUrl>,
    pub poll_interval: Duration,
    /// How long a job may stay unknown to the engine (never seen, or seen
    /// and then forgotten) before ctasd settles it as FAILED.
    pub missing_job_grace: Duration,
    pub max_requests_per_second: u32,
}

/// What a user registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineDescriptor {
    pub name: EngineName,
    pub kind: EngineKind,
    pub settings: EngineSettings,
    pub comment: Option<String>,
}

/// Whether ctasd could reach an engine when it last tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::EnumString)]
#[strum(serialize_all = "snake_case")]
pub enum Reachability {
    /// Not polled yet since it was registered or altered.
    Unknown,
    Reachable,
    Unreachable,
}

/// What ctasd last saw of an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineObservation {
    pub reachability: Reachability,
    /// Since when the engine has been as `reachability` says.
    pub since: Option<DateTime<Utc>>,
    pub checked_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed, while unreachable.
    pub last_error: Option<String>,
    /// The engine's version, as it reported it.
    pub version: Option<String>,
}

impl EngineObservation {
    pub fn unknown() -> Self {
        Self {
            reachability: Reachability::Unknown,
            since: None,
            checked_at: None,
            last_error: None,
            version: None,
        }
    }
}

/// A descriptor as stored, with its version and what was last seen of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineRecord {
    pub descriptor: EngineDescriptor,
    pub version: i64,
    pub observation: EngineObservation,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An `http://` URL with a host, no credentials, query or fragment;
/// kept without a trailing `/` so that paths append to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EngineUrl(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineSettingError {
    #[error(
        "{field} must be an http:// URL with a host (and optionally a port and a path), without credentials, query or fragment"
    )]
    BadUrl { field: &'static str },
    #[error(
        "{field} uses https://, which this build does not speak; reach the cluster over http:// (e.g. inside its network)"
    )]
    Https { field: &'static str },
    #[error("{field} must be between {min} and {max}")]
    OutOfRange {
        field: &'static str,
        min: u64,
        max: u64,
    },
    #[error("the comment is longer than 2048 characters")]
    CommentTooLong,
    #[error("{field} names a host that --engine-allowed-hosts does not allow")]
    HostNotAllowed { field: &'static str },
}

impl EngineSettingError {
    /// The request field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            EngineSettingError::BadUrl { field }
            | EngineSettingError::Https { field }
            | EngineSettingError::OutOfRange { field, .. }
            | EngineSettingError::HostNotAllowed { field } => field,
            EngineSettingError::CommentTooLong => "comment",
        }
    }
}

impl EngineUrl {
    pub fn parse(field: &'static str, value: &str) -> Result<Self, EngineSettingError> {
        if value.starts_with("https://") {
            return Err(EngineSettingError::Https { field });
        }
        let well_formed = value.len() <= 2048
            && value.strip_prefix("http://").is_some_and(|rest| {
                let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                authority_is_host_and_port(authority)
                    && path
                        .chars()
                        .all(|c| c.is_ascii_graphic() && !matches!(c, '?' | '#' | '\\'))
            });
        if !well_formed {
            return Err(EngineSettingError::BadUrl { field });
        }
        Ok(Self(value.trim_end_matches('/').to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The host, without port or brackets.
    pub fn host(&self) -> &str {
        let rest = self.0.strip_prefix("http://").unwrap_or(&self.0);
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        match authority.strip_prefix('[') {
            Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
            None => authority.split(':').next().unwrap_or_default(),
        }
    }

    /// The URL of `path` (which starts with `/`) on this endpoint.
    pub fn join(&self, path: &str) -> String {
        format!("{}{path}", self.0)
    }
}

/// `host`, `host:port`, `[ipv6]` or `[ipv6]:port`; no credentials.
fn authority_is_host_and_port(authority: &str) -> bool {
    let (host_ok, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, after)) if after.is_empty() || after.starts_with(':') => (
                !host.is_empty() && host.chars().all(|c| c.is_ascii_hexdigit() || c == ':'),
                after.strip_prefix(':'),
            ),
            _ => return false,
        },
        None => {
            let (host, port) = match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            };
            let host_ok = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
            (host_ok, port)
        }
    };
    host_ok && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0))
}

impl EngineSettings {
    /// Settings from what a user gave, the rest by default.
    pub fn new(
        url: &str,
        history_url: Option<&str>,
        poll_interval_ms: Option<u64>,
        missing_job_grace_seconds: Option<u64>,
        max_requests_per_second: Option<u64>,
    ) -> Result<Self, EngineSettingError> {
        let in_range = |field, value: Option<u64>, default: u64, min: u64, max: u64| match value {
            None => Ok(default),
            Some(v) if (min..=max).contains(&v) => Ok(v),
            Some(_) => Err(EngineSettingError::OutOfRange { field, min, max }),
        };
        Ok(Self {
            url: EngineUrl::parse("url", url)?,
            history_url: history_url
                .map(|u| EngineUrl::parse("history_url", u))
                .transpose()?,
            poll_interval: Duration::from_millis(in_range(
                "poll_interval_ms",
                poll_interval_ms,
                DEFAULT_POLL_INTERVAL.as_millis() as u64,
                100,
                3_600_000,
            )?),
            missing_job_grace: Duration::from_secs(in_range(
                "missing_job_grace_seconds",
                missing_job_grace_seconds,
                DEFAULT_MISSING_JOB_GRACE.as_secs(),
                1,
                30 * 24 * 3600,
            )?),
            max_requests_per_second: in_range(
                "max_requests_per_second",
                max_requests_per_second,
                u64::from(DEFAULT_MAX_REQUESTS_PER_SECOND),
                1,
                10_000,
            )? as u32,
        })
    }
}

/// Flink's `JobID`: 32 lowercase hex digits (Flink prints it so; upper case
/// is accepted and lowered).
pub fn flink_job_id(value: &str) -> Option<String> {
    (value.len() == 32 && value.chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| value.to_ascii_lowercase())
}

/// Flink's configuration key that fixes a job's `JobID`, so that a job
/// submitted to ctasd first runs on Flink under an id ctasd already knows.
pub const FLINK_FIXED_JOB_ID_KEY: &str = "$internal.pipeline.job-id";

/// The statuses a job passed through after `applied_until` (a Flink time in
/// unix milliseconds), in the order it reached them: Flink's `timestamps`
/// (each status with the last time it was reached, `0` for never), then the
/// job's current status at `current_at` if the timestamps (served from a
/// cache) do not have it yet.
pub fn statuses_since(
    timestamps: &BTreeMap<JobStatus, i64>,
    current: JobStatus,
    current_at: i64,
    applied_until: Option<i64>,
) -> Vec<(JobStatus, i64)> {
    // Flink's times are positive; 0 stands for "never reached".
    let after = applied_until.unwrap_or(0);
    let mut passed: Vec<(JobStatus, i64)> = timestamps
        .iter()
        .filter(|(_, at)| **at > after)
        .map(|(status, at)| (*status, *at))
        .collect();
    // Stable: statuses reached in the same millisecond keep Flink's order.
    passed.sort_by_key(|(_, at)| *at);
    let latest = passed.last().map_or(after, |(_, at)| *at);
    let current_is_last = passed.last().is_some_and(|(status, _)| *status == current);
    if !current_is_last && (current_at > after || !passed.is_empty()) {
        passed.push((current, current_at.max(latest)));
    }
    passed
}

/// The root cause of a failure as Flink's `/jobs/<id>/exceptions` words it:
/// the innermost `Caused by:` of the stack trace (or its first line), its
/// first line, and the last line of a Python traceback when the message
/// carries one. At most [`MAX_FAILURE_LEN`] characters.
pub fn root_cause(stacktrace: &str) -> String {
    let block = match stacktrace.rfind("\nCaused by: ") {
        Some(at) => &stacktrace[at + "\nCaused by: ".len()..],
        None => stacktrace,
    };
    let message = block.split("\n\tat ").next().unwrap_or(block);
    let mut lines = message.lines().map(str::trim_end).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default().trim().to_owned();
    let last = lines.next_back().map(str::trim);
    let cause = match last {
        Some(last) if last != first && !last.starts_with("at ") && !last.starts_with("...") => {
            format!("{first} … {last}")
        }
        _ => first,
    };
    truncate(&cause, MAX_FAILURE_LEN)
}

/// Longest engine value quoted in a message or kept as it is (a state, a
/// version), in characters.
pub const MAX_QUOTED_LEN: usize = 64;

/// A short value from an engine's answer as ctasd quotes it: controls
/// escaped, at most [`MAX_QUOTED_LEN`] characters.
pub fn quoted(value: &str) -> String {
    truncate(&printable(value), MAX_QUOTED_LEN)
}

/// `text` with every character that could forge or break a line of text
/// escaped as `\u{..}`: C0 and C1 controls, DEL, and the Unicode line and
/// paragraph separators.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// Marks a text that was cut to its limit.
pub const CUT_MARK: &str = "… [cut]";

/// At most `max` characters of `text`, ending with [`CUT_MARK`] when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let keep = max.saturating_sub(CUT_MARK.chars().count());
    let mut cut: String = text.chars().take(keep).collect();
    cut.push_str(CUT_MARK);
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobStatus::*;

    #[test]
    fn quoted_engine_values_are_escaped_and_bounded() {
        assert_eq!(
            printable("a\u{1b}[31mb\u{9b}c\u{2028}d\n"),
            "a\\u{1b}[31mb\\u{9b}c\\u{2028}d\\u{a}"
        );
        assert_eq!(printable("plain ünïcode"), "plain ünïcode");
        let long = quoted(&"x".repeat(4 << 20));
        assert_eq!(long.chars().count(), MAX_QUOTED_LEN);
        assert!(long.ends_with(CUT_MARK));
    }

    #[test]
    fn engine_urls_are_plain_http_endpoints() {
        for good in [
            "http://127.0.0.1:8081",
            "http://flink-jobmanager:8081/",
            "http://[::1]:8081",
            "http://[::1]",
            "http://flink.example.com/proxy/flink",
        ] {
            assert!(EngineUrl::parse("url", good).is_ok(), "{good}");
        }
        assert_eq!(
            EngineUrl::parse("url", "http://h:8081/")
                .unwrap()
                .join("/jobs/overview"),
            "http://h:8081/jobs/overview"
        );
        for bad in [
            "",
            "127.0.0.1:8081",
            "ftp://h",
            "http://",
            "http://:8081",
            "http://user:secret@h:8081",
            "http://h:8081/?x=1",
            "http://h:8081/#f",
            "http://h:0",
            "http://h:99999",
            "http://h h",
            "http://h\n",
        ] {
            assert!(EngineUrl::parse("url", bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            EngineUrl::parse("url", "https://h"),
            Err(EngineSettingError::Https { field: "url" })
        );
    }

    #[test]
    fn settings_default_and_stay_in_range() {
        let settings = EngineSettings::new("http://h:8081", None, None, None, None).unwrap();
        assert_eq!(settings.poll_interval, DEFAULT_POLL_INTERVAL);
        assert_eq!(settings.missing_job_grace, DEFAULT_MISSING_JOB_GRACE);
        let error = EngineSettings::new("http://h", None, Some(10), None, None).unwrap_err();
        assert_eq!(error.field(), "poll_interval_ms");
        assert!(EngineSettings::new("http://h", None, None, Some(0), None).is_err());
        assert!(EngineSettings::new("http://h", None, None, None, Some(0)).is_err());
    }

    #[test]
    fn flink_job_ids_are_32_hex_digits() {
        assert_eq!(
            flink_job_id("AAAABBBBCCCCDDDDEEEEFFFF00001111").as_deref(),
            Some("aaaabbbbccccddddeeeeffff00001111")
        );
        for bad in ["", "abc", &"g".repeat(32), &"a".repeat(33)] {
            assert_eq!(flink_job_id(bad), None, "{bad}");
        }
    }

    fn times(pairs: &[(JobStatus, i64)]) -> BTreeMap<JobStatus, i64> {
        JobStatus::ALL
            .iter()
            .map(|s| {
                (
                    *s,
                    pairs.iter().find(|(p, _)| p == s).map_or(0, |(_, t)| *t),
                )
            })
            .collect()
    }

    #[test]
    fn statuses_passed_over_come_in_the_order_flink_reached_them() {
        // Measured on Flink 2.3: a short batch job, seen only once FINISHED.
        let timestamps = times(&[
            (Initializing, 1538),
            (Created, 2145),
            (Running, 2249),
            (Finished, 3776),
        ]);
        assert_eq!(
            statuses_since(&timestamps, Finished, 3776, None),
            [
                (Initializing, 1538),
                (Created, 2145),
                (Running, 2249),
                (Finished, 3776)
            ]
        );
        assert_eq!(
            statuses_since(&timestamps, Finished, 3776, Some(2145)),
            [(Running, 2249), (Finished, 3776)]
        );
        assert_eq!(statuses_since(&timestamps, Finished, 3776, Some(3776)), []);
    }

    #[test]
    fn a_status_the_cached_details_miss_comes_last() {
        let stale = times(&[(Initializing, 10), (Created, 20), (Running, 30)]);
        assert_eq!(
            statuses_since(&stale, Canceled, 50, Some(30)),
            [(Canceled, 50)]
        );
        // A restart: RUNNING was reached again after RESTARTING.
        let restarted = times(&[(Created, 20), (Restarting, 40), (Running, 45)]);
        assert_eq!(
            statuses_since(&restarted, Running, 45, Some(30)),
            [(Restarting, 40), (Running, 45)]
        );
    }

    #[test]
    fn the_root_cause_is_the_innermost_cause_with_its_python_error() {
        let trace = "org.apache.flink.runtime.JobException: Recovery is suppressed\n\tat a.b(C.java:1)\n\
            Caused by: java.lang.RuntimeException: Error received from SDK harness for instruction 1: Traceback (most recent call last):\n  \
            File \"job.py\", line 10, in checked\n    raise ValueError(\"row 500 is refused\")\n\
            ValueError: row 500 is refused\n\n\tat x.y(Z.java:2)\n\t... 3 more\n";
        assert_eq!(
            root_cause(trace),
            "java.lang.RuntimeException: Error received from SDK harness for instruction 1: \
             Traceback (most recent call last): … ValueError: row 500 is refused"
        );
        assert_eq!(
            root_cause("java.io.IOException: disk full\n\tat a.b(C.java:1)"),
            "java.io.IOException: disk full"
        );
        assert_eq!(
            root_cause(&"x".repeat(10_000)).chars().count(),
            MAX_FAILURE_LEN
        );
    }
}
