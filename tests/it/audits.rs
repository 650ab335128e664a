//! Write–audit–publish, as a data engineer would try it over HTTP: audits
//! declared with the job run on the staging at FINISHED, before the
//! commit; a staging that passes is published, one that fails is not
//! (readers keep the old table, or none), is kept in quarantine or
//! discarded as the job says, and an operator can publish it anyway.
//! Checked on PostgreSQL, MariaDB and SQLite, the tables read back there.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{ServerProcess, TestApp, figure, sqlite_database};
use crate::staging::{World, world_options};

/// The SQL systems configured here, each with a registered catalog `c`.
async fn sql_worlds() -> Vec<(World, Value, String)> {
    world_options()
        .await
        .into_iter()
        .filter(|(world, _, _)| !matches!(world, World::Files(_)))
        .collect()
}

/// Runs a statement on the world as its owner would.
async fn run(world: &World, sql: &str) {
    match world {
        World::Postgres(pg) => pg.execute(sql).await,
        World::Mysql(my) => my.execute(sql).await,
        World::Sqlite(dir) => sqlite_database(dir.path(), "main", sql).await,
        World::Files(_) => unreachable!("files have no SQL"),
    }
}

fn orders_job(kind: &str, database: &str, audits: Value, extra: Value) -> Value {
    let mut job = json!({"name": "audited", "mode": "batch", "hooks": [{"kind": kind,
        "target": {"catalog": "c", "database": database, "table": "orders"},
        "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                              {"name": "note", "type": "VARCHAR(20)"}]},
        "audits": audits}]});
    for (key, value) in extra.as_object().unwrap() {
        job[key] = value.clone();
    }
    job
}

