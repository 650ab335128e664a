//! `/v1/engines` without a Flink cluster: what is refused at registration
//! (a URL that is not one, a host off the allowed list, and in one neutral
//! refusal whatever answers instead of Flink: a closed port, a database, an
//! HTTP server), and jobs that name an engine that does not exist. The engines
//! that do answer are exercised end to end in `flink.rs`.

use serde_json::json;

use crate::helpers::TestApp;

fn engine(url: &str) -> serde_json::Value {
    json!({"name": "flink", "url": url})
}

#[tokio::test]
async fn a_url_that_is_not_a_plain_http_endpoint_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    for url in [
        "127.0.0.1:8081",
        "ftp://h",
        "http://user:secret@h:8081",
        "http://h:8081/?x=1",
        "http://h:99999",
    ] {
        let reply = app.post("/v1/engines", &engine(url)).await;
        reply.assert_problem(422, "ENGINE_SETTING_INVALID");
        assert_eq!(
            reply.body["errors"][0]["field"], "url",
            "{url}: {}",
            reply.text
        );
        assert!(!reply.text.contains("secret"), "{}", reply.text);
    }
    let https = app.post("/v1/engines", &engine("https://h:8081")).await;
    https.assert_problem(422, "ENGINE_SETTING_INVALID");
    assert!(https.detail().contains("http://"), "{}", https.detail());
    let fast = json!({"name": "flink", "url": "http://127.0.0.1:1", "poll_interval_ms": 1});
    let reply = app.post("/v1/engines", &fast).await;
    reply.assert_problem(422, "ENGINE_SETTING_INVALID");
    assert_eq!(reply.body["errors"][0]["field"], "poll_interval_ms");
    let bad_name = app
        .post(
            "/v1/engines",
            &json!({"name": "1x", "url": "http://127.0.0.1:1"}),
        )
        .await;
    bad_name.assert_problem(422, "NAME_INVALID");
    assert_eq!(app.get("/v1/engines").await.body["engines"], json!([]));
}

#[tokio::test]
async fn whatever_answers_instead_of_flink_gets_one_neutral_refusal_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    // A port nobody listens on, an HTTP server that is not Flink (ctasd
    // itself), and the database servers on ctasd's network.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut urls = vec![format!("http://127.0.0.1:{port}"), app.url("")];
    for (service, default_port) in [
        (crate::helpers::postgres_url(), 5432),
        (crate::helpers::mysql_url(), 3306),
    ] {
        if service.is_some() {
            urls.push(format!("http://127.0.0.1:{default_port}"));
        }
    }
    let mut details = Vec::new();
    for url in &urls {
        let reply = app.post("/v1/engines", &engine(url)).await;
        reply.assert_problem(422, "ENGINE_UNREACHABLE");
        details.push(reply.detail().replace(url.trim_end_matches('/'), "<url>"));
    }
    assert!(
        details[0].contains("is not a Flink REST endpoint"),
        "{}",
        details[0]
    );
    assert!(
        details.iter().all(|d| *d == details[0]),
        "one refusal for all: {details:#?}"
    );

    app.get("/v1/engines/flink")
        .await
        .assert_problem(404, "ENGINE_NOT_FOUND");
    app.delete("/v1/engines/flink")
        .await
        .assert_problem(404, "ENGINE_NOT_FOUND");
    assert_eq!(
        app.delete("/v1/engines/flink?if_exists=true").await.status,
        204
    );
}

#[tokio::test]
async fn a_job_on_an_engine_that_does_not_exist_is_refused_and_nothing_is_prepared() {
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("warehouse");
    std::fs::create_dir_all(warehouse.join("db")).unwrap();
    let catalog = json!({"type": "filesystem", "path": warehouse.display().to_string()});
    assert_eq!(app.register("fs", catalog).await.status, 201);
    let job = |engine: &str| {
        json!({"name": "j", "mode": "batch", "engine": engine,
               "hooks": [{"kind": "create_table_as", "target": {"catalog": "fs", "database": "db", "table": "t"},
                          "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]})
    };
    let missing = app.post("/v1/jobs", &job("nowhere")).await;
    missing.assert_problem(422, "ENGINE_NOT_FOUND");
    assert_eq!(missing.body["errors"][0]["field"], "engine");
    app.post("/v1/jobs", &job("no such"))
        .await
        .assert_problem(422, "NAME_INVALID");
    let entries: Vec<_> = std::fs::read_dir(warehouse.join("db")).unwrap().collect();
    assert!(entries.is_empty(), "no staging was made: {entries:?}");
    assert_eq!(app.get("/v1/jobs").await.body["jobs"], json!([]));
}

#[tokio::test]
async fn an_engine_host_off_the_allowed_list_is_refused_before_any_connection() {
    let app = TestApp::spawn_with_settings(|s| {
        s.engine_allowed_hosts = vec!["flink.example.com".into(), "10.0.0.0/8".into()];
    })
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());

    let refused = app.post("/v1/engines", &engine(&url)).await;
    let history = app
        .post(
            "/v1/engines",
            &json!({"name": "flink", "url": "http://10.1.2.3:8081", "history_url": url}),
        )
        .await;

    refused.assert_problem(422, "ENGINE_SETTING_INVALID");
    assert_eq!(
        refused.body["errors"][0]["field"], "url",
        "{}",
        refused.text
    );
    assert!(
        refused.detail().contains("--engine-allowed-hosts"),
        "{}",
        refused.text
    );
    history.assert_problem(422, "ENGINE_SETTING_INVALID");
    assert_eq!(
        history.body["errors"][0]["field"], "history_url",
        "{}",
        history.text
    );
    let accepted =
        tokio::time::timeout(std::time::Duration::from_millis(300), listener.accept()).await;
    assert!(accepted.is_err(), "no connection was made to the host");
    assert_eq!(app.get("/v1/engines").await.body["engines"], json!([]));
}
