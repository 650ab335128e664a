//! Start-up while the store cannot be reached yet: the port is bound and
//! answers at once (alive, not ready), and the store is tried again with
//! backoff, each attempt logged, until it answers. A restart of ctasd and
//! of its database together (a host reboot, a deploy) then settles by
//! itself instead of ending in a crash loop. What no wait can fix (the
//! URL's scheme, a SQLite file another process holds, a damaged schema)
//! still ends the start.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::watch;
use tower::ServiceExt;

use crate::api::error::{ApiError, ProblemCode};
use crate::config::StoreSettings;
use crate::store::{self, Keyring, OpenStoreError, Store, StoreError};

/// The first wait before the store is tried again; it doubles up to
/// [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(500);
const LONGEST_WAIT: Duration = Duration::from_secs(30);

/// A router that hands each request to whichever app is current: the
/// waiting one until the store is reached, then the service itself. Each
/// request looks again, so a keep-alive connection opened while waiting is
/// served by the service once it is there.
pub fn switchable(current: watch::Receiver<Router>) -> Router {
    Router::new().fallback(move |request: Request| {
        let app = current.borrow().clone();
        async move { app.oneshot(request).await.into_response() }
    })
}

/// Why the store is not reached yet, as `/readyz` says it while waiting.
#[derive(Clone, Default)]
pub struct Waiting(Arc<Mutex<String>>);

impl Waiting {
    fn note(&self, reason: String) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = reason;
    }

    fn reason(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// What answers while the store is not reached: `/healthz` says the
    /// process lives, everything else is `503 STORE_UNAVAILABLE` saying
    /// why, with `Retry-After`.
    pub fn router(&self) -> Router {
        let waiting = self.clone();
        Router::new()
            .route(
                "/healthz",
                get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }),
            )
            .fallback(move || {
                let reason = waiting.reason();
                async move { not_yet(&reason) }
            })
    }
}

fn not_yet(reason: &str) -> Response {
    let detail = if reason.is_empty() {
        "ctasd is starting and has not reached its store yet".to_owned()
    } else {
        format!("ctasd is starting and waits for its store: {reason}")
    };
    let mut response = ApiError::new(ProblemCode::StoreUnavailable, detail).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Whether an attempt at the store may succeed later.
enum Attempt {
    Later(String),
    Never(anyhow::Error),
}

impl From<StoreError> for Attempt {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(reason) => Attempt::Later(reason),
            other => Attempt::Never(other.into()),
        }
    }
}

impl From<OpenStoreError> for Attempt {
    fn from(error: OpenStoreError) -> Self {
        match error {
            OpenStoreError::Store(error) => error.into(),
            other => Attempt::Never(other.into()),
        }
    }
}

/// The store, connected, migrated, and with the leases of a previous run
/// released; tried until it answers, unless it never can.
pub async fn reach_store(
    settings: &StoreSettings,
    keyring: Arc<Keyring>,
    waiting: &Waiting,
) -> anyhow::Result<Arc<dyn Store>> {
    let mut wait = FIRST_WAIT;
    let mut attempt = 1u64;
    loop {
        match prepare(settings, keyring.clone()).await {
            Ok(store) => {
                if attempt > 1 {
                    tracing::info!(attempt, store = %store.describe(), "the store answers now");
                }
                return Ok(store);
            }
            Err(Attempt::Never(error)) => return Err(error),
            Err(Attempt::Later(reason)) => {
                tracing::warn!(
                    attempt,
                    retry_in_ms = wait.as_millis() as u64,
                    %reason,
                    "the store cannot be reached; alive, not ready, trying again"
                );
                waiting.note(format!("attempt {attempt} failed: {reason}"));
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(LONGEST_WAIT);
                attempt += 1;
            }
        }
    }
}

async fn prepare(
    settings: &StoreSettings,
    keyring: Arc<Keyring>,
) -> Result<Arc<dyn Store>, Attempt> {
    let store = store::connect(settings.database_url(), &settings.data_dir, keyring).await?;
    store.migrate().await?;
    let released = store.release_orphaned_leases().await?;
    if released > 0 {
        tracing::info!(
            released,
            "resuming hook actions that a previous run had started"
        );
    }
    Ok(store)
}
