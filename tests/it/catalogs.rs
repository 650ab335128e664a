//! Register, read, list, alter and drop catalogs over HTTP.

use serde_json::json;

use crate::helpers::TestApp;

fn memory() -> serde_json::Value {
    json!({"type": "generic_in_memory"})
}

#[tokio::test]
async fn registering_answers_201_with_location_and_the_catalog_reads_back_the_same() {
    let app = TestApp::spawn().await;

    let created = app
        .post(
            "/v1/catalogs",
            &json!({"name": "mem", "options": memory(), "comment": "scratch"}),
        )
        .await;

    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.headers["location"], "/v1/catalogs/mem");
    assert_eq!(created.body["name"], "mem");
    assert_eq!(created.body["type"], "generic_in_memory");
    assert_eq!(created.body["comment"], "scratch");
    let read = app.get("/v1/catalogs/mem").await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body, created.body);
}

#[tokio::test]
async fn registering_a_taken_name_is_a_conflict_unless_if_not_exists() {
    let app = TestApp::spawn().await;
    app.post(
        "/v1/catalogs",
        &json!({"name": "mem", "options": memory(), "comment": "first"}),
    )
    .await;

    let again = app
        .post(
            "/v1/catalogs",
            &json!({"name": "mem", "options": memory(), "comment": "second"}),
        )
        .await;
    again.assert_problem(409, "CATALOG_EXISTS");

    let tolerant = app
        .post(
            "/v1/catalogs?if_not_exists=true",
            &json!({"name": "mem", "options": memory(), "comment": "second"}),
        )
        .await;
    assert_eq!(tolerant.status, 200, "{}", tolerant.text);
    assert_eq!(
        tolerant.body["comment"], "first",
        "the existing catalog is returned unchanged"
    );
}

#[tokio::test]
async fn validation_failures_name_the_problem_as_flink_does_and_store_nothing() {
    let app = TestApp::spawn().await;
    let cases = [
        (
            json!({"path": "/tmp"}),
            "CATALOG_TYPE_MISSING",
            "Catalog options do not contain an option key 'type' for discovering a catalog.",
        ),
        (
            json!({"type": "hive"}),
            "CATALOG_TYPE_UNKNOWN",
            "Could not find any factory for identifier 'hive' that implements 'CatalogFactory'.\n\nAvailable factory identifiers are:\n\nfilesystem\ngeneric_in_memory\njdbc",
        ),
        (
            json!({"type": "jdbc", "username": "u", "password": "p"}),
            "CATALOG_OPTIONS_MISSING",
            "One or more required options are missing.\n\nMissing required options are:\n\nbase-url\ndefault-database",
        ),
        (
            json!({"type": "generic_in_memory", "colour": "blue"}),
            "CATALOG_OPTIONS_UNSUPPORTED",
            "Unsupported options found for 'generic_in_memory'.\n\nUnsupported options:\n\ncolour\n\nSupported options:\n\ndefault-database\nproperty-version\ntype",
        ),
        (
            json!({"type": "jdbc", "base-url": "jdbc:postgresql://h/db", "default-database": "d", "username": "u", "password": "p"}),
            "CATALOG_OPTION_INVALID",
            "Invalid value for option 'base-url': the base URL names only the server (host and port); put the database in 'default-database' and credentials in 'username'/'password'",
        ),
    ];
    for (options, code, detail) in cases {
        let reply = app.register("bad", options).await;
        reply.assert_problem(422, code);
        assert_eq!(reply.detail(), detail);
        assert!(
            !reply.body["errors"].as_array().unwrap().is_empty(),
            "errors name the fields: {}",
            reply.text
        );
    }
    app.get("/v1/catalogs/bad")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
}

#[tokio::test]
async fn every_missing_option_is_listed_as_a_field_at_once() {
    let app = TestApp::spawn().await;
    let reply = app
        .register(
            "pg",
            json!({"type": "jdbc", "base-url": "jdbc:postgresql://127.0.0.1"}),
        )
        .await;
    reply.assert_problem(422, "CATALOG_OPTIONS_MISSING");
    let fields: Vec<&str> = reply.body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "options.default-database",
            "options.username",
            "options.password"
        ],
        "all at once, as Flink names them"
    );
    assert!(
        reply
            .detail()
            .ends_with("default-database\nusername\npassword"),
        "{}",
        reply.detail()
    );
    let reply = app
        .register("pg", json!({"type": "jdbc", "base-url": "jdbc:postgresql://127.0.0.1", "default-database": "d"}))
        .await;
    reply.assert_problem(422, "CATALOG_OPTIONS_MISSING");
    assert!(
        reply.detail().ends_with("username\npassword"),
        "{}",
        reply.detail()
    );
}

