//! A registered password appears nowhere in plain text: not in responses,
//! not in log lines (even at debug level), not in the SQLite file's bytes,
//! not in PostgreSQL rows.

use std::path::Path;

use serde_json::{Value, json};

use crate::helpers::{
    Reply, SECRET, ServerProcess, TestApp, TestPostgres, postgres_options, sqlite_database,
};

#[tokio::test]
async fn the_password_is_in_no_response_log_line_or_store_byte() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let lite = dir.path().join("lite");
    std::fs::create_dir_all(&lite).unwrap();
    sqlite_database(&lite, "main", "CREATE TABLE t (x INT)").await;
    let pg = TestPostgres::create().await;
    let server = ServerProcess::start(&data_dir);
    let client = reqwest::Client::new();
    let mut replies = Vec::new();
    let sqlite_options = json!({
        "type": "jdbc", "base-url": format!("jdbc:sqlite:{}", lite.display()),
        "default-database": "main", "username": "someone", "password": SECRET,
    });
    let mut requests: Vec<(reqwest::Method, &str, Option<Value>)> = vec![
        (
            reqwest::Method::POST,
            "/v1/catalogs",
            Some(json!({"name": "lite", "options": sqlite_options})),
        ),
        (reqwest::Method::GET, "/v1/catalogs/lite", None),
        (reqwest::Method::GET, "/v1/catalogs", None),
        (
            reqwest::Method::PATCH,
            "/v1/catalogs/lite",
            Some(json!({"set": {"password": SECRET}, "comment": "again"})),
        ),
        (
            reqwest::Method::PATCH,
            "/v1/catalogs/lite",
            Some(json!({"set": {"password": SECRET, "default-database": "absent"}})),
        ),
        (
            reqwest::Method::GET,
            "/v1/catalogs/lite/databases/main/tables/t",
            None,
        ),
    ];
    let mut pg_requests = Vec::new();
    if let Some(pg) = &pg {
        let mut refused = postgres_options(pg);
        refused["base-url"] = json!("jdbc:postgresql://127.0.0.1:1");
        pg_requests.push(json!({"name": "pg", "options": postgres_options(pg)}));
        pg_requests.push(json!({"name": "refused", "options": refused}));
    }
    for body in &pg_requests {
        requests.push((reqwest::Method::POST, "/v1/catalogs", Some(body.clone())));
    }

    // A subscription's signing secret: shown once, in its registration's
    // answer, and nowhere else.
    let signing = "whsec_c2lnbmluZy1zZWNyZXQtb2YtYS1zdWJzY3JpYmVy";
    requests.push((
        reqwest::Method::POST,
        "/v1/subscriptions",
        Some(json!({"name": "hooks", "url": "http://127.0.0.1:9/hook", "secret": signing})),
    ));
    let registration = requests.len() - 1;
    requests.push((reqwest::Method::GET, "/v1/subscriptions", None));
    requests.push((reqwest::Method::GET, "/v1/subscriptions/hooks", None));
    for (method, path, body) in requests {
        let mut request = client.request(method, format!("{}{path}", server.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        replies.push(Reply::from(request.send().await.unwrap()).await);
    }
    let log = server.stop();

    assert_eq!(replies[0].status, 201, "{}", replies[0].text);
    assert_eq!(
        replies[4].status, 422,
        "the failed alteration: {}",
        replies[4].text
    );
    for reply in &replies {
        assert!(
            !reply.text.contains(SECRET),
            "a response shows the secret: {}",
            reply.text
        );
    }
    assert_eq!(replies[registration].body["secret"], signing);
    for (at, reply) in replies
        .iter()
        .enumerate()
        .filter(|(at, _)| *at != registration)
    {
        assert!(
            !reply.text.contains(signing),
            "reply {at} shows the signing secret"
        );
    }
    assert!(log.contains("catalog registered"), "the log was captured");
    assert!(!log.contains(SECRET), "the log shows the secret");
    assert!(!log.contains(signing), "the log shows the signing secret");
    let mut files = 0;
    for entry in std::fs::read_dir(&data_dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !contains(&bytes, SECRET.as_bytes()),
            "{} holds the secret in plain text",
            path.display()
        );
        assert!(
            !contains(&bytes, signing.as_bytes()),
            "{} holds the signing secret in plain text",
            path.display()
        );
        files += 1;
    }
    assert!(files >= 2, "the store and the key file were checked");
    let sealed = sealed_password_in_sqlite(&data_dir.join("ctasd.db")).await;
    assert!(
        sealed.starts_with("v1."),
        "the password is stored sealed, not dropped: {sealed}"
    );
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn sealed_password_in_sqlite(path: &Path) -> String {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::query_scalar(
        "SELECT json_extract(sealed_options, '$.password') FROM catalogs WHERE name = 'lite'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_password_is_sealed_in_postgres_store_rows() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let app = TestApp::spawn_with(Some(&store.url)).await;
    let lite = app.scratch("lite");
    sqlite_database(&lite, "main", "CREATE TABLE t (x INT)").await;
    let options = json!({
        "type": "jdbc", "base-url": format!("jdbc:sqlite:{}", lite.display()),
        "default-database": "main", "username": "someone", "password": SECRET,
    });

    assert_eq!(app.register("lite", options).await.status, 201);

    let mut conn = store.connect().await;
    let rows: Vec<String> = sqlx::query_scalar("SELECT row_to_json(c)::text FROM catalogs c")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(!rows[0].contains(SECRET), "{}", rows[0]);
    let sealed: String =
        sqlx::query_scalar("SELECT sealed_options::jsonb ->> 'password' FROM catalogs")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(sealed.starts_with("v1."), "{sealed}");
}

const OLD_KEY: &str = "k-old:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
const NEW_KEY: &str = "k-new:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

/// The id of the key each sealed value of the SQLite store was sealed with:
/// catalogs' secrets, hooks' snapshots and secret table options.
async fn sealing_keys(data_dir: &Path) -> Vec<String> {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(data_dir.join("ctasd.db"))
        .read_only(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    let sealed: Vec<String> = sqlx::query_scalar(
        "SELECT value FROM catalogs, json_each(catalogs.sealed_options) \
         UNION ALL SELECT value FROM hooks, json_each(hooks.catalog_sealed_options) \
         UNION ALL SELECT value FROM hooks, json_each(hooks.sealed_table_properties) \
         UNION ALL SELECT sealed_secret FROM subscriptions",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut keys: Vec<String> = sealed
        .iter()
        .map(|s| s.split('.').nth(1).unwrap().to_owned())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Settings that give exactly `keys` (the first active).
fn with_keys(keys: &str) -> impl FnOnce(&mut ctasd::config::ServeSettings) {
    let keys = secrecy::SecretString::from(keys.to_owned());
    move |settings| settings.store.secret_key = Some(keys)
}

/// A server given `keys`, with catalog `lite` whose password they sealed.
async fn with_a_password_sealed_by(keys: &str) -> TestApp {
    let app = TestApp::spawn_with_settings(with_keys(keys)).await;
    let lite = app.scratch("lite");
    sqlite_database(&lite, "main", "SELECT 1").await;
    let options = json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", lite.display()),
        "default-database": "main", "username": "someone", "password": SECRET});
    assert_eq!(app.register("lite", options).await.status, 201);
    app
}

#[tokio::test]
async fn a_key_is_retired_by_putting_a_new_one_first_restarting_and_removing_it() {
    let app = with_a_password_sealed_by(OLD_KEY).await;
    let job = app
        .post(
            "/v1/jobs",
            &json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
                "target": {"catalog": "lite", "table": "t"},
                "table": {"columns": [{"name": "id", "type": "BIGINT"}],
                          "options": {"connector": "jdbc", "password": SECRET}}}]}),
        )
        .await;
    assert_eq!(job.status, 201, "{}", job.text);
    let subscribed = app
        .post(
            "/v1/subscriptions",
            &json!({"name": "hooks", "url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(subscribed.status, 201, "{}", subscribed.text);
    let data_dir = app.settings().store.data_dir.clone();

    // The new key first, the old one still given: every secret moves.
    let app = app
        .stop_keeping_store()
        .await
        .start_again_with(with_keys(&format!("{NEW_KEY},{OLD_KEY}")))
        .await;
    assert_eq!(app.get("/readyz").await.status, 200);
    assert_eq!(sealing_keys(&data_dir).await, ["k-new"]);

    // The old key removed: everything still opens.
    let app = app
        .stop_keeping_store()
        .await
        .start_again_with(with_keys(NEW_KEY))
        .await;
    assert_eq!(app.get("/readyz").await.status, 200);
    let catalog = app.get("/v1/catalogs/lite/databases").await;
    assert_eq!(catalog.status, 200, "{}", catalog.text);
    let id = job.body["id"].as_str().unwrap();
    assert_eq!(app.put_status(id, "CREATED").await.status, 200);
    // The signing secret opens too: the deliverer signs with it and tries
    // the receiver (which is not there).
    let mut tried = Value::Null;
    for _ in 0..100 {
        tried = app.get("/v1/subscriptions/hooks/deliveries").await.body;
        let errors = tried["deliveries"].as_array().unwrap().iter();
        if errors
            .filter_map(|d| d["last_error"].as_str())
            .any(|e| e.contains("could not be reached"))
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no delivery was signed and tried: {tried}");
}

#[tokio::test]
async fn a_secret_sealed_with_a_key_no_longer_given_is_named_at_start_and_in_readyz() {
    let app = with_a_password_sealed_by(OLD_KEY).await;

    // Restarted with only a new key: the old one was dropped too early.
    let app = app
        .stop_keeping_store()
        .await
        .start_again_with(with_keys(NEW_KEY))
        .await;

    let ready = app.get("/readyz").await;
    ready.assert_problem(503, "STORE_NOT_READY");
    assert!(
        ready
            .detail()
            .contains("sealed with key 'k-old', which is not given")
            && ready.detail().contains("catalog 'lite'"),
        "{}",
        ready.text
    );
    assert!(!ready.text.contains(SECRET));
    // What needs the old key is refused in words that name it, not a 500.
    let listing = app.get("/v1/catalogs").await;
    listing.assert_problem(503, "STORE_NOT_READY");
    assert!(listing.detail().contains("'k-old'"), "{}", listing.text);
    // What does not need it still works.
    assert_eq!(app.get("/v1/jobs").await.status, 200);
}
