//! Jobs over HTTP on every catalog type: the status report runs the hooks,
//! and the effect is checked in the external system.

use std::time::Duration;

use ctasd::domain::job::JobStatus::*;
use serde_json::{Value, json};

use crate::helpers::{Reply, Submitted, TestApp};
use crate::staging::world_options;

fn orders_table() -> Value {
    json!({"columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "VARCHAR(20)"}]})
}

async fn submit(app: &TestApp, mode: &str, kind: &str, database: &str, table: &str) -> Submitted {
    let body = json!({
        "name": "ctas",
        "mode": mode,
        "hooks": [{"kind": kind, "target": {"catalog": "c", "database": database, "table": table}, "table": orders_table()}]
    });
    app.submit(&body).await
}

/// The name of the table or directory the engine writes into.
fn write_name(job: &Value) -> String {
    job["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn app_on(options: &Value) -> TestApp {
    let app = TestApp::spawn().await;
    let registered = app.register("c", options.clone()).await;
    assert_eq!(registered.status, 201, "{}", registered.text);
    app
}

#[tokio::test]
async fn a_batch_job_publishes_its_rows_on_finished_everywhere() {
    for (world, options, database) in world_options().await {
        let app = app_on(&options).await;
        let job = submit(&app, "batch", "create_table_as", &database, "orders").await;
        let id = job.id.clone();

        let created = app.report(&id, Created).await;
        let staging = write_name(&created.body["job"]);
        assert_eq!(created.body["actions_taken"][0]["action"], "begin");
        assert_eq!(
            created.body["actions_taken"][0]["state"], "done",
            "{}",
            created.text
        );
        assert_eq!(
            world.ids(&staging).await,
            Some(vec![]),
            "the staging exists"
        );
        assert_eq!(world.ids("orders").await, None, "the target does not, yet");
        world.insert(&staging, &[1, 2, 3]).await;
        let finished = app.report_all(&id, &[Running, Finished]).await;

        assert_eq!(finished.body["actions_taken"][0]["action"], "commit");
        assert_eq!(
            finished.body["actions_taken"][0]["outcome"], "committed",
            "{}",
            finished.text
        );
        assert_eq!(world.ids("orders").await, Some(vec![1, 2, 3]));
        assert_eq!(world.ids(&staging).await, None, "the staging is gone");
    }
}

#[tokio::test]
async fn a_failed_or_cancelled_batch_job_leaves_no_target_and_no_staging() {
    for (world, options, database) in world_options().await {
        let app = app_on(&options).await;
        for ending in [&[Running, Failed][..], &[Running, Cancelling, Canceled][..]] {
            let job = submit(&app, "batch", "create_table_as", &database, "orders").await;
            let id = job.id.clone();
            let created = app.report(&id, Created).await;
            let staging = write_name(&created.body["job"]);
            world.insert(&staging, &[1]).await;

            let ended = app.report_all(&id, ending).await;

            assert_eq!(
                ended.body["actions_taken"][0]["action"], "abort",
                "{}",
                ended.text
            );
            assert_eq!(ended.body["actions_taken"][0]["state"], "done");
            assert_eq!(world.ids(&staging).await, None);
            assert_eq!(world.ids("orders").await, None);
        }
    }
}

#[tokio::test]
async fn a_streaming_table_appears_on_created_and_stays_when_the_job_fails() {
    for (world, options, database) in world_options().await {
        let app = app_on(&options).await;
        let job = submit(&app, "streaming", "create_table_as", &database, "events").await;
        let id = job.id.clone();

        let created = app.report(&id, Created).await;
        assert_eq!(
            created.body["actions_taken"][0]["outcome"], "created",
            "{}",
            created.text
        );
        assert_eq!(
            write_name(&created.body["job"]),
            "events",
            "a streaming job writes into the target"
        );
        world.insert("events", &[5]).await;
        app.report_all(&id, &[Running, Failed]).await;

        assert_eq!(world.ids("events").await, Some(vec![5]));
    }
}

#[tokio::test]
async fn a_replacement_shows_old_rows_until_finished_and_new_rows_after() {
    for (world, options, database) in world_options().await {
        let app = app_on(&options).await;
        let first = submit(&app, "batch", "create_table_as", &database, "orders").await;
        let first_id = first.id.clone();
        let created = app.report(&first_id, Created).await;
        world
            .insert(&write_name(&created.body["job"]), &[1, 2])
            .await;
        app.report_all(&first_id, &[Running, Finished]).await;

        let second = submit(&app, "batch", "replace_table_as", &database, "orders").await;
        let id = second.id.clone();
        let created = app.report(&id, Created).await;
        world
            .insert(&write_name(&created.body["job"]), &[8, 9])
            .await;
        app.report(&id, Running).await;
        assert_eq!(
            world.ids("orders").await,
            Some(vec![1, 2]),
            "readers see the old rows meanwhile"
        );

        let finished = app.report(&id, Finished).await;

        assert_eq!(
            finished.body["actions_taken"][0]["outcome"], "committed",
            "{}",
            finished.text
        );
        assert_eq!(world.ids("orders").await, Some(vec![8, 9]));
    }
}

#[tokio::test]
async fn repeated_and_concurrent_reports_commit_once_and_answer_the_same() {
    let (world, options, database) = world_options().await.into_iter().next().unwrap();
    let app = app_on(&options).await;
    let job = submit(&app, "batch", "create_table_as", &database, "orders").await;
    let id = job.id.clone();
    let first = app.report(&id, Created).await;
    let again = app.report(&id, Created).await;
    assert_eq!(
        again.body, first.body,
        "CREATED twice (a JobManager failover) changes nothing"
    );
    world.insert(&write_name(&first.body["job"]), &[1, 2]).await;
    app.report(&id, Running).await;

    let reports = (0..20).map(|_| app.spawn_put_status(&id, "FINISHED"));
    let mut answers = Vec::new();
    for report in reports {
        answers.push(report.await.unwrap());
    }

    for answer in &answers {
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(
            answer.body, answers[0].body,
            "every report gets the same answer"
        );
    }
    let commits: Vec<&Value> = answers[0].body["job"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "commit")
        .collect();
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0]["outcome"], "committed");
    assert_eq!(world.ids("orders").await, Some(vec![1, 2]));
    let late = app.report(&id, Finished).await;
    assert_eq!(
        late.body, answers[0].body,
        "FINISHED reported again later: the same answer"
    );
}

#[tokio::test]
async fn leaving_a_terminal_status_is_refused_naming_the_legal_moves() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let job = submit(&app, "batch", "create_table_as", "default", "t").await;
    let id = job.id.clone();

    app.report_all(&id, &[Created, Running, Finished]).await;
    let after = app.report(&id, Running).await;

    after.assert_problem(409, "TRANSITION_ILLEGAL");
    assert!(
        after
            .detail()
            .contains("FINISHED, which is globally terminal"),
        "{}",
        after.detail()
    );
    app.put_status(&id, "BOGUS")
        .await
        .assert_problem(422, "BODY_INVALID");
    app.report("0123", Created)
        .await
        .assert_problem(400, "JOB_ID_INVALID");
    app.report(&"a".repeat(32), Created)
        .await
        .assert_problem(404, "JOB_NOT_FOUND");
}