#[tokio::test]
async fn invalid_catalog_names_are_refused_with_the_rule() {
    let app = TestApp::spawn().await;
    for name in [
        "",
        "1abc",
        "has space",
        "dot.ted",
        "semi;colon",
        "../up",
        "x".repeat(65).as_str(),
        "nul\u{0}",
    ] {
        let reply = app.register(name, memory()).await;
        reply.assert_problem(422, "NAME_INVALID");
        assert_eq!(reply.body["errors"][0]["field"], "name");
    }
    app.get("/v1/catalogs/1abc")
        .await
        .assert_problem(400, "NAME_INVALID");
    let listed = app.get("/v1/catalogs").await;
    assert_eq!(listed.body["catalogs"], json!([]));
}

#[tokio::test]
async fn a_filesystem_catalog_whose_directory_is_missing_is_not_stored() {
    let app = TestApp::spawn().await;
    let missing = app.scratch("x").join("does-not-exist");

    let reply = app
        .register("fs", json!({"type": "filesystem", "path": missing}))
        .await;

    reply.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert!(
        reply.detail().contains("No such file or directory"),
        "{}",
        reply.detail()
    );
    assert_eq!(reply.body["errors"][0]["field"], "options.path");
    app.get("/v1/catalogs/fs")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
}

#[tokio::test]
async fn alter_sets_and_resets_options_and_reopens_the_catalog() {
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("warehouse");
    app.register(
        "fs",
        json!({"type": "filesystem", "path": warehouse, "property-version": "1"}),
    )
    .await;

    let altered = app
        .patch(
            "/v1/catalogs/fs",
            &json!({"set": {"default-database": "sales"}, "reset": ["property-version"], "comment": "sales data"}),
        )
        .await;

    assert_eq!(altered.status, 200, "{}", altered.text);
    assert_eq!(
        altered.body["options"],
        json!({"default-database": "sales", "path": warehouse, "type": "filesystem"})
    );
    assert_eq!(altered.body["comment"], "sales data");
    assert!(
        warehouse.join("sales").is_dir(),
        "the reopened catalog created its new default database"
    );
    let databases = app.get("/v1/catalogs/fs/databases").await;
    assert!(
        databases.body["databases"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "sales", "default": true}))
    );
    let cleared = app.patch("/v1/catalogs/fs", &json!({"comment": ""})).await;
    assert_eq!(cleared.body["comment"], serde_json::Value::Null);
}

#[tokio::test]
async fn alter_refuses_to_reset_or_change_the_type_and_keeps_the_catalog() {
    let app = TestApp::spawn().await;
    app.register("mem", memory()).await;

    app.patch("/v1/catalogs/mem", &json!({"reset": ["type"]}))
        .await
        .assert_problem(422, "CATALOG_TYPE_IMMUTABLE");
    app.patch("/v1/catalogs/mem", &json!({"set": {"type": "filesystem"}}))
        .await
        .assert_problem(422, "CATALOG_TYPE_IMMUTABLE");
    app.patch("/v1/catalogs/mem", &json!({"set": {"nonsense": "1"}}))
        .await
        .assert_problem(422, "CATALOG_OPTIONS_UNSUPPORTED");
    app.patch("/v1/catalogs/nope", &json!({}))
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");

    let unchanged = app.get("/v1/catalogs/mem").await;
    assert_eq!(
        unchanged.body["options"],
        json!({"type": "generic_in_memory"})
    );
}

#[tokio::test]
async fn an_alteration_that_cannot_be_opened_leaves_the_stored_catalog_as_it_was() {
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("warehouse");
    app.register("fs", json!({"type": "filesystem", "path": warehouse}))
        .await;
    let before = app.get("/v1/catalogs/fs").await;

    let reply = app
        .patch(
            "/v1/catalogs/fs",
            &json!({"set": {"path": warehouse.join("gone")}}),
        )
        .await;

    reply.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert_eq!(app.get("/v1/catalogs/fs").await.body, before.body);
    assert_eq!(
        app.get("/v1/catalogs/fs/databases").await.status,
        200,
        "the old catalog still works"
    );
}

