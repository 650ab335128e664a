//! Outages, made with a TCP proxy the test controls (the machine's shared
//! database services are never stopped): a target database refusing
//! connections during a commit, and the PostgreSQL store going away.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{TcpProxy, TestApp, TestPostgres, postgres_options};

async fn target_rows(pg: &TestPostgres) -> Option<Vec<i64>> {
    sqlx::query_scalar("SELECT id FROM orders ORDER BY id")
        .fetch_all(&mut pg.connect().await)
        .await
        .ok()
}

#[tokio::test]
async fn a_commit_waits_out_a_database_outage_and_then_happens_once() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let proxy = TcpProxy::start(pg.host_port().parse().unwrap()).await;
    let mut options = postgres_options(&pg);
    options["base-url"] = json!(format!("jdbc:postgresql://127.0.0.1:{}", proxy.port));
    let app = TestApp::spawn().await;
    assert_eq!(app.register("pg", options).await.status, 201);
    let job = app
        .post(
            "/v1/jobs",
            &json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
            "target": {"catalog": "pg", "table": "orders"},
            "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]}),
        )
        .await;
    let id = job.body["id"].as_str().unwrap().to_owned();
    let created = app.put_status(&id, "CREATED").await;
    let staging = created.body["job"]["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    pg.execute(&format!("INSERT INTO \"{staging}\" VALUES (1), (2)"))
        .await;
    app.put_status(&id, "RUNNING").await;

    proxy.refuse();
    let finished = app.put_status(&id, "FINISHED").await;

    assert_eq!(finished.status, 200, "{}", finished.text);
    let commit = &finished.body["actions_taken"][0];
    assert_eq!(commit["action"], "commit");
    assert_eq!(commit["state"], "pending", "{}", finished.text);
    assert!(
        !commit["last_error"].as_str().unwrap_or_default().is_empty(),
        "the job shows the error"
    );
    assert_eq!(
        target_rows(&pg).await,
        None,
        "nothing is published while the database is away"
    );

    proxy.accept_again().await;
    let mut job: Value = Value::Null;
    for _ in 0..200 {
        job = app.get(&format!("/v1/jobs/{id}")).await.body;
        if job["actions"][1]["state"] == "done" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let commits: Vec<&Value> = job["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "commit")
        .collect();
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0]["state"], "done", "{job}");
    assert_eq!(commits[0]["outcome"], "committed");
    assert!(
        commits[0]["attempts"].as_u64().unwrap() >= 2,
        "it was retried"
    );
    assert_eq!(target_rows(&pg).await, Some(vec![1, 2]));
}

#[tokio::test]
async fn while_the_postgres_store_is_away_requests_get_503_and_the_service_recovers_by_itself() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let proxy = TcpProxy::start(store.host_port().parse().unwrap()).await;
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        store.username(),
        proxy.port,
        store.database
    );
    let app = TestApp::spawn_with(Some(&url)).await;
    assert_eq!(
        app.register("mem", json!({"type": "generic_in_memory"}))
            .await
            .status,
        201
    );

    proxy.refuse();
    let listing = app.get("/v1/catalogs").await;
    let ready = app.get("/readyz").await;
    let register = app
        .register("other", json!({"type": "generic_in_memory"}))
        .await;

    listing.assert_problem(503, "STORE_UNAVAILABLE");
    ready.assert_problem(503, "STORE_UNAVAILABLE");
    register.assert_problem(503, "STORE_UNAVAILABLE");
    assert!(
        !listing.text.contains("127.0.0.1"),
        "no internals in the answer: {}",
        listing.text
    );

    proxy.accept_again().await;
    let mut recovered = None;
    for _ in 0..100 {
        let reply = app.get("/v1/catalogs").await;
        if reply.status == 200 {
            recovered = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let names: Vec<String> = recovered.expect("the service recovers").body["catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["mem"],
        "what was acknowledged is there; what was refused is not"
    );
    assert_eq!(app.get("/readyz").await.status, 200);
}
