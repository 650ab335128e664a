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