/// Submits `job`, reports CREATED and RUNNING, writes `ids` into the
/// staging as the engine would, then FINISHED: the job's id and the
/// FINISHED answer.
async fn run_job(app: &TestApp, world: &World, job: &Value, ids: &[i64]) -> (String, Value) {
    let submitted = app.post("/v1/jobs", job).await;
    assert_eq!(submitted.status, 201, "{}", submitted.text);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let staging = submitted.body["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(app.put_status(&id, "CREATED").await.status, 200);
    world.insert(&staging, ids).await;
    assert_eq!(app.put_status(&id, "RUNNING").await.status, 200);
    let finished = app.put_status(&id, "FINISHED").await;
    assert_eq!(finished.status, 200, "{}", finished.text);
    (id, finished.body)
}

fn commit_of(job: &Value) -> Value {
    job["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["action"] == "commit")
        .cloned()
        .unwrap()
}

fn every_audit() -> Value {
    json!([
        {"kind": "row_count", "min": 2, "max": 10},
        {"kind": "not_null", "columns": ["id", "note"]},
        {"kind": "unique", "columns": ["id"]},
        {"kind": "accepted_values", "column": "note", "values": ["n1", "n2", "n3"]},
        {"kind": "sql", "name": "ids positive", "query": "SELECT MIN(id) > 0 FROM {{ staging }}"}
    ])
}

#[tokio::test]
async fn a_staging_that_passes_every_audit_is_published_and_the_job_says_what_each_found() {
    for (world, options, database) in sql_worlds().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let job = orders_job("create_table_as", &database, every_audit(), json!({}));

        let (id, finished) = run_job(&app, &world, &job, &[1, 2, 3]).await;

        let commit = commit_of(&finished["job"]);
        assert_eq!(
            commit["outcome"],
            "committed",
            "{}: {finished}",
            world.label()
        );
        assert_eq!(
            world.ids("orders").await,
            Some(vec![1, 2, 3]),
            "{}",
            world.label()
        );
        let results = finished["job"]["hooks"][0]["audit_results"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(results.len(), 5, "{}: {finished}", world.label());
        assert!(
            results.iter().all(|r| r["passed"] == true),
            "{}: {results:?}",
            world.label()
        );
        assert_eq!(
            results[0]["observed"],
            "3",
            "{}: row_count observes the rows",
            world.label()
        );
        assert_eq!(finished["job"]["settlement"], "settled");
        let events = app
            .get(&format!("/v1/jobs/{id}/events?page_size=100"))
            .await;
        let audits = events.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "audit")
            .count();
        assert_eq!(audits, 5, "{}: {}", world.label(), events.text);
    }
}

#[tokio::test]
async fn a_failed_audit_keeps_the_staging_in_quarantine_until_an_operator_publishes_it_anyway() {
    for (world, options, database) in sql_worlds().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let job = orders_job("create_table_as", &database, every_audit(), json!({}));

        // A duplicate key: `unique(id)` fails, the rest pass.
        let (id, finished) = run_job(&app, &world, &job, &[1, 1, 2]).await;

        let label = world.label();
        let job = &finished["job"];
        let commit = commit_of(job);
        assert_eq!(commit["state"], "pending", "{label}: {finished}");
        assert_eq!(commit["outcome"], "quarantined", "{label}: {finished}");
        assert!(
            commit["last_error"]
                .as_str()
                .unwrap()
                .contains("unique(id)"),
            "{label}: {commit}"
        );
        assert_eq!(job["settlement"], "quarantined", "{label}");
        assert!(job["quarantined_until"].is_string(), "{label}: {job}");
        let unique = &job["hooks"][0]["audit_results"][2];
        assert_eq!(unique["name"], "unique(id)");
        assert_eq!(unique["passed"], false);
        assert_eq!(unique["observed"], "1", "{label}: one duplicated value");
        assert_eq!(
            world.ids("orders").await,
            None,
            "{label}: readers see no table"
        );
        let staging = job["hooks"][0]["write_location"]["name"].as_str().unwrap();
        assert!(world.exists(staging).await, "{label}: the staging is kept");
        let held = app.get("/v1/jobs?quarantined=true").await;
        assert_eq!(held.body["jobs"][0]["id"], id.as_str(), "{label}: listed");
        assert_eq!(held.body["jobs"].as_array().unwrap().len(), 1);

        let decision = format!("/v1/jobs/{id}/actions/{}/publish-anyway", commit["id"]);
        let published = app
            .post(
                &decision,
                &json!({"reason": "duplicates are expected today"}),
            )
            .await;

        assert_eq!(published.status, 200, "{label}: {}", published.text);
        assert_eq!(
            commit_of(&published.body)["outcome"],
            "committed",
            "{label}: {}",
            published.text
        );
        assert_eq!(world.ids("orders").await, Some(vec![1, 1, 2]), "{label}");
        assert!(!world.exists(staging).await, "{label}");
        let events = app
            .get(&format!("/v1/jobs/{id}/events?page_size=100"))
            .await;
        let decided = events.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "intervention")
            .cloned()
            .unwrap();
        assert_eq!(decided["decision"], "publish_anyway");
        assert_eq!(decided["reason"], "duplicates are expected today");
        let held = app.get("/v1/jobs?quarantined=true").await;
        assert_eq!(held.body["jobs"], json!([]), "{label}: no longer held");
    }
}

