//! Every text from outside is bounded and escaped before it is stored,
//! served or logged: an engine's unknown states, versions and malformed
//! answers; a client's `X-Request-Id`; a request path's controls.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{FlinkRun, StandInFlink, TestApp};

const FLINK_ID: &str = "0b7d3f5a9c1e4b6d8f0a2c4e6b8d0f1a";

async fn register(app: &TestApp, flink: &StandInFlink) -> Value {
    let reply = app
        .post(
            "/v1/engines",
            &json!({"name": "flink", "url": flink.url, "poll_interval_ms": 100}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

/// Reads `path` until `done` holds for its answer, or fails after ten seconds.
async fn wait_for(app: &TestApp, path: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = app.get(path).await.text;
        if done(&text) {
            return text;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_engines_unknown_state_reaches_a_jobs_note_cut_and_escaped() {
    let app = TestApp::spawn().await;
    let flink = StandInFlink::start().await;
    register(&app, &flink).await;
    let warehouse = app.scratch("warehouse");
    app.register("c", json!({"type": "filesystem", "path": warehouse}))
        .await;
    let huge_state = format!("\u{1b}[31m{}", "X".repeat(2 << 20));
    let now = chrono::Utc::now().timestamp_millis();
    flink.set_run(
        FLINK_ID,
        FlinkRun {
            details_state: Some(huge_state),
            ..FlinkRun::finished_at(now)
        },
    );
    let job = app
        .submit(
            &json!({"name": "j", "mode": "batch", "engine": "flink", "engine_job_id": FLINK_ID,
            "hooks": [{"kind": "create_table_as", "target": {"catalog": "c", "table": "t"},
                       "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]}),
        )
        .await;

    let page = wait_for(&app, "/v1/jobs", |text| text.contains("unknown state")).await;

    assert!(
        page.len() < 16 * 1024,
        "a page of one job is {} bytes",
        page.len()
    );
    let listed: Value = serde_json::from_str(&page).unwrap();
    let note = listed["jobs"][0]["watch"]["note"].as_str().unwrap();
    assert!(note.chars().count() <= 4096, "{}", note.len());
    assert!(note.contains("\\u{1b}[31mXXX"), "{note}");
    assert!(!note.contains('\u{1b}'), "{note}");
    assert_eq!(listed["jobs"][0]["id"], job.id.as_str());
}

#[tokio::test]
async fn an_engines_huge_version_is_stored_cut() {
    let app = TestApp::spawn().await;
    let flink = StandInFlink::start().await;
    flink.with(|answers| answers.version = format!("2.3.0-{}", "9".repeat(4 << 20)));

    register(&app, &flink).await;

    let engines = app.get("/v1/engines").await;
    assert!(
        engines.text.len() < 16 * 1024,
        "{} bytes",
        engines.text.len()
    );
    let version = engines.body["engines"][0]["reachability"]["engine_version"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", engines.text));
    assert!(version.starts_with("2.3.0-999"), "{version}");
    assert!(version.chars().count() <= 64, "{version}");
}

#[tokio::test]
async fn a_malformed_engine_answer_is_never_quoted_into_last_error() {
    let app = TestApp::spawn().await;
    let flink = StandInFlink::start().await;
    register(&app, &flink).await;
    flink.with(|answers| {
        answers.overview = Some(json!({"jobs": "internal-secret-4242 from another service"}))
    });

    let engines = wait_for(&app, "/v1/engines", |text| {
        text.contains("not Flink's JSON")
    })
    .await;

    assert!(!engines.contains("internal-secret-4242"), "{engines}");
    assert!(
        engines.contains("a value of another type or shape at line 1"),
        "{engines}"
    );
}

/// `ctasd serve` with text logs; its address and its log so far.
struct TextLogServer {
    child: std::process::Child,
    addr: String,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl TextLogServer {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctasd"))
            .args(["serve", "--listen", "127.0.0.1:0", "--log-format", "text"])
            .arg("--data-dir")
            .arg(dir.path())
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("ctasd ready")
                    && let Some(rest) = line.split("addr=").nth(1)
                {
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = addr_tx.send(addr.to_owned());
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("server announces its address");
        Self {
            child,
            addr,
            log,
            _dir: dir,
        }
    }

    /// Sends `head` (request line and headers, raw bytes) and answers the
    /// response's head.
    fn send(&self, head: &[u8]) -> String {
        let mut stream = std::net::TcpStream::connect(&self.addr).unwrap();
        stream.write_all(head).unwrap();
        stream.write_all(b"Connection: close\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn log_after_a_moment(&self) -> String {
        std::thread::sleep(Duration::from_millis(300));
        self.log.lock().unwrap().clone()
    }
}

impl Drop for TextLogServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_forged_request_id_and_raw_controls_in_a_path_never_reach_the_text_log() {
    let server = TextLogServer::start();

    let forged = server.send(
        b"GET /v1/catalogs HTTP/1.1\r\nHost: 127.0.0.1\r\n\
          X-Request-Id: r1 path=/v1/catalogs/pg method=DELETE\r\n",
    );
    let kept = server
        .send(b"GET /v1/catalogs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-Id: trace-42.a:b_c\r\n");
    let controls =
        server.send(b"GET /v1/catalogs/a\xc2\x9bb\xe2\x80\xa8c HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    let log = server.log_after_a_moment();

    assert!(forged.starts_with("HTTP/1.1 200"), "{forged}");
    assert!(!forged.contains("path=/v1/catalogs/pg"), "{forged}");
    assert!(
        kept.to_ascii_lowercase()
            .contains("x-request-id: trace-42.a:b_c"),
        "{kept}"
    );
    assert!(
        !log.contains("path=/v1/catalogs/pg"),
        "no forged field in the log:\n{log}"
    );
    assert!(log.contains("request_id=trace-42.a:b_c"), "{log}");
    assert!(controls.starts_with("HTTP/1.1 4"), "{controls}");
    assert!(
        !log.contains('\u{9b}') && !log.contains('\u{2028}'),
        "no raw C1 control or line separator in the log:\n{log}"
    );
    assert!(
        log.contains("\\u{9b}"),
        "the control is shown escaped:\n{log}"
    );
}
