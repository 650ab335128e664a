//! The watcher between its polls: it keeps the engine's watched jobs in
//! memory and reads from the store only what changed, so these check, on a
//! stand-in Flink REST server in Flink 2.3's format, that nothing is missed
//! for it: a job submitted while the engine is watched is followed, its
//! table published on the target; a job Flink stops listing is settled
//! after the grace and its staging removed; a job that ends during a
//! catch-up of many jobs is published ahead of it; a cluster that lists
//! more than ctasd once read whole is watched.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{FlinkRun, StandInFlink, TestApp};

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn flink_id(n: usize) -> String {
    format!("{:032x}", 0xc7a5d000 + n)
}

/// An app with filesystem catalog `c` and engine `flink` on a stand-in.
async fn watched_app(engine: Value) -> (TestApp, StandInFlink, PathBuf) {
    let app = TestApp::spawn().await;
    let warehouse = app.filesystem_catalog("c").await;
    let flink = StandInFlink::start().await;
    let mut engine = engine;
    engine["name"] = json!("flink");
    engine["url"] = json!(flink.url);
    let registered = app.post("/v1/engines", &engine).await;
    assert_eq!(registered.status, 201, "{}", registered.text);
    (app, flink, warehouse)
}

/// Submits batch job `n`, creating `c.db.t<n>`, watched as Flink job `n`.
async fn submit(app: &TestApp, n: usize) -> String {
    let job = json!({"name": format!("w{n}"), "mode": "batch", "engine": "flink",
        "engine_job_id": flink_id(n),
        "hooks": [{"kind": "create_table_as", "target": {"catalog": "c", "table": format!("t{n}")},
                   "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]});
    app.submit(&job).await.id
}

/// Job `n` running in Flink, submitted, and waited for until ctasd shows
/// it RUNNING (within `secs`): its id, and the job as then shown.
async fn submit_running(
    app: &TestApp,
    flink: &StandInFlink,
    n: usize,
    secs: u64,
) -> (String, Value) {
    flink.set_run(&flink_id(n), FlinkRun::running_since(now_ms()));
    let job = submit(app, n).await;
    let running = wait_for(app, &format!("/v1/jobs/{job}"), secs, |j| {
        j["status"] == "RUNNING"
    })
    .await;
    (job, running)
}

/// Job `n` (ctasd's `job`) finished in Flink now, and waited for until
/// ctasd settled it (within `secs`): the job as then shown.
async fn finish_settled(
    app: &TestApp,
    flink: &StandInFlink,
    n: usize,
    job: &str,
    secs: u64,
) -> Value {
    flink.set_run(&flink_id(n), FlinkRun::finished_at(now_ms()));
    wait_for(app, &format!("/v1/jobs/{job}"), secs, |j| {
        j["settlement"] == "settled"
    })
    .await
}

/// Polls `path` until `done` holds for its answer, or fails after `secs`.
async fn wait_for(app: &TestApp, path: &str, secs: u64, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let answer = app.get(path).await.body;
        if done(&answer) {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out on {path}: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn staging_dirs(warehouse: &Path) -> Vec<String> {
    std::fs::read_dir(warehouse.join("db"))
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| name.starts_with("_ctasd_stg_"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_job_submitted_while_its_engine_is_watched_is_followed_to_its_published_table() {
    let (app, flink, warehouse) = watched_app(json!({"poll_interval_ms": 100})).await;
    let (first, _) = submit_running(&app, &flink, 1, 10).await;

    // Polls have run since; a job submitted now is found among the changes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (second, _) = submit_running(&app, &flink, 2, 10).await;
    assert!(
        !warehouse.join("db").join("t2").exists(),
        "not yet published"
    );

    let finished = finish_settled(&app, &flink, 2, &second, 10).await;
    assert_eq!(finished["status"], "FINISHED", "{finished}");
    assert!(
        warehouse.join("db").join("t2").is_dir(),
        "the table is published on the target"
    );
    let first = app.get(&format!("/v1/jobs/{first}")).await.body;
    assert_eq!(first["status"], "RUNNING", "the other job is untouched");
    assert!(!warehouse.join("db").join("t1").exists());
}

#[tokio::test]
async fn a_job_flink_stops_listing_is_settled_failed_after_the_grace_and_its_staging_removed() {
    let (app, flink, warehouse) =
        watched_app(json!({"poll_interval_ms": 100, "missing_job_grace_seconds": 1})).await;
    let (job, running) = submit_running(&app, &flink, 3, 10).await;
    assert!(!staging_dirs(&warehouse).is_empty(), "{running}");
    let first_seen = running["watch"]["first_seen_at"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(running["watch"]["last_seen_at"].as_str().unwrap() >= first_seen.as_str());

    flink.with(|answers| answers.runs.clear());
    let settled = wait_for(&app, &format!("/v1/jobs/{job}"), 15, |j| {
        j["status"] == "FAILED" && j["settlement"] == "settled"
    })
    .await;
    let watch = &settled["watch"];
    assert!(
        watch["note"]
            .as_str()
            .is_some_and(|n| n.contains("no longer knows")),
        "{settled}"
    );
    let last_seen = watch["last_seen_at"].as_str().unwrap();
    let missing_since = watch["missing_since"].as_str().unwrap();
    assert!(
        first_seen.as_str() <= last_seen && last_seen <= missing_since,
        "last seen while listed, before it went missing: {watch}"
    );
    assert_eq!(
        staging_dirs(&warehouse),
        Vec::<String>::new(),
        "staging removed"
    );
    assert!(!warehouse.join("db").join("t3").exists());
}

#[tokio::test]
async fn a_job_ending_during_a_catch_up_is_published_ahead_of_it() {
    // Six requests a second, four of them the listing: following 60
    // starting jobs in detail takes half a minute.
    let (app, flink, warehouse) =
        watched_app(json!({"poll_interval_ms": 250, "max_requests_per_second": 6})).await;
    let jobs = 60;
    let started = now_ms();
    for n in 0..jobs {
        flink.set_run(&flink_id(n), FlinkRun::running_since(started));
    }
    let mut ids = Vec::new();
    for n in 0..jobs {
        ids.push(submit(&app, n).await);
    }
    let running = |overview: &Value| {
        overview["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["status"] == "RUNNING")
            .map(|c| c["jobs"].as_i64().unwrap())
            .sum::<i64>()
    };
    // The job examined last, were jobs taken in the order of their ids.
    let last = (0..jobs).max_by_key(|&n| &ids[n]).unwrap();
    let before = running(&app.get("/v1/overview").await.body);
    let finished = finish_settled(&app, &flink, last, &ids[last], 30).await;
    assert_eq!(finished["status"], "FINISHED", "{finished}");
    assert!(
        warehouse.join("db").join(format!("t{last}")).is_dir(),
        "published"
    );
    let meanwhile = running(&app.get("/v1/overview").await.body) - before;
    assert!(
        meanwhile <= 6,
        "the ended job went first, yet {meanwhile} others were caught up meanwhile \
         ({before} before it ended, of {})",
        jobs - 1
    );

    // The catch-up goes on, poll after poll, to its end.
    wait_for(&app, "/v1/overview", 90, |o| running(o) == jobs as i64 - 1).await;
    let details_read = flink.with(|answers| answers.details_read);
    assert!(details_read >= jobs as u64, "{details_read}");
    for n in (0..jobs).filter(|&n| n != last) {
        assert!(!warehouse.join("db").join(format!("t{n}")).exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_flink_lists_as_ended_is_published_while_the_listing_still_arrives() {
    let (app, flink, warehouse) = watched_app(json!({"poll_interval_ms": 250})).await;
    let (job, _) = submit_running(&app, &flink, 7, 30).await;

    // Every listing from now on stops for 6 s after the job's entry.
    flink.with(|answers| answers.listing_stalls = Some(Duration::from_secs(6)));
    let finished = finish_settled(&app, &flink, 7, &job, 4).await;

    assert_eq!(finished["status"], "FINISHED", "{finished}");
    assert!(warehouse.join("db").join("t7").is_dir(), "published");
    assert!(staging_dirs(&warehouse).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_listing_more_than_32_mib_of_other_jobs_is_watched() {
    let (app, flink, warehouse) = watched_app(json!({"poll_interval_ms": 500})).await;
    // 120,000 ended jobs ctasd does not watch, braces in their names.
    let ended = now_ms() - 3_600_000;
    let besides: Vec<String> = (0..120_000u64)
        .map(|n| {
            format!(
                r#"{{"jid":"{:032x}","name":"someone else's {{job}} [{n}]","state":"FINISHED","start-time":{ended},"end-time":{end},"duration":60000,"last-modification":{end},"tasks":{{"total":1,"created":0,"scheduled":0,"deploying":0,"running":0,"finished":1,"canceling":0,"canceled":0,"failed":0,"reconciling":0,"initializing":0}}}}"#,
                0xe000_0000u64 + n,
                end = ended + 60_000
            )
        })
        .collect();
    let besides = besides.join(",");
    assert!(besides.len() > 32 << 20, "{} bytes", besides.len());
    flink.with(|answers| answers.listed_besides = besides);
    let (job, _) = submit_running(&app, &flink, 5, 60).await;
    let finished = finish_settled(&app, &flink, 5, &job, 60).await;
    assert_eq!(finished["status"], "FINISHED", "{finished}");
    assert!(warehouse.join("db").join("t5").is_dir(), "published");
    let engine = app.get("/v1/engines/flink").await.body;
    assert_eq!(engine["reachability"]["state"], "reachable", "{engine}");
    assert!(engine["reachability"]["last_error"].is_null(), "{engine}");
}
