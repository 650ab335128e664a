//! End to end with a real Flink 2.3 cluster and nobody reporting statuses:
//! ctasd's own watcher follows each job. PyFlink programs written as a
//! Flink user writes them for ctasd (they set the job's `engine_options`
//! and run its `sink_statement`) write into a filesystem catalog; the
//! effect is checked on disk and, for the published table, by reading it
//! back with a second Flink job.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::flink::{FlinkCluster, scripts};
use crate::helpers::{Reply, TestApp, TestPostgres, figure};

const COLUMNS: &str = "id BIGINT, note STRING";

fn table() -> Value {
    json!({"columns": [{"name": "id", "type": "BIGINT"}, {"name": "note", "type": "STRING"}],
           "options": {"format": "csv"}})
}

/// Submits a job watched on engine `flink`, writing `table` of database `db`.
async fn submit(app: &TestApp, mode: &str, table_name: &str) -> Value {
    let body = json!({"name": format!("e2e {table_name}"), "mode": mode, "engine": "flink",
        "hooks": [{"kind": "create_table_as", "target": {"catalog": "fs", "database": "db", "table": table_name},
                   "table": table()}]});
    app.submit(&body).await.job
}

/// What the PyFlink program needs: the job's engine options and its sink.
fn spec(job: &Value, extra: Value) -> Value {
    let location = &job["hooks"][0]["write_location"];
    let table = job["hooks"][0]["target"]["table"].as_str().unwrap();
    let mut spec = json!({
        "mode": job["mode"],
        "engine_options": job["engine_options"],
        "sink_statement": location["sink_statement"],
        "sink": format!("{table}_sink"),
        "name": job["name"],
    });
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    spec
}

fn write_path(job: &Value) -> PathBuf {
    PathBuf::from(job["hooks"][0]["write_location"]["path"].as_str().unwrap())
}

fn flink_id(job: &Value) -> String {
    job["engine_job_id"].as_str().unwrap().to_owned()
}

