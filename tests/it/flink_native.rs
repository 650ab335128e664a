//! ctasd's Flink catalog jar (`flink/`) on a real Flink 2.3 cluster, with
//! the jar in the cluster's `lib/`: plain Flink SQL `CREATE TABLE … AS
//! SELECT` onto a catalog of type `ctasd`, written as a Flink user writes
//! it. The table appears with every row only when the job finishes; a
//! refused statement runs no job; a failing job leaves nothing. Checked in
//! the warehouse's directories and through ctasd's API.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::helpers::TestApp;
use crate::helpers::flink::{FlinkCluster, scripts};

/// The jar, built once per test run with `flink/build.sh`, as the README says.
fn built_jar(flink_home: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let output = std::process::Command::new(root.join("flink/build.sh"))
                .env("FLINK_HOME", flink_home)
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "flink/build.sh: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            root.join("target/flink/ctasd-flink.jar")
        })
        .clone()
}

/// Every line of every data file of a table directory (hidden files,
/// ctasd's and Flink's own, left out).
fn rows_on_disk(table: &Path) -> Vec<String> {
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(table).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_file() && !name.starts_with(['.', '_']) {
            rows.extend(
                std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(str::to_owned),
            );
        }
    }
    rows.sort();
    rows
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// `native_ctas.py` with `spec`, `extra` added to it, run to its end.
fn run_native(flink: &FlinkCluster, mut spec: Value, extra: Value) -> Output {
    spec.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    tokio::task::block_in_place(|| flink.try_python(&scripts().join("native_ctas.py"), &spec))
}

/// A statement's success, or what it said and the cluster's log.
fn assert_done(flink: &FlinkCluster, done: &Output) {
    assert!(
        done.status.success(),
        "{}\n{}",
        said(done),
        flink.log_tail()
    );
}

/// A Flink cluster with the jar in its `lib/`, and a server with a
/// `filesystem` catalog `lake` on a warehouse (its `default` database
/// made); `None` when the suite is not configured.
async fn a_lake_on_flink() -> Option<(FlinkCluster, TestApp, PathBuf)> {
    let mut flink = FlinkCluster::configured()?;
    let home = std::env::var("CTASD_TEST_FLINK_HOME").unwrap();
    flink.add_to_lib(&built_jar(&home));
    flink.start().await;
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("warehouse");
    std::fs::create_dir_all(warehouse.join("default")).unwrap();
    let lake = json!({"type": "filesystem", "path": warehouse, "default-database": "default"});
    assert_eq!(app.register("lake", lake).await.status, 201);
    Some((flink, app, warehouse))
}

