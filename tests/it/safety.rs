//! What a careless or hostile user tries: pointing catalogs at data ctasd did
//! not write, at system directories, at ctasd's own store; types that would
//! exhaust the stack; tables no system can hold. Each is refused with a clear
//! problem, and the world is checked to be as it was.

use serde_json::{Value, json};

use crate::helpers::{TestApp, TestMysql, TestPostgres, mysql_options, postgres_options};

fn job(mode: &str, kind: &str, catalog: &str, database: Option<&str>, table: &str) -> Value {
    let mut target = json!({"catalog": catalog, "table": table});
    if let Some(database) = database {
        target["database"] = json!(database);
    }
    json!({"name": "j", "mode": mode, "hooks": [{"kind": kind, "target": target,
        "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]})
}

fn with_columns(table: &str, database: &str, columns: Value, key: Option<Value>) -> Value {
    let mut definition = json!({"columns": columns});
    if let Some(key) = key {
        definition["primary_key"] = key;
    }
    json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "c", "database": database, "table": table}, "table": definition}]})
}

/// Every file under `dir`, relative to it, sorted.
fn files_under(dir: &std::path::Path) -> Vec<String> {
    fn walk(base: &std::path::Path, dir: &std::path::Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn a_replace_of_a_directory_ctasd_did_not_write_is_refused_and_deletes_nothing() {
    let app = TestApp::spawn().await;
    let warehouse = app.scratch("warehouse");
    let victim = warehouse.join("db").join("victim");
    std::fs::create_dir_all(victim.join("keepme")).unwrap();
    std::fs::write(victim.join("keepme").join("data.txt"), b"precious").unwrap();
    app.register(
        "c",
        json!({"type": "filesystem", "path": warehouse, "default-database": "db"}),
    )
    .await;

    for kind in ["replace_table_as", "create_or_replace_table_as"] {
        let reply = app
            .post("/v1/jobs", &job("batch", kind, "c", None, "victim"))
            .await;

        reply.assert_problem(409, "TABLE_NOT_OWNED");
        assert!(
            reply
                .detail()
                .contains("holds 'keepme' but no ctasd marker"),
            "{}",
            reply.detail()
        );
        assert_eq!(reply.body["errors"][0]["field"], "hooks[0].target");
    }
    assert_eq!(files_under(&victim), ["keepme/data.txt"]);
}

#[tokio::test]
async fn a_foreign_directory_appearing_before_the_commit_is_a_conflict_and_is_kept() {
    let app = TestApp::spawn().await;
    let warehouse = app.filesystem_catalog("c").await;
    let submitted = app
        .post(
            "/v1/jobs",
            &job("batch", "create_or_replace_table_as", "c", None, "late"),
        )
        .await;
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    app.put_status(&id, "CREATED").await;
    app.put_status(&id, "RUNNING").await;
    // Someone else writes a directory under the target's name meanwhile.
    let late = warehouse.join("db").join("late");
    std::fs::create_dir_all(&late).unwrap();
    std::fs::write(late.join("theirs.csv"), b"1,2").unwrap();

    let finished = app.put_status(&id, "FINISHED").await;

    let commit = &finished.body["actions_taken"][0];
    assert_eq!(commit["state"], "failed", "{}", finished.text);
    assert!(
        commit["last_error"]
            .as_str()
            .unwrap()
            .contains("not ctasd's to replace"),
        "{commit}"
    );
    assert_eq!(files_under(&late), ["theirs.csv"]);
    let left: Vec<String> = std::fs::read_dir(warehouse.join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        left,
        ["late"],
        "the staging is gone, the foreign directory stays"
    );
}

#[tokio::test]
async fn system_directories_and_the_data_directorys_neighbourhood_are_refused_as_warehouses() {
    let app = TestApp::spawn().await;
    let data_dir = app.settings().store.data_dir.canonicalize().unwrap();
    let elsewhere = app.scratch("elsewhere").canonicalize().unwrap();
    std::os::unix::fs::symlink(&data_dir, elsewhere.join("link")).unwrap();
    std::fs::create_dir(data_dir.join("inside")).unwrap();
    let refused = [
        ("/".to_owned(), "shared by many owners"),
        ("/etc".to_owned(), "belongs to the operating system"),
        ("/var/lib".to_owned(), "belongs to the operating system"),
        (
            data_dir.display().to_string(),
            "overlaps ctasd's data directory",
        ),
        (
            data_dir.parent().unwrap().display().to_string(),
            "overlaps ctasd's data directory",
        ),
        (
            data_dir.join("inside").display().to_string(),
            "overlaps ctasd's data directory",
        ),
        (
            elsewhere.join("link").display().to_string(),
            "not canonical",
        ),
        (
            format!("{}/../elsewhere", elsewhere.display()),
            "not canonical",
        ),
    ];

    for (path, reason) in refused {
        let reply = app
            .register("w", json!({"type": "filesystem", "path": path}))
            .await;

        reply.assert_problem(422, "CATALOG_OPTION_INVALID");
        assert_eq!(reply.body["errors"][0]["field"], "options.path", "{path}");
        assert!(
            reply.detail().contains(reason),
            "{path}: {}",
            reply.detail()
        );
    }
    assert_eq!(app.get("/v1/catalogs").await.body["catalogs"], json!([]));
    let accepted = app
        .register("w", json!({"type": "filesystem", "path": elsewhere}))
        .await;
    assert_eq!(accepted.status, 201, "{}", accepted.text);
}

#[tokio::test]
async fn a_catalog_on_ctasds_own_sqlite_store_is_refused_however_it_is_reached() {
    let app = TestApp::spawn().await;
    let data_dir = app.settings().store.data_dir.canonicalize().unwrap();
    let other = app.scratch("other").canonicalize().unwrap();
    std::fs::hard_link(data_dir.join("ctasd.db"), other.join("alias.db")).unwrap();
    std::os::unix::fs::symlink(data_dir.join("ctasd.db"), other.join("link.db")).unwrap();

    let direct = app
        .register(
            "own",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", data_dir.display()),
            "default-database": "ctasd"}),
        )
        .await;
    let linked = app
        .register(
            "own",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", other.display()),
            "default-database": "alias"}),
        )
        .await;

    direct.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert_eq!(direct.body["errors"][0]["field"], "options.base-url");
    linked.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert_eq!(
        linked.body["errors"][0]["field"],
        "options.default-database"
    );
    assert!(
        linked.detail().contains("ctasd's own file"),
        "{}",
        linked.detail()
    );
    let symlinked = app
        .register(
            "own",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", other.display()),
            "default-database": "link"}),
        )
        .await;
    symlinked.assert_problem(422, "CATALOG_OPTION_INVALID");
    // Another ctasd's store, copied here, is recognised by its marker table.
    std::fs::create_dir(other.join("copy")).unwrap();
    let copy = other.join("copy");
    let backup = sqlx::query(sqlx::AssertSqlSafe(format!(
        "VACUUM INTO '{}'",
        copy.join("theirs.db").display()
    )));
    {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&format!(
            "sqlite://{}",
            data_dir.join("ctasd.db").display()
        ))
        .await
        .unwrap();
        backup.execute(&mut conn).await.unwrap();
    }
    let theirs = app
        .register(
            "own",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", copy.display()),
            "default-database": "theirs"}),
        )
        .await;
    theirs.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert!(
        theirs.detail().contains("holds a ctasd store"),
        "{}",
        theirs.detail()
    );
    assert_eq!(app.get("/v1/catalogs").await.body["catalogs"], json!([]));
    assert_eq!(app.get("/readyz").await.status, 200);
}