#[tokio::test]
async fn statuses_a_poller_missed_are_applied_in_order_and_the_rows_published_everywhere() {
    for (world, options, database) in world_options().await {
        let app = app_on(&options).await;
        let job = submit(&app, "batch", "create_table_as", &database, "orders").await;
        let id = job.id.clone();
        let created = app.report(&id, Created).await;
        world
            .insert(&write_name(&created.body["job"]), &[1, 2])
            .await;

        // RUNNING came and went between two polls.
        let finished = app.report(&id, Finished).await;

        assert_eq!(finished.status, 200, "{}", finished.text);
        let taken: Vec<(&str, &str)> = finished.body["actions_taken"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["action"].as_str().unwrap(), a["state"].as_str().unwrap()))
            .collect();
        assert_eq!(taken, [("commit", "done")], "{}", finished.text);
        assert_eq!(world.ids("orders").await, Some(vec![1, 2]));
        let events = app.get(&format!("/v1/jobs/{id}/events")).await;
        let statuses: Vec<(&str, bool)> = events.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "status")
            .map(|e| (e["to"].as_str().unwrap(), e["inferred"].as_bool().unwrap()))
            .collect();
        assert_eq!(
            statuses,
            [
                ("INITIALIZING", false),
                ("CREATED", false),
                ("RUNNING", true),
                ("FINISHED", false)
            ]
        );
    }
}

