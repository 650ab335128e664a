//! The contract between an engine and ctasd, over HTTP on the real systems:
//! restarts, streaming replaces, the published table as declared, failures
//! that end (and the operator's say over them), engine job ids.

use ctasd::domain::job::JobStatus::*;
use serde_json::{Value, json};

use crate::helpers::{SECRET, TestApp, TestMysql, TestPostgres, mysql_options, postgres_options};
use crate::staging::world_options;

fn orders() -> Value {
    json!({"columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "VARCHAR(20)"}]})
}

async fn submit(
    app: &TestApp,
    mode: &str,
    kind: &str,
    database: &str,
    table: &str,
    definition: Value,
) -> Value {
    let body = json!({"name": "contract", "mode": mode, "hooks": [{"kind": kind,
        "target": {"catalog": "c", "database": database, "table": table}, "table": definition}]});
    app.submit(&body).await.job
}

fn write_name(job: &Value) -> String {
    job["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_restarted_batch_job_publishes_the_rows_of_its_last_attempt_once_everywhere() {
    for (world, options, database) in world_options().await {
        for restart in [
            [Restarting, Created, Running],
            [Restarting, Running, Running],
        ] {
            let app = TestApp::spawn().await;
            app.register("c", options.clone()).await;
            let job = submit(
                &app,
                "batch",
                "create_table_as",
                &database,
                "orders",
                orders(),
            )
            .await;
            let id = job["id"].as_str().unwrap();
            let staging = write_name(&job);

            app.report_all(id, &[Created]).await;
            world.insert(&staging, &[1, 2]).await;
            app.report_all(id, &[Running]).await;
            app.report_all(id, &restart).await;
            // The new attempt writes the same rows again.
            world.insert(&staging, &[1, 2]).await;
            app.report_all(id, &[Finished]).await;

            assert_eq!(world.ids("orders").await, Some(vec![1, 2]), "{restart:?}");
            world.drop_table("orders").await;
        }
    }
}

#[tokio::test]
async fn a_streaming_replace_has_the_new_columns_right_after_created_everywhere() {
    for (world, options, database) in world_options().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let first = submit(
            &app,
            "streaming",
            "create_table_as",
            &database,
            "clicks",
            orders(),
        )
        .await;
        app.report_all(first["id"].as_str().unwrap(), &[Created])
            .await;
        world.insert("clicks", &[5]).await;
        let wider = json!({"columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "VARCHAR(20)"},
                                        {"name": "url", "type": "VARCHAR(100)"}]});
        let second = submit(
            &app,
            "streaming",
            "replace_table_as",
            &database,
            "clicks",
            wider,
        )
        .await;
        let id = second["id"].as_str().unwrap();

        let created = app.report_all(id, &[Created]).await;
        let browsed = app
            .get(&format!(
                "/v1/catalogs/c/databases/{database}/tables/clicks"
            ))
            .await;
        let restarted = {
            app.report_all(id, &[Restarting]).await;
            app.report_all(id, &[Created]).await
        };

        assert_eq!(
            created.body["actions_taken"][0]["outcome"], "replaced",
            "{}",
            created.text
        );
        let columns: Vec<&str> = browsed.body["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["id", "note", "url"], "{}", browsed.text);
        assert_eq!(
            world.ids("clicks").await,
            Some(vec![]),
            "the old rows went with the old table"
        );
        assert_eq!(
            restarted.body["actions_taken"][0]["outcome"], "already_existed",
            "a restart keeps the replaced table and what was written to it"
        );
    }
}

#[tokio::test]
async fn the_published_postgres_table_carries_the_declared_key_name_and_comments() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", postgres_options(&pg)).await;
    let declared = json!({"columns": [{"name": "day", "type": "DATE NOT NULL", "comment": "the day"},
                                       {"name": "total", "type": "DECIMAL(12, 2)"}],
                           "primary_key": {"name": "pk_day", "columns": ["day"]},
                           "comment": "totals by day"});
    for (kind, mode) in [
        ("create_table_as", "batch"),
        ("replace_table_as", "batch"),
        ("replace_table_as", "streaming"),
    ] {
        let job = submit(
            &app,
            mode,
            kind,
            &pg.database,
            "daily_totals",
            declared.clone(),
        )
        .await;
        let id = job["id"].as_str().unwrap();
        app.report_all(id, &[Created, Running, Finished]).await;

        let mut conn = pg.connect().await;
        let key: String = sqlx::query_scalar(
            "SELECT conname::text FROM pg_constraint WHERE conrelid = 'daily_totals'::regclass AND contype = 'p'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        let (table_comment, column_comment): (Option<String>, Option<String>) = sqlx::query_as(
            "SELECT obj_description('daily_totals'::regclass, 'pg_class'), col_description('daily_totals'::regclass, 1)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(key, "pk_day", "{mode} {kind}");
        assert_eq!(
            table_comment.as_deref(),
            Some("totals by day"),
            "{mode} {kind}"
        );
        assert_eq!(column_comment.as_deref(), Some("the day"), "{mode} {kind}");
    }
}

#[tokio::test]
async fn the_published_mariadb_table_carries_the_declared_comments() {
    let Some(my) = TestMysql::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", mysql_options(&my)).await;
    let declared = json!({"columns": [{"name": "day", "type": "DATE NOT NULL", "comment": "the day"}],
                           "primary_key": {"name": "pk_day", "columns": ["day"]}, "comment": "totals by day"});
    let job = submit(
        &app,
        "batch",
        "create_table_as",
        &my.database,
        "daily_totals",
        declared,
    )
    .await;
    let id = job["id"].as_str().unwrap();
    app.report_all(id, &[Created, Finished]).await;

    let mut conn = my.connect().await;
    let (table_comment, column_comment): (String, String) = sqlx::query_as(
        "SELECT CAST(t.table_comment AS CHAR), CAST(c.column_comment AS CHAR) FROM information_schema.tables t \
         JOIN information_schema.columns c ON c.table_schema = t.table_schema AND c.table_name = t.table_name \
         WHERE t.table_schema = DATABASE() AND t.table_name = 'daily_totals'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        (table_comment.as_str(), column_comment.as_str()),
        ("totals by day", "the day")
    );
}

#[tokio::test]
async fn a_replace_blocked_by_a_dependent_view_fails_at_once_and_the_operator_settles_it() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", postgres_options(&pg)).await;
    pg.execute("CREATE TABLE base (id BIGINT NOT NULL, note VARCHAR(20)); CREATE VIEW v AS SELECT id FROM base")
        .await;
    let mut jobs = Vec::new();
    for _ in 0..2 {
        let job = submit(
            &app,
            "batch",
            "replace_table_as",
            &pg.database,
            "base",
            orders(),
        )
        .await;
        let id = job["id"].as_str().unwrap().to_owned();
        app.report_all(&id, &[Created]).await;
        jobs.push((id, write_name(&job)));
    }
    let (given_up, retried) = (&jobs[0], &jobs[1]);

    let finished = app.report_all(&given_up.0, &[Finished]).await;

    let commit = &finished.body["actions_taken"][0];
    assert_eq!(commit["state"], "failed", "{}", finished.text);
    assert_eq!(commit["attempts"], 1, "a refusal is not retried");
    let error = commit["last_error"].as_str().unwrap();
    assert!(
        error.contains(
            "PostgreSQL refused: cannot drop table base because other objects depend on it"
        ),
        "{error}"
    );
    assert!(error.contains("view v depends on table base"), "{error}");
    assert!(!error.contains("line"), "no source locations: {error}");
    assert_eq!(finished.body["job"]["settlement"], "failed");
    assert_eq!(finished.body["job"]["failures"][0]["action"], "commit");

    let action = commit["id"].as_i64().unwrap();
    let settled = app
        .post(
            &format!("/v1/jobs/{}/actions/{action}/give-up", given_up.0),
            &json!({}),
        )
        .await;
    assert_eq!(settled.status, 200, "{}", settled.text);
    let abort = settled.body["actions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (abort["action"].as_str(), abort["state"].as_str()),
        (Some("abort"), Some("done"))
    );
    let staging_left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename = $1")
            .bind(&given_up.1)
            .fetch_one(&mut pg.connect().await)
            .await
            .unwrap();
    assert_eq!(staging_left, 0, "giving up discards the staging");
    let events = app.get(&format!("/v1/jobs/{}/events", given_up.0)).await;
    assert!(
        events.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "intervention" && e["decision"] == "give_up"),
        "{}",
        events.text
    );

    // The other job's commit fails alike; once the view is gone, a retry publishes.
    pg.execute(&format!("INSERT INTO \"{}\" VALUES (7, 'new')", retried.1))
        .await;
    let failed = app.report_all(&retried.0, &[Finished]).await;
    let action = failed.body["actions_taken"][0]["id"].as_i64().unwrap();
    pg.execute("DROP VIEW v").await;
    let again = app
        .post(
            &format!("/v1/jobs/{}/actions/{action}/retry", retried.0),
            &json!({}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.body["settlement"], "settled", "{}", again.text);
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM base")
        .fetch_all(&mut pg.connect().await)
        .await
        .unwrap();
    assert_eq!(ids, [7]);
    let done_twice = app
        .post(
            &format!("/v1/jobs/{}/actions/{action}/retry", retried.0),
            &json!({}),
        )
        .await;
    done_twice.assert_problem(409, "ACTION_NOT_SETTLEABLE");
}

#[tokio::test]
async fn a_cancelled_job_whose_begin_cannot_succeed_ends_with_its_catalog_droppable() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let role = pg.limited_role().await;
    let app = TestApp::spawn().await;
    let mut options = postgres_options(&pg);
    options["username"] = json!(role.name);
    app.register("c", options).await;
    let job = submit(
        &app,
        "batch",
        "create_table_as",
        &pg.database,
        "t",
        orders(),
    )
    .await;
    let id = job["id"].as_str().unwrap();
    pg.execute(&format!(
        "REVOKE CREATE ON SCHEMA public FROM \"{}\"",
        role.name
    ))
    .await;

    let created = app.report_all(id, &[Created]).await;
    let cancelled = app.report_all(id, &[Canceled]).await;
    let dropped = app.delete("/v1/catalogs/c").await;

    let begin = &created.body["actions_taken"][0];
    assert_eq!(
        (begin["state"].as_str(), begin["attempts"].as_i64()),
        (Some("failed"), Some(1)),
        "{}",
        created.text
    );
    assert!(
        begin["last_error"]
            .as_str()
            .unwrap()
            .contains("permission denied"),
        "{begin}"
    );
    assert_eq!(
        cancelled.body["actions_taken"][0]["state"], "done",
        "{}",
        cancelled.text
    );
    assert_eq!(dropped.status, 204, "{}", dropped.text);
    assert!(!created.text.contains(SECRET));
}