fn said(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

// Several threads: this server answers the Flink client while the test
// waits for that client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_flink_ctas_onto_a_ctasd_catalog_appears_whole_when_the_job_ends_or_not_at_all() {
    let Some((mut flink, app, warehouse)) = a_lake_on_flink().await else {
        return;
    };
    let ctas = |table: &str, extra: Value| {
        let spec = json!({"url": app.url(""), "catalog": "lake", "table": table, "rows": 50});
        run_native(&flink, spec, extra)
    };

    // A CTAS: the table is there, with every row, once the job finished.
    assert_done(&flink, &ctas("daily", json!({})));
    let table = app
        .get("/v1/catalogs/lake/databases/default/tables/daily")
        .await;
    assert_eq!(table.status, 200, "{}", table.text);
    let columns: Vec<&str> = table.body["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["id", "note"]);
    let rows = rows_on_disk(&warehouse.join("default/daily"));
    assert_eq!(rows.len(), 50, "{rows:?}");
    assert!(
        rows.contains(&"7,\"row 7\"".to_owned()) || rows.contains(&"7,row 7".to_owned()),
        "{rows:?}"
    );
    assert_eq!(
        names_in(&warehouse.join("default")),
        ["daily"],
        "no staging left"
    );
    let jobs = app.get("/v1/jobs").await;
    let job = &jobs.body["jobs"][0];
    assert_eq!(job["status"], "FINISHED", "{}", jobs.text);
    let job = app
        .get(&format!("/v1/jobs/{}", job["id"].as_str().unwrap()))
        .await;
    let actions: Vec<(&str, &str)> = job.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap(),
                a["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    // Flink's filesystem sink makes its directory in the client, before
    // the JobManager's begin: ctasd adopts it.
    assert_eq!(
        actions,
        [("begin", "adopted"), ("commit", "committed")],
        "{}",
        job.text
    );
    let flink_job = job.body["engine_job_id"].as_str().unwrap_or_default();
    assert_eq!(flink_job.len(), 32, "Flink's job id is kept: {}", job.text);

    // The same CTAS onto the table that now exists: refused, no job runs.
    let refused = ctas("daily", json!({}));
    assert!(!said(&refused).contains("DONE"), "{}", said(&refused));
    assert!(said(&refused).contains("REFUSED:"), "{}", said(&refused));
    assert!(
        said(&refused).contains("TABLE_EXISTS"),
        "{}",
        said(&refused)
    );
    assert_eq!(rows_on_disk(&warehouse.join("default/daily")).len(), 50);
    let jobs = app.get("/v1/jobs").await;
    assert_eq!(
        jobs.body["jobs"].as_array().unwrap().len(),
        1,
        "ctasd made no job"
    );

    // IF NOT EXISTS onto it: the job runs, its rows go nowhere.
    let skipped = ctas("daily", json!({"statement": "if_not_exists", "rows": 10}));
    assert!(skipped.status.success(), "{}", said(&skipped));
    assert_eq!(rows_on_disk(&warehouse.join("default/daily")).len(), 50);
    let jobs = app.get("/v1/jobs").await;
    let skipping = jobs.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["hooks"][0]["skipped"] == true);
    assert_eq!(skipping.count(), 1, "{}", jobs.text);

    // CREATE OR REPLACE: the new rows take the old ones' place at the end.
    let replaced = ctas(
        "daily",
        json!({"statement": "create_or_replace", "rows": 20}),
    );
    assert!(replaced.status.success(), "{}", said(&replaced));
    assert_eq!(rows_on_disk(&warehouse.join("default/daily")).len(), 20);
    assert_eq!(
        names_in(&warehouse.join("default")),
        ["daily"],
        "no staging left"
    );

    // Plain DDL: CREATE TABLE through ctasd (the table is there, empty),
    // then DROP TABLE (ctasd made it, so ctasd drops it).
    let ddl = ctas(
        "daily",
        json!({"statement": "if_not_exists", "rows": 1, "ddl": [
            "CREATE TABLE lake.`default`.plain (id BIGINT NOT NULL, note STRING) WITH ('format' = 'csv')",
            "DROP TABLE lake.`default`.plain"]}),
    );
    assert_done(&flink, &ddl);
    assert!(
        said(&ddl).contains("DDL DONE: CREATE TABLE"),
        "{}",
        said(&ddl)
    );
    assert!(
        said(&ddl).contains("DDL DONE: DROP TABLE"),
        "{}",
        said(&ddl)
    );
    let plain = app
        .get("/v1/catalogs/lake/databases/default/tables/plain")
        .await;
    assert_eq!(plain.status, 404, "dropped: {}", plain.text);

    // A job that fails half-way: no table, no staging.
    let failed = ctas("broken", json!({"fail_at": 20}));
    assert!(!failed.status.success(), "{}", said(&failed));
    let missing = app
        .get("/v1/catalogs/lake/databases/default/tables/broken")
        .await;
    assert_eq!(missing.status, 404, "{}", missing.text);
    assert_eq!(
        names_in(&warehouse.join("default")),
        ["daily"],
        "nothing left"
    );

    // Audits in the statement's options: too few rows, so Flink's job
    // finishes but nothing is published; the staging waits in quarantine
    // until an operator publishes it anyway.
    let audited = ctas(
        "audited",
        json!({"rows": 30, "options": {"ctasd.audit.0.kind": "row_count", "ctasd.audit.0.min": "100",
                                       "ctasd.audit.1.kind": "not_null", "ctasd.audit.1.columns.0": "id"}}),
    );
    assert_done(&flink, &audited);
    let missing = app
        .get("/v1/catalogs/lake/databases/default/tables/audited")
        .await;
    assert_eq!(missing.status, 404, "not published: {}", missing.text);
    let jobs = app.get("/v1/jobs?page_size=1").await;
    let id = jobs.body["jobs"][0]["id"].as_str().unwrap().to_owned();
    let job = app.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(job.body["settlement"], "quarantined", "{}", job.text);
    let results = &job.body["hooks"][0]["audit_results"];
    assert_eq!(results[0]["observed"], "30", "{results}");
    assert_eq!(results[1]["passed"], true, "{results}");
    let staging = job.body["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap();
    assert_eq!(
        rows_on_disk(&warehouse.join("default").join(staging)).len(),
        30
    );
    assert!(
        flink
            .logs()
            .contains("ctasd did not publish lake.default.audited"),
        "the JobManager says so: {}",
        flink.log_tail()
    );
    let commit = job.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "commit")
        .unwrap()["id"]
        .clone();
    let published = app
        .post(
            &format!("/v1/jobs/{id}/actions/{commit}/publish-anyway"),
            &json!({"reason": "a short day"}),
        )
        .await;
    assert_eq!(published.status, 200, "{}", published.text);
    assert_eq!(rows_on_disk(&warehouse.join("default/audited")).len(), 30);
    assert_eq!(names_in(&warehouse.join("default")), ["audited", "daily"]);
    flink.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_flink_ctas_onto_a_postgres_catalog_publishes_its_rows_at_the_end_only() {
    let Some(pg) = crate::helpers::TestPostgres::create().await else {
        return;
    };
    let Some(mut flink) = FlinkCluster::configured() else {
        return;
    };
    let home = std::env::var("CTASD_TEST_FLINK_HOME").unwrap();
    flink.add_to_lib(&built_jar(&home));
    // The database's JDBC driver, from Debian's libpostgresql-jdbc-java.
    flink.add_to_lib(Path::new("/usr/share/java/postgresql.jar"));
    flink.start().await;
    let app = TestApp::spawn().await;
    let options = crate::helpers::postgres_options(&pg);
    assert_eq!(app.register("pg", options).await.status, 201);
    let ctas = |table: &str, extra: Value| {
        let spec = json!({"url": app.url(""), "catalog": "pg", "database": pg.database,
                              "password": crate::helpers::SECRET, "table": table, "rows": 1200});
        run_native(&flink, spec, extra)
    };
    let count = |table: &'static str| {
        let pg = &pg;
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM \"{table}\""
            )))
            .fetch_one(&mut pg.connect().await)
            .await
            .ok()
        }
    };
    let tables = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1",
        )
        .fetch_all(&mut pg.connect().await)
        .await
        .unwrap()
    };

    assert_done(&flink, &ctas("daily", json!({})));
    assert_eq!(count("daily").await, Some(1200), "every row, in batches");
    assert_eq!(tables().await, ["daily"], "no staging left");

    let failed = ctas("broken", json!({"fail_at": 700}));
    assert!(!failed.status.success(), "{}", said(&failed));
    assert_eq!(count("broken").await, None, "no table");
    assert_eq!(tables().await, ["daily"], "no staging left");
    flink.stop();
}

