//! Registering opens the catalog; browsing answers from the live system:
//! real tables and columns in PostgreSQL, MariaDB, SQLite and a warehouse.

use serde_json::json;

use crate::helpers::{
    SECRET, TestApp, TestMysql, TestPostgres, mysql_options, postgres_options, sqlite_database,
};

fn column_names(table: &serde_json::Value) -> Vec<(String, String, bool)> {
    table["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["data_type"].as_str().unwrap().into(),
                c["nullable"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_jdbc_catalog_on_postgres_masks_the_password_and_lists_real_tables_and_columns() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    pg.execute("CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, note VARCHAR(20), amount NUMERIC(10, 2)); CREATE TABLE customers (id INT)")
        .await;
    let app = TestApp::spawn().await;

    let created = app.register("pg", postgres_options(&pg)).await;

    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["options"]["password"], "******");
    let read = app.get("/v1/catalogs/pg").await;
    assert_eq!(read.body["options"]["password"], "******");
    assert!(!read.text.contains(SECRET));

    let databases = app.get("/v1/catalogs/pg/databases").await;
    assert!(
        databases.body["databases"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": pg.database, "default": true}))
    );
    let tables = app
        .get(&format!("/v1/catalogs/pg/databases/{}/tables", pg.database))
        .await;
    assert_eq!(
        tables.body["tables"],
        json!([{"name": "customers"}, {"name": "orders"}])
    );
    let orders = app
        .get(&format!(
            "/v1/catalogs/pg/databases/{}/tables/orders",
            pg.database
        ))
        .await;
    assert_eq!(
        column_names(&orders.body),
        [
            ("id".into(), "bigint".into(), false),
            ("note".into(), "character varying(20)".into(), true),
            ("amount".into(), "numeric(10,2)".into(), true)
        ]
    );

    // A table created after registration shows up: answers come from the live database.
    pg.execute("CREATE TABLE late (x TEXT)").await;
    let tables = app
        .get(&format!("/v1/catalogs/pg/databases/{}/tables", pg.database))
        .await;
    assert_eq!(tables.body["tables"].as_array().unwrap().len(), 3);

    app.get(&format!(
        "/v1/catalogs/pg/databases/{}/tables/nope",
        pg.database
    ))
    .await
    .assert_problem(404, "TABLE_NOT_FOUND");
    app.get("/v1/catalogs/pg/databases/no_such_db/tables")
        .await
        .assert_problem(404, "DATABASE_NOT_FOUND");
}

#[tokio::test]
async fn postgres_that_cannot_be_reached_or_lacks_the_database_is_refused_and_not_stored() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let mut unreachable = postgres_options(&pg);
    // A port nothing listens on: bind one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    unreachable["base-url"] = json!(format!("jdbc:postgresql://127.0.0.1:{port}"));
    let mut missing_database = postgres_options(&pg);
    missing_database["default-database"] = json!("ctasd_no_such_database");

    let refused = app.register("pg", unreachable).await;
    let missing = app.register("pg", missing_database).await;

    refused.assert_problem(422, "CATALOG_OPEN_FAILED");
    assert!(
        refused.detail().contains("Connection refused"),
        "{}",
        refused.detail()
    );
    assert!(
        refused.detail().contains(&format!("127.0.0.1:{port}")),
        "{}",
        refused.detail()
    );
    missing.assert_problem(422, "CATALOG_OPEN_FAILED");
    assert!(
        missing
            .detail()
            .contains("\"ctasd_no_such_database\" does not exist"),
        "{}",
        missing.detail()
    );
    for reply in [&refused, &missing] {
        assert!(!reply.text.contains(SECRET));
    }
    app.get("/v1/catalogs/pg")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
}

#[tokio::test]
async fn a_jdbc_catalog_on_mariadb_lists_real_tables_and_columns() {
    let Some(my) = TestMysql::create().await else {
        return;
    };
    my.execute("CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, note VARCHAR(20))")
        .await;
    let app = TestApp::spawn().await;

    let created = app.register("my", mysql_options(&my)).await;

    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["options"]["password"], "******");
    let databases = app.get("/v1/catalogs/my/databases").await;
    assert_eq!(
        databases.body["databases"],
        json!([{"name": my.database, "default": true}]),
        "the user sees only its database"
    );
    let tables = app
        .get(&format!("/v1/catalogs/my/databases/{}/tables", my.database))
        .await;
    assert_eq!(tables.body["tables"], json!([{"name": "orders"}]));
    let orders = app
        .get(&format!(
            "/v1/catalogs/my/databases/{}/tables/orders",
            my.database
        ))
        .await;
    assert_eq!(
        column_names(&orders.body),
        [
            ("id".into(), "bigint(20)".into(), false),
            ("note".into(), "varchar(20)".into(), true)
        ]
    );
}

#[tokio::test]
async fn mariadb_with_a_wrong_password_or_a_missing_database_is_refused_and_not_stored() {
    let Some(my) = TestMysql::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let mut wrong_password = mysql_options(&my);
    wrong_password["password"] = json!("not-the-password");
    let mut missing_database = mysql_options(&my);
    missing_database["default-database"] = json!("ctasd_no_such_database");

    let denied = app.register("my", wrong_password).await;
    let missing = app.register("my", missing_database).await;

    denied.assert_problem(422, "CATALOG_OPEN_FAILED");
    assert!(
        denied.detail().contains("Access denied"),
        "{}",
        denied.detail()
    );
    missing.assert_problem(422, "CATALOG_OPEN_FAILED");
    assert!(
        missing.detail().contains("ctasd_no_such_database"),
        "{}",
        missing.detail()
    );
    assert!(
        !denied.text.contains("not-the-password"),
        "a secret is masked even when it is wrong"
    );
    app.get("/v1/catalogs/my")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
}

