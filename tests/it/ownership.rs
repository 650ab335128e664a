//! A commit never claims a table it did not publish. With no staging left,
//! a target counts as this job's only when it carries the staging's marker
//! (or, on MySQL, the database's publication log names the staging); a
//! commit whose staging was discarded after a conflict is not offered again.
//! Checked over HTTP against the real systems, the tables read back there.

use serde_json::{Value, json};

use crate::helpers::{TestApp, TestMysql, mysql_options};
use crate::staging::{World, world_options};

fn batch_job(database: &str) -> Value {
    json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "c", "database": database, "table": "orders"},
        "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                              {"name": "note", "type": "VARCHAR(20)"}]}}]})
}

/// A running batch job on catalog `c`: its id and its staging's name.
async fn running_job(app: &TestApp, database: &str) -> (String, String) {
    let reply = app.post("/v1/jobs", &batch_job(database)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let id = reply.body["id"].as_str().unwrap().to_owned();
    let staging = reply.body["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    app.put_status(&id, "CREATED").await;
    app.put_status(&id, "RUNNING").await;
    (id, staging)
}

/// The job's commit action, after its FINISHED.
async fn finish(app: &TestApp, id: &str) -> Value {
    let finished = app.put_status(id, "FINISHED").await;
    assert_eq!(finished.status, 200, "{}", finished.text);
    let commit = finished.body["actions_taken"][0].clone();
    assert_eq!(commit["action"], "commit", "{}", finished.text);
    commit
}

#[tokio::test]
async fn a_target_that_appeared_where_ctasds_staging_vanished_is_never_reported_as_committed() {
    for (world, options, database) in world_options().await {
        if matches!(world, World::Files(_)) {
            continue;
        }
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let (id, staging) = running_job(&app, &database).await;
        // Someone drops ctasd's staging and makes a table of their own at
        // the target: no staging, a target, and nothing of ctasd's on it.
        world.drop_table(&staging).await;
        world.create_old("orders").await;

        let commit = finish(&app, &id).await;

        assert_eq!(commit["state"], "failed", "{}: {commit}", world.label());
        assert_ne!(commit["outcome"], "already_committed", "{}", world.label());
        assert!(
            commit["last_error"]
                .as_str()
                .unwrap()
                .contains("cannot prove it published it"),
            "{}: {commit}",
            world.label()
        );
        assert_eq!(
            world.ids("orders").await,
            Some(vec![999]),
            "{}: their table, untouched",
            world.label()
        );
        let job = app.get(&format!("/v1/jobs/{id}")).await;
        assert_ne!(job.body["settlement"], "settled", "{}", job.text);
    }
}

#[tokio::test]
async fn a_commit_whose_staging_was_discarded_after_a_conflict_is_not_offered_again() {
    for (world, options, database) in world_options().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let (id, staging) = running_job(&app, &database).await;
        if !matches!(world, World::Files(_)) {
            world.insert(&staging, &[1]).await;
        }
        // Someone else creates the target before the commit.
        world.create_old("orders").await;

        let commit = finish(&app, &id).await;
        assert_eq!(commit["state"], "failed", "{}: {commit}", world.label());
        assert_eq!(
            commit["outcome"],
            "discarded",
            "{}: {commit}",
            world.label()
        );
        assert!(
            commit["last_error"]
                .as_str()
                .unwrap()
                .ends_with("staging discarded"),
            "{commit}"
        );

        // An operator's retry is refused: there is nothing left to publish,
        // and the table there is not this job's.
        let action = commit["id"].as_i64().unwrap();
        let retried = app
            .post(&format!("/v1/jobs/{id}/actions/{action}/retry"), &json!({}))
            .await;
        retried.assert_problem(409, "ACTION_NOT_SETTLEABLE");
        assert!(
            retried.detail().contains("staging was discarded"),
            "{}",
            retried.text
        );
        let job = app.get(&format!("/v1/jobs/{id}")).await;
        let kept = job.body["actions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == action)
            .unwrap();
        assert_eq!(kept["state"], "failed", "{}", job.text);
        assert_eq!(kept["outcome"], "discarded", "{}", job.text);
        assert_ne!(job.body["settlement"], "settled", "{}", job.text);
        if !matches!(world, World::Files(_)) {
            assert_eq!(
                world.ids("orders").await,
                Some(vec![999]),
                "{}",
                world.label()
            );
            assert_eq!(world.ids(&staging).await, None, "{}", world.label());
        }
    }
}

#[tokio::test]
async fn a_mariadb_table_at_the_publication_logs_name_is_never_written_to() {
    let Some(my) = TestMysql::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", mysql_options(&my)).await;
    my.execute(
        "CREATE TABLE __ctasd_published (table_name VARCHAR(64) PRIMARY KEY, marker VARCHAR(1024))",
    )
    .await;
    my.execute("INSERT INTO __ctasd_published VALUES ('orders', 'theirs')")
        .await;
    let (id, staging) = running_job(&app, &my.database).await;

    let commit = finish(&app, &id).await;

    assert_eq!(commit["state"], "failed", "{commit}");
    assert!(
        commit["last_error"]
            .as_str()
            .unwrap()
            .contains("publication log"),
        "{commit}"
    );
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT table_name, marker FROM __ctasd_published")
            .fetch_all(&mut my.connect().await)
            .await
            .unwrap();
    assert_eq!(rows, [("orders".to_owned(), "theirs".to_owned())]);
    let world = World::Mysql(my);
    assert_eq!(world.ids("orders").await, None, "nothing was published");
    assert_eq!(world.ids(&staging).await, None, "the staging was discarded");
}
