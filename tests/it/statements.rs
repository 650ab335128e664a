//! `POST /v1/statements`: Flink's catalog statements over HTTP, against a
//! real PostgreSQL for the jdbc round trip.

use serde_json::{Value, json};

use crate::helpers::{SECRET, TestApp, TestPostgres, postgres_options};

async fn run(app: &TestApp, statement: &str) -> crate::helpers::Reply {
    app.post("/v1/statements", &json!({ "statement": statement }))
        .await
}

async fn run_ok(app: &TestApp, statement: &str) -> crate::helpers::Reply {
    let reply = run(app, statement).await;
    assert_eq!(reply.status, 200, "{statement}: {}", reply.body);
    reply
}

fn rows(reply: &crate::helpers::Reply) -> Vec<Vec<String>> {
    serde_json::from_value(reply.body["rows"].clone()).unwrap()
}

#[tokio::test]
async fn show_create_catalog_of_a_jdbc_catalog_registers_an_equal_catalog_once_the_password_is_filled_in()
 {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    let options = postgres_options(&pg);
    let with: Vec<String> = options
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("'{k}' = '{}'", v.as_str().unwrap()))
        .collect();
    let create = format!(
        "CREATE CATALOG pg COMMENT 'the warehouse''s catalog'\nWITH ({});",
        with.join(",\n  ")
    );
    run_ok(&app, &create).await;

    let shown = run_ok(&app, "SHOW CREATE CATALOG pg").await;
    let statement = rows(&shown)[0][0].clone();
    assert!(
        statement.starts_with("CREATE CATALOG `pg`\nCOMMENT 'the warehouse''s catalog'\nWITH (\n"),
        "{statement}"
    );
    assert!(statement.contains("'password' = '******'"), "{statement}");
    assert!(!statement.contains(SECRET), "the secret is never shown");

    // As shown, the mask is refused: the password must be given.
    let copy = statement.replace("CATALOG `pg`", "CATALOG `pg_copy`");
    run(&app, &copy)
        .await
        .assert_problem(422, "OPTIONS_INVALID");
    assert_eq!(app.get("/v1/catalogs/pg_copy").await.status, 404);

    let filled_in = copy.replace("'******'", &format!("'{SECRET}'"));
    run_ok(&app, &filled_in).await;
    let original = app.get("/v1/catalogs/pg").await.body;
    let copied = app.get("/v1/catalogs/pg_copy").await.body;
    for field in ["type", "options", "comment"] {
        assert_eq!(original[field], copied[field], "{field}");
    }
    // The copy really connects: it lists the database's schemas.
    let databases = app.get("/v1/catalogs/pg_copy/databases").await;
    assert_eq!(databases.status, 200, "{}", databases.body);
}

#[tokio::test]
async fn catalog_statements_create_alter_describe_show_and_drop_with_flinks_semantics() {
    let app = TestApp::spawn().await;
    let create = "CREATE CATALOG mem COMMENT 'scratch' WITH ('type' = 'generic_in_memory')";
    assert_eq!(rows(&run(&app, create).await), [["OK"]]);
    let again = run(&app, create).await;
    again.assert_problem(409, "CATALOG_EXISTS");
    assert_eq!(again.detail(), "Catalog mem already exists.");
    run_ok(&app, &create.replace("CATALOG", "CATALOG IF NOT EXISTS")).await;

    run_ok(&app, "ALTER CATALOG mem SET ('default-database' = 'db')").await;
    run_ok(&app, "ALTER CATALOG mem COMMENT 'renamed'").await;
    let described = run(&app, "DESCRIBE CATALOG EXTENDED mem").await;
    assert_eq!(
        described.body["columns"],
        json!(["info name", "info value"])
    );
    assert_eq!(
        rows(&described),
        [
            ["name", "mem"],
            ["type", "generic_in_memory"],
            ["comment", "renamed"],
            ["option:default-database", "db"],
        ]
    );
    // The same store as the JSON routes.
    assert_eq!(
        app.get("/v1/catalogs/mem").await.body["options"]["default-database"],
        "db"
    );
    run_ok(&app, "ALTER CATALOG mem RESET ('default-database')").await;
    assert_eq!(rows(&run(&app, "DESC CATALOG mem").await).len(), 3);
    run(&app, "ALTER CATALOG mem RESET ('type')")
        .await
        .assert_problem(422, "CATALOG_TYPE_IMMUTABLE");

    let shown = run(&app, "SHOW CATALOGS").await;
    assert_eq!(shown.body["columns"], json!(["catalog name"]));
    assert_eq!(rows(&shown), [["mem"]]);

    run_ok(&app, "DROP CATALOG mem;").await;
    assert_eq!(app.get("/v1/catalogs/mem").await.status, 404);
    let missing = run(&app, "DROP CATALOG mem").await;
    missing.assert_problem(404, "CATALOG_NOT_FOUND");
    assert_eq!(missing.detail(), "Catalog mem does not exist.");
    run_ok(&app, "DROP CATALOG IF EXISTS mem").await;
    run(&app, "ALTER CATALOG mem COMMENT 'x'")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
    run(&app, "CREATE CATALOG bad WITH ('type' = 'hive')")
        .await
        .assert_problem(422, "CATALOG_TYPE_UNKNOWN");
    assert_eq!(
        rows(&run(&app, "SHOW CATALOGS").await),
        Vec::<Vec<String>>::new()
    );
}

#[tokio::test]
async fn a_syntax_error_points_at_line_and_column_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let reply = run(
        &app,
        "CREATE CATALOG c\nWITH (\n  'type' = 'generic_in_memory'\n  'x' = 'y')",
    )
    .await;
    reply.assert_problem(400, "STATEMENT_SYNTAX");
    assert_eq!(
        (reply.body["line"].clone(), reply.body["column"].clone()),
        (json!(4), json!(3))
    );
    assert!(
        reply
            .detail()
            .contains("Encountered a string literal at line 4, column 3"),
        "{}",
        reply.detail()
    );
    assert_eq!(reply.body["errors"][0]["field"], "statement");
    assert_eq!(app.get("/v1/catalogs/c").await.status, 404);

    for (statement, at) in [
        ("SHOW TABLES", (1, 6)),
        ("DROP CATALOG", (1, 13)),
        ("", (1, 1)),
        ("CREATE CATALOG c WITH ('type' = 'x", (1, 33)),
    ] {
        let reply = run(&app, statement).await;
        reply.assert_problem(400, "STATEMENT_SYNTAX");
        let found: (Value, Value) = (reply.body["line"].clone(), reply.body["column"].clone());
        assert_eq!(found, (json!(at.0), json!(at.1)), "{statement}");
    }
}
