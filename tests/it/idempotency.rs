//! `Idempotency-Key` on POSTs: a retry gets the first answer and creates
//! nothing twice, on both stores' path and across a restart.

use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, TestPostgres};

async fn post_with_key(app: &TestApp, path: &str, key: &str, body: &Value) -> Reply {
    let request = app
        .client
        .post(app.url(path))
        .header("idempotency-key", key)
        .json(body);
    Reply::from(request.send().await.unwrap()).await
}

fn job(name: &str) -> Value {
    json!({
        "name": name, "mode": "batch",
        "hooks": [{"kind": "create_table_as", "target": {"catalog": "mem", "table": "t"},
                   "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]
    })
}

async fn job_count(app: &TestApp) -> usize {
    app.get("/v1/jobs").await.body["jobs"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_repeated_post_with_the_same_key_creates_one_job_and_answers_the_same() {
    one_job_per_key(TestApp::spawn().await).await;
}

#[tokio::test]
async fn a_repeated_post_with_the_same_key_creates_one_job_on_postgresql_too() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    one_job_per_key(TestApp::spawn_with(Some(&store.url)).await).await;
}

async fn one_job_per_key(app: TestApp) {
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;

    let first = post_with_key(&app, "/v1/jobs", "key-1", &job("once")).await;
    let again = post_with_key(&app, "/v1/jobs", "key-1", &job("once")).await;

    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(again.status, 201);
    assert_eq!(again.body, first.body, "the first answer, replayed");
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert!(first.headers.get("idempotent-replayed").is_none());
    assert_eq!(again.headers.get("location"), first.headers.get("location"));
    assert_eq!(job_count(&app).await, 1, "one job");

    // The same key on a different request is refused, and creates nothing.
    let other = post_with_key(&app, "/v1/jobs", "key-1", &job("twice")).await;
    other.assert_problem(422, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(job_count(&app).await, 1);

    // Another key is another request; no key at all is as before.
    post_with_key(&app, "/v1/jobs", "key-2", &job("twice")).await;
    app.post("/v1/jobs", &job("thrice")).await;
    assert_eq!(job_count(&app).await, 3);

    post_with_key(&app, "/v1/jobs", "not a key", &job("x"))
        .await
        .assert_problem(400, "IDEMPOTENCY_KEY_INVALID");
    assert_eq!(job_count(&app).await, 3);
}

#[tokio::test]
async fn a_final_refusal_is_replayed_too_and_the_answers_outlive_a_restart() {
    let app = TestApp::spawn().await;
    let catalog = json!({"name": "mem", "options": {"type": "generic_in_memory"}});
    let created = post_with_key(&app, "/v1/catalogs", "register-mem", &catalog).await;
    assert_eq!(created.status, 201, "{}", created.text);

    // A retry after the first attempt succeeded: 201 again, not 409.
    let app = app.restart().await;
    let retried = post_with_key(&app, "/v1/catalogs", "register-mem", &catalog).await;
    assert_eq!(retried.status, 201, "{}", retried.text);
    assert_eq!(retried.headers["idempotent-replayed"], "true");

    let bad = json!({"name": "bad", "options": {"type": "hive"}});
    let refused = post_with_key(&app, "/v1/catalogs", "register-bad", &bad).await;
    refused.assert_problem(422, "CATALOG_TYPE_UNKNOWN");
    let refused_again = post_with_key(&app, "/v1/catalogs", "register-bad", &bad).await;
    refused_again.assert_problem(422, "CATALOG_TYPE_UNKNOWN");
    assert_eq!(refused_again.headers["idempotent-replayed"], "true");
}

/// Leaves a claim of `key` as a process that died mid-request would, last
/// renewed `age_ms` ago.
async fn abandoned_claim(app: &TestApp, key: &str, age_ms: i64) {
    use sqlx::Connection;
    let file = app.settings().store.data_dir.join("ctasd.db");
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO idempotency_keys (caller, key, request, created_at) VALUES ('', ?, 'x', ?)",
    )
    .bind(key)
    .bind(chrono::Utc::now().timestamp_millis() - age_ms)
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_key_claimed_by_a_process_that_died_is_free_again_within_seconds() {
    let app = TestApp::spawn().await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    abandoned_claim(&app, "died-long-ago", 11_000).await;
    abandoned_claim(&app, "still-running", 1_000).await;

    let freed = post_with_key(&app, "/v1/jobs", "died-long-ago", &job("a")).await;
    let running = post_with_key(&app, "/v1/jobs", "still-running", &job("b")).await;

    assert_eq!(freed.status, 201, "{}", freed.text);
    // The live claim holds: the request does not run (its digest is not
    // the planted claim's, so it is answered as the key's other request).
    running.assert_problem(422, "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(job_count(&app).await, 1);
}

#[tokio::test]
async fn an_answer_kept_for_a_role_is_not_replayed_once_the_role_was_lowered() {
    use ctasd::api::auth::{Role, generate};
    use secrecy::{ExposeSecret, SecretString};
    let (token, line) = generate("ci", Role::Operator);
    let app =
        TestApp::spawn_with_settings(|s| s.tokens = Some(SecretString::from(line.clone()))).await;
    let app = app.authorized(token.expose_secret());
    let body = json!({"name": "mem", "options": {"type": "generic_in_memory"}});
    let first = post_with_key(&app, "/v1/catalogs", "register-mem", &body).await;
    assert_eq!(first.status, 201, "{}", first.text);

    // The same token, its role lowered to reader.
    let lowered = line.replace(":operator:", ":reader:");
    assert_ne!(lowered, line);
    let app = app
        .stop_keeping_store()
        .await
        .start_again_with(|s| s.tokens = Some(SecretString::from(lowered)))
        .await
        .authorized(token.expose_secret());
    let again = post_with_key(&app, "/v1/catalogs", "register-mem", &body).await;

    again.assert_problem(403, "FORBIDDEN");
    assert!(again.headers.get("idempotent-replayed").is_none());
}

/// The `body` column of every kept answer, as the store file holds it.
async fn kept_bodies(app: &TestApp) -> Vec<String> {
    use sqlx::Connection;
    let file = app.settings().store.data_dir.join("ctasd.db");
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
        .await
        .unwrap();
    let bodies = sqlx::query_scalar("SELECT body FROM idempotency_keys WHERE body IS NOT NULL")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    bodies
}

#[tokio::test]
async fn a_kept_answer_is_sealed_and_a_syntax_error_never_quotes_a_value() {
    let app = TestApp::spawn().await;
    // A missing '=' after 'password': the parser meets the value next.
    let statement = json!({"statement":
        "CREATE CATALOG lite WITH ('type' = 'generic_in_memory', 'password' 'Hunter2-secret')"});

    let first = post_with_key(&app, "/v1/statements", "stmt-1", &statement).await;
    let again = post_with_key(&app, "/v1/statements", "stmt-1", &statement).await;

    first.assert_problem(400, "STATEMENT_SYNTAX");
    assert!(
        first
            .detail()
            .contains("Encountered a string literal at line 1, column 68"),
        "{}",
        first.text
    );
    assert!(!first.text.contains("Hunter2-secret"), "{}", first.text);
    assert_eq!(again.body, first.body, "the first answer, replayed");
    assert_eq!(again.headers["idempotent-replayed"], "true");
    let bodies = kept_bodies(&app).await;
    assert_eq!(bodies.len(), 1);
    assert!(bodies[0].starts_with("v1."), "sealed: {}", bodies[0]);
    assert!(!bodies[0].contains("STATEMENT_SYNTAX"), "{}", bodies[0]);
    let file = std::fs::read(app.settings().store.data_dir.join("ctasd.db")).unwrap();
    assert!(
        !file.windows(14).any(|w| w == b"Hunter2-secret"),
        "the store file holds no secret"
    );
}

#[tokio::test]
async fn a_kept_answer_sealed_with_a_key_no_longer_given_is_not_run_again() {
    let app = TestApp::spawn().await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let first = post_with_key(&app, "/v1/jobs", "job-1", &job("once")).await;
    assert_eq!(first.status, 201, "{}", first.text);
    {
        use sqlx::Connection;
        let file = app.settings().store.data_dir.join("ctasd.db");
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", file.display()))
            .await
            .unwrap();
        // As if sealed under a key the server was since stopped being given.
        sqlx::query("UPDATE idempotency_keys SET body = 'v1.k-retired.AAAA' WHERE key = 'job-1'")
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }

    let again = post_with_key(&app, "/v1/jobs", "job-1", &job("once")).await;

    again.assert_problem(409, "IDEMPOTENT_ANSWER_UNREADABLE");
    assert!(again.detail().contains("k-retired"), "{}", again.text);
    assert_eq!(job_count(&app).await, 1, "the request did not run again");
}

/// Keys planted behind ctasd's back, each `(key, answered, age in ms)`,
/// on whichever store `app` runs on.
async fn plant_keys(app: &TestApp, keys: &[(String, bool, i64)]) {
    use sqlx::Connection;
    let now = chrono::Utc::now().timestamp_millis();
    let insert = "INSERT INTO idempotency_keys (caller, key, request, status, created_at) \
                  VALUES ('', $1, 'x', $2, $3)";
    let store = &app.settings().store;
    macro_rules! plant {
        ($conn:expr) => {{
            let mut conn = $conn;
            let mut tx = conn.begin().await.unwrap();
            for (key, answered, age_ms) in keys {
                sqlx::query(insert)
                    .bind(key)
                    .bind(answered.then_some(201_i64))
                    .bind(now - age_ms)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
            }
            tx.commit().await.unwrap();
        }};
    }
    match store.database_url() {
        Some(url) => plant!(sqlx::PgConnection::connect(url).await.unwrap()),
        None => {
            let file = store.data_dir.join("ctasd.db");
            let url = format!("sqlite://{}", file.display());
            plant!(sqlx::SqliteConnection::connect(&url).await.unwrap())
        }
    }
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

#[tokio::test]
async fn a_key_past_its_lifetime_is_claimed_afresh_in_place() {
    let app = TestApp::spawn().await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    plant_keys(&app, &[("yesterday".into(), true, DAY_MS + 60_000)]).await;

    // Its first answer (planted for another request) is not replayed: the
    // key is free again, though no purge has run since it expired.
    let fresh = post_with_key(&app, "/v1/jobs", "yesterday", &job("a")).await;
    let again = post_with_key(&app, "/v1/jobs", "yesterday", &job("a")).await;

    assert_eq!(fresh.status, 201, "{}", fresh.text);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body, fresh.body);
    assert_eq!(job_count(&app).await, 1);
}

#[tokio::test]
async fn expired_keys_and_dead_claims_are_purged_in_batches_and_live_ones_stay() {
    expired_keys_are_purged(TestApp::spawn().await).await;
}

#[tokio::test]
async fn expired_keys_and_dead_claims_are_purged_on_postgresql_too() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    expired_keys_are_purged(TestApp::spawn_with(Some(&store.url)).await).await;
}

async fn expired_keys_are_purged(app: TestApp) {
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    // More expired keys than one batch deletes, and one dead claim.
    let mut planted: Vec<(String, bool, i64)> = (0..2_500)
        .map(|i| (format!("old-{i}"), true, DAY_MS + 1_000 + i))
        .collect();
    planted.push(("died".into(), false, 60_000));
    planted.push(("answered-an-hour-ago".into(), true, 3_600_000));
    planted.push(("running-now".into(), false, 0));
    plant_keys(&app, &planted).await;
    let kept = post_with_key(&app, "/v1/jobs", "posted-now", &job("a")).await;
    assert_eq!(kept.status, 201, "{}", kept.text);

    // The background purges as the server starts, then every minute.
    let app = app.restart().await;
    let mut left = kept_keys(&app).await;
    for _ in 0..100 {
        if left.len() <= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        left = kept_keys(&app).await;
    }
    assert_eq!(
        left,
        ["answered-an-hour-ago", "posted-now", "running-now"],
        "every expired key and the dead claim deleted, nothing else"
    );
}

/// The keys the store keeps, sorted.
async fn kept_keys(app: &TestApp) -> Vec<String> {
    use sqlx::Connection;
    let select = "SELECT key FROM idempotency_keys ORDER BY key";
    let store = &app.settings().store;
    match store.database_url() {
        Some(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query_scalar(select)
                .fetch_all(&mut conn)
                .await
                .unwrap()
        }
        None => {
            let file = store.data_dir.join("ctasd.db");
            let url = format!("sqlite://{}", file.display());
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            sqlx::query_scalar(select)
                .fetch_all(&mut conn)
                .await
                .unwrap()
        }
    }
}