#[tokio::test]
async fn with_abort_a_vetoed_replace_leaves_readers_the_old_table_and_discards_the_staging() {
    for (world, options, database) in sql_worlds().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        world.create_old("orders").await;
        let audits = json!([{"kind": "row_count", "min": 5},
                            {"kind": "row_count_change", "min_ratio": 0.5}]);
        let job = orders_job(
            "replace_table_as",
            &database,
            audits,
            json!({"on_audit_failure": "abort"}),
        );

        let (_, finished) = run_job(&app, &world, &job, &[1, 2]).await;

        let label = world.label();
        let commit = commit_of(&finished["job"]);
        assert_eq!(commit["state"], "failed", "{label}: {finished}");
        assert_eq!(commit["outcome"], "vetoed", "{label}: {finished}");
        let results = &finished["job"]["hooks"][0]["audit_results"];
        assert_eq!(results[0]["observed"], "2", "{label}: {results}");
        assert_eq!(
            results[1]["passed"], true,
            "{label}: two rows over one: {results}"
        );
        assert_eq!(
            world.ids("orders").await,
            Some(vec![999]),
            "{label}: the old table stays"
        );
        let staging = finished["job"]["hooks"][0]["write_location"]["name"]
            .as_str()
            .unwrap();
        assert!(!world.exists(staging).await, "{label}: the staging is gone");
        assert_eq!(finished["job"]["settlement"], "failed");
        // A vetoed commit has nothing left to publish.
        let retry = app
            .post(
                &format!(
                    "/v1/jobs/{}/actions/{}/retry",
                    finished["job"]["id"].as_str().unwrap(),
                    commit["id"]
                ),
                &json!({}),
            )
            .await;
        assert_eq!(retry.status, 409, "{label}: {}", retry.text);
    }
}

#[tokio::test]
async fn a_quarantine_that_ends_discards_the_staging_and_the_table_never_appears() {
    for (world, options, database) in sql_worlds().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let audits = json!([{"kind": "not_null", "columns": ["note"]}]);
        let job = orders_job(
            "create_table_as",
            &database,
            audits,
            json!({"quarantine_seconds": 1}),
        );
        let submitted = app.post("/v1/jobs", &job).await;
        let id = submitted.body["id"].as_str().unwrap().to_owned();
        let staging = submitted.body["hooks"][0]["write_location"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        app.put_status(&id, "CREATED").await;
        let table = match world {
            World::Mysql(_) => format!("`{staging}`"),
            _ => format!("\"{staging}\""),
        };
        run(&world, &format!("INSERT INTO {table} VALUES (1, NULL)")).await;
        let finished = app.put_status(&id, "FINISHED").await;
        let label = world.label();
        assert_eq!(
            commit_of(&finished.body["job"])["outcome"],
            "quarantined",
            "{label}: {}",
            finished.text
        );
        assert_eq!(
            finished.body["job"]["hooks"][0]["audit_results"][0]["observed"],
            "1"
        );

        let mut job = Value::Null;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            job = app.get(&format!("/v1/jobs/{id}")).await.body;
            if commit_of(&job)["state"] != "pending" {
                break;
            }
        }
        let commit = commit_of(&job);
        assert_eq!(commit["outcome"], "vetoed", "{label}: {job}");
        assert!(
            commit["last_error"]
                .as_str()
                .unwrap()
                .contains("quarantine ended"),
            "{label}: {commit}"
        );
        assert!(
            !world.exists(&staging).await,
            "{label}: the staging is gone"
        );
        assert_eq!(world.ids("orders").await, None, "{label}");
    }
}