#[tokio::test]
async fn drop_removes_the_catalog_and_if_exists_tolerates_absence() {
    let app = TestApp::spawn().await;
    app.register("mem", memory()).await;

    let dropped = app.delete("/v1/catalogs/mem").await;

    assert_eq!(dropped.status, 204);
    app.get("/v1/catalogs/mem")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
    app.get("/v1/catalogs/mem/databases")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
    app.delete("/v1/catalogs/mem")
        .await
        .assert_problem(404, "CATALOG_NOT_FOUND");
    assert_eq!(
        app.delete("/v1/catalogs/mem?if_exists=true").await.status,
        204
    );
    let again = app.register("mem", memory()).await;
    assert_eq!(again.status, 201, "the name is free again");
}

async fn list_all(app: &TestApp, page_size: u32, during: impl AsyncFn(usize)) -> Vec<String> {
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    for page in 0.. {
        let path = match &token {
            Some(t) => format!("/v1/catalogs?page_size={page_size}&page_token={t}"),
            None => format!("/v1/catalogs?page_size={page_size}"),
        };
        let reply = app.get(&path).await;
        assert_eq!(reply.status, 200, "{}", reply.text);
        let catalogs = reply.body["catalogs"].as_array().unwrap();
        assert!(catalogs.len() <= page_size as usize);
        names.extend(
            catalogs
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_owned()),
        );
        during(page).await;
        match reply.body["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_owned()),
            None => break,
        }
    }
    names
}

#[tokio::test]
async fn two_hundred_catalogs_in_pages_of_seven_come_back_each_once_in_order() {
    let app = TestApp::spawn().await;
    let mut expected: Vec<String> = (0..200)
        .map(|i| format!("cat{:03}", (i * 37) % 200))
        .collect();
    for name in &expected {
        assert_eq!(app.register(name, memory()).await.status, 201);
    }
    expected.sort();

    let listed = list_all(&app, 7, async |_| {}).await;

    assert_eq!(listed, expected);
}

#[tokio::test]
async fn pages_stay_stable_while_catalogs_are_inserted() {
    let app = TestApp::spawn().await;
    let originals: Vec<String> = (0..50).map(|i| format!("m{i:02}")).collect();
    for name in &originals {
        app.register(name, memory()).await;
    }

    // After each page, insert one name that sorts before everything and one
    // that sorts after everything.
    let listed = list_all(&app, 7, async |page| {
        app.register(&format!("a{page:02}"), memory()).await;
        app.register(&format!("z{page:02}"), memory()).await;
    })
    .await;

    let seen_originals: Vec<&String> = listed.iter().filter(|n| n.starts_with('m')).collect();
    assert_eq!(
        seen_originals,
        originals.iter().collect::<Vec<_>>(),
        "each original exactly once, in order"
    );
    let mut sorted = listed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, listed, "no name twice, and in order");
}

#[tokio::test]
async fn bad_page_parameters_are_refused() {
    let app = TestApp::spawn().await;
    app.get("/v1/catalogs?page_size=0")
        .await
        .assert_problem(400, "QUERY_INVALID");
    app.get("/v1/catalogs?page_size=1001")
        .await
        .assert_problem(400, "QUERY_INVALID");
    app.get("/v1/catalogs?page_size=ten")
        .await
        .assert_problem(400, "QUERY_INVALID");
    app.get("/v1/catalogs?page_token=bm9wZQ")
        .await
        .assert_problem(400, "PAGE_TOKEN_INVALID");
    app.get("/v1/catalogs?page_token=%00%01")
        .await
        .assert_problem(400, "PAGE_TOKEN_INVALID");
    app.get("/v1/catalogs?colour=blue")
        .await
        .assert_problem(400, "QUERY_INVALID");
}

#[tokio::test]
async fn catalog_types_describe_every_factory_and_mark_the_password_sensitive() {
    let app = TestApp::spawn().await;

    let reply = app.get("/v1/catalog-types").await;

    assert_eq!(reply.status, 200);
    let types = reply.body["catalog_types"].as_array().unwrap();
    let names: Vec<&str> = types.iter().map(|t| t["type"].as_str().unwrap()).collect();
    assert_eq!(names, ["filesystem", "generic_in_memory", "jdbc"]);
    let jdbc = &types[2]["options"];
    let option = |key: &str| {
        jdbc.as_array()
            .unwrap()
            .iter()
            .find(|o| o["key"] == key)
            .unwrap()
            .clone()
    };
    assert_eq!(option("password")["sensitive"], true);
    assert_eq!(option("username")["sensitive"], false);
    assert_eq!(option("base-url")["required"], true);
    assert_eq!(types[1]["options"][2]["default"], "default");
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/healthz").await.body, json!({"status": "ok"}));
    assert_eq!(app.get("/readyz").await.body, json!({"status": "ready"}));
}