#[tokio::test]
async fn a_job_seen_first_when_finished_is_begun_then_committed_in_one_report() {
    let app = TestApp::spawn().await;
    let warehouse = app.filesystem_catalog("c").await;
    let job = submit(&app, "batch", "create_table_as", "db", "late").await;
    let id = job.id.clone();
    // The engine wrote its files before ctasd heard of any status.
    let staging = warehouse.join("db").join(write_name(&job.job));
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("part-7"), b"row").unwrap();

    let now = chrono::Utc::now().timestamp_millis();
    let finished = app
        .client
        .put(app.url(&format!("/v1/jobs/{id}/status")))
        .json(
            &json!({"status": "FINISHED", "timestamps": {"CREATED": now - 410, "RUNNING": now - 290,
            "FINISHED": now, "FAILED": 0}}),
        )
        .send()
        .await
        .unwrap();
    let finished = Reply::from(finished).await;

    assert_eq!(finished.status, 200, "{}", finished.text);
    let taken: Vec<&str> = finished.body["actions_taken"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(taken, ["begin", "commit"]);
    assert!(
        finished.body["actions_taken"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["state"] == "done")
    );
    assert_eq!(
        crate::staging::part_ids(&warehouse.join("db").join("late")),
        Some(vec![7])
    );
    let events = app.get(&format!("/v1/jobs/{id}/events")).await;
    let created = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["to"] == "CREATED")
        .unwrap();
    assert_eq!(created["inferred"], true);
    let created_at = chrono::DateTime::from_timestamp_millis(now - 410).unwrap();
    assert_eq!(
        created["engine_at"],
        created_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    );
    let again = app.report(&id, Finished).await;
    assert_eq!(
        again.body["actions_taken"], finished.body["actions_taken"],
        "a repeat answers the same"
    );
}

#[tokio::test]
async fn an_in_memory_table_is_published_into_the_registered_catalog() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let job = submit(&app, "batch", "create_table_as", "default", "orders").await;
    let id = job.id.clone();
    app.report(&id, Created).await;
    assert_eq!(
        app.get("/v1/catalogs/c/databases/default/tables")
            .await
            .body["tables"],
        json!([])
    );

    app.report_all(&id, &[Running, Finished]).await;

    let table = app
        .get("/v1/catalogs/c/databases/default/tables/orders")
        .await;
    assert_eq!(table.status, 200, "{}", table.text);
    assert_eq!(table.body["columns"][0]["name"], "id");
}

#[tokio::test]
async fn an_in_memory_job_that_fails_or_is_cancelled_publishes_nothing() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    for ending in [&[Running, Failed][..], &[Running, Cancelling, Canceled][..]] {
        let job = submit(&app, "batch", "create_table_as", "default", "orders").await;
        let id = job.id.clone();
        app.report(&id, Created).await;

        let ended = app.report_all(&id, ending).await;

        assert_eq!(
            ended.body["actions_taken"][0]["outcome"], "aborted",
            "{}",
            ended.text
        );
        assert_eq!(
            app.get("/v1/catalogs/c/databases/default/tables")
                .await
                .body["tables"],
            json!([])
        );
    }
}

