//! Flink's REST API, the few calls the watcher makes, with the formats of
//! Flink 2.3 as measured on a real cluster:
//!
//! - `GET /config` names the version (`flink-version`);
//! - `GET /jobs/overview` lists every job the cluster knows (finished ones
//!   until `jobstore.expiration-time`) with `state` and `last-modification`,
//!   one request however many jobs are watched, read as it streams in;
//! - `GET /jobs/<id>` has `timestamps`, each status with the last time the
//!   job reached it (`0` for never); it is served from a cache refreshed
//!   every few seconds, so its `state` may lag the overview's;
//! - an id the cluster does not know answers 404 there (and **500** with
//!   `FlinkJobNotFoundException` on `/jobs/<id>/status`);
//! - `GET /jobs/<id>/exceptions` keeps the failure history
//!   (`exceptionHistory.entries`, newest first), each with a stack trace.
//!
//! Every call is bounded in time and in the size of what it reads, and
//! follows no redirect: an engine URL is the one place ctasd sends requests
//! a user chose.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::hosts::AllowedHosts;
use super::listing::{CutError, ListingDecoder, ListingReader, UnreadableListing};
use crate::domain::engine::{EngineUrl, quoted, root_cause};
use crate::domain::job::JobStatus;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read whole (one job's details, its failures).
const MAX_ANSWER_BYTES: usize = 32 << 20;
/// The longest job listing read, entry by entry: some three million jobs.
const MAX_LISTING_BYTES: usize = 1 << 30;
/// The listing read between turns given to what runs beside the read:
/// some 150 µs of reading.
const READ_BETWEEN_TURNS: usize = 64 << 10;
/// The most bytes of engine answers held at once, all engines together:
/// many clusters answering large overviews at the same moment take turns
/// instead of taking the process's memory.
const MAX_HELD_BYTES: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlinkError {
    /// No answer: refused, timed out, cut, or not HTTP.
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The cluster does not know the job.
    #[error("Flink does not know job {0}")]
    JobNotFound(String),
    /// An answer, but not one Flink gives.
    #[error("{url} answered {reason}")]
    Unexpected { url: String, reason: String },
}

/// A job as `/jobs/<id>` details it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlinkJobDetails {
    pub state: JobStatus,
    /// Each status with the last time the job reached it (unix ms, `0`
    /// for never).
    pub timestamps: BTreeMap<JobStatus, i64>,
}

/// One Flink cluster's REST endpoint.
#[derive(Clone)]
pub struct FlinkClient {
    http: Arc<EngineHttp>,
    base: EngineUrl,
}

/// What every engine is reached with: one HTTP client, the hosts engine
/// URLs may name, and the budget of answer bytes held at once.
pub struct EngineHttp {
    client: reqwest::Client,
    allowed: AllowedHosts,
    held: Arc<Semaphore>,
}

impl EngineHttp {
    pub fn new(allowed: AllowedHosts) -> Self {
        Self::with_budget(allowed, MAX_HELD_BYTES)
    }

    /// With room for `held_bytes` of answers at once.
    fn with_budget(allowed: AllowedHosts, held_bytes: usize) -> Self {
        Self {
            client: reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(REQUEST_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("ctasd/", env!("CARGO_PKG_VERSION")))
                .build()
                .expect("an HTTP client with these settings builds"),
            allowed,
            held: Arc::new(Semaphore::new(held_bytes)),
        }
    }

    /// Whether engine URLs may name `url`'s host.
    pub fn allows(&self, url: &EngineUrl) -> bool {
        self.allowed.allows(url)
    }

    /// Room for `bytes` more of an answer, added to `held`; `false` when
    /// the answers held now leave none.
    fn hold(&self, held: &mut Option<OwnedSemaphorePermit>, bytes: usize) -> bool {
        let Ok(bytes) = u32::try_from(bytes) else {
            return false;
        };
        match self.held.clone().try_acquire_many_owned(bytes) {
            Ok(more) => {
                match held {
                    Some(permit) => permit.merge(more),
                    None => *held = Some(more),
                }
                true
            }
            Err(_) => false,
        }
    }
}