#[tokio::test]
async fn audits_that_cannot_hold_are_refused_at_submission_naming_the_audit() {
    for (_, options, database) in sql_worlds().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let refused = [
            (json!([{"kind": "not_null", "columns": ["nope"]}]), "'nope'"),
            (
                json!([{"kind": "sql", "name": "w", "query": "DELETE FROM {{ staging }}"}]),
                "one SELECT",
            ),
            (
                json!([{"kind": "sql", "name": "two", "query": "SELECT 1 FROM {{ staging }}; DROP TABLE x"}]),
                "one SELECT",
            ),
            (
                json!([{"kind": "sql", "name": "x", "query": "SELECT FROM WHERE {{ staging }}"}]),
                "does not parse",
            ),
            (
                json!([{"kind": "sql", "name": "copies", "query": "SELECT * INTO copied FROM {{ staging }}"}]),
                "audit sql(copies)",
            ),
            (
                json!([{"kind": "row_count_change", "max_ratio": 2}]),
                "replace",
            ),
        ];
        for (audits, words) in refused {
            let reply = app
                .post(
                    "/v1/jobs",
                    &orders_job("create_table_as", &database, audits.clone(), json!({})),
                )
                .await;
            assert_eq!(reply.status, 422, "{audits}: {}", reply.text);
            assert_eq!(reply.body["code"], "JOB_INVALID");
            assert_eq!(
                reply.body["errors"][0]["field"], "hooks[0].audits",
                "{}",
                reply.text
            );
            assert!(reply.text.contains(words), "{audits}: {}", reply.text);
        }
        let mut streaming = orders_job(
            "create_table_as",
            &database,
            json!([{"kind": "row_count", "min": 1}]),
            json!({}),
        );
        streaming["mode"] = json!("streaming");
        let reply = app.post("/v1/jobs", &streaming).await;
        assert_eq!(reply.status, 422, "{}", reply.text);
        assert!(reply.text.contains("batch jobs"), "{}", reply.text);
        let jobs = app.get("/v1/jobs").await;
        assert_eq!(
            jobs.body["jobs"].as_array().unwrap().len(),
            0,
            "nothing was submitted"
        );
    }
    let app = TestApp::spawn().await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let mut job = orders_job(
        "create_table_as",
        "default",
        json!([{"kind": "row_count", "min": 1}]),
        json!({}),
    );
    job["hooks"][0]["target"]["catalog"] = json!("mem");
    let reply = app.post("/v1/jobs", &job).await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert!(
        reply.text.contains("cannot run these audits"),
        "{}",
        reply.text
    );
}