/// The ctasd job of the statement onto `table`, once its staged table has
/// begun on the JobManager (it then carries Flink's job id).
async fn begun(app: &TestApp, table: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let jobs = app.get("/v1/jobs").await;
        let found = jobs.body["jobs"].as_array().unwrap().iter().find(|j| {
            j["hooks"][0]["target"]["table"] == table && j["engine_job_id"].as_str().is_some()
        });
        if let Some(job) = found {
            return job.clone();
        }
        assert!(std::time::Instant::now() < deadline, "{}", jobs.text);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Waits until the ctasd job reaches `status`, all of its actions done.
async fn settled_as(app: &TestApp, id: &str, status: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let job = app.get(&format!("/v1/jobs/{id}")).await;
        if job.body["status"] == status && job.body["settlement"] == "settled" {
            return job.body;
        }
        assert!(std::time::Instant::now() < deadline, "{}", job.text);
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_ctas_leaves_nothing_and_one_ctasd_could_not_be_told_of_is_finished_by_its_watcher()
 {
    let Some((mut flink, app, warehouse)) = a_lake_on_flink().await else {
        return;
    };
    let engine = json!({"name": "flink", "url": flink.url(), "poll_interval_ms": 200});
    assert_eq!(app.post("/v1/engines", &engine).await.status, 201);
    // The JobManager reaches ctasd through a proxy the test can cut.
    let proxy = crate::helpers::TcpProxy::start(app.addr).await;
    let through_proxy = format!("http://127.0.0.1:{}", proxy.port);
    let submit = |table: &str, rows: u64| {
        let spec = json!({"url": through_proxy, "catalog": "lake", "table": table, "rows": rows,
                          "rows_per_second": 50, "engine": "flink", "detached": true,
                          "mode": if table == "events" { "streaming" } else { "batch" }});
        tokio::task::block_in_place(|| {
            flink.run_python(&scripts().join("native_ctas.py"), &spec, true)
        })
    };

    // Cancelled while it runs: aborted, nothing left.
    submit("cancelled", 100_000);
    let job = begun(&app, "cancelled").await;
    // While it runs, the table is not there: not in ctasd, not on disk
    // (only ctasd's hidden staging is).
    let running = app
        .get("/v1/catalogs/lake/databases/default/tables/cancelled")
        .await;
    assert_eq!(running.status, 404, "{}", running.text);
    let on_disk = names_in(&warehouse.join("default"));
    assert!(
        on_disk.len() == 1 && on_disk[0].starts_with("_ctasd_stg_"),
        "{on_disk:?}"
    );
    flink.cancel(job["engine_job_id"].as_str().unwrap()).await;
    let id = job["id"].as_str().unwrap();
    let ended = settled_as(&app, id, "FAILED").await;
    assert!(
        ended["actions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "abort" && a["state"] == "done"),
        "{ended}"
    );
    assert_eq!(
        names_in(&warehouse.join("default")),
        Vec::<String>::new(),
        "nothing left"
    );

    // A streaming CTAS: its table is there from the start and stays when
    // the job is cancelled.
    submit("events", 100_000);
    let job = begun(&app, "events").await;
    assert_eq!(
        names_in(&warehouse.join("default")),
        ["events"],
        "there from the start"
    );
    flink.cancel(job["engine_job_id"].as_str().unwrap()).await;
    settled_as(&app, job["id"].as_str().unwrap(), "FAILED").await;
    let kept = app
        .get("/v1/catalogs/lake/databases/default/tables/events")
        .await;
    assert_eq!(kept.status, 200, "a streaming table stays: {}", kept.text);
    std::fs::remove_dir_all(warehouse.join("default/events")).unwrap();

    // ctasd is down when the job finishes: the JobManager lives on, and
    // once ctasd is back its watcher publishes the table from Flink's
    // FINISHED, once.
    submit("late", 150);
    let job = begun(&app, "late").await;
    proxy.refuse();
    let stopped = app.stop_keeping_store().await;
    let flink_job = job["engine_job_id"].as_str().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let seen: Value = reqwest::get(format!("{}/jobs/{flink_job}", flink.url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if seen["state"] == "FINISHED" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{seen}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    // ctasd is back (its store as it was): its watcher finds the job done.
    let app = stopped.start_again().await;
    let id = job["id"].as_str().unwrap();
    let ended = settled_as(&app, id, "FINISHED").await;
    let commits: Vec<&Value> = ended["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "commit")
        .collect();
    assert_eq!(commits.len(), 1, "{ended}");
    assert_eq!(commits[0]["outcome"], "committed", "{ended}");
    assert_eq!(rows_on_disk(&warehouse.join("default/late")).len(), 150);
    assert_eq!(names_in(&warehouse.join("default")), ["late"]);
    let overview = reqwest::get(format!("{}/overview", flink.url()))
        .await
        .unwrap();
    assert_eq!(overview.status(), 200, "the JobManager survived");
    flink.stop();
}