#[tokio::test]
async fn a_job_carries_its_engine_id_which_finds_it() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let flink_id = "fd72014d4c864993a2e5a9287b4a9c5d";
    let body = json!({"name": "j", "mode": "batch", "engine_job_id": flink_id, "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "c", "table": "a"}, "table": orders()}]});
    let first = app.post("/v1/jobs", &body).await;
    let second = submit(&app, "batch", "create_table_as", "default", "b", orders()).await;
    let second_id = second["id"].as_str().unwrap();

    let found = app.get(&format!("/v1/jobs?engine_job_id={flink_id}")).await;
    let taken = app
        .patch(
            &format!("/v1/jobs/{second_id}"),
            &json!({"engine_job_id": flink_id}),
        )
        .await;
    let attached = app
        .patch(
            &format!("/v1/jobs/{second_id}"),
            &json!({"engine_job_id": "0123456789abcdef0123456789abcdef"}),
        )
        .await;

    assert_eq!(first.body["engine_job_id"], flink_id);
    let listed: Vec<&str> = found.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [first.body["id"].as_str().unwrap()]);
    taken.assert_problem(409, "ENGINE_JOB_ID_TAKEN");
    assert_eq!(attached.status, 200, "{}", attached.text);
    assert_eq!(
        attached.body["engine_job_id"],
        "0123456789abcdef0123456789abcdef"
    );
}