/// Polls `path` until `done` holds for its body, or fails after `within`.
async fn wait_for(
    app: &TestApp,
    path: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let reply = app.get(path).await;
        if reply.status == 200 && done(&reply.body) {
            return reply.body;
        }
        assert!(
            Instant::now() < deadline,
            "{path} did not get there within {within:?}: {}",
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs the job's PyFlink program (a slow or endless source) and waits
/// until ctasd has seen it RUNNING.
async fn run_until_running(app: &TestApp, flink: &FlinkCluster, job: &Value, source: Value) {
    flink.run_python(&scripts().join("ctas_job.py"), &spec(job, source), true);
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    wait_for(app, &path, Duration::from_secs(60), |j| {
        j["status"] == "RUNNING"
    })
    .await;
}

/// Waits until the job has `status` and nothing is left to do for it.
async fn settled(app: &TestApp, job: &Value, status: &str) -> Value {
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    wait_for(app, &path, Duration::from_secs(180), |j| {
        j["status"] == status && j["settlement"] != "in_progress"
    })
    .await
}

async fn engine(app: &TestApp) -> Value {
    app.get("/v1/engines/flink").await.body
}

/// The statuses the job went through, as the watcher applied them.
async fn statuses(app: &TestApp, job: &Value) -> Vec<(String, bool)> {
    let events = app
        .get(&format!("/v1/jobs/{}/events", job["id"].as_str().unwrap()))
        .await;
    events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "status")
        .map(|e| {
            (
                e["to"].as_str().unwrap().to_owned(),
                !e["engine_at"].is_null(),
            )
        })
        .collect()
}

#[tokio::test]
async fn flink_jobs_are_watched_end_to_end_with_nobody_reporting() {
    let Some(mut flink) = FlinkCluster::configured() else {
        return;
    };
    let started = Instant::now();
    flink.start().await;
    figure(&format!(
        "flink: cluster started in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("warehouse");
    std::fs::create_dir_all(warehouse.join("db")).unwrap();
    let catalog = json!({"type": "filesystem", "path": warehouse.display().to_string(), "default-database": "db"});
    assert_eq!(app.register("fs", catalog).await.status, 201);
    let registered = app
        .post(
            "/v1/engines",
            &json!({"name": "flink", "url": flink.url(),
            "poll_interval_ms": 250, "missing_job_grace_seconds": 120}),
        )
        .await;
    assert_eq!(registered.status, 201, "{}", registered.text);
    assert_eq!(registered.body["reachability"]["state"], "reachable");
    assert_eq!(registered.body["reachability"]["engine_version"], "2.3.0");

    let cases = Instant::now();
    a_batch_job_publishes_exactly_its_rows(&app, &flink, &warehouse).await;
    figure(&format!(
        "flink: (a) batch published in {:.1} s",
        cases.elapsed().as_secs_f64()
    ));
    let case = Instant::now();
    b_a_failing_job_publishes_nothing_and_shows_flinks_cause(&app, &flink, &warehouse).await;
    figure(&format!(
        "flink: (b) failure settled in {:.1} s",
        case.elapsed().as_secs_f64()
    ));
    let case = Instant::now();
    c_a_job_cancelled_in_flink_publishes_nothing(&app, &flink, &warehouse).await;
    figure(&format!(
        "flink: (c) cancel settled in {:.1} s",
        case.elapsed().as_secs_f64()
    ));
    let case = Instant::now();
    d_a_streaming_table_exists_at_start_and_stays_after_cancel(&app, &flink).await;
    figure(&format!(
        "flink: (d) streaming in {:.1} s",
        case.elapsed().as_secs_f64()
    ));
    let case = Instant::now();
    e_a_stopped_cluster_is_shown_and_watched_again_when_back(&app, &mut flink).await;
    figure(&format!(
        "flink: (e) outage in {:.1} s",
        case.elapsed().as_secs_f64()
    ));
    let listed = app.get("/v1/engines").await;
    assert_eq!(
        listed.body["engines"][0]["name"], "flink",
        "{}",
        listed.text
    );
    assert_eq!(
        app.delete("/v1/engines/flink").await.status,
        204,
        "no job left to watch"
    );
    let case = Instant::now();
    f_replicas_on_one_store_apply_each_status_once(&flink).await;
    figure(&format!(
        "flink: (f) replicas in {:.1} s",
        case.elapsed().as_secs_f64()
    ));
    figure(&format!(
        "flink: all cases in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
}

async fn a_batch_job_publishes_exactly_its_rows(
    app: &TestApp,
    flink: &FlinkCluster,
    warehouse: &Path,
) {
    let job = submit(app, "batch", "orders").await;
    assert_eq!(
        job["engine_job_id"], job["id"],
        "a watched job's Flink id defaults to its own"
    );
    assert_eq!(
        job["engine_options"]["$internal.pipeline.job-id"],
        job["id"]
    );
    let staging = write_path(&job);
    assert!(staging.is_dir(), "the staging is prepared at submission");

    flink.run_python(
        &scripts().join("ctas_job.py"),
        &spec(&job, json!({"rows": 1000})),
        true,
    );
    let done = settled(app, &job, "FINISHED").await;
    assert_eq!(done["settlement"], "settled", "{done}");
    assert!(
        !staging.exists(),
        "the staging was published, not left behind"
    );
    assert!(warehouse.join("db/orders").is_dir());
    // The watcher notes what it saw just after it applied it.
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    wait_for(app, &path, Duration::from_secs(30), |j| {
        j["watch"]["engine_status"] == "FINISHED"
    })
    .await;
    let passed = statuses(app, &job).await;
    for status in ["CREATED", "RUNNING", "FINISHED"] {
        assert!(
            passed.contains(&(status.to_owned(), true)),
            "{status} applied with Flink's time: {passed:?}"
        );
    }

    let published = app.get("/v1/catalogs/fs/databases/db/tables/orders").await;
    assert_eq!(published.status, 200, "{}", published.text);
    let read = flink.run_python(
        &scripts().join("read_back.py"),
        &json!({"columns": COLUMNS, "options": published.body["options"]}),
        false,
    );
    let stdout = String::from_utf8_lossy(&read.stdout);
    let result: Value = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .map(|r| serde_json::from_str(r).unwrap())
        .unwrap_or_else(|| panic!("the read-back job printed no result: {stdout}"));
    assert_eq!(
        result,
        json!({"rows": 1000, "distinct_ids": 1000, "id_sum": 499_500})
    );
}

async fn b_a_failing_job_publishes_nothing_and_shows_flinks_cause(
    app: &TestApp,
    flink: &FlinkCluster,
    warehouse: &Path,
) {
    let job = submit(app, "batch", "refused").await;
    let staging = write_path(&job);
    let extra = json!({"rows": 1000, "fail_at": 500});
    flink.run_python(&scripts().join("ctas_job.py"), &spec(&job, extra), true);
    let failed = settled(app, &job, "FAILED").await;
    assert_eq!(failed["settlement"], "settled", "{failed}");
    let cause = failed["failure"].as_str().unwrap_or_default();
    assert!(
        cause.contains("ValueError: ctasd-e2e: row 500 is refused"),
        "Flink's root cause is the job's failure: {cause}"
    );
    assert!(
        !staging.exists(),
        "the staging (and Flink's files in it) is gone"
    );
    assert!(
        !warehouse.join("db/refused").exists(),
        "no table was published"
    );
}

async fn c_a_job_cancelled_in_flink_publishes_nothing(
    app: &TestApp,
    flink: &FlinkCluster,
    warehouse: &Path,
) {
    let job = submit(app, "batch", "cancelled").await;
    let staging = write_path(&job);
    run_until_running(
        app,
        flink,
        &job,
        json!({"rows": 100_000, "rows_per_second": 5}),
    )
    .await;
    flink.cancel(&flink_id(&job)).await;
    let cancelled = settled(app, &job, "CANCELED").await;
    assert_eq!(cancelled["settlement"], "settled", "{cancelled}");
    assert!(!staging.exists());
    assert!(!warehouse.join("db/cancelled").exists());
}

async fn d_a_streaming_table_exists_at_start_and_stays_after_cancel(
    app: &TestApp,
    flink: &FlinkCluster,
) {
    let job = submit(app, "streaming", "events").await;
    let target = write_path(&job);
    assert!(
        target.is_dir(),
        "a streaming table exists before the job starts"
    );
    let browse = app.get("/v1/catalogs/fs/databases/db/tables/events").await;
    assert_eq!(browse.status, 200, "{}", browse.text);

    run_until_running(app, flink, &job, json!({"rows_per_second": 5})).await;
    flink.cancel(&flink_id(&job)).await;
    let cancelled = settled(app, &job, "CANCELED").await;
    assert_eq!(cancelled["settlement"], "settled", "{cancelled}");
    assert!(target.is_dir(), "a streaming table stays after a cancel");
    assert_eq!(
        app.get("/v1/catalogs/fs/databases/db/tables/events")
            .await
            .status,
        200
    );
}

async fn e_a_stopped_cluster_is_shown_and_watched_again_when_back(
    app: &TestApp,
    flink: &mut FlinkCluster,
) {
    let job = submit(app, "batch", "outage").await;
    let staging = write_path(&job);
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    run_until_running(
        app,
        flink,
        &job,
        json!({"rows": 100_000, "rows_per_second": 5}),
    )
    .await;
    // A short grace, so that the job the restarted cluster forgot is settled soon.
    let altered = app
        .patch(
            "/v1/engines/flink",
            &json!({"missing_job_grace_seconds": 3}),
        )
        .await;
    assert_eq!(altered.status, 200, "{}", altered.text);
    assert_eq!(altered.body["watched_jobs"], 1);
    app.delete("/v1/engines/flink")
        .await
        .assert_problem(409, "ENGINE_IN_USE");

    flink.stop();
    let down = wait_for(app, "/v1/engines/flink", Duration::from_secs(60), |e| {
        e["reachability"]["state"] == "unreachable"
    })
    .await;
    assert!(!down["reachability"]["last_error"].is_null(), "{down}");
    let watched = app.get(&path).await.body;
    assert_eq!(
        watched["watch"]["engine_reachability"], "unreachable",
        "{watched}"
    );
    assert_eq!(
        watched["status"], "RUNNING",
        "an unreachable cluster settles nothing"
    );
    assert!(staging.is_dir());

    flink.start().await;
    wait_for(app, "/v1/engines/flink", Duration::from_secs(90), |e| {
        e["reachability"]["state"] == "reachable"
    })
    .await;
    // Without high availability the restarted cluster forgot the job.
    let failed = settled(app, &job, "FAILED").await;
    let why = failed["failure"].as_str().unwrap_or_default();
    assert!(why.contains("no longer knows"), "{why}");
    assert!(!staging.exists(), "no staging stays forever");
    assert_eq!(engine(app).await["watched_jobs"], 0);
}

async fn f_replicas_on_one_store_apply_each_status_once(flink: &FlinkCluster) {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let first = TestApp::spawn_with(Some(&pg.url)).await;
    let second = first.sibling().await;
    let warehouse = first.scratch("replicated");
    std::fs::create_dir_all(warehouse.join("db")).unwrap();
    let catalog = json!({"type": "filesystem", "path": warehouse.display().to_string()});
    assert_eq!(first.register("fs", catalog).await.status, 201);
    let engine = json!({"name": "flink", "url": flink.url(), "poll_interval_ms": 100});
    let registered: Reply = second.post("/v1/engines", &engine).await;
    assert_eq!(registered.status, 201, "{}", registered.text);

    let job = submit(&first, "batch", "replicated").await;
    flink.run_python(
        &scripts().join("ctas_job.py"),
        &spec(&job, json!({"rows": 100})),
        true,
    );
    let done = settled(&second, &job, "FINISHED").await;
    let actions: Vec<(String, String)> = done["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_owned(),
                a["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("begin".to_owned(), "done".to_owned()),
            ("commit".to_owned(), "done".to_owned())
        ],
        "each action recorded and run once"
    );
    let passed = statuses(&first, &job).await;
    let mut seen = std::collections::HashSet::new();
    for (status, _) in &passed {
        assert!(
            seen.insert(status.clone()),
            "{status} applied twice: {passed:?}"
        );
    }
    assert!(warehouse.join("db/replicated").is_dir());
}
