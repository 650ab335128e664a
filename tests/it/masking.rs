//! What readers see of texts that come from outside (reported failures,
//! target errors) and of secret-named table options: every secret of the
//! job's catalogs and tables masked, long texts cut and marked, and the
//! store holding neither in plain text.

use std::path::Path;

use serde_json::{Value, json};

use crate::helpers::{Reply, SECRET, TestApp, sqlite_database};

/// A reader's token and an engine's, and the server that admits them.
struct Roles {
    app: TestApp,
    reader: String,
    engine: String,
}

impl Roles {
    async fn spawn() -> Self {
        use ctasd::api::auth::{Role, generate};
        use secrecy::ExposeSecret;
        let (reader, reader_line) = generate("dash", Role::Reader);
        let (engine, engine_line) = generate("flink", Role::Engine);
        let (admin, admin_line) = generate("root", Role::Admin);
        let lines = format!("{reader_line},{engine_line},{admin_line}");
        let app = TestApp::spawn_with_settings(|s| {
            s.tokens = Some(secrecy::SecretString::from(lines));
        })
        .await;
        let app = app.authorized(admin.expose_secret());
        Self {
            app,
            reader: reader.expose_secret().to_owned(),
            engine: engine.expose_secret().to_owned(),
        }
    }

    async fn as_token(&self, token: &str, method: &str, path: &str, body: Option<Value>) -> Reply {
        let mut request = reqwest::Client::new()
            .request(method.parse().unwrap(), self.app.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        Reply::from(request.send().await.unwrap()).await
    }
}

/// Every file's bytes under the data directory.
fn store_bytes(data_dir: &Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(data_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

async fn lite_catalog(roles: &Roles) {
    let lite = roles.app.scratch("lite");
    sqlite_database(&lite, "main", "SELECT 1").await;
    let reply = roles
        .app
        .register(
            "lite",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", lite.display()),
                   "default-database": "main", "username": "me", "password": SECRET}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
}

fn batch_on(catalog: &str, options: Value) -> Value {
    json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": catalog, "table": "t"},
        "table": {"columns": [{"name": "id", "type": "BIGINT"}], "options": options}}]})
}