#[tokio::test]
async fn a_catalog_or_a_target_on_ctasds_own_postgres_store_is_refused() {
    let (Some(store), Some(other)) = (TestPostgres::create().await, TestPostgres::create().await)
    else {
        return;
    };
    let app = TestApp::spawn_with(Some(&store.url)).await;

    let on_store = app.register("own", postgres_options(&store)).await;
    app.register("c", postgres_options(&other)).await;
    let target_on_store = app
        .post(
            "/v1/jobs",
            &job(
                "batch",
                "replace_table_as",
                "c",
                Some(&store.database),
                "catalogs",
            ),
        )
        .await;

    on_store.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert_eq!(
        on_store.body["errors"][0]["field"],
        "options.default-database"
    );
    target_on_store.assert_problem(422, "TARGET_PROTECTED");
    let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM catalogs")
        .fetch_one(&mut store.connect().await)
        .await
        .unwrap();
    assert_eq!(tables, 1, "the store's catalogs table is intact");
    assert_eq!(app.get("/readyz").await.status, 200);
}

#[tokio::test]
async fn readiness_reports_a_store_whose_schema_was_damaged() {
    use sqlx::Connection;
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/readyz").await.status, 200);
    let file = app.settings().store.data_dir.join("ctasd.db");
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    sqlx::query("DROP TABLE catalogs")
        .execute(&mut conn)
        .await
        .unwrap();

    let ready = app.get("/readyz").await;

    ready.assert_problem(503, "STORE_NOT_READY");
    assert!(
        ready.detail().contains("catalogs missing"),
        "{}",
        ready.detail()
    );
}

