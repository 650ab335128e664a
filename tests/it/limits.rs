//! Bounded resources, seen from a client's socket: connections beyond the cap
//! are answered 503, clients that never finish their headers or stay silent
//! are cut off, list pages stop growing at a byte budget, and a server
//! without tokens answers only requests addressed to loopback.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::TestApp;

/// Reads until the server closes the connection, or `limit` passes; how
/// long it took, or `None` if it stayed open.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + limit).into(), stream.read(&mut buffer)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn half_sent_headers_and_idle_connections_are_closed_after_the_header_timeout() {
    let app = TestApp::spawn_with_settings(|s| s.header_read_timeout_secs = 1).await;
    let mut half = TcpStream::connect(app.addr).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    let mut silent = TcpStream::connect(app.addr).await.unwrap();

    let half_closed = closed_within(&mut half, Duration::from_secs(10)).await;
    let silent_closed = closed_within(&mut silent, Duration::from_secs(10)).await;

    assert!(half_closed.is_some(), "a half-sent request is cut off");
    assert!(silent_closed.is_some(), "a silent connection is cut off");
    assert_eq!(app.get("/healthz").await.status, 200);
}

#[tokio::test]
async fn a_connection_silent_in_the_middle_of_its_body_is_closed_after_the_idle_timeout() {
    let app = TestApp::spawn_with_settings(|s| {
        s.idle_timeout_secs = 1;
        s.request_timeout_secs = 30;
    })
    .await;
    let mut stream = TcpStream::connect(app.addr).await.unwrap();
    stream
        .write_all(
            b"POST /v1/catalogs HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{\"name\":",
        )
        .await
        .unwrap();

    let closed = closed_within(&mut stream, Duration::from_secs(10)).await;

    assert!(
        closed.is_some_and(|t| t < Duration::from_secs(10)),
        "closed after {closed:?}"
    );
}

#[tokio::test]
async fn connections_beyond_the_cap_are_answered_503_and_service_resumes() {
    let app = TestApp::spawn_with_settings(|s| s.max_connections = 8).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(app.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    let mut extra = TcpStream::connect(app.addr).await.unwrap();
    extra
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), extra.read_to_string(&mut answer)).await;

    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["code"], "TOO_MANY_CONNECTIONS");
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let reply = app.client.get(app.url("/healthz")).send().await;
        if reply.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "service resumes once the held connections close"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends one request on `stream` and reads its answer's head and body
/// (`content-length` bytes), leaving the connection open.
async fn one_request(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer within seconds")
            .unwrap();
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&answer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|l| l.trim().parse().ok())
                .unwrap_or(0);
            if body.len() >= length {
                break;
            }
        }
    }
    String::from_utf8(answer).unwrap()
}

#[tokio::test]
async fn at_the_cap_the_keep_alive_connection_idle_longest_makes_room_for_a_new_client() {
    let app = TestApp::spawn_with_settings(|s| s.max_connections = 8).await;
    let mut idle = Vec::new();
    for _ in 0..8 {
        let mut stream = TcpStream::connect(app.addr).await.unwrap();
        assert!(one_request(&mut stream).await.starts_with("HTTP/1.1 200"));
        idle.push(stream);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // Every place is held by an idle keep-alive connection: newcomers are
    // served all the same, each in the place of the one idle longest.
    let mut newcomers = Vec::new();
    for newcomer in 0..3 {
        let mut stream = TcpStream::connect(app.addr).await.unwrap();
        let answer = one_request(&mut stream).await;
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "newcomer {newcomer}: {answer}"
        );
        newcomers.push(stream);
    }
    let mut closed = Vec::new();
    for (n, stream) in idle.iter_mut().enumerate() {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(200), stream.read(&mut byte)).await;
        if matches!(read, Ok(Ok(0))) {
            closed.push(n);
        }
    }
    assert_eq!(
        closed,
        [0, 1, 2],
        "the three idle longest were closed, the others kept"
    );
}