#[tokio::test]
async fn submission_checks_targets_and_types_before_anything_is_created() {
    let app = TestApp::spawn().await;
    let dir = app.scratch("lite");
    crate::helpers::sqlite_database(&dir, "main", "CREATE TABLE existing (x INT)").await;
    app.register("c", json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()), "default-database": "main"}))
        .await;
    let hook = |kind: &str, table: &str, columns: Value| json!({"name": "j", "mode": "batch", "hooks": [{"kind": kind, "target": {"catalog": "c", "table": table}, "table": {"columns": columns}}]});
    let ok_columns = json!([{"name": "id", "type": "BIGINT"}]);

    app.post(
        "/v1/jobs",
        &hook("create_table_as", "existing", ok_columns.clone()),
    )
    .await
    .assert_problem(409, "TABLE_EXISTS");
    app.post(
        "/v1/jobs",
        &hook("replace_table_as", "absent", ok_columns.clone()),
    )
    .await
    .assert_problem(409, "TARGET_MISSING");
    let unsupported = app
        .post(
            "/v1/jobs",
            &hook(
                "create_table_as",
                "t",
                json!([{"name": "price", "type": "DECIMAL(30, 2)"}]),
            ),
        )
        .await;
    unsupported.assert_problem(422, "TABLE_UNSUPPORTED");
    assert!(
        unsupported.detail().contains("column 'price'"),
        "{}",
        unsupported.detail()
    );
    app.post(
        "/v1/jobs",
        &hook(
            "create_table_as",
            "t",
            json!([{"name": "x", "type": "BIGGINT"}]),
        ),
    )
    .await
    .assert_problem(422, "TABLE_INVALID");
    let mut unknown = hook("create_table_as", "t", ok_columns.clone());
    unknown["hooks"][0]["target"]["catalog"] = json!("nope");
    app.post("/v1/jobs", &unknown)
        .await
        .assert_problem(422, "CATALOG_NOT_FOUND");

    let mut skip = hook("create_table_as", "existing", ok_columns);
    skip["hooks"][0]["if_not_exists"] = json!(true);
    let skipped = app.post("/v1/jobs", &skip).await;
    assert_eq!(skipped.status, 201, "{}", skipped.text);
    assert_eq!(skipped.body["hooks"][0]["skipped"], true);
    let id = skipped.body["id"].as_str().unwrap();
    let created = app.report(id, Created).await;
    assert_eq!(
        created.body["actions_taken"],
        json!([]),
        "a skipped hook takes no action"
    );
    assert_eq!(
        app.get("/v1/catalogs/c/databases/main/tables").await.body["tables"],
        json!([{"name": "existing"}])
    );
}

#[tokio::test]
async fn resubmitting_the_same_id_returns_the_job_and_a_different_body_conflicts() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let id = "00112233445566778899aabbccddeeff";
    let body = json!({"id": id, "name": "j", "mode": "batch",
        "hooks": [{"kind": "create_table_as", "target": {"catalog": "c", "table": "t"}, "table": orders_table()}]});

    let first = app.post("/v1/jobs", &body).await;
    let again = app.post("/v1/jobs", &body).await;
    let mut different = body.clone();
    different["name"] = json!("other");
    let clash = app.post("/v1/jobs", &different).await;

    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(first.headers["location"], format!("/v1/jobs/{id}"));
    assert_eq!(again.status, 200);
    assert_eq!(again.body, first.body);
    clash.assert_problem(409, "JOB_EXISTS");
}

#[tokio::test]
async fn a_property_map_as_flink_writes_it_comes_back_identical() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let properties = json!({
        "schema.0.name": "id", "schema.0.data-type": "BIGINT NOT NULL", "schema.0.comment": "order id",
        "schema.1.name": "ts", "schema.1.data-type": "TIMESTAMP(3)",
        "schema.2.name": "day", "schema.2.data-type": "VARCHAR(2147483647)", "schema.2.expr": "DATE_FORMAT(`ts`, 'yyyy-MM-dd')",
        "schema.watermark.0.rowtime": "ts", "schema.watermark.0.strategy.expr": "`ts` - INTERVAL '5' SECOND",
        "schema.watermark.0.strategy.data-type": "TIMESTAMP(3)",
        "schema.primary-key.name": "PK_id", "schema.primary-key.columns": "id",
        "partition.keys.0.name": "day", "comment": "orders", "connector": "filesystem"
    });
    let body = json!({"name": "j", "mode": "streaming",
        "hooks": [{"kind": "create_table_as", "target": {"catalog": "c", "table": "t"}, "table_properties": properties}]});

    let submitted = app.post("/v1/jobs", &body).await;
    assert_eq!(submitted.status, 201, "{}", submitted.text);
    let read = app
        .get(&format!(
            "/v1/jobs/{}",
            submitted.body["id"].as_str().unwrap()
        ))
        .await;

    assert_eq!(read.body["hooks"][0]["table_properties"], properties);
    assert_eq!(
        read.body["hooks"][0]["table"]["columns"][2]["expr"],
        "DATE_FORMAT(`ts`, 'yyyy-MM-dd')"
    );
}

