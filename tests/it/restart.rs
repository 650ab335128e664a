//! Registered catalogs survive a restart, on either store, and are usable
//! at once (their secrets open with the persisted key).

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