#[tokio::test]
async fn the_filesystem_write_location_is_a_file_uri_with_the_tables_connector_options() {
    let app = TestApp::spawn().await;
    app.filesystem_catalog("c").await;
    let table = json!({"columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "name with space", "type": "STRING"}],
                        "options": {"format": "csv", "csv.field-delimiter": ";"}});
    let job = submit(&app, "batch", "create_table_as", "db", "people", table).await;

    let location = &job["hooks"][0]["write_location"];
    let path = location["sink_options"]["path"].as_str().unwrap();
    assert!(path.starts_with("file:///"), "{location}");
    assert_eq!(location["sink_options"]["format"], "csv");
    assert_eq!(location["sink_options"]["csv.field-delimiter"], ";");
    assert_eq!(location["sink_options"]["connector"], "filesystem");
    let statement = location["sink_statement"].as_str().unwrap();
    assert!(
        statement.starts_with("CREATE TEMPORARY TABLE `people_sink` ("),
        "{statement}"
    );
    assert!(
        statement.contains("`name with space` VARCHAR(2147483647)"),
        "{statement}"
    );
    assert!(statement.contains("'format' = 'csv'"), "{statement}");
}

#[tokio::test]
async fn a_filesystem_table_that_names_no_format_gets_a_sink_flink_accepts_in_csv() {
    let app = TestApp::spawn().await;
    app.filesystem_catalog("c").await;
    let table = json!({"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]});
    let job = submit(&app, "batch", "create_table_as", "db", "plain", table).await;

    let location = &job["hooks"][0]["write_location"];
    assert_eq!(location["sink_options"]["format"], "csv", "{location}");
    let statement = location["sink_statement"].as_str().unwrap();
    assert!(statement.contains("'format' = 'csv'"), "{statement}");
    assert!(
        statement.contains("'connector' = 'filesystem'"),
        "{statement}"
    );
}