#[tokio::test]
async fn a_type_nested_twenty_thousand_deep_is_refused_and_the_server_lives() {
    let app = TestApp::spawn().await;
    app.register("c", json!({"type": "generic_in_memory"}))
        .await;
    let deep = format!("{}INT{}", "ARRAY<".repeat(20_000), ">".repeat(20_000));
    let body = with_columns("t", "default", json!([{"name": "x", "type": deep}]), None);

    let reply = app.post("/v1/jobs", &body).await;

    reply.assert_problem(422, "TABLE_INVALID");
    assert!(reply.detail().contains("levels deep"), "{}", reply.detail());
    assert!(
        reply.text.len() < 2048,
        "the refused type is not echoed whole"
    );
    assert_eq!(app.get("/healthz").await.status, 200);
}

fn columns(count: usize, data_type: &str) -> Value {
    (0..count)
        .map(|i| json!({"name": format!("c{i}"), "type": data_type}))
        .collect()
}

#[tokio::test]
async fn tables_postgres_cannot_hold_are_refused_at_submission() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", postgres_options(&pg)).await;
    let db = pg.database.as_str();

    let wide = app
        .post(
            "/v1/jobs",
            &with_columns("t", db, columns(1700, "INT"), None),
        )
        .await;
    let twice = app
        .post(
            "/v1/jobs",
            &with_columns(
                "t",
                db,
                columns(2, "INT NOT NULL"),
                Some(json!({"name": "pk", "columns": ["c0", "c0"]})),
            ),
        )
        .await;

    wide.assert_problem(422, "TABLE_UNSUPPORTED");
    assert!(
        wide.detail().contains("at most 1600 columns"),
        "{}",
        wide.detail()
    );
    twice.assert_problem(422, "TABLE_INVALID");
    assert!(
        twice.detail().contains("names column 'c0' twice"),
        "{}",
        twice.detail()
    );
    assert_eq!(app.get("/v1/jobs").await.body["jobs"], json!([]));
}

#[tokio::test]
async fn a_postgres_database_dropped_after_use_is_missing_for_the_next_job_and_the_next_action() {
    use ctasd::domain::job::JobStatus::{Created, Finished, Running};
    let (Some(pg), Some(gone)) = (TestPostgres::create().await, TestPostgres::create().await)
    else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", postgres_options(&pg)).await;
    let target = gone.database.as_str();
    // A job stages its table there: the catalog has found the database,
    // and has seen this definition pass its dry run.
    let first = app
        .submit(&with_columns("t", target, columns(2, "INT"), None))
        .await;
    app.report_all(&first.id, &[Created, Running]).await;
    pg.execute(&format!("DROP DATABASE \"{target}\" WITH (FORCE)"))
        .await;

    let again = app
        .post(
            "/v1/jobs",
            &with_columns("u", target, columns(2, "INT"), None),
        )
        .await;
    let finished = app.report(&first.id, Finished).await;

    again.assert_problem(422, "DATABASE_NOT_FOUND");
    assert!(again.detail().contains(target), "{}", again.detail());
    assert_eq!(finished.status, 200, "{}", finished.text);
    let commit = &finished.body["actions_taken"][0];
    assert_eq!(commit["action"], "commit", "{}", finished.text);
    assert_eq!(commit["state"], "failed", "{}", finished.text);
    let error = commit["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains(&format!("database '{target}' does not exist")),
        "the commit names the missing database: {error}"
    );
}

