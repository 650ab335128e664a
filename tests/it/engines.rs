//! `/v1/engines` without a Flink cluster: what is refused at registration
//! (a URL that is not one, a port nobody answers on, a server that is not
//! Flink), and jobs that name an engine that does not exist. The engines
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
async fn an_engine_that_does_not_answer_as_flink_is_not_stored() {
    let app = TestApp::spawn().await;
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let reply = app
        .post("/v1/engines", &engine(&format!("http://127.0.0.1:{port}")))
        .await;
    reply.assert_problem(422, "ENGINE_UNREACHABLE");
    assert!(
        reply.detail().contains("cannot reach"),
        "{}",
        reply.detail()
    );

    // An HTTP server that is not Flink: ctasd itself.
    let itself = app.post("/v1/engines", &engine(&app.url(""))).await;
    itself.assert_problem(422, "ENGINE_UNREACHABLE");
    assert!(itself.detail().contains("/config"), "{}", itself.detail());

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