#[tokio::test]
async fn a_reported_failure_quoting_a_password_reaches_readers_and_the_store_masked() {
    let roles = Roles::spawn().await;
    lite_catalog(&roles).await;
    let job = roles.app.submit(&batch_on("lite", json!({}))).await;
    let path = format!("/v1/jobs/{}/status", job.id);
    for status in ["CREATED", "RUNNING"] {
        let reply = roles
            .as_token(&roles.engine, "PUT", &path, Some(json!({"status": status})))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let failure = format!("java.sql.SQLException: login failed for me/{SECRET} at jdbc:x");

    let failed = roles
        .as_token(
            &roles.engine,
            "PUT",
            &path,
            Some(json!({"status": "FAILED", "failure": failure})),
        )
        .await;

    assert_eq!(failed.status, 200, "{}", failed.text);
    assert_eq!(
        failed.body["job"]["failure"],
        "java.sql.SQLException: login failed for me/****** at jdbc:x"
    );
    for read in [
        format!("/v1/jobs/{}", job.id),
        format!("/v1/jobs/{}/events", job.id),
        "/v1/jobs".to_owned(),
    ] {
        let reply = roles.as_token(&roles.reader, "GET", &read, None).await;
        assert_eq!(reply.status, 200, "{read}: {}", reply.text);
        assert!(
            reply.text.contains("login failed"),
            "{read}: {}",
            reply.text
        );
        assert!(!reply.text.contains(SECRET), "{read}: {}", reply.text);
    }
    let data_dir = roles.app.settings().store.data_dir.clone();
    // Stopped, its files kept: the store as it lies on disk.
    let _stopped = roles.app.stop_keeping_store().await;
    for (file, bytes) in store_bytes(&data_dir) {
        assert!(!holds(&bytes, SECRET), "{file} holds the password");
        assert!(!holds(&bytes, "for me/s3cret"), "{file}");
    }
}

#[tokio::test]
async fn a_failure_of_900000_characters_is_kept_cut_and_marked_in_the_job_and_its_history() {
    let app = TestApp::spawn_with_settings(|s| s.max_body_bytes = 2 * 1024 * 1024).await;
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let job = app.submit(&batch_on("mem", json!({}))).await;
    app.put_status(&job.id, "RUNNING").await;
    let long = "x".repeat(900_000);
    let path = format!("/v1/jobs/{}/status", job.id);
    for status in ["FAILING", "FAILED"] {
        let reply = Reply::from(
            app.client
                .put(app.url(&path))
                .json(&json!({"status": status, "failure": long}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(reply.status, 200, "{status}: {}", &reply.text[..200]);
    }

    let read = app.get(&format!("/v1/jobs/{}", job.id)).await;
    let events = app.get(&format!("/v1/jobs/{}/events", job.id)).await;

    let failure = read.body["failure"].as_str().unwrap();
    assert_eq!(failure.chars().count(), 4096);
    assert!(failure.ends_with("… [cut]"), "{}", &failure[4000..]);
    let failing: Vec<&Value> = events.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["failure"].is_string())
        .collect();
    assert_eq!(failing.len(), 2, "FAILING and FAILED carry the failure");
    for event in failing {
        assert_eq!(event["failure"].as_str().unwrap(), failure);
    }
    assert!(events.text.len() < 20_000, "{} bytes", events.text.len());
}

#[tokio::test]
async fn secret_named_table_options_are_masked_sealed_and_withheld_from_the_engine() {
    let roles = Roles::spawn().await;
    let warehouse = roles.app.scratch("warehouse");
    let reply = roles
        .app
        .register(
            "lake",
            json!({"type": "filesystem", "path": warehouse, "default-database": "db"}),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let options = json!({"format": "csv", "fs.s3a.secret.key": SECRET, "password": SECRET});
    let job = roles.app.submit(&batch_on("lake", options)).await;

    let read = roles
        .as_token(&roles.reader, "GET", &format!("/v1/jobs/{}", job.id), None)
        .await;

    assert!(!job.job.to_string().contains(SECRET), "{}", job.job);
    assert!(!read.text.contains(SECRET), "{}", read.text);
    let hook = &read.body["hooks"][0];
    assert_eq!(hook["table"]["options"]["fs.s3a.secret.key"], "******");
    assert_eq!(hook["table"]["options"]["format"], "csv");
    assert_eq!(hook["table_properties"]["password"], "******");
    let location = &hook["write_location"];
    assert!(location["sink_options"].get("password").is_none());
    assert!(
        !location["sink_statement"]
            .as_str()
            .unwrap()
            .contains("secret")
    );
    assert_eq!(
        location["withheld_options"],
        json!(["fs.s3a.secret.key", "password"])
    );

    // The job still runs: the catalog is handed the real values, and the
    // table's schema file beside the data keeps none of them.
    for status in ["CREATED", "RUNNING", "FINISHED"] {
        let reply = roles
            .as_token(
                &roles.engine,
                "PUT",
                &format!("/v1/jobs/{}/status", job.id),
                Some(json!({"status": status})),
            )
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let table = warehouse.join("db").join("t");
    assert!(table.is_dir(), "published");
    for entry in std::fs::read_dir(&table).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!holds(&bytes, SECRET), "the warehouse holds the secret");
    }
    let data_dir = roles.app.settings().store.data_dir.clone();
    // Stopped, its files kept: the store as it lies on disk.
    let _stopped = roles.app.stop_keeping_store().await;
    for (file, bytes) in store_bytes(&data_dir) {
        assert!(!holds(&bytes, SECRET), "{file} holds the table's secret");
    }
}
