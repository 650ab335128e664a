//! Every kind of bad request gets problem+json that names the problem.

use serde_json::json;

use crate::helpers::{Reply, TestApp};

async fn raw_post(
    app: &TestApp,
    content_type: Option<&str>,
    body: impl Into<reqwest::Body>,
) -> Reply {
    let mut request = app.client.post(app.url("/v1/catalogs")).body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    Reply::from(request.send().await.unwrap()).await
}

#[tokio::test]
async fn malformed_json_is_a_400_that_says_where() {
    let app = TestApp::spawn().await;
    let reply = raw_post(&app, Some("application/json"), "{\"name\": ").await;
    reply.assert_problem(400, "BODY_MALFORMED");
    assert!(
        reply.detail().contains("line 1 column"),
        "{}",
        reply.detail()
    );
}

#[tokio::test]
async fn a_missing_or_wrong_content_type_is_a_415() {
    let app = TestApp::spawn().await;
    raw_post(
        &app,
        None,
        r#"{"name":"a","options":{"type":"generic_in_memory"}}"#,
    )
    .await
    .assert_problem(415, "CONTENT_TYPE_UNSUPPORTED");
    raw_post(
        &app,
        Some("text/plain"),
        r#"{"name":"a","options":{"type":"generic_in_memory"}}"#,
    )
    .await
    .assert_problem(415, "CONTENT_TYPE_UNSUPPORTED");
}

#[tokio::test]
async fn wrong_types_unknown_and_missing_fields_are_422_naming_the_field() {
    let app = TestApp::spawn().await;
    let cases = [
        (
            json!({"name": "a", "options": {"type": 1}}),
            "options.type",
            "invalid type: integer `1`",
        ),
        (
            json!({"name": 7, "options": {}}),
            "name",
            "invalid type: integer `7`",
        ),
        (
            json!({"name": "a", "options": {}, "colour": "blue"}),
            "colour",
            "unknown field `colour`",
        ),
        (
            json!({"options": {"type": "generic_in_memory"}}),
            "",
            "missing field `name`",
        ),
        (
            json!(42),
            "",
            "invalid type: integer `42`, expected struct RegisterCatalog",
        ),
    ];
    for (body, field, words) in cases {
        let reply = app.post("/v1/catalogs", &body).await;
        reply.assert_problem(422, "BODY_INVALID");
        assert!(
            reply.detail().contains(words),
            "{} should contain {words}",
            reply.detail()
        );
        if !field.is_empty() {
            assert_eq!(reply.body["errors"][0]["field"], field, "{}", reply.text);
        }
    }
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413() {
    let app = TestApp::spawn_with_settings(|s| s.max_body_bytes = 4096).await;
    let big = json!({"name": "a", "options": {"type": "generic_in_memory", "x": "y".repeat(8192)}});
    let reply = raw_post(&app, Some("application/json"), big.to_string()).await;
    reply.assert_problem(413, "BODY_TOO_LARGE");
}

#[tokio::test]
async fn headers_over_the_limit_are_a_431_problem_and_smaller_ones_pass() {
    let app = TestApp::spawn_with_settings(|s| s.max_header_bytes = 8 * 1024).await;
    let send = |size: usize| {
        app.client
            .get(app.url("/v1/catalogs"))
            .header("x-padding", "p".repeat(size))
            .send()
    };

    let over = Reply::from(send(9 * 1024).await.unwrap()).await;
    let under = Reply::from(send(4 * 1024).await.unwrap()).await;

    over.assert_problem(431, "HEADERS_TOO_LARGE");
    assert!(over.detail().contains("8192 bytes"), "{}", over.text);
    assert_eq!(under.status, 200, "{}", under.text);
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems_too() {
    let app = TestApp::spawn().await;
    app.get("/v2/nothing")
        .await
        .assert_problem(404, "ROUTE_NOT_FOUND");
    let reply = Reply::from(
        app.client
            .put(app.url("/v1/catalogs"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    reply.assert_problem(405, "METHOD_NOT_ALLOWED");
}

#[tokio::test]
async fn the_mask_is_refused_as_an_option_value_on_register_and_alter() {
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("w");
    let reply = app
        .register(
            "fs",
            json!({"type": "filesystem", "path": warehouse, "password": "******"}),
        )
        .await;
    reply.assert_problem(422, "OPTIONS_INVALID");
    assert_eq!(reply.body["errors"][0]["field"], "options.password");

    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    app.patch(
        "/v1/catalogs/mem",
        &json!({"set": {"default-database": "******"}}),
    )
    .await
    .assert_problem(422, "OPTIONS_INVALID");
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = TestApp::spawn().await;
    let ok = app.get("/healthz").await;
    let problem = app.get("/nowhere").await;
    assert!(!ok.headers["x-request-id"].is_empty());
    assert!(!problem.headers["x-request-id"].is_empty());
    let echoed = app
        .client
        .get(app.url("/healthz"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "abc-123");
}

#[tokio::test]
async fn a_request_that_outlives_the_time_limit_is_a_408_and_stores_nothing() {
    let app = TestApp::spawn_with_settings(|s| s.request_timeout_secs = 1).await;
    // A server that accepts connections and never answers: the catalog's
    // connection attempt hangs past the request's time limit.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let options = json!({
        "type": "jdbc",
        "base-url": format!("jdbc:postgresql://{}", silent.local_addr().unwrap()),
        "default-database": "db", "username": "u", "password": "p",
    });

    let reply = app.register("slow", options).await;

    reply.assert_problem(408, "REQUEST_TIMEOUT");
    app.get("/v1/catalogs/slow")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
}
