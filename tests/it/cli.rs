//! The `ctasd` binary as a user runs it: `migrate`, `openapi`, and `serve`
//! refusing a store another process holds.

use std::process::Command;

#[test]
fn migrate_creates_the_embedded_store_and_can_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let status = Command::new(env!("CARGO_BIN_EXE_ctasd"))
            .args(["migrate", "--data-dir"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
    }
    assert!(dir.path().join("ctasd.db").is_file());
    assert!(dir.path().join("secret.key").is_file());
}

#[test]
fn openapi_prints_the_document() {
    let output = Command::new(env!("CARGO_BIN_EXE_ctasd"))
        .arg("openapi")
        .output()
        .unwrap();
    assert!(output.status.success());
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["info"]["title"], "ctasd");
}

#[test]
fn an_unsupported_database_url_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ctasd"))
        .args(["migrate", "--database-url", "oracle://x/y", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("unsupported database URL"));
}

#[test]
fn a_second_serve_on_the_same_sqlite_store_exits_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let first = crate::helpers::ServerProcess::start(dir.path());

    let second = Command::new(env!("CARGO_BIN_EXE_ctasd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();

    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("is in use by another ctasd process")
            && stderr.contains("run replicas on PostgreSQL"),
        "{stderr}"
    );
    first.stop();
}

