//! A webhook receiver, as an integrator runs one: a real HTTP server that
//! keeps every request it got (headers and body) and answers 200, or, while
//! a test says so, 503 as a receiver that is down would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub id: String,
    pub timestamp: i64,
    pub signature: String,
    pub body: String,
    /// What the receiver answered.
    pub status: u16,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap()
    }

    /// Whether the signature verifies with `secret`, as the Standard
    /// Webhooks libraries check it: HMAC-SHA256 over `id.timestamp.body`
    /// with the base64 key after `whsec_`.
    pub fn verifies_with(&self, secret: &str) -> bool {
        let key = STANDARD
            .decode(secret.strip_prefix("whsec_").unwrap())
            .unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(format!("{}.{}.{}", self.id, self.timestamp, self.body).as_bytes());
        let expected = STANDARD.encode(mac.finalize().into_bytes());
        self.signature
            .split(' ')
            .any(|s| s.strip_prefix("v1,") == Some(expected.as_str()))
    }
}

#[derive(Default)]
struct Inbox {
    received: Mutex<Vec<Received>>,
    down: AtomicBool,
}

pub struct Receiver {
    pub url: String,
    inbox: Arc<Inbox>,
}

impl Receiver {
    pub async fn start() -> Self {
        let inbox = Arc::new(Inbox::default());
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(inbox.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, inbox }
    }

    /// While down, every request is answered 503.
    pub fn set_down(&self, down: bool) {
        self.inbox.down.store(down, Ordering::SeqCst);
    }

    /// Every request so far, in the order they came.
    pub fn requests(&self) -> Vec<Received> {
        self.inbox.received.lock().unwrap().clone()
    }

    /// The events taken (answered 200), first copy of each id only, in
    /// the order they were taken: what a receiver that dedupes keeps.
    pub fn taken(&self) -> Vec<Received> {
        let mut seen = std::collections::HashSet::new();
        self.requests()
            .into_iter()
            .filter(|r| r.status == 200 && seen.insert(r.id.clone()))
            .collect()
    }

    /// Waits up to `timeout` until `taken()` holds `count` events.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let taken = self.taken();
            if taken.len() >= count || tokio::time::Instant::now() >= deadline {
                return taken;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn receive(State(inbox): State<Arc<Inbox>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let status = match inbox.down.load(Ordering::SeqCst) {
        true => StatusCode::SERVICE_UNAVAILABLE,
        false => StatusCode::OK,
    };
    inbox.received.lock().unwrap().push(Received {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp").parse().unwrap_or(0),
        signature: header("webhook-signature"),
        body: String::from_utf8_lossy(&body).into_owned(),
        status: status.as_u16(),
    });
    status
}