#[derive(Deserialize)]
struct Config {
    #[serde(rename = "flink-version")]
    flink_version: String,
}

#[derive(Deserialize)]
struct Details {
    state: String,
    #[serde(default)]
    timestamps: BTreeMap<String, i64>,
}

#[derive(Deserialize)]
struct Exceptions {
    #[serde(rename = "exceptionHistory")]
    history: Option<History>,
}

#[derive(Deserialize)]
struct History {
    entries: Vec<HistoryEntry>,
}

#[derive(Deserialize)]
struct HistoryEntry {
    #[serde(default)]
    stacktrace: String,
    #[serde(rename = "exceptionName", default)]
    exception_name: String,
    #[serde(default)]
    timestamp: i64,
}

impl FlinkClient {
    pub fn new(http: Arc<EngineHttp>, base: EngineUrl) -> Self {
        Self { http, base }
    }

    /// The cluster's version, from `/config`: the check at registration.
    pub async fn version(&self) -> Result<String, FlinkError> {
        let config: Config = self.get_json("/config", None).await?;
        Ok(quoted(&config.flink_version))
    }

    /// Reads the cluster's listing into `reader`: the entries of the jobs
    /// it watches, each as soon as it has arrived. The listing is read as it
    /// streams in and only watched jobs' entries are decoded (see
    /// [`super::listing`]), however many jobs it lists.
    pub async fn jobs(&self, reader: &mut impl ListingReader) -> Result<(), FlinkError> {
        let url = self.base.join("/jobs/overview");
        let unexpected = |reason: String| FlinkError::Unexpected {
            url: url.clone(),
            reason,
        };
        let mut response = self.send(&url).await?;
        if !response.status().is_success() {
            return Err(unexpected(format!("HTTP {}", response.status())));
        }
        let mut listing = ListingDecoder::default();
        let (mut read, mut read_at_turn) = (0, 0);
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| FlinkError::Unreachable {
                url: url.clone(),
                reason: describe(&e),
            })?
        {
            read += chunk.len();
            if read > MAX_LISTING_BYTES {
                return Err(unexpected(format!(
                    "a job listing of more than {} MiB, which ctasd does not read",
                    MAX_LISTING_BYTES >> 20
                )));
            }
            listing
                .feed(&chunk, reader)
                .map_err(|e| unexpected(unreadable(e)))?;
            // A long listing arrives faster than it is read: without a
            // turn given now and then, what runs beside the read in the
            // same task (the examination of the jobs it lists as ended)
            // would wait for all of it.
            if read - read_at_turn >= READ_BETWEEN_TURNS {
                read_at_turn = read;
                tokio::task::yield_now().await;
            }
        }
        listing.finish().map_err(|e| unexpected(unreadable(e)))
    }

    /// One job's state and the times it reached each status.
    pub async fn job(&self, id: &str) -> Result<FlinkJobDetails, FlinkError> {
        let details: Details = self.get_json(&format!("/jobs/{id}"), Some(id)).await?;
        let state = details.state.parse().map_err(|_| FlinkError::Unexpected {
            url: self.base.join(&format!("/jobs/{id}")),
            reason: format!("an unknown state '{}'", quoted(&details.state)),
        })?;
        let timestamps = details
            .timestamps
            .into_iter()
            .filter_map(|(status, at)| Some((status.parse().ok()?, at)))
            .collect();
        Ok(FlinkJobDetails { state, timestamps })
    }

    /// The root cause of the job's latest failure, if it has one.
    pub async fn failure(&self, id: &str) -> Result<Option<String>, FlinkError> {
        let exceptions: Exceptions = self
            .get_json(&format!("/jobs/{id}/exceptions"), Some(id))
            .await?;
        let latest = exceptions
            .history
            .map(|h| h.entries)
            .unwrap_or_default()
            .into_iter()
            .max_by_key(|entry| entry.timestamp);
        Ok(latest.map(|entry| {
            if entry.stacktrace.trim().is_empty() {
                entry.exception_name
            } else {
                root_cause(&entry.stacktrace)
            }
        }))
    }

    /// `GET path` as JSON. `job`: the job the path is about, so that
    /// Flink's "not found" (404, or 500 naming `FlinkJobNotFoundException`)
    /// reads as [`FlinkError::JobNotFound`].
    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        job: Option<&str>,
    ) -> Result<T, FlinkError> {
        let url = self.base.join(path);
        let unreachable = |reason: String| FlinkError::Unreachable {
            url: url.clone(),
            reason,
        };
        let mut response = self.send(&url).await?;
        let status = response.status();
        let mut body = Vec::new();
        // Released when the answer has been read into what it says.
        let mut held = None;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| unreachable(describe(&e)))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(FlinkError::Unexpected {
                    url,
                    reason: format!("more than {} MiB", MAX_ANSWER_BYTES >> 20),
                });
            }
            if !self.http.hold(&mut held, chunk.len()) {
                return Err(unreachable(format!(
                    "its answer was not read: the answers of engines held right now \
                     reach {} MiB; it is read again on the next poll",
                    MAX_HELD_BYTES >> 20
                )));
            }
            body.extend_from_slice(&chunk);
        }
        if let Some(job) = job
            && (status == reqwest::StatusCode::NOT_FOUND
                || status.is_server_error()
                    && String::from_utf8_lossy(&body).contains("FlinkJobNotFoundException"))
        {
            return Err(FlinkError::JobNotFound(job.to_owned()));
        }
        if !status.is_success() {
            return Err(FlinkError::Unexpected {
                url,
                reason: format!("HTTP {status}"),
            });
        }
        serde_json::from_slice(&body).map_err(|e| FlinkError::Unexpected {
            url,
            reason: not_flinks_json(&e),
        })
    }

    /// Sends `GET url` (a URL of this engine), following no redirect.
    async fn send(&self, url: &str) -> Result<reqwest::Response, FlinkError> {
        let unreachable = |reason: String| FlinkError::Unreachable {
            url: url.to_owned(),
            reason,
        };
        if !self.http.allows(&self.base) {
            return Err(unreachable(
                "its host is not one --engine-allowed-hosts allows".into(),
            ));
        }
        self.http
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| unreachable(describe(&e)))
    }
}