#[tokio::test]
async fn a_page_of_large_jobs_ends_at_the_byte_budget_and_its_tokens_reach_every_job() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let columns: Vec<Value> = (0..100)
        .map(|i| json!({"name": format!("column_number_{i}"), "type": "DECIMAL(12, 2)"}))
        .collect();
    let mut submitted = Vec::new();
    for job in 0..12 {
        let hooks: Vec<Value> = (0..64)
            .map(|hook| {
                json!({"kind": "create_table_as",
                "target": {"catalog": "c", "table": format!("t{job}_{hook}")},
                "table": {"columns": columns}})
            })
            .collect();
        let reply = app
            .post(
                "/v1/jobs",
                &json!({"name": "wide", "mode": "batch", "hooks": hooks}),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        submitted.push(reply.body["id"].as_str().unwrap().to_owned());
    }

    let mut seen = Vec::new();
    let mut pages = 0;
    let mut token: Option<String> = None;
    loop {
        let path = match &token {
            Some(t) => format!("/v1/jobs?page_size=100&page_token={t}"),
            None => "/v1/jobs?page_size=100".to_owned(),
        };
        let page = app.get(&path).await;
        assert_eq!(page.status, 200);
        assert!(
            page.text.len() < 8 * 1024 * 1024,
            "a page is {} bytes",
            page.text.len()
        );
        pages += 1;
        for job in page.body["jobs"].as_array().unwrap() {
            seen.push(job["id"].as_str().unwrap().to_owned());
        }
        match page.body["next_page_token"].as_str() {
            Some(next) => token = Some(next.to_owned()),
            None => break,
        }
    }

    submitted.reverse();
    assert_eq!(seen, submitted, "every job once, newest first");
    assert!(pages > 1, "the byte budget ended the first page early");
}

#[tokio::test]
async fn without_tokens_requests_addressed_to_other_hosts_or_from_other_pages_are_refused() {
    let app = TestApp::spawn().await;
    let request = |host: &str, origin: Option<&str>| {
        let mut request = app
            .client
            .get(app.url("/v1/catalogs"))
            .header("host", host.to_owned());
        if let Some(origin) = origin {
            request = request.header("origin", origin.to_owned());
        }
        request
    };

    let rebound =
        crate::helpers::Reply::from(request("attacker.example.com", None).send().await.unwrap())
            .await;
    let cross_site = crate::helpers::Reply::from(
        request("127.0.0.1", Some("http://attacker.example.com"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let local = request(
        &format!("localhost:{}", app.addr.port()),
        Some("http://localhost:3000"),
    )
    .send()
    .await
    .unwrap();

    rebound.assert_problem(403, "HOST_NOT_ALLOWED");
    cross_site.assert_problem(403, "HOST_NOT_ALLOWED");
    assert_eq!(local.status(), 200);
    // A sandboxed frame's page is a page like any other.
    let sandboxed =
        crate::helpers::Reply::from(request("127.0.0.1", Some("null")).send().await.unwrap()).await;
    sandboxed.assert_problem(403, "HOST_NOT_ALLOWED");
}

#[tokio::test]
async fn a_kept_answer_is_never_replayed_to_a_foreign_host() {
    let app = TestApp::spawn().await;
    let register = |host: &str| {
        app.client
            .post(app.url("/v1/catalogs"))
            .header("host", host.to_owned())
            .header("idempotency-key", "register-mem-1")
            .json(&serde_json::json!({"name": "mem", "options": {"type": "generic_in_memory"}}))
    };
    let first = register("127.0.0.1").send().await.unwrap();
    assert_eq!(first.status(), 201);

    let replayed =
        crate::helpers::Reply::from(register("attacker.example.com").send().await.unwrap()).await;

    replayed.assert_problem(403, "HOST_NOT_ALLOWED");
    assert!(
        !replayed.text.contains("generic_in_memory"),
        "{}",
        replayed.text
    );
}

#[tokio::test]
async fn with_tokens_any_host_is_served_to_a_valid_token() {
    let (token, line) = ctasd::api::auth::generate("t", ctasd::api::auth::Role::Reader);
    let app = TestApp::spawn_with_settings(|s| {
        s.tokens = Some(secrecy::SecretString::from(line));
    })
    .await;
    use secrecy::ExposeSecret;

    let reply = app
        .client
        .get(app.url("/v1/catalogs"))
        .header("host", "ctasd.internal.example")
        .bearer_auth(token.expose_secret())
        .send()
        .await
        .unwrap();

    assert_eq!(reply.status(), 200);
}