#[tokio::test]
async fn tables_mariadb_cannot_hold_are_refused_at_submission_even_where_only_it_knows() {
    let Some(my) = TestMysql::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", mysql_options(&my)).await;
    let db = my.database.as_str();

    let spaced = app
        .post(
            "/v1/jobs",
            &with_columns("t", db, json!([{"name": "a ", "type": "INT"}]), None),
        )
        .await;
    // 40 columns of 240 bytes fit MySQL's 65,535-byte row, not InnoDB's
    // 8,126-byte page: only the server knows, and the dry run asks it.
    let in_page = app
        .post(
            "/v1/jobs",
            &with_columns("t", db, columns(40, "VARCHAR(60)"), None),
        )
        .await;

    spaced.assert_problem(422, "TABLE_UNSUPPORTED");
    assert!(
        spaced.detail().contains("ends with a space"),
        "{}",
        spaced.detail()
    );
    in_page.assert_problem(422, "TABLE_UNSUPPORTED");
    assert!(
        in_page.detail().contains("Row size too large"),
        "{}",
        in_page.detail()
    );
    let mut conn = my.connect().await;
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(tables, 0, "the dry run left nothing behind");
}

#[tokio::test]
async fn warehouse_names_longer_than_a_directory_name_are_refused() {
    let app = TestApp::spawn().await;
    app.filesystem_catalog("c").await;
    let long = "é".repeat(128);

    let reply = app
        .post(
            "/v1/jobs",
            &job("batch", "create_table_as", "c", None, &long),
        )
        .await;

    reply.assert_problem(422, "TABLE_UNSUPPORTED");
    assert!(reply.detail().contains("at most 255"), "{}", reply.detail());
}

#[tokio::test]
async fn pointing_a_catalog_elsewhere_needs_its_secrets_again_and_sends_nothing_without() {
    let Some(pg) = TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", postgres_options(&pg)).await;
    let before = app.get("/v1/catalogs/c").await;
    // A server the operator controls, listening for the password.
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let trap_url = format!("jdbc:postgresql://{}", trap.local_addr().unwrap());

    let without = app
        .patch("/v1/catalogs/c", &json!({"set": {"base-url": trap_url}}))
        .await;
    let connected =
        tokio::time::timeout(std::time::Duration::from_millis(300), trap.accept()).await;

    without.assert_problem(422, "CATALOG_SECRETS_REQUIRED");
    assert_eq!(without.body["errors"][0]["field"], "set.password");
    assert!(connected.is_err(), "ctasd did not connect to the new place");
    assert_eq!(app.get("/v1/catalogs/c").await.body, before.body);
    let with = app
        .patch(
            "/v1/catalogs/c",
            &json!({"set": {"base-url": format!("jdbc:postgresql://{}", pg.host_port()),
            "password": "an0ther-Secret"}, "comment": "moved"}),
        )
        .await;
    assert_eq!(with.status, 200, "{}", with.text);
    let comment_only = app
        .patch("/v1/catalogs/c", &json!({"comment": "only this"}))
        .await;
    assert_eq!(comment_only.status, 200, "{}", comment_only.text);
}

#[tokio::test]
async fn a_database_name_that_would_add_url_parameters_never_reaches_a_sink_url() {
    let injected = format!(
        "x?allowLoadLocalInfile=true&autoDeserialize=true&n={}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let (Some(_hostile), Some(pg)) = (
        TestPostgres::create_named(&injected).await,
        TestPostgres::create().await,
    ) else {
        return;
    };
    let app = TestApp::spawn().await;
    let mut options = postgres_options(&pg);

    app.register("c", options.clone()).await;
    let target = app
        .post(
            "/v1/jobs",
            &job("batch", "create_table_as", "c", Some(&injected), "t"),
        )
        .await;
    options["default-database"] = json!(injected);
    let catalog = app.register("d", options).await;

    target.assert_problem(422, "TABLE_UNSUPPORTED");
    assert!(target.detail().contains("'?'"), "{}", target.detail());
    catalog.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert_eq!(
        catalog.body["errors"][0]["field"],
        "options.default-database"
    );
    assert_eq!(app.get("/v1/jobs").await.body["jobs"], json!([]));
}