#[tokio::test]
async fn a_jdbc_catalog_on_sqlite_files_lists_databases_tables_and_columns() {
    let app = TestApp::spawn().await;
    let dir = app.scratch("sqlite");
    sqlite_database(
        &dir,
        "main_db",
        "CREATE TABLE orders (id INTEGER NOT NULL, note VARCHAR(20)); CREATE TABLE b (x)",
    )
    .await;
    sqlite_database(&dir, "other", "CREATE TABLE t (y REAL)").await;
    let options = json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()), "default-database": "main_db"});

    let created = app.register("lite", options).await;

    assert_eq!(created.status, 201, "{}", created.text);
    let databases = app.get("/v1/catalogs/lite/databases").await;
    assert_eq!(
        databases.body["databases"],
        json!([{"name": "main_db", "default": true}, {"name": "other", "default": false}])
    );
    let tables = app.get("/v1/catalogs/lite/databases/main_db/tables").await;
    assert_eq!(
        tables.body["tables"],
        json!([{"name": "b"}, {"name": "orders"}])
    );
    let orders = app
        .get("/v1/catalogs/lite/databases/main_db/tables/orders")
        .await;
    assert_eq!(
        column_names(&orders.body),
        [
            ("id".into(), "INTEGER".into(), false),
            ("note".into(), "VARCHAR(20)".into(), true)
        ]
    );
    let other = app.get("/v1/catalogs/lite/databases/other/tables").await;
    assert_eq!(other.body["tables"], json!([{"name": "t"}]));
}

#[tokio::test]
async fn a_sqlite_catalog_whose_database_file_does_not_exist_is_refused() {
    let app = TestApp::spawn().await;
    let dir = app.scratch("sqlite");
    let options = json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()), "default-database": "absent"});

    let reply = app.register("lite", options).await;

    reply.assert_problem(422, "CATALOG_OPEN_FAILED");
    assert!(reply.detail().contains("absent.db"), "{}", reply.detail());
    assert!(
        !dir.join("absent.db").exists(),
        "opening must not create the database"
    );
}

#[tokio::test]
async fn a_filesystem_catalog_lists_directories_and_hides_staging_and_metadata() {
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("warehouse");
    std::fs::create_dir_all(warehouse.join("sales/orders")).unwrap();
    std::fs::create_dir_all(warehouse.join("sales/_staging_orders")).unwrap();
    std::fs::create_dir_all(warehouse.join("sales/.hidden")).unwrap();
    std::fs::write(warehouse.join("sales/not_a_table.txt"), "x").unwrap();
    std::fs::write(
        warehouse.join("sales/orders/_ctasd_schema.json"),
        r#"{"columns": [{"name": "id", "data_type": "BIGINT NOT NULL", "nullable": false}]}"#,
    )
    .unwrap();

    let created = app
        .register(
            "fs",
            json!({"type": "filesystem", "path": warehouse, "default-database": "sales"}),
        )
        .await;

    assert_eq!(created.status, 201, "{}", created.text);
    let databases = app.get("/v1/catalogs/fs/databases").await;
    assert_eq!(
        databases.body["databases"],
        json!([{"name": "sales", "default": true}])
    );
    let tables = app.get("/v1/catalogs/fs/databases/sales/tables").await;
    assert_eq!(tables.body["tables"], json!([{"name": "orders"}]));
    let orders = app
        .get("/v1/catalogs/fs/databases/sales/tables/orders")
        .await;
    assert_eq!(
        column_names(&orders.body),
        [("id".into(), "BIGINT NOT NULL".into(), false)]
    );
    app.get("/v1/catalogs/fs/databases/sales/tables/_staging_orders")
        .await
        .assert_problem(404, "TABLE_NOT_FOUND");
    app.get("/v1/catalogs/fs/databases/..%2F..%2Fetc/tables")
        .await
        .assert_problem(400, "NAME_INVALID");
    assert!(warehouse.join("sales/orders").is_dir());
}

#[tokio::test]
async fn an_in_memory_catalog_has_its_default_database() {
    let app = TestApp::spawn().await;
    app.register(
        "mem",
        json!({"type": "generic_in_memory", "default-database": "scratch"}),
    )
    .await;

    let databases = app.get("/v1/catalogs/mem/databases").await;

    assert_eq!(
        databases.body["databases"],
        json!([{"name": "scratch", "default": true}])
    );
    assert_eq!(
        app.get("/v1/catalogs/mem/databases/scratch/tables")
            .await
            .body["tables"],
        json!([])
    );
    app.get("/v1/catalogs/mem/databases/other/tables")
        .await
        .assert_problem(404, "DATABASE_NOT_FOUND");
}

#[tokio::test]
async fn browsing_reuses_the_live_catalogs_connections_instead_of_reconnecting() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    pg.execute("CREATE TABLE t (x INT)").await;
    let app = TestApp::spawn().await;
    app.register("pg", postgres_options(&pg)).await;
    let path = format!("/v1/catalogs/pg/databases/{}/tables/t", pg.database);
    let mut observer = pg.connect().await;
    let mut backends = std::collections::BTreeSet::new();

    for _ in 0..30 {
        assert_eq!(app.get(&path).await.status, 200);
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'ctasd'",
        )
        .bind(&pg.database)
        .fetch_all(&mut observer)
        .await
        .unwrap();
        backends.extend(pids);
    }

    assert!(
        !backends.is_empty(),
        "the pool keeps its connections open between requests"
    );
    assert!(
        backends.len() <= 4,
        "30 requests used {} server connections; the pool holds at most 4",
        backends.len()
    );
}