/// What one client command printed, and how it exited.
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `ctasd <args>` with `env`, as a user's shell would, off the
/// runtime that serves the app.
async fn ctasd(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let (args, env): (Vec<String>, Vec<(String, String)>) = (
        args.iter().map(|a| a.to_string()).collect(),
        env.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    tokio::task::spawn_blocking(move || {
        let output = Command::new(env!("CARGO_BIN_EXE_ctasd"))
            .args(&args)
            .env_remove("CTASD_SERVER")
            .env_remove("CTASD_TOKEN")
            .env("XDG_CONFIG_HOME", "/nonexistent")
            .envs(env)
            .output()
            .unwrap();
        Ran {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// A server that wants tokens, an operator's token for it, and a job on
/// an in-memory catalog.
async fn a_server_with_a_job() -> (crate::helpers::TestApp, String, String) {
    use secrecy::{ExposeSecret, SecretString};
    let (token, line) = ctasd::api::auth::generate("cli", ctasd::api::auth::Role::Admin);
    let app =
        crate::helpers::TestApp::spawn_with_settings(|s| s.tokens = Some(SecretString::from(line)))
            .await
            .authorized(token.expose_secret());
    app.register("mem", serde_json::json!({"type": "generic_in_memory"}))
        .await;
    let job = app
        .post(
            "/v1/jobs",
            &serde_json::json!({"name": "nightly totals", "mode": "batch", "hooks": [{"kind": "create_table_as",
                "target": {"catalog": "mem", "table": "totals"},
                "table": {"columns": [{"name": "id", "type": "BIGINT"}]}}]}),
        )
        .await;
    assert_eq!(job.status, 201, "{}", job.text);
    let id = job.body["id"].as_str().unwrap().to_owned();
    (app, token.expose_secret().to_owned(), id)
}

#[tokio::test]
async fn the_client_lists_gets_and_reports_jobs_as_aligned_tables_or_json() {
    let (app, token, id) = a_server_with_a_job().await;
    let server = app.url("");
    let flags = ["--server", server.as_str(), "--token", token.as_str()];

    let listed = ctasd(&[&["jobs", "list"][..], &flags].concat(), &[]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert!(lines[0].starts_with("ID "), "{}", listed.stdout);
    let name_at = lines[0].find("NAME").unwrap();
    assert_eq!(&lines[1][..id.len()], id, "{}", listed.stdout);
    assert_eq!(
        &lines[1][name_at..name_at + 14],
        "nightly totals",
        "columns line up"
    );

    // The token from the environment, JSON out.
    let json = ctasd(
        &["jobs", "list", "--json", "--server", &server],
        &[("CTASD_TOKEN", &token)],
    )
    .await;
    assert_eq!(json.code, 0, "{}", json.stderr);
    let page: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(page["jobs"][0]["id"], id.as_str());

    let reported = ctasd(&[&["report", &id, "CREATED"][..], &flags].concat(), &[]).await;
    assert_eq!(reported.code, 0, "{}", reported.stderr);
    assert!(
        reported.stdout.contains("is CREATED"),
        "{}",
        reported.stdout
    );
    assert!(
        reported.stdout.contains("hook 0 begin: staged"),
        "{}",
        reported.stdout
    );
    let job = app.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(
        job.body["status"], "CREATED",
        "the report reached the server"
    );

    let got = ctasd(&[&["jobs", "get", &id][..], &flags].concat(), &[]).await;
    assert!(got.stdout.contains("status      CREATED"), "{}", got.stdout);
    assert!(got.stdout.contains("mem.default.totals"), "{}", got.stdout);
    let events = ctasd(&[&["jobs", "events", &id][..], &flags].concat(), &[]).await;
    assert!(
        events.stdout.contains("INITIALIZING -> CREATED"),
        "{}",
        events.stdout
    );

    // A config file instead of flags.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("client.toml");
    std::fs::write(
        &config,
        format!("server = \"{server}\"\ntoken = \"{token}\"\n"),
    )
    .unwrap();
    let catalogs = ctasd(
        &["catalogs", "list", "--config", config.to_str().unwrap()],
        &[],
    )
    .await;
    assert_eq!(catalogs.code, 0, "{}", catalogs.stderr);
    assert!(
        catalogs.stdout.lines().nth(1).unwrap().starts_with("mem "),
        "{}",
        catalogs.stdout
    );
    let catalog = ctasd(
        &[
            "catalogs",
            "get",
            "mem",
            "--config",
            config.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(
        catalog.stdout.contains("generic_in_memory"),
        "{}",
        catalog.stdout
    );
    let engines = ctasd(&[&["engines", "list"][..], &flags].concat(), &[]).await;
    assert_eq!(
        engines.stdout.trim(),
        "NAME  URL  REACHABLE  WATCHED JOBS  VERSION"
    );
}

#[tokio::test]
async fn the_client_says_what_went_wrong_and_exits_with_its_kind() {
    let (app, token, id) = a_server_with_a_job().await;
    let server = app.url("");
    let flags = ["--server", server.as_str(), "--token", token.as_str()];

    let missing = ctasd(
        &[
            &["jobs", "get", "00112233445566778899aabbccddeeff"][..],
            &flags,
        ]
        .concat(),
        &[],
    )
    .await;
    assert_eq!(missing.code, 4, "{}", missing.stderr);
    assert!(
        missing.stderr.starts_with("error: Job not found: "),
        "{}",
        missing.stderr
    );

    let refused = ctasd(&[&["report", &id, "EXPLODED"][..], &flags].concat(), &[]).await;
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(refused.stderr.contains("status"), "{}", refused.stderr);

    let anonymous = ctasd(&["jobs", "list", "--server", &server], &[]).await;
    assert_eq!(anonymous.code, 5, "{}", anonymous.stderr);
    assert!(anonymous.stderr.contains("error: "), "{}", anonymous.stderr);

    let away = ctasd(&["jobs", "list", "--server", "http://127.0.0.1:1"], &[]).await;
    assert_eq!(away.code, 7, "{}", away.stderr);
    assert!(away.stderr.contains("cannot be reached"), "{}", away.stderr);
    assert!(!away.stderr.contains(&token) && !refused.stderr.contains(&token));
}

#[tokio::test]
async fn serve_reads_a_config_file_below_flags_and_variables_and_prints_what_it_runs_with() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ctasd.toml");
    std::fs::write(
        &config,
        "listen = \"127.0.0.1:9999\"\nmax-connections = 7\nidle-timeout-secs = 99\n\
         engine-allowed-hosts = [\"flink.internal\", \"10.0.0.0/8\"]\ninsecure-no-auth = true\n\
         database-url = \"postgres://ctasd:hunter2@db/ctasd\"\n",
    )
    .unwrap();
    let path = config.to_str().unwrap();

    let printed = ctasd(
        &[
            "serve",
            "--config",
            path,
            "--max-connections",
            "9",
            "--print-config",
        ],
        &[("CTASD_IDLE_TIMEOUT_SECS", "33")],
    )
    .await;

    assert_eq!(printed.code, 0, "{}", printed.stderr);
    let line = |key: &str| {
        printed
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("{key} in {}", printed.stdout))
            .to_owned()
    };
    assert!(
        line("listen").contains("\"127.0.0.1:9999\"") && line("listen").ends_with("# config file")
    );
    assert!(
        line("max-connections").contains("\"9\"") && line("max-connections").ends_with("# flag")
    );
    assert!(
        line("idle-timeout-secs").contains("\"33\"")
            && line("idle-timeout-secs").ends_with("# environment")
    );
    assert!(
        line("engine-allowed-hosts").contains("[\"flink.internal\", \"10.0.0.0/8\"]"),
        "{}",
        printed.stdout
    );
    assert!(
        line("insecure-no-auth").contains("true"),
        "{}",
        printed.stdout
    );
    assert!(
        line("data-dir").ends_with("# default"),
        "{}",
        printed.stdout
    );
    assert!(
        line("database-url").contains("******"),
        "{}",
        printed.stdout
    );
    assert!(
        !printed.stdout.contains("hunter2"),
        "a secret printed: {}",
        printed.stdout
    );

    std::fs::write(&config, "max-conections = 7\n").unwrap();
    let misspelt = ctasd(&["serve", "--config", path, "--print-config"], &[]).await;
    assert_ne!(misspelt.code, 0);
    assert!(
        misspelt
            .stderr
            .contains("'max-conections' is not a setting of serve")
            && misspelt.stderr.contains("max-connections"),
        "{}",
        misspelt.stderr
    );
    std::fs::write(&config, "max-connections = \"many\"\n").unwrap();
    let wrong = ctasd(&["serve", "--config", path, "--print-config"], &[]).await;
    assert_ne!(wrong.code, 0);
    assert!(
        wrong.stderr.contains("--max-connections"),
        "{}",
        wrong.stderr
    );
}
