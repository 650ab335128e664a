//! Only this run's evidence counts: a terminal status that an earlier run
//! under the same Flink job id reached, before the ctasd job was
//! submitted, publishes and discards nothing, whether a stand-in Flink REST
//! server (in Flink 2.3's format) lists it or a client reports it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{FlinkRun, StandInFlink, TestApp};
use crate::staging::part_ids;

const FLINK_ID: &str = "5a7f0c3e9b1d4e2f8a6c0b3d7e9f1a2b";

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A filesystem catalog `c` holding table `db.kept` (published by ctasd)
/// with three rows.
async fn catalog_with_kept_table(app: &TestApp) -> std::path::PathBuf {
    let warehouse = app.filesystem_catalog("c").await;
    let first = app
        .submit(
            &json!({"name": "first", "mode": "streaming", "hooks": [{"kind": "create_table_as",
            "target": {"catalog": "c", "table": "kept"},
            "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]}),
        )
        .await;
    app.put_status(&first.id, "CREATED").await;
    let kept = warehouse.join("db").join("kept");
    for id in 1..=3 {
        std::fs::write(kept.join(format!("part-{id}")), b"row").unwrap();
    }
    kept
}

fn replace_job(engine: Option<&str>) -> Value {
    let mut job = json!({"name": "replace", "mode": "batch", "engine_job_id": FLINK_ID,
        "hooks": [{"kind": "replace_table_as", "target": {"catalog": "c", "table": "kept"},
                   "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]});
    if let Some(engine) = engine {
        job["engine"] = json!(engine);
    }
    job
}

/// Polls the job until `done` holds, or fails after ten seconds.
async fn wait_for(app: &TestApp, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let job = app.get(&format!("/v1/jobs/{id}")).await.body;
        if done(&job) {
            return job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out; job: {job}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_watched_jobs_earlier_finished_run_publishes_nothing_and_its_own_run_does() {
    let app = TestApp::spawn().await;
    let kept = catalog_with_kept_table(&app).await;
    let two_hours_ago = now_ms() - 2 * 3600 * 1000;
    let flink = StandInFlink::start().await;
    flink.set_run(FLINK_ID, FlinkRun::finished_at(two_hours_ago));
    let url = flink.url.clone();
    let engine = app
        .post(
            "/v1/engines",
            &json!({"name": "flink", "url": url, "poll_interval_ms": 100}),
        )
        .await;
    assert_eq!(engine.status, 201, "{}", engine.text);

    let job = app.submit(&replace_job(Some("flink"))).await;
    let waiting = wait_for(&app, &job.id, |job| {
        job["watch"]["note"]
            .as_str()
            .is_some_and(|note| note.contains("earlier run"))
    })
    .await;

    assert_ne!(waiting["status"], "FINISHED", "{waiting}");
    let actions = waiting["actions"].as_array().unwrap();
    assert!(
        actions
            .iter()
            .all(|a| a["action"] != "commit" && a["action"] != "abort"),
        "nothing is published or discarded: {waiting}"
    );
    assert_eq!(
        part_ids(&kept),
        Some(vec![1, 2, 3]),
        "the target keeps its rows"
    );
    let note = waiting["watch"]["note"].as_str().unwrap();
    assert!(note.contains("FINISHED"), "{note}");

    // This job's own run, under the same id, is followed.
    let now = now_ms();
    flink.set_run(FLINK_ID, FlinkRun::finished_at(now));
    // FINISHED shows as soon as it is applied; the commit follows it.
    let finished = wait_for(&app, &job.id, |job| {
        job["status"] == "FINISHED" && job["settlement"] != "in_progress"
    })
    .await;
    let commit = finished["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "commit")
        .unwrap_or_else(|| panic!("{finished}"))
        .clone();
    assert_eq!(commit["outcome"], "committed", "{finished}");
}

#[tokio::test]
async fn a_reported_terminal_status_timed_before_submission_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let kept = catalog_with_kept_table(&app).await;
    let job = app.submit(&replace_job(None)).await;
    app.put_status(&job.id, "CREATED").await;
    app.put_status(&job.id, "RUNNING").await;
    let two_hours_ago = now_ms() - 2 * 3600 * 1000;

    for status in ["FINISHED", "FAILED", "CANCELED"] {
        let reply = app
            .client
            .put(app.url(&format!("/v1/jobs/{}/status", job.id)))
            .json(&json!({"status": status, "timestamps": {status: two_hours_ago}}))
            .send()
            .await
            .unwrap();
        let reply = crate::helpers::Reply::from(reply).await;
        reply.assert_problem(409, "STALE_RUN");
        assert!(reply.detail().contains("earlier run"), "{}", reply.text);
    }

    let job_now = app.get(&format!("/v1/jobs/{}", job.id)).await.body;
    assert_eq!(job_now["status"], "RUNNING", "{job_now}");
    assert_eq!(part_ids(&kept), Some(vec![1, 2, 3]));
    // A run that started before and ends now is this job's.
    let reply = app
        .client
        .put(app.url(&format!("/v1/jobs/{}/status", job.id)))
        .json(&json!({"status": "FINISHED",
            "timestamps": {"RUNNING": two_hours_ago, "FINISHED": now_ms()}}))
        .send()
        .await
        .unwrap();
    let reply = crate::helpers::Reply::from(reply).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["job"]["status"], "FINISHED");
    assert_eq!(
        part_ids(&kept),
        Some(vec![]),
        "its own (empty) run is published"
    );
}

#[tokio::test]
async fn a_reported_time_far_ahead_of_the_clock_is_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let kept = catalog_with_kept_table(&app).await;
    let job = app.submit(&replace_job(None)).await;
    app.put_status(&job.id, "CREATED").await;
    // Microseconds sent as milliseconds: some 56,000 years ahead.
    let micros = now_ms() * 1000;

    let reply = app
        .client
        .put(app.url(&format!("/v1/jobs/{}/status", job.id)))
        .json(&json!({"status": "RUNNING", "timestamps": {"RUNNING": micros}}))
        .send()
        .await
        .unwrap();
    let reply = crate::helpers::Reply::from(reply).await;

    reply.assert_problem(422, "BODY_INVALID");
    assert_eq!(reply.body["errors"][0]["field"], "timestamps.RUNNING");
    assert!(reply.detail().contains("microseconds"), "{}", reply.text);
    // Later reports still move the job: nothing was recorded.
    for status in ["RUNNING", "FINISHED"] {
        let moved = app.put_status(&job.id, status).await;
        assert_eq!(moved.status, 200, "{}", moved.text);
    }
    let finished = app.get(&format!("/v1/jobs/{}", job.id)).await.body;
    assert_eq!(finished["status"], "FINISHED", "{finished}");
    assert_eq!(part_ids(&kept), Some(vec![]), "the replace was published");
}

#[tokio::test]
async fn how_far_ahead_an_engine_time_may_be_is_a_setting() {
    let app = TestApp::spawn_with_settings(|s| s.max_engine_time_ahead_secs = 5).await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let job = app
        .submit(
            &json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
            "target": {"catalog": "mem", "table": "t"},
            "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]}),
        )
        .await;
    let report = |ahead_ms: i64| {
        app.client
            .put(app.url(&format!("/v1/jobs/{}/status", job.id)))
            .json(&json!({"status": "CREATED", "timestamps": {"CREATED": now_ms() + ahead_ms}}))
            .send()
    };

    let refused = crate::helpers::Reply::from(report(60_000).await.unwrap()).await;
    let accepted = crate::helpers::Reply::from(report(1_000).await.unwrap()).await;

    refused.assert_problem(422, "BODY_INVALID");
    assert!(
        refused.detail().contains("more than the 5 s"),
        "{}",
        refused.text
    );
    assert_eq!(accepted.status, 200, "{}", accepted.text);
}
