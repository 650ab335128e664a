//! Events out under faults: a `ctasd serve` killed with SIGKILL between a
//! commit and its announcement, or between posting an event and recording
//! that it was taken, loses no event once it is started again (the one
//! posted twice carries the same `webhook-id`, for the receiver to drop);
//! two replicas on one PostgreSQL store deliver every event, none twice.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{Receiver, ServerProcess, TestPostgres, figure, sqlite_database};

/// A job onto `lite` that publishes `table` with two rows, reported by
/// `server`'s caller up to FINISHED (whose answer may never come).
async fn run_job(server: &ServerProcess, dir: &std::path::Path, table: &str) -> String {
    let job = json!({"name": table, "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "lite", "table": table},
        "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]});
    let (status, submitted) = server
        .call(Method::POST, "/v1/jobs", Some(&job))
        .await
        .unwrap();
    assert_eq!(status, 201, "{submitted}");
    let id = submitted["id"].as_str().unwrap().to_owned();
    let staging = submitted["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap();
    let path = format!("/v1/jobs/{id}/status");
    server
        .call(Method::PUT, &path, Some(&json!({"status": "CREATED"})))
        .await
        .unwrap();
    sqlite_database(
        dir,
        "main",
        &format!("INSERT INTO \"{staging}\" VALUES (1), (2)"),
    )
    .await;
    let _ = server
        .call(Method::PUT, &path, Some(&json!({"status": "FINISHED"})))
        .await;
    id
}

/// Registers catalog `lite` on `dir` and a subscription to `receiver`.
async fn set_up(server: &ServerProcess, dir: &std::path::Path, receiver: &Receiver) {
    sqlite_database(dir, "main", "SELECT 1").await;
    let lite = json!({"name": "lite", "options": {"type": "jdbc",
        "base-url": format!("jdbc:sqlite:{}", dir.display()), "default-database": "main"}});
    let hooks = json!({"name": "hooks", "url": receiver.url,
                       "events": ["job.status_changed", "table.published"]});
    for (path, body) in [("/v1/catalogs", lite), ("/v1/subscriptions", hooks)] {
        let (status, answer) = server.call(Method::POST, path, Some(&body)).await.unwrap();
        assert_eq!(status, 201, "{answer}");
    }
}

/// The events a receiver that drops repeated ids kept, as (type, what).
fn kept(receiver: &Receiver) -> Vec<(String, String)> {
    receiver
        .taken()
        .iter()
        .map(|r| {
            let event = r.json();
            let what = match event["type"].as_str().unwrap() {
                "job.status_changed" => event["data"]["to"].as_str().unwrap().to_owned(),
                _ => event["data"]["outcome"].as_str().unwrap().to_owned(),
            };
            (event["type"].as_str().unwrap().to_owned(), what)
        })
        .collect()
}

/// One trial: killed at `kill_at`, started again; the events the receiver
/// kept, and how many of its requests it answered 200. A kill after a post waits
/// until the job is reported: the receiver refuses everything until then.
async fn killed_at(kill_at: &str) -> (Vec<(String, String)>, usize) {
    let temp = tempfile::tempdir().unwrap();
    let (data, dir) = (temp.path().join("data"), temp.path().join("lite"));
    std::fs::create_dir_all(&dir).unwrap();
    let receiver = Receiver::start().await;
    let mut server = ServerProcess::start_with_env(&data, &[("CTASD_FAULT_KILL_AT", kill_at)]);
    set_up(&server, &dir, &receiver).await;
    let after_a_post = kill_at.starts_with("event-posted");
    receiver.set_down(after_a_post);
    let id = run_job(&server, &dir, "daily").await;
    receiver.set_down(false);
    assert_eq!(
        server.wait_for_sigkill(Duration::from_secs(20)),
        Some(true),
        "{kill_at}: killed"
    );

    let server = ServerProcess::start(&data);
    let (status, _) = server
        .call(
            Method::PUT,
            &format!("/v1/jobs/{id}/status"),
            Some(&json!({"status": "FINISHED"})),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{kill_at}: the engine's retried report");
    receiver.wait_for(5, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    server.stop();
    let answered = receiver
        .requests()
        .iter()
        .filter(|r| r.status == 200)
        .count();
    (kept(&receiver), answered)
}

fn expected(published: &str) -> Vec<(String, String)> {
    ["INITIALIZING", "CREATED", "RUNNING", "FINISHED"]
        .iter()
        .map(|s| ("job.status_changed".to_owned(), s.to_string()))
        .chain([("table.published".to_owned(), published.to_owned())])
        .collect()
}

// Several threads: the receiver answers while the test waits, blocking,
// for the process to die.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_a_commit_and_its_announcement_the_server_loses_no_event() {
    // The table is published, the ledger does not say so yet: nothing was
    // announced. After the restart the commit finds it done and says so.
    let (kept, _) = killed_at("commit-applied:1").await;
    assert_eq!(kept, expected("already_committed"));

    // Each event posted and taken, the process killed before recording it:
    // sent again under the same id, kept once.
    let mut resent = 0;
    for nth in 1..=3 {
        let (kept, answered) = killed_at(&format!("event-posted:{nth}")).await;
        assert_eq!(kept, expected("committed"), "event-posted:{nth}");
        assert!(
            answered > kept.len(),
            "event-posted:{nth}: the posted one came again"
        );
        resent += answered - kept.len();
    }
    figure(&format!(
        "events crash: 4 trials killed at commit-applied or after a post; every event kept once, {resent} sent again under the same webhook-id"
    ));
}

#[tokio::test]
async fn two_replicas_deliver_every_event_none_twice() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let (data, dir) = (temp.path().join("data"), temp.path().join("lite"));
    std::fs::create_dir_all(&dir).unwrap();
    let env = [("CTASD_DATABASE_URL", store.url.as_str())];
    // One after the other: the first writes the secret key both use.
    let first = ServerProcess::start_with_env(&data, &env);
    let second = ServerProcess::start_with_env(&data, &env);
    let receiver = Receiver::start().await;
    set_up(&first, &dir, &receiver).await;

    const JOBS: usize = 8;
    let runs = (0..JOBS).map(|job| {
        let server = if job % 2 == 0 { &first } else { &second };
        let (dir, table) = (dir.clone(), format!("t{job}"));
        async move { run_job(server, &dir, &table).await }
    });
    let ids: Vec<String> = futures_util::future::join_all(runs).await;
    let events = JOBS * 5;
    let taken = receiver.wait_for(events, Duration::from_secs(60)).await;
    tokio::time::sleep(Duration::from_millis(800)).await;

    assert_eq!(taken.len(), events, "every event of every job");
    assert_eq!(receiver.requests().len(), events, "none sent twice");
    for id in &ids {
        let of_job: Vec<i64> = taken
            .iter()
            .map(|r| r.json())
            .filter(|e| e["job"]["id"] == id.as_str())
            .map(|e| e["sequence"].as_i64().unwrap())
            .collect();
        assert_eq!(of_job.len(), 5, "{id}");
        assert!(
            of_job.windows(2).all(|w| w[0] < w[1]),
            "{id} in order: {of_job:?}"
        );
    }
    let deliveries: Value = first
        .call(Method::GET, "/v1/subscriptions/hooks", None)
        .await
        .unwrap()
        .1;
    assert_eq!(
        deliveries["deliveries"]["delivered"], events,
        "{deliveries}"
    );
    figure(&format!(
        "events replicas: {JOBS} jobs over two replicas on one PostgreSQL store, {events} events delivered, none twice"
    ));
}