#[tokio::test]
async fn a_drop_racing_a_submission_never_lets_both_succeed() {
    let store = TestPostgres::create().await;
    let mut stores = vec![None];
    if let Some(pg) = &store {
        stores.push(Some(pg.url.clone()));
    }
    for url in stores {
        let app = TestApp::spawn_with(url.as_deref()).await;
        let mut both = 0;
        for trial in 0..40 {
            let name = format!("c{trial}");
            app.register(&name, json!({"type": "generic_in_memory"}))
                .await;
            let submit = app.client.post(app.url("/v1/jobs")).json(&job(
                "batch",
                "create_table_as",
                &name,
                None,
                "t",
            ));
            let drop = app.client.delete(app.url(&format!("/v1/catalogs/{name}")));
            let (submitted, dropped) = tokio::join!(submit.send(), drop.send());
            let (submitted, dropped) = (submitted.unwrap().status(), dropped.unwrap());
            let dropped_status = dropped.status();
            let dropped_text = dropped.text().await.unwrap();
            let dropped = dropped_status;
            assert!(
                [201, 422].contains(&submitted.as_u16()) && [204, 409].contains(&dropped.as_u16()),
                "{submitted} {dropped}: {}",
                dropped_text
            );
            if submitted == 201 && dropped == 204 {
                both += 1;
            }
        }
        assert_eq!(
            both, 0,
            "a job was stored on a catalog dropped at the same time"
        );
    }
}

#[tokio::test]
async fn altering_only_the_comment_of_an_in_memory_catalog_keeps_its_tables() {
    let app = TestApp::spawn().await;
    app.register("m", json!({"type": "generic_in_memory"}))
        .await;
    let submitted = app
        .post(
            "/v1/jobs",
            &job("streaming", "create_table_as", "m", None, "kept"),
        )
        .await;
    app.put_status(submitted.body["id"].as_str().unwrap(), "CREATED")
        .await;

    let altered = app
        .patch(
            "/v1/catalogs/m",
            &json!({"comment": "renamed in words only"}),
        )
        .await;

    assert_eq!(altered.status, 200, "{}", altered.text);
    let tables = app.get("/v1/catalogs/m/databases/default/tables").await;
    assert_eq!(tables.body["tables"], json!([{"name": "kept"}]));
}

#[tokio::test]
async fn the_data_directory_is_private_and_every_file_in_it_is_0600() {
    use std::os::unix::fs::PermissionsExt;
    let app = TestApp::spawn().await;
    // Writes, so that the WAL and shared-memory files exist.
    app.register("m", json!({"type": "generic_in_memory"}))
        .await;
    let data_dir = app.settings().store.data_dir.clone();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;

    assert_eq!(mode(&data_dir), 0o700);
    let mut files: Vec<String> = std::fs::read_dir(&data_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "ctasd.db",
            "ctasd.db-shm",
            "ctasd.db-wal",
            "ctasd.db.lock",
            "secret.key"
        ]
    );
    for file in files {
        assert_eq!(mode(&data_dir.join(&file)), 0o600, "{file}");
    }
}

#[tokio::test]
async fn a_key_file_others_can_read_is_warned_about_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let temp = tempfile::tempdir().unwrap();
    let key = temp.path().join("shared.key");
    std::fs::write(
        &key,
        format!(
            "{}\n",
            secrecy::ExposeSecret::expose_secret(&ctasd::store::secrets::generate_key_spec())
        ),
    )
    .unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();

    let server = crate::helpers::ServerProcess::start_with_env(
        &temp.path().join("data"),
        &[("CTASD_SECRET_KEY_FILE", key.to_str().unwrap())],
    );
    let log = server.stop();

    assert!(
        log.contains("the secret key file can be read or written by other users"),
        "{log}"
    );
}

