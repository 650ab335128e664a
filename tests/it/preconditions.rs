//! `ETag` on catalogs and jobs and `If-Match` on their changes: a change
//! made from a stale read is refused with 412, and nothing changes.

use ctasd::domain::job::JobStatus::Created;
use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp};

async fn send(
    app: &TestApp,
    method: &str,
    path: &str,
    if_match: &str,
    body: Option<Value>,
) -> Reply {
    let mut request = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .header("if-match", if_match);
    if let Some(body) = body {
        request = request.json(&body);
    }
    Reply::from(request.send().await.unwrap()).await
}

fn etag(reply: &Reply) -> String {
    reply.headers["etag"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_catalog_change_from_a_stale_read_is_412_and_changes_nothing() {
    let app = TestApp::spawn().await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let read = app.get("/v1/catalogs/mem").await;
    let first = etag(&read);
    assert_eq!(
        etag(&app.get("/v1/catalogs/mem").await),
        first,
        "stable while unchanged"
    );

    let altered = send(
        &app,
        "PATCH",
        "/v1/catalogs/mem",
        &first,
        Some(json!({"comment": "one"})),
    )
    .await;
    assert_eq!(altered.status, 200, "{}", altered.text);
    let second = etag(&altered);
    assert_ne!(second, first, "the tag moves with the catalog");
    assert_eq!(etag(&app.get("/v1/catalogs/mem").await), second);

    let stale = send(
        &app,
        "PATCH",
        "/v1/catalogs/mem",
        &first,
        Some(json!({"comment": "two"})),
    )
    .await;
    stale.assert_problem(412, "PRECONDITION_FAILED");
    assert!(stale.detail().contains(&second), "{}", stale.detail());
    assert_eq!(app.get("/v1/catalogs/mem").await.body["comment"], "one");

    send(&app, "DELETE", "/v1/catalogs/mem", &first, None)
        .await
        .assert_problem(412, "PRECONDITION_FAILED");
    assert_eq!(app.get("/v1/catalogs/mem").await.status, 200, "still there");
    // A weak tag never matches (If-Match compares strongly).
    send(
        &app,
        "DELETE",
        "/v1/catalogs/mem",
        &format!("W/{second}"),
        None,
    )
    .await
    .assert_problem(412, "PRECONDITION_FAILED");

    let dropped = send(
        &app,
        "DELETE",
        "/v1/catalogs/mem",
        &format!("\"0\", {second}"),
        None,
    )
    .await;
    assert_eq!(dropped.status, 204, "{}", dropped.text);
    assert_eq!(app.get("/v1/catalogs/mem").await.status, 404);
}

#[tokio::test]
async fn a_job_update_from_before_a_status_change_is_412() {
    let app = TestApp::spawn().await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let job = app
        .submit(&json!({
            "name": "tagged", "mode": "batch",
            "hooks": [{"kind": "create_table_as", "target": {"catalog": "mem", "table": "t"},
                       "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]
        }))
        .await;
    let path = format!("/v1/jobs/{}", job.id);
    let before = etag(&app.get(&path).await);

    app.report(&job.id, Created).await;
    let after = etag(&app.get(&path).await);
    assert_ne!(before, after, "the tag moves when the job moves");

    let engine_id = json!({"engine_job_id": "aabbccddeeff00112233445566778899"});
    send(&app, "PATCH", &path, &before, Some(engine_id.clone()))
        .await
        .assert_problem(412, "PRECONDITION_FAILED");
    assert_eq!(app.get(&path).await.body["engine_job_id"], Value::Null);

    let updated = send(&app, "PATCH", &path, &after, Some(engine_id)).await;
    assert_eq!(updated.status, 200, "{}", updated.text);
    assert_eq!(
        updated.body["engine_job_id"],
        "aabbccddeeff00112233445566778899"
    );
}
