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
    assert!(log.contains("catalog registered"), "the log was captured");
    assert!(!log.contains(SECRET), "the log shows the secret");
    let mut files = 0;
    for entry in std::fs::read_dir(&data_dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !contains(&bytes, SECRET.as_bytes()),
            "{} holds the secret in plain text",
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
