//! A real `ctasd serve` process killed with SIGKILL between storing
//! `FINISHED` and running the commit, then started again: the table is
//! published exactly once, with no further request.

use std::time::Duration;

use serde_json::json;

use crate::helpers::{Reply, ServerProcess, sqlite_database};

async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: serde_json::Value,
) -> Reply {
    Reply::from(
        client
            .request(method, url)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn rows(dir: &std::path::Path, table: &str) -> Option<Vec<i64>> {
    use sqlx::Connection;
    let mut conn =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}", dir.join("main.db").display()))
            .await
            .unwrap();
    let sql = format!("SELECT id FROM \"{table}\" ORDER BY id");
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut conn)
        .await
        .ok()
}

#[tokio::test]
async fn a_server_killed_after_finished_is_stored_publishes_the_table_once_after_restart() {
    let temp = tempfile::tempdir().unwrap();
    let (data_dir, lite) = (temp.path().join("data"), temp.path().join("lite"));
    std::fs::create_dir_all(&lite).unwrap();
    sqlite_database(&lite, "main", "SELECT 1").await;
    let client = reqwest::Client::new();
    let server =
        ServerProcess::start_with_env(&data_dir, &[("CTASD_FAULT_STALL_AFTER", "FINISHED")]);
    let url = |path: &str| format!("{}{path}", server.base);
    let options = json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", lite.display()), "default-database": "main"});
    send(
        &client,
        reqwest::Method::POST,
        url("/v1/catalogs"),
        json!({"name": "c", "options": options}),
    )
    .await;
    let job = send(&client, reqwest::Method::POST, url("/v1/jobs"), json!({"name": "j", "mode": "batch",
        "hooks": [{"kind": "create_table_as", "target": {"catalog": "c", "table": "orders"},
                   "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "STRING"}]}}]}))
    .await;
    let id = job.body["id"].as_str().unwrap().to_owned();
    let status = url(&format!("/v1/jobs/{id}/status"));
    let created = send(
        &client,
        reqwest::Method::PUT,
        status.clone(),
        json!({"status": "CREATED"}),
    )
    .await;
    let staging = created.body["job"]["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    sqlite_database(
        &lite,
        "main",
        &format!("INSERT INTO \"{staging}\" VALUES (1, 'a'), (2, 'b')"),
    )
    .await;
    send(
        &client,
        reqwest::Method::PUT,
        status.clone(),
        json!({"status": "RUNNING"}),
    )
    .await;

    // FINISHED is stored, then the server stalls before running the commit.
    let stalled = client
        .put(status)
        .json(&json!({"status": "FINISHED"}))
        .timeout(Duration::from_secs(1))
        .send()
        .await;
    assert!(stalled.is_err(), "the fault switch holds the report");
    let stored = Reply::from(
        client
            .get(url(&format!("/v1/jobs/{id}")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stored.body["status"], "FINISHED");
    assert_eq!(stored.body["actions"][1]["action"], "commit");
    assert_eq!(stored.body["actions"][1]["state"], "pending");
    assert_eq!(
        rows(&lite, "orders").await,
        None,
        "not published before the crash"
    );
    server.kill();

    let server = ServerProcess::start(&data_dir);
    let mut published = None;
    for _ in 0..100 {
        published = rows(&lite, "orders").await;
        if published.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let job = Reply::from(
        client
            .get(format!("{}/v1/jobs/{id}", server.base))
            .send()
            .await
            .unwrap(),
    )
    .await;
    server.stop();

    assert_eq!(
        published,
        Some(vec![1, 2]),
        "published after the restart, by the resumer alone"
    );
    assert_eq!(rows(&lite, &staging).await, None, "the staging is gone");
    let commits: Vec<&serde_json::Value> = job.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "commit")
        .collect();
    assert_eq!(commits.len(), 1, "one commit in the ledger");
    assert_eq!(commits[0]["state"], "done");
    assert_eq!(commits[0]["outcome"], "committed");
}