/// Why a job listing could not be read, in words.
fn unreadable(error: UnreadableListing) -> String {
    match error {
        UnreadableListing::Cut(error) => not_a_listing(error),
        UnreadableListing::Entry(error) => not_flinks_json(&error),
    }
}

/// Where a job listing stopped being Flink's.
fn not_a_listing(error: CutError) -> String {
    format!(
        "something that is not Flink's JSON ({} at line {} column {})",
        error.what, error.line, error.column
    )
}

/// Where an answer stopped being Flink's JSON. serde's own message quotes
/// the value it met: an internal service's answer is never quoted back.
fn not_flinks_json(error: &serde_json::Error) -> String {
    let what = match error.classify() {
        serde_json::error::Category::Data => "a value of another type or shape",
        serde_json::error::Category::Syntax => "text that is not JSON",
        serde_json::error::Category::Eof => "JSON cut short",
        serde_json::error::Category::Io => "an unreadable body",
    };
    format!(
        "something that is not Flink's JSON ({what} at line {} column {})",
        error.line(),
        error.column()
    )
}

/// A transport error in a few words, without the URL (the caller has it).
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "no answer in time".to_owned()
    } else if error.is_connect() {
        "connection refused or unroutable".to_owned()
    } else {
        let mut source: Option<&dyn std::error::Error> = Some(error);
        let mut last = error.to_string();
        while let Some(inner) = source {
            last = inner.to_string();
            source = inner.source();
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_held_within_the_budget_and_give_their_room_back() {
        let http = EngineHttp::with_budget(AllowedHosts::default(), 10);
        let mut first = None;
        assert!(http.hold(&mut first, 4));
        assert!(http.hold(&mut first, 2));
        let mut second = None;
        assert!(!http.hold(&mut second, 5), "6 of 10 held");
        assert!(http.hold(&mut second, 4));
        drop(first);
        assert!(http.hold(&mut second, 6), "the first answer's room is back");
    }
}