#[tokio::test]
async fn a_finished_job_whose_commit_never_ran_is_published_after_a_restart_without_any_request() {
    let (world, options, database) = world_options().await.into_iter().next().unwrap();
    let app = app_on(&options).await;
    let job = submit(&app, "batch", "create_table_as", &database, "orders").await;
    let id = job.id.clone();
    let created = app.report_all(&id, &[Created, Running]).await;
    world
        .insert(&write_name(&created.body["job"]), &[4, 5])
        .await;
    let app = app.stop_keeping_store().await;
    let store = app.store().await;

    // As if the process died right after storing FINISHED: the commit is in
    // the ledger, and nothing ran it.
    let job_id = ctasd::domain::job::JobId::parse(&id).unwrap();
    store
        .transition_job(
            &job_id,
            &ctasd::domain::job::StatusReport::new(ctasd::domain::job::JobStatus::Finished),
            None,
        )
        .await
        .unwrap();
    drop(store);
    assert_eq!(world.ids("orders").await, None);
    let app = app.start_again().await;

    let mut published = None;
    for _ in 0..100 {
        published = world.ids("orders").await;
        if published.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        published,
        Some(vec![4, 5]),
        "published by the resumer alone"
    );
    let job = app.get(&format!("/v1/jobs/{id}")).await;
    let commits: Vec<&Value> = job.body["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "commit")
        .collect();
    assert_eq!(commits.len(), 1);
    assert_eq!(commits[0]["state"], "done");
}

#[tokio::test]
async fn jobs_are_listed_in_pages_and_filtered_by_status_and_catalog() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    app.register("d", json!({"type": "generic_in_memory"}))
        .await;
    let mut ids = Vec::new();
    for (catalog, table) in [("c", "a"), ("c", "b"), ("c", "e"), ("d", "a")] {
        let body = json!({"name": "j", "mode": "batch",
            "hooks": [{"kind": "create_table_as", "target": {"catalog": catalog, "table": table}, "table": orders_table()}]});
        ids.push(
            app.post("/v1/jobs", &body).await.body["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    app.report(&ids[1], Created).await;

    let mut listed = Vec::new();
    let mut path = "/v1/jobs?page_size=3".to_owned();
    loop {
        let page = app.get(&path).await;
        assert_eq!(page.status, 200, "{}", page.text);
        listed.extend(
            page.body["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_str().unwrap().to_owned()),
        );
        match page.body["next_page_token"].as_str() {
            Some(token) => path = format!("/v1/jobs?page_size=3&page_token={token}"),
            None => break,
        }
    }
    let created = app.get("/v1/jobs?status=CREATED").await;
    let on_d = app.get("/v1/jobs?catalog=d").await;

    ids.reverse();
    assert_eq!(listed, ids, "every job once, newest first");
    assert_eq!(created.body["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(created.body["jobs"][0]["status"], "CREATED");
    assert_eq!(on_d.body["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(on_d.body["jobs"][0]["hooks"][0]["target"]["catalog"], "d");
    app.get("/v1/jobs?status=SLEEPING")
        .await
        .assert_problem(400, "QUERY_INVALID");
    app.get("/v1/jobs?page_token=YzE6Yw")
        .await
        .assert_problem(400, "PAGE_TOKEN_INVALID");
}

#[tokio::test]
async fn jobs_are_listed_newest_first_within_a_creation_time_window() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let mut jobs = Vec::new();
    for table in ["a", "b", "e", "f", "g"] {
        let body = json!({"name": table, "mode": "batch",
            "hooks": [{"kind": "create_table_as", "target": {"catalog": "c", "table": table}, "table": orders_table()}]});
        jobs.push(app.post("/v1/jobs", &body).await.body);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let names = |reply: &crate::helpers::Reply| -> Vec<String> {
        reply.body["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let at = |i: usize| {
        let time = jobs[i]["created_at"].as_str().unwrap();
        time.replace('+', "%2B")
    };

    let window = app
        .get(&format!(
            "/v1/jobs?created_after={}&created_before={}",
            at(1),
            at(4)
        ))
        .await;
    let first_page = app.get("/v1/jobs?page_size=2").await;
    let token = first_page.body["next_page_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let second_page = app
        .get(&format!("/v1/jobs?page_size=2&page_token={token}"))
        .await;

    assert_eq!(window.status, 200, "{}", window.text);
    assert_eq!(
        names(&window),
        ["f", "e", "b"],
        "from the second job up to the fifth, newest first"
    );
    assert_eq!(names(&first_page), ["g", "f"]);
    assert_eq!(names(&second_page), ["e", "b"]);
    app.get("/v1/jobs?created_after=yesterday")
        .await
        .assert_problem(400, "QUERY_INVALID");
}

#[tokio::test]
async fn events_tell_the_status_history_and_action_results_oldest_first() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let job = submit(&app, "batch", "create_table_as", "default", "t").await;
    let id = job.id.clone();
    let url = app.url(&format!("/v1/jobs/{id}/status"));
    app.client
        .put(url)
        .json(&json!({"status": "CREATED"}))
        .send()
        .await
        .unwrap();
    app.report_all(&id, &[Running, Failing]).await;
    let url = app.url(&format!("/v1/jobs/{id}/status"));
    app.client
        .put(url)
        .json(&json!({"status": "FAILED", "failure": "task lost"}))
        .send()
        .await
        .unwrap();

    let events = app.get(&format!("/v1/jobs/{id}/events")).await;

    let summary: Vec<String> = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| match e["kind"].as_str().unwrap() {
            "status" => format!("status {}", e["to"].as_str().unwrap()),
            _ => format!(
                "{} {}",
                e["action"].as_str().unwrap(),
                e["state"].as_str().unwrap()
            ),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "status INITIALIZING",
            "status CREATED",
            "begin done",
            "status RUNNING",
            "status FAILING",
            "status FAILED",
            "abort done"
        ]
    );
    let failed = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["to"] == "FAILED")
        .unwrap();
    assert_eq!(failed["failure"], "task lost");
    assert_eq!(failed["from"], "FAILING");
}

#[tokio::test]
async fn a_target_created_meanwhile_fails_the_commit_discards_the_staging_and_the_job_says_why() {
    let app = TestApp::spawn().await;
    let dir = app.scratch("lite");
    crate::helpers::sqlite_database(&dir, "main", "SELECT 1").await;
    let options = json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()), "default-database": "main"});
    app.register("c", options).await;
    let job = submit(&app, "batch", "create_table_as", "main", "orders").await;
    let id = job.id.clone();
    let created = app.report_all(&id, &[Created, Running]).await;
    let staging = write_name(&created.body["job"]);
    crate::helpers::sqlite_database(
        &dir,
        "main",
        "CREATE TABLE orders (mine INT); INSERT INTO orders VALUES (42)",
    )
    .await;

    let finished = app.report(&id, Finished).await;

    let commit = &finished.body["actions_taken"][0];
    assert_eq!(commit["state"], "failed", "{}", finished.text);
    assert!(
        commit["last_error"]
            .as_str()
            .unwrap()
            .contains("conflict at commit"),
        "{commit}"
    );
    let tables = app.get("/v1/catalogs/c/databases/main/tables/orders").await;
    assert_eq!(
        tables.body["columns"][0]["name"], "mine",
        "the other table is untouched"
    );
    use sqlx::Connection;
    let mut conn =
        sqlx::SqliteConnection::connect(&format!("sqlite://{}", dir.join("main.db").display()))
            .await
            .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE name = ?1")
        .bind(&staging)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "the staging was discarded");
}

#[tokio::test]
async fn a_catalog_cannot_be_dropped_while_an_unfinished_job_uses_it() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let job = submit(&app, "batch", "create_table_as", "default", "t").await;
    let id = job.id.clone();
    app.report(&id, Created).await;

    let refused = app.delete("/v1/catalogs/c").await;
    app.report_all(&id, &[Running, Finished]).await;
    let dropped = app.delete("/v1/catalogs/c").await;

    refused.assert_problem(409, "CATALOG_IN_USE");
    assert!(
        refused.detail().contains("1 unfinished job"),
        "{}",
        refused.detail()
    );
    assert_eq!(dropped.status, 204, "{}", dropped.text);
}

/// Every event of a job, read `page_size` at a time, and the last page.
async fn all_events(app: &TestApp, id: &str, page_size: u32) -> (Vec<Value>, Value) {
    let mut events = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut path = format!("/v1/jobs/{id}/events?page_size={page_size}");
        if let Some(token) = &token {
            path.push_str(&format!("&page_token={token}"));
        }
        let page = app.get(&path).await;
        assert_eq!(page.status, 200, "{}", page.text);
        events.extend(page.body["events"].as_array().unwrap().iter().cloned());
        match page.body["next_page_token"].as_str() {
            Some(next) => token = Some(next.to_owned()),
            None => return (events, page.body),
        }
    }
}

#[tokio::test]
async fn events_come_a_page_at_a_time_and_the_pages_make_the_whole() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let job = submit(&app, "batch", "create_table_as", "default", "t").await;
    app.report_all(&job.id, &[Created, Running, Restarting, Running, Finished])
        .await;

    let (whole, _) = all_events(&app, &job.id, 1000).await;
    let (paged, _) = all_events(&app, &job.id, 2).await;

    assert!(whole.len() > 6, "{whole:#?}");
    assert_eq!(paged, whole, "two at a time, nothing lost or repeated");
    let bad = app
        .get(&format!("/v1/jobs/{}/events?page_token=bm9wZQ", job.id))
        .await;
    bad.assert_problem(400, "PAGE_TOKEN_INVALID");
    let other_list = app.get("/v1/jobs?page_size=1").await;
    let foreign = other_list.body["next_page_token"].as_str().unwrap_or("x");
    app.get(&format!("/v1/jobs/{}/events?page_token={foreign}", job.id))
        .await
        .assert_problem(400, "PAGE_TOKEN_INVALID");
}