#[tokio::test]
async fn an_audit_query_that_writes_or_runs_too_long_fails_its_audit_and_changes_nothing() {
    let Some((world, options, database)) = sql_worlds()
        .await
        .into_iter()
        .find(|(world, _, _)| matches!(world, World::Postgres(_)))
    else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", options).await;
    run(&world, "CREATE SEQUENCE audit_counter").await;
    let audits = json!([
        {"kind": "sql", "name": "writes", "query": "SELECT nextval('audit_counter') > 0 FROM {{ staging }}"},
        {"kind": "sql", "name": "sleeps", "query": "SELECT pg_sleep(60) IS NOT NULL FROM {{ staging }}"},
        {"kind": "sql", "name": "reads", "query": "SELECT current_user || ':' || version() FROM {{ staging }}"}
    ]);
    let job = orders_job("create_table_as", &database, audits, json!({}));

    let (_, finished) = run_job(&app, &world, &job, &[1]).await;

    let results = &finished["job"]["hooks"][0]["audit_results"];
    assert_eq!(results[0]["passed"], false, "{results}");
    assert!(
        results[0]["observed"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{results}"
    );
    assert_eq!(results[1]["passed"], false, "{results}");
    assert!(
        results[1]["observed"]
            .as_str()
            .unwrap()
            .contains("stopped after"),
        "{results}"
    );
    // What a query read stays in the database: the job says only whether
    // the answer was true.
    assert_eq!(results[2]["passed"], false, "{results}");
    assert_eq!(results[2]["observed"], "not a truth value", "{results}");
    assert_eq!(commit_of(&finished["job"])["outcome"], "quarantined");
    assert_eq!(world.ids("orders").await, None);
    if let World::Postgres(pg) = &world {
        let called: bool = sqlx::query_scalar("SELECT is_called FROM audit_counter")
            .fetch_one(&mut pg.connect().await)
            .await
            .unwrap();
        assert!(!called, "the sequence never moved: the write was refused");
    }
    let metrics = app.get("/metrics").await;
    assert!(
        metrics
            .text
            .contains("ctasd_audits_total{result=\"failed\"} 3"),
        "{}",
        metrics.text
    );
}

#[tokio::test]
async fn a_warehouse_staging_is_audited_from_its_csv_and_json_data_files() {
    let root = tempfile::tempdir().unwrap();
    let app = TestApp::spawn().await;
    app.register(
        "c",
        json!({"type": "filesystem", "path": root.path(), "default-database": "db"}),
    )
    .await;
    let audits = json!([
        {"kind": "row_count", "min": 2},
        {"kind": "not_null", "columns": ["note"]},
        {"kind": "unique", "columns": ["id"]},
        {"kind": "accepted_values", "column": "note", "values": ["a", "b"]}
    ]);
    for (format, good, bad) in [
        ("csv", "1,a\n2,b\n", "1,a\n1,\n3,c\n"),
        (
            "json",
            "{\"id\": 1, \"note\": \"a\"}\n{\"id\": 2, \"note\": \"b\"}\n",
            "{\"id\": 1, \"note\": \"a\"}\n{\"id\": 1, \"note\": null}\n{\"id\": 3, \"note\": \"c\"}\n",
        ),
    ] {
        for (table, rows, passes) in [
            (format!("good_{format}"), good, true),
            (format!("bad_{format}"), bad, false),
        ] {
            let mut job = orders_job("create_table_as", "db", audits.clone(), json!({}));
            job["hooks"][0]["target"]["table"] = json!(table);
            job["hooks"][0]["table"]["options"] = json!({"format": format});
            let submitted = app.post("/v1/jobs", &job).await;
            assert_eq!(submitted.status, 201, "{}", submitted.text);
            let id = submitted.body["id"].as_str().unwrap().to_owned();
            let created = app.put_status(&id, "CREATED").await;
            let staging = created.body["job"]["hooks"][0]["write_location"]["path"]
                .as_str()
                .unwrap()
                .to_owned();
            let staging = staging.trim_start_matches("file://").to_owned();
            std::fs::write(format!("{staging}/part-0.{format}"), rows).unwrap();
            // An engine's own file, skipped as engines skip it.
            std::fs::write(format!("{staging}/_SUCCESS"), "not a row").unwrap();
            // A link planted among the data files, to rows outside the
            // warehouse: not followed, so not counted, and nothing read there.
            let outside = root.path().join(format!("outside-{table}.{format}"));
            let outside_rows = match format {
                "csv" => "7,\n7,\n7,\n",
                _ => "{\"id\": 7, \"note\": null}\n{\"id\": 7, \"note\": null}\n",
            };
            std::fs::write(&outside, outside_rows).unwrap();
            if !passes {
                std::os::unix::fs::symlink(&outside, format!("{staging}/part-9.{format}")).unwrap();
            }
            let finished = app.put_status(&id, "FINISHED").await;
            let results = &finished.body["job"]["hooks"][0]["audit_results"];
            let published = root.path().join("db").join(&table);
            if passes {
                assert_eq!(
                    commit_of(&finished.body["job"])["outcome"],
                    "committed",
                    "{format}: {results}"
                );
                assert!(
                    published.join(format!("part-0.{format}")).exists(),
                    "{format}"
                );
            } else {
                assert_eq!(
                    commit_of(&finished.body["job"])["outcome"],
                    "quarantined",
                    "{format}: {results}"
                );
                let observed: Vec<&str> = results
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["observed"].as_str().unwrap())
                    .collect();
                assert_eq!(observed, ["3", "1", "1", "1"], "{format}: {results}");
                assert_eq!(std::fs::read_to_string(&outside).unwrap(), outside_rows);
                assert!(!published.exists(), "{format}: readers see no table");
                assert!(
                    std::path::Path::new(&staging).exists(),
                    "{format}: the staging is kept"
                );
            }
        }
    }
    let mut sql = orders_job(
        "create_table_as",
        "db",
        json!([{"kind": "sql", "name": "x", "query": "SELECT 1 = 1 FROM {{ staging }}"}]),
        json!({}),
    );
    sql["hooks"][0]["table"]["options"] = json!({"format": "csv"});
    let refused = app.post("/v1/jobs", &sql).await;
    assert_eq!(refused.status, 422, "{}", refused.text);
    assert!(refused.text.contains("needs SQL"), "{}", refused.text);
}