#[tokio::test]
async fn a_sqlite_catalog_under_a_system_directory_or_linked_into_one_is_refused() {
    let app = TestApp::spawn().await;
    let system = app
        .register(
            "lite",
            json!({"type": "jdbc", "base-url": "jdbc:sqlite:/var/lib", "default-database": "x"}),
        )
        .await;
    system.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert_eq!(system.body["errors"][0]["field"], "options.base-url");
    assert!(
        system.detail().contains("belongs to the operating system"),
        "{}",
        system.detail()
    );

    // A database file of an ordinary directory that links into one.
    let dir = app.scratch("lite").canonicalize().unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("linked.db")).unwrap();
    let before = std::fs::read("/etc/passwd").unwrap();
    let linked = app
        .register(
            "lite",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()),
                   "default-database": "linked"}),
        )
        .await;
    linked.assert_problem(422, "CATALOG_OPTION_INVALID");
    assert_eq!(
        linked.body["errors"][0]["field"],
        "options.default-database"
    );
    assert!(
        linked.detail().contains("resolves to '/etc/passwd'"),
        "{}",
        linked.detail()
    );

    // The same rule for a database that a job's target names.
    crate::helpers::sqlite_database(&dir, "main", "SELECT 1").await;
    let registered = app
        .register(
            "lite",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", dir.display()),
                   "default-database": "main"}),
        )
        .await;
    assert_eq!(registered.status, 201, "{}", registered.text);
    let job = app
        .post(
            "/v1/jobs",
            &job(
                "batch",
                "replace_table_as",
                "lite",
                Some("linked"),
                "passwd",
            ),
        )
        .await;
    assert!(job.status.is_client_error(), "{}", job.text);
    assert!(
        job.detail().contains("/etc/passwd") || job.detail().contains("'linked' does not exist"),
        "{}",
        job.text
    );
    assert_eq!(std::fs::read("/etc/passwd").unwrap(), before);
}

