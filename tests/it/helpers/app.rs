//! A ctasd server in this process, over real HTTP, and its replies read whole.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use ctasd::config::{ServeSettings, StoreSettings};
use ctasd::domain::job::JobStatus;
use ctasd::server::RunningServer;
use ctasd::store::Store;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

/// A ctasd server in this process.
pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    settings: ServeSettings,
    server: Option<RunningServer>,
    _temp: Arc<tempfile::TempDir>,
}

impl TestApp {
    /// On the embedded default: SQLite in a fresh data directory.
    pub async fn spawn() -> Self {
        Self::spawn_with(None).await
    }

    /// On the store at `database_url` (e.g. a [`TestPostgres`] URL).
    pub async fn spawn_with(database_url: Option<&str>) -> Self {
        let temp = Arc::new(tempfile::tempdir().unwrap());
        let mut store = StoreSettings::for_data_dir(temp.path().join("data"));
        store.database_url = database_url.map(|u| SecretString::from(u.to_owned()));
        let settings = ServeSettings::new("127.0.0.1:0".parse().unwrap(), store);
        Self::start(settings, temp).await
    }

    pub async fn spawn_with_settings(adjust: impl FnOnce(&mut ServeSettings)) -> Self {
        let temp = Arc::new(tempfile::tempdir().unwrap());
        let mut settings = ServeSettings::new(
            "127.0.0.1:0".parse().unwrap(),
            StoreSettings::for_data_dir(temp.path().join("data")),
        );
        adjust(&mut settings);
        Self::start(settings, temp).await
    }

    async fn start(settings: ServeSettings, temp: Arc<tempfile::TempDir>) -> Self {
        let server = ctasd::server::start(settings.clone())
            .await
            .expect("server starts");
        Self {
            addr: server.addr,
            client: reqwest::Client::new(),
            settings,
            server: Some(server),
            _temp: temp,
        }
    }

    /// This app, its client sending `token` with every request.
    pub fn authorized(mut self, token: &str) -> Self {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = format!("Bearer {token}").parse().unwrap();
        headers.insert(reqwest::header::AUTHORIZATION, value);
        self.client = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .unwrap();
        self
    }

    /// A scratch directory that lives as long as this app.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let dir = self._temp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Another server on the same store and data directory, as a second replica.
    pub async fn sibling(&self) -> Self {
        Self::start(self.settings.clone(), self._temp.clone()).await
    }

    /// Stop this server and start another on the same store and data directory.
    pub async fn restart(self) -> Self {
        self.stop_keeping_store().await.start_again().await
    }

    /// The settings this server was started with.
    pub fn settings(&self) -> &ServeSettings {
        &self.settings
    }

    /// Stop the server; its store and data directory stay.
    pub async fn stop_keeping_store(mut self) -> StoppedApp {
        self.server.take().unwrap().stop().await;
        StoppedApp {
            settings: self.settings.clone(),
            temp: self._temp.clone(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn get(&self, path: &str) -> Reply {
        Reply::from(self.client.get(self.url(path)).send().await.unwrap()).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        Reply::from(
            self.client
                .post(self.url(path))
                .json(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Reply {
        Reply::from(
            self.client
                .patch(self.url(path))
                .json(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        Reply::from(self.client.delete(self.url(path)).send().await.unwrap()).await
    }

    /// `PUT /v1/jobs/{job}/status` with `{"status": status}`.
    pub async fn put_status(&self, job: &str, status: &str) -> Reply {
        self.spawn_put_status(job, status).await.unwrap()
    }

    /// The same report on a task of its own, to run beside others.
    pub fn spawn_put_status(&self, job: &str, status: &str) -> tokio::task::JoinHandle<Reply> {
        let request = self
            .client
            .put(self.url(&format!("/v1/jobs/{job}/status")))
            .json(&json!({"status": status}));
        tokio::spawn(async move { Reply::from(request.send().await.unwrap()).await })
    }

    /// Submits `job` (a `POST /v1/jobs` body), expecting it accepted.
    pub async fn submit(&self, job: &Value) -> Submitted {
        let reply = self.post("/v1/jobs", job).await;
        assert_eq!(reply.status, 201, "submit: {}", reply.text);
        Submitted {
            id: reply.body["id"].as_str().unwrap().to_owned(),
            job: reply.body,
        }
    }

    /// Reports `status` for `job`, as an engine does.
    pub async fn report(&self, job: &str, status: JobStatus) -> Reply {
        self.put_status(job, status.as_str()).await
    }

    /// Reports each of `statuses` in turn, expecting each accepted; the
    /// last reply.
    pub async fn report_all(&self, job: &str, statuses: &[JobStatus]) -> Reply {
        let mut last = None;
        for status in statuses {
            let reply = self.report(job, *status).await;
            assert_eq!(reply.status, 200, "{status:?}: {}", reply.text);
            last = Some(reply);
        }
        last.expect("at least one status")
    }

    pub async fn register(&self, name: &str, options: Value) -> Reply {
        self.post("/v1/catalogs", &json!({"name": name, "options": options}))
            .await
    }

    /// Registers filesystem catalog `name` on a fresh warehouse (default
    /// database `db`); the warehouse.
    pub async fn filesystem_catalog(&self, name: &str) -> PathBuf {
        let warehouse = self.scratch("warehouse");
        let options = json!({"type": "filesystem", "path": warehouse, "default-database": "db"});
        let registered = self.register(name, options).await;
        assert_eq!(registered.status, 201, "{}", registered.text);
        warehouse
    }
}

/// A job the server accepted.
pub struct Submitted {
    pub id: String,
    /// The job as the submission answered it.
    pub job: Value,
}

/// A server that was stopped, with what it needs to start again.
pub struct StoppedApp {
    settings: ServeSettings,
    temp: Arc<tempfile::TempDir>,
}

impl StoppedApp {
    /// A handle on the stopped server's store (same database, same keys).
    pub async fn store(&self) -> Arc<dyn Store> {
        ctasd::server::open_store(&self.settings.store)
            .await
            .unwrap()
    }

    pub async fn start_again(self) -> TestApp {
        self.start_again_with(|_| {}).await
    }

    /// Starts it again with `adjust`ed settings (other tokens, say).
    pub async fn start_again_with(self, adjust: impl FnOnce(&mut ServeSettings)) -> TestApp {
        let mut settings = self.settings;
        adjust(&mut settings);
        settings.listen = "127.0.0.1:0".parse().unwrap();
        TestApp::start(settings, self.temp).await
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub body: Value,
}

impl Reply {
    pub async fn from(response: reqwest::Response) -> Self {
        let status = response.status();
        let headers = response.headers().clone();
        let content_type = headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Self {
            status,
            content_type,
            headers,
            text,
            body,
        }
    }

    /// Asserts a problem+json answer with this status and code.
    #[track_caller]
    pub fn assert_problem(&self, status: u16, code: &str) -> &Self {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.text
        );
        assert_eq!(
            self.content_type, "application/problem+json",
            "body: {}",
            self.text
        );
        assert_eq!(self.body["code"], code, "body: {}", self.text);
        assert_eq!(self.body["status"], status);
        assert!(
            self.body["type"]
                .as_str()
                .unwrap()
                .starts_with("urn:ctasd:problem:")
        );
        assert!(!self.body["title"].as_str().unwrap().is_empty());
        self
    }

    pub fn detail(&self) -> &str {
        self.body["detail"].as_str().unwrap_or_default()
    }
}