#[tokio::test]
async fn audits_in_their_property_map_form_gate_the_publish_as_the_json_form_does() {
    for (world, options, database) in sql_worlds().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let label = world.label();
        let mut job = orders_job("create_table_as", &database, json!([]), json!({}));
        job["hooks"][0]["audit_properties"] = json!({
            "audit.0.kind": "unique", "audit.0.columns.0": "id",
            "audit.1.kind": "row_count", "audit.1.min": "1"
        });

        let (id, finished) = run_job(&app, &world, &job, &[7, 7]).await;

        let results = &finished["job"]["hooks"][0]["audit_results"];
        assert_eq!(results[0]["name"], "unique(id)", "{label}: {results}");
        assert_eq!(results[0]["passed"], false, "{label}: {results}");
        assert_eq!(results[0]["observed"], "1", "{label}: one duplicated id");
        assert_eq!(results[1]["passed"], true, "{label}: {results}");
        assert_eq!(commit_of(&finished["job"])["outcome"], "quarantined");
        assert_eq!(world.ids("orders").await, None, "{label}: no table yet");
        let audits = &finished["job"]["hooks"][0]["audits"];
        assert_eq!(audits[0], json!({"kind": "unique", "columns": ["id"]}));

        let mut malformed = orders_job("create_table_as", &database, json!([]), json!({}));
        malformed["hooks"][0]["audit_properties"] =
            json!({"audit.0.kind": "row_count", "audit.0.min": "many"});
        let reply = app.post("/v1/jobs", &malformed).await;
        assert_eq!(reply.status, 422, "{label}: {}", reply.text);
        assert_eq!(
            reply.body["errors"][0]["field"],
            "hooks[0].audit_properties"
        );
        assert!(reply.text.contains("'audit.0.min'"), "{}", reply.text);
        let jobs = app.get("/v1/jobs").await;
        assert_eq!(jobs.body["jobs"].as_array().unwrap().len(), 1, "{id} only");
    }
}