#[tokio::test]
async fn a_mariadb_replace_of_a_table_other_objects_depend_on_is_refused_and_changes_nothing() {
    let Some(my) = TestMysql::create().await else {
        return;
    };
    let app = TestApp::spawn().await;
    app.register("c", mysql_options(&my)).await;
    my.execute("CREATE TABLE base (id BIGINT NOT NULL PRIMARY KEY)")
        .await;
    my.execute("INSERT INTO base VALUES (1), (2), (3)").await;
    my.execute("CREATE TABLE child (id BIGINT NOT NULL, CONSTRAINT child_base FOREIGN KEY (id) REFERENCES base (id))")
        .await;
    my.execute("INSERT INTO child VALUES (2)").await;
    let replace = job("batch", "replace_table_as", "c", Some(&my.database), "base");

    let refused = app.post("/v1/jobs", &replace).await;

    refused.assert_problem(409, "TABLE_NOT_OWNED");
    assert!(
        refused.detail().contains("foreign key child_base"),
        "{}",
        refused.detail()
    );

    // A foreign key made after submission: the commit is refused before
    // anything is renamed.
    my.execute("ALTER TABLE child DROP FOREIGN KEY child_base")
        .await;
    let submitted = app.post("/v1/jobs", &replace).await;
    assert_eq!(submitted.status, 201, "{}", submitted.text);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    app.put_status(&id, "CREATED").await;
    app.put_status(&id, "RUNNING").await;
    my.execute("ALTER TABLE child ADD CONSTRAINT child_base FOREIGN KEY (id) REFERENCES base (id)")
        .await;

    let finished = app.put_status(&id, "FINISHED").await;

    let commit = &finished.body["actions_taken"][0];
    assert_eq!(commit["state"], "failed", "{}", finished.text);
    assert!(
        commit["last_error"]
            .as_str()
            .unwrap()
            .contains("foreign key child_base"),
        "{commit}"
    );
    let mut conn = my.connect().await;
    let rows: Vec<i64> = sqlx::query_scalar("SELECT id FROM base ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows, [1, 2, 3], "the old table is where it was");
    let referenced: String = sqlx::query_scalar(
        "SELECT CAST(referenced_table_name AS CHAR) FROM information_schema.referential_constraints \
         WHERE constraint_schema = DATABASE() AND constraint_name = 'child_base'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(referenced, "base", "the foreign key still points at it");
}

#[tokio::test]
async fn a_table_at_a_staging_name_that_ctasd_did_not_create_is_neither_adopted_published_nor_dropped()
 {
    for (world, options, database) in crate::staging::world_options().await {
        if matches!(world, crate::staging::World::Files(_)) {
            continue;
        }
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let submit = || async {
            let reply = app
                .post(
                    "/v1/jobs",
                    &json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
                        "target": {"catalog": "c", "database": database, "table": "orders"},
                        "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                                              {"name": "note", "type": "VARCHAR(20)"}]}}]}),
                )
                .await;
            assert_eq!(reply.status, 201, "{}", reply.text);
            let id = reply.body["id"].as_str().unwrap().to_owned();
            let staging = reply.body["hooks"][0]["write_location"]["name"]
                .as_str()
                .unwrap()
                .to_owned();
            (id, staging)
        };

        // Made before the begin: refused, and an abort leaves it.
        let (id, staging) = submit().await;
        world.create_old(&staging).await;
        let created = app.put_status(&id, "CREATED").await;
        let begin = &created.body["actions_taken"][0];
        assert_eq!(begin["state"], "failed", "{}", created.text);
        assert!(
            begin["last_error"]
                .as_str()
                .unwrap()
                .contains("without ctasd's marker"),
            "{begin}"
        );
        app.put_status(&id, "FAILED").await;
        assert_eq!(world.ids(&staging).await, Some(vec![999]), "kept as it was");

        // Swapped in for ctasd's own staging before the commit: refused.
        let (id, staging) = submit().await;
        app.put_status(&id, "CREATED").await;
        app.put_status(&id, "RUNNING").await;
        world.drop_table(&staging).await;
        world.create_old(&staging).await;
        let finished = app.put_status(&id, "FINISHED").await;
        let commit = &finished.body["actions_taken"][0];
        assert_eq!(commit["state"], "failed", "{}", finished.text);
        assert!(
            commit["last_error"]
                .as_str()
                .unwrap()
                .contains("without ctasd's marker"),
            "{commit}"
        );
        assert_eq!(world.ids("orders").await, None, "nothing was published");
        assert_eq!(world.ids(&staging).await, Some(vec![999]), "kept as it was");
    }
}

#[tokio::test]
async fn a_staging_another_installation_made_under_the_same_job_id_is_left_to_it() {
    for (world, options, database) in crate::staging::world_options().await {
        let ours = TestApp::spawn().await;
        let theirs = TestApp::spawn().await;
        ours.register("c", options.clone()).await;
        theirs.register("c", options).await;
        let id = uuid::Uuid::new_v4().simple().to_string();
        let job = json!({"id": id, "name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
            "target": {"catalog": "c", "database": database, "table": "orders"},
            "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                                  {"name": "note", "type": "VARCHAR(20)"}]}}]});
        for app in [&theirs, &ours] {
            let reply = app.post("/v1/jobs", &job).await;
            assert_eq!(reply.status, 201, "{}", reply.text);
        }
        theirs.put_status(&id, "CREATED").await;
        let staging = ours.get(&format!("/v1/jobs/{id}")).await.body["hooks"][0]["write_location"]
            ["name"]
            .as_str()
            .unwrap()
            .to_owned();
        world.insert(&staging, &[5]).await;

        let created = ours.put_status(&id, "CREATED").await;
        let begin = &created.body["actions_taken"][0];
        assert_eq!(begin["state"], "failed", "{}", created.text);
        assert!(
            begin["last_error"]
                .as_str()
                .unwrap()
                .contains("another ctasd installation"),
            "{begin}"
        );
        ours.put_status(&id, "FAILED").await;
        assert_eq!(
            world.ids(&staging).await,
            Some(vec![5]),
            "their staging keeps its rows"
        );

        // Theirs publishes it as ever.
        theirs.put_status(&id, "RUNNING").await;
        let finished = theirs.put_status(&id, "FINISHED").await;
        assert_eq!(
            finished.body["actions_taken"][0]["outcome"], "committed",
            "{}",
            finished.text
        );
        assert_eq!(world.ids("orders").await, Some(vec![5]));
    }
}
