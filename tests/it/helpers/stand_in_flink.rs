//! A stand-in for a Flink cluster's REST endpoint, answering the calls the
//! watcher makes in Flink 2.3's format (`/config`, `/jobs/overview`,
//! `/jobs/<id>`, `/jobs/<id>/exceptions`), with answers a test sets: runs
//! of jobs, and hostile answers a real cluster would not give.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// One job as the stand-in lists it.
#[derive(Clone)]
pub struct FlinkRun {
    /// The state `/jobs/overview` lists.
    pub state: String,
    /// The state `/jobs/<id>` answers, when it differs.
    pub details_state: Option<String>,
    /// Each status with the last time it was reached (unix ms).
    pub timestamps: BTreeMap<String, i64>,
}

impl FlinkRun {
    /// A run that reached RUNNING at `at` and is still running.
    pub fn running_since(at: i64) -> Self {
        Self {
            state: "RUNNING".into(),
            details_state: None,
            timestamps: BTreeMap::from([
                ("INITIALIZING".into(), at - 1000),
                ("CREATED".into(), at - 900),
                ("RUNNING".into(), at),
            ]),
        }
    }

    /// A run that went from INITIALIZING to FINISHED, ending at `end`.
    pub fn finished_at(end: i64) -> Self {
        Self {
            state: "FINISHED".into(),
            details_state: None,
            timestamps: BTreeMap::from([
                ("INITIALIZING".into(), end - 3000),
                ("CREATED".into(), end - 2900),
                ("RUNNING".into(), end - 2000),
                ("FINISHED".into(), end),
            ]),
        }
    }
}

/// What the stand-in answers.
pub struct Answers {
    pub version: String,
    /// Answered whole by `/jobs/overview` instead of the runs, when set.
    pub overview: Option<Value>,
    pub runs: BTreeMap<String, FlinkRun>,
    /// Entries `/jobs/overview` lists before the runs' (JSON objects joined
    /// by commas): jobs the cluster knows that ctasd does not watch.
    pub listed_besides: String,
    /// How many times `/jobs/<id>` was asked, for any id.
    pub details_read: u64,
    /// When set, `/jobs/overview` sends the runs' entries, then nothing for
    /// this long, then the rest: a listing that is slow to arrive.
    pub listing_stalls: Option<std::time::Duration>,
}

#[derive(Clone)]
pub struct StandInFlink {
    pub url: String,
    pub answers: Arc<Mutex<Answers>>,
}

impl StandInFlink {
    pub async fn start() -> Self {
        let answers = Arc::new(Mutex::new(Answers {
            version: "2.3.0".into(),
            overview: None,
            runs: BTreeMap::new(),
            listed_besides: String::new(),
            details_read: 0,
            listing_stalls: None,
        }));
        let router = axum::Router::new()
            .route("/config", axum::routing::get(config))
            .route("/jobs/overview", axum::routing::get(overview))
            .route("/jobs/{id}", axum::routing::get(job))
            .route("/jobs/{id}/exceptions", axum::routing::get(exceptions))
            .with_state(answers.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self {
            url: format!("http://{addr}"),
            answers,
        }
    }

    pub fn set_run(&self, id: &str, run: FlinkRun) {
        self.answers.lock().unwrap().runs.insert(id.to_owned(), run);
    }

    pub fn with<T>(&self, change: impl FnOnce(&mut Answers) -> T) -> T {
        change(&mut self.answers.lock().unwrap())
    }
}

type Shared = State<Arc<Mutex<Answers>>>;

async fn config(State(answers): Shared) -> Response {
    let version = answers.lock().unwrap().version.clone();
    axum::Json(json!({"flink-version": version, "flink-revision": "stand-in"})).into_response()
}

async fn overview(State(answers): Shared) -> Response {
    let answers = answers.lock().unwrap();
    if let Some(body) = &answers.overview {
        return axum::Json(body.clone()).into_response();
    }
    let listed: Vec<Value> = answers
        .runs
        .iter()
        .map(|(id, run)| {
            let last = run.timestamps.values().copied().max().unwrap_or(0);
            let ended = matches!(run.state.as_str(), "FINISHED" | "FAILED" | "CANCELED");
            json!({"jid": id, "name": "insert-into", "state": run.state,
                   "start-time": run.timestamps.get("CREATED").copied().unwrap_or(0),
                   "end-time": if ended { last } else { -1 },
                   "last-modification": last})
        })
        .collect();
    if let Some(stall) = answers.listing_stalls {
        let runs = Value::from(listed).to_string();
        let head = format!("{{\"jobs\":{}", &runs[..runs.len() - 1]);
        let tail = futures_util::stream::once(async move {
            tokio::time::sleep(stall).await;
            Ok::<_, std::convert::Infallible>("]}".to_owned())
        });
        let body = futures_util::stream::once(std::future::ready(Ok(head))).chain(tail);
        return (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            axum::body::Body::from_stream(body),
        )
            .into_response();
    }
    if answers.listed_besides.is_empty() {
        return axum::Json(json!({"jobs": listed})).into_response();
    }
    let runs = Value::from(listed).to_string();
    let separator = if runs == "[]" { "" } else { "," };
    let body = format!(
        "{{\"jobs\":[{}{separator}{}}}",
        answers.listed_besides,
        &runs[1..]
    );
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

async fn job(State(answers): Shared, Path(id): Path<String>) -> Response {
    let mut answers = answers.lock().unwrap();
    answers.details_read += 1;
    match answers.runs.get(&id) {
        Some(run) => axum::Json(json!({"jid": id,
            "state": run.details_state.as_ref().unwrap_or(&run.state),
            "timestamps": run.timestamps}))
        .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"errors": ["Job could not be found."]})),
        )
            .into_response(),
    }
}

async fn exceptions() -> Response {
    axum::Json(json!({"exceptionHistory": {"entries": [], "truncated": false}})).into_response()
}
