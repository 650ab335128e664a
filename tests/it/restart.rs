//! Registered catalogs survive a restart, on either store, and are usable
//! at once (their secrets open with the persisted key); replicas sharing a
//! PostgreSQL store never serve a catalog that was altered or replaced
//! elsewhere; a SQLite store serves one process and refuses a second.

use serde_json::json;

use crate::helpers::{SECRET, TestApp, TestPostgres, postgres_options, sqlite_database};

async fn register_and_restart(app: TestApp, extra: Option<serde_json::Value>) -> TestApp {
    let lite = app.scratch("lite");
    sqlite_database(&lite, "main", "CREATE TABLE orders (id INT)").await;
    let warehouse = app.scratch("warehouse");
    let lite_options = json!({
        "type": "jdbc", "base-url": format!("jdbc:sqlite:{}", lite.display()),
        "default-database": "main", "password": SECRET,
    });
    assert_eq!(app.register("lite", lite_options).await.status, 201);
    assert_eq!(
        app.register("fs", json!({"type": "filesystem", "path": warehouse}))
            .await
            .status,
        201
    );
    if let Some(options) = extra {
        assert_eq!(app.register("pg", options).await.status, 201);
    }
    app.restart().await
}

#[tokio::test]
async fn catalogs_survive_a_restart_on_sqlite_and_are_still_open() {
    let app = register_and_restart(TestApp::spawn().await, None).await;

    let listed = app.get("/v1/catalogs").await;
    let names: Vec<&str> = listed.body["catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fs", "lite"]);
    let lite = app.get("/v1/catalogs/lite").await;
    assert_eq!(lite.body["options"]["password"], "******");
    let tables = app.get("/v1/catalogs/lite/databases/main/tables").await;
    assert_eq!(tables.body["tables"], json!([{"name": "orders"}]));
    assert_eq!(app.get("/v1/catalogs/fs/databases").await.status, 200);
}

#[tokio::test]
async fn catalogs_survive_a_restart_on_postgres_and_are_still_open() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let Some(target) = TestPostgres::create().await else {
        return;
    };
    target.execute("CREATE TABLE events (id BIGINT)").await;
    let app = TestApp::spawn_with(Some(&store.url)).await;

    let app = register_and_restart(app, Some(postgres_options(&target))).await;

    let listed = app.get("/v1/catalogs").await;
    assert_eq!(
        listed.body["catalogs"].as_array().unwrap().len(),
        3,
        "{}",
        listed.text
    );
    let tables = app
        .get(&format!(
            "/v1/catalogs/pg/databases/{}/tables",
            target.database
        ))
        .await;
    assert_eq!(
        tables.body["tables"],
        json!([{"name": "events"}]),
        "{}",
        tables.text
    );
    let tables = app.get("/v1/catalogs/lite/databases/main/tables").await;
    assert_eq!(tables.body["tables"], json!([{"name": "orders"}]));
}

#[tokio::test]
async fn a_replica_notices_a_catalog_dropped_and_registered_again_elsewhere() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let first = TestApp::spawn_with(Some(&store.url)).await;
    let second = first.sibling().await;
    let old = first.scratch("old");
    let new = first.scratch("new");
    first
        .register(
            "fs",
            json!({"type": "filesystem", "path": old, "default-database": "before"}),
        )
        .await;
    let seen = first.get("/v1/catalogs/fs/databases").await;
    assert_eq!(
        seen.body["databases"],
        json!([{"name": "before", "default": true}])
    );

    assert_eq!(second.delete("/v1/catalogs/fs").await.status, 204);
    let again = second
        .register(
            "fs",
            json!({"type": "filesystem", "path": new, "default-database": "after"}),
        )
        .await;
    assert_eq!(again.status, 201, "{}", again.text);

    let seen = first.get("/v1/catalogs/fs/databases").await;
    assert_eq!(
        seen.body["databases"],
        json!([{"name": "after", "default": true}]),
        "the first replica reopened it"
    );
}

#[tokio::test]
async fn a_replica_notices_a_catalog_altered_elsewhere() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let first = TestApp::spawn_with(Some(&store.url)).await;
    let second = first.sibling().await;
    let warehouse = first.scratch("w");
    first
        .register("fs", json!({"type": "filesystem", "path": warehouse}))
        .await;
    first.get("/v1/catalogs/fs/databases").await;

    let altered = second
        .patch(
            "/v1/catalogs/fs",
            &json!({"set": {"default-database": "renamed"}}),
        )
        .await;
    assert_eq!(altered.status, 200, "{}", altered.text);

    let seen = first.get("/v1/catalogs/fs/databases").await;
    assert!(
        seen.body["databases"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "renamed", "default": true})),
        "{}",
        seen.text
    );
}

#[tokio::test]
async fn a_second_server_on_the_same_sqlite_file_refuses_to_start_and_says_why() {
    let first = TestApp::spawn().await;
    let settings = first.settings().clone();

    let refused = ctasd::server::start(settings.clone())
        .await
        .err()
        .expect("a second server on the same SQLite file is refused");
    let message = format!("{refused:#}");
    assert!(
        message.contains("in use by another ctasd process") && message.contains("PostgreSQL"),
        "{message}"
    );
    assert_eq!(
        first.get("/v1/catalogs").await.status,
        200,
        "the first still serves"
    );

    // Once the first has stopped, the file is free again.
    let stopped = first.stop_keeping_store().await;
    let again = stopped.start_again().await;
    assert_eq!(again.get("/v1/catalogs").await.status, 200);
}