/// One crash trial: a job with a hook on every SQL system, each audited
/// three times, run by a `ctasd serve` that kills itself at the `nth`
/// audit; the engine then reports `FINISHED` again to the restarted
/// server. `duplicated` writes a duplicate id, which fails `unique(id)`.
async fn killed_during_an_audit(nth: usize, duplicated: bool) {
    let worlds = sql_worlds().await;
    let data = tempfile::tempdir().unwrap();
    let kill_at = format!("audit-ran:{nth}");
    let mut server =
        ServerProcess::start_with_env(&data.path().join("d"), &[("CTASD_FAULT_KILL_AT", &kill_at)]);
    let hooks: Vec<Value> = worlds
        .iter()
        .enumerate()
        .map(|(index, (_, _, database))| {
            let mut job = orders_job("create_table_as", database, json!([]), json!({}));
            job["hooks"][0]["target"]["catalog"] = json!(format!("c{index}"));
            job["hooks"][0]["audits"] = json!([
                {"kind": "row_count", "min": 2},
                {"kind": "unique", "columns": ["id"]},
                {"kind": "sql", "name": "ids positive", "query": "SELECT MIN(id) > 0 FROM {{ staging }}"}
            ]);
            job["hooks"][0].clone()
        })
        .collect();
    let job =
        json!({"name": "audited", "mode": "batch", "on_audit_failure": "abort", "hooks": hooks});
    for (index, (_, options, _)) in worlds.iter().enumerate() {
        let catalog = json!({"name": format!("c{index}"), "options": options});
        let (status, _) = server
            .call(Method::POST, "/v1/catalogs", Some(&catalog))
            .await
            .unwrap();
        assert_eq!(status, 201);
    }
    let (_, submitted) = server
        .call(Method::POST, "/v1/jobs", Some(&job))
        .await
        .unwrap();
    let id = submitted["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/jobs/{id}/status");
    let (created, finished) = (json!({"status": "CREATED"}), json!({"status": "FINISHED"}));
    let (_, created) = server
        .call(Method::PUT, &path, Some(&created))
        .await
        .unwrap();
    let ids: &[i64] = if duplicated { &[1, 1] } else { &[1, 2] };
    for (index, (world, _, _)) in worlds.iter().enumerate() {
        let staging = created["job"]["hooks"][index]["write_location"]["name"]
            .as_str()
            .unwrap();
        world.insert(staging, ids).await;
    }
    // The server dies during the audits, run by the report or by the
    // resumer, which may have claimed the commit first: the report may or
    // may not have had its answer.
    let _ = server.call(Method::PUT, &path, Some(&finished)).await;
    assert_eq!(
        server.wait_for_sigkill(Duration::from_secs(10)),
        Some(true),
        "{kill_at}: killed at an audit"
    );

    let server = ServerProcess::start(&data.path().join("d"));
    let (status, _) = server
        .call(Method::PUT, &path, Some(&finished))
        .await
        .unwrap();
    assert_eq!(status, 200, "{kill_at}");
    let job = server.job_once_settled(&id).await;
    let context = format!("{kill_at}, duplicated {duplicated}: {job}");
    let commits: Vec<&Value> = job["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "commit")
        .collect();
    assert_eq!(commits.len(), worlds.len(), "{context}");
    for (index, (world, _, _)) in worlds.iter().enumerate() {
        let label = world.label();
        let results = job["hooks"][index]["audit_results"].as_array().unwrap();
        assert_eq!(
            results.len(),
            3,
            "{label}: each audit recorded once: {context}"
        );
        if duplicated {
            assert_eq!(commits[index]["outcome"], "vetoed", "{label}: {context}");
            assert_eq!(world.ids("orders").await, None, "{label}: {context}");
            assert_eq!(
                world.tables().await,
                Vec::<String>::new(),
                "{label}: staging discarded"
            );
        } else {
            assert!(
                ["committed", "already_committed"]
                    .contains(&commits[index]["outcome"].as_str().unwrap()),
                "{label}: {context}"
            );
            assert_eq!(
                world.ids("orders").await,
                Some(vec![1, 2]),
                "{label}: published once"
            );
            assert_eq!(world.tables().await, ["orders"], "{label}: no staging left");
        }
    }
    server.stop();
}

#[tokio::test]
async fn killed_during_an_audit_the_server_publishes_or_vetoes_exactly_once_after_its_restart() {
    let audits = 3 * sql_worlds().await.len();
    let mut trials = 0;
    for duplicated in [false, true] {
        for nth in [1, audits.div_ceil(2), audits] {
            killed_during_an_audit(nth, duplicated).await;
            trials += 1;
        }
    }
    figure(&format!(
        "audits crash: {trials} trials killed at an audit ({audits} per job), each published or vetoed once"
    ));
}

#[tokio::test]
async fn hostile_values_and_names_in_audits_reach_sql_only_as_quoted_text() {
    for (world, options, database) in sql_worlds().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        world.create_old("victim").await;
        let hostile = "n1'); DROP TABLE victim; --";
        let mut job = orders_job(
            "create_table_as",
            &database,
            json!([{"kind": "accepted_values", "column": "we\"ird`col", "values": ["n1", hostile]},
                   {"kind": "not_null", "columns": ["we\"ird`col"]}]),
            json!({"on_audit_failure": "abort"}),
        );
        job["hooks"][0]["table"]["columns"][1]["name"] = json!("we\"ird`col");
        let label = world.label();

        let (_, finished) = run_job(&app, &world, &job, &[1, 2, 3]).await;

        let results = &finished["job"]["hooks"][0]["audit_results"];
        assert_eq!(
            results[0]["observed"], "2",
            "{label}: n2 and n3 are outside: {finished}"
        );
        assert_eq!(results[1]["observed"], "0", "{label}: {results}");
        assert_eq!(
            world.ids("victim").await,
            Some(vec![999]),
            "{label}: the other table stays"
        );
    }
}