/// A streaming job through 35 restarts: its id and its events (the
/// history kept), checked to keep the latest 20 cycles and count the rest.
async fn restart_loop(app: &TestApp) -> (String, Vec<Value>) {
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let job = submit(app, "streaming", "create_table_as", "default", "t").await;
    app.report_all(&job.id, &[Created, Running]).await;
    for _ in 0..35 {
        app.report_all(&job.id, &[Restarting, Running]).await;
    }
    let (events, last_page) = all_events(app, &job.id, 1000).await;
    let restarts = events.iter().filter(|e| e["to"] == "RESTARTING").count();
    assert_eq!(restarts, 20, "the latest 20 cycles are kept");
    assert_eq!(
        last_page["folded_restarts"], 15,
        "the 15 before them are counted"
    );
    (job.id, events)
}

#[tokio::test]
async fn a_restart_loop_keeps_the_latest_cycles_on_postgresql_too() {
    let Some(store) = crate::helpers::TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn_with(Some(&store.url)).await;
    let (id, events) = restart_loop(&app).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM job_transitions WHERE job_id = $1")
        .bind(&id)
        .fetch_one(&mut store.connect().await)
        .await
        .unwrap();
    let shown = events.iter().filter(|e| e["kind"] == "status").count();
    assert_eq!(rows as usize, shown);
}

#[tokio::test]
async fn a_restart_loop_keeps_the_latest_cycles_in_the_history_and_counts_the_rest() {
    let app = TestApp::spawn().await;
    let (id, events) = restart_loop(&app).await;
    let statuses: Vec<&str> = events.iter().filter_map(|e| e["to"].as_str()).collect();
    assert_eq!(
        &statuses[..3],
        ["INITIALIZING", "CREATED", "RUNNING"],
        "the start stays"
    );
    assert_eq!(statuses.last(), Some(&"RUNNING"));
    // The store holds only what is shown.
    use sqlx::Connection;
    let file = app.settings().store.data_dir.join("ctasd.db");
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM job_transitions WHERE job_id = ?")
        .bind(&id)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows as usize, statuses.len());
    assert!(rows <= 3 + 2 * 20, "{rows} rows");
}
