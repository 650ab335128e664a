//! No file operation goes through a link or leaves the warehouse: links to
//! a file and to a directory outside are planted at each path ctasd reads,
//! writes, renames or removes (its schema and marker files, the staging,
//! the replacement path, the database directory, inside a table it
//! replaces) before each phase; the outside stays byte-identical, and where
//! ctasd refuses, the job's action says why.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::helpers::TestApp;

/// A warehouse with database `db`, and an outside directory holding a file
/// and a directory that must never change.
struct Scene {
    app: TestApp,
    warehouse: PathBuf,
    outside: PathBuf,
    before: BTreeMap<String, Vec<u8>>,
}

impl Scene {
    async fn new() -> Self {
        let app = TestApp::spawn().await;
        let warehouse = app.scratch("warehouse");
        let outside = app.scratch("outside");
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::write(outside.join("secret.key"), b"precious key").unwrap();
        std::fs::write(outside.join("dir").join("data"), b"precious data").unwrap();
        let reply = app
            .register(
                "c",
                json!({"type": "filesystem", "path": warehouse, "default-database": "db"}),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        let before = snapshot(&outside);
        Self {
            app,
            warehouse,
            outside,
            before,
        }
    }

    fn db(&self) -> PathBuf {
        self.warehouse.join("db")
    }

    fn assert_outside_untouched(&self) {
        assert_eq!(
            snapshot(&self.outside),
            self.before,
            "the files outside the warehouse are byte-identical"
        );
    }

    /// Submits a one-hook job; answers its id and staging directory.
    async fn submit(&self, mode: &str, kind: &str, table: &str) -> (String, PathBuf) {
        let reply = self
            .app
            .post(
                "/v1/jobs",
                &json!({"name": "j", "mode": mode, "hooks": [{"kind": kind,
                    "target": {"catalog": "c", "table": table},
                    "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]}),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        let id = reply.body["id"].as_str().unwrap().to_owned();
        let name = reply.body["hooks"][0]["write_location"]["name"]
            .as_str()
            .unwrap()
            .to_owned();
        (id, self.db().join(name))
    }

    async fn report(&self, id: &str, statuses: &[&str]) -> Value {
        let mut last = Value::Null;
        for status in statuses {
            let reply = self.app.put_status(id, status).await;
            assert_eq!(reply.status, 200, "{status}: {}", reply.text);
            last = reply.body;
        }
        last
    }

    async fn actions(&self, id: &str) -> Vec<Value> {
        self.app.get(&format!("/v1/jobs/{id}")).await.body["actions"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// Links named `names` in `dir`, each to the outside file.
    fn plant_file_links(&self, dir: &Path, names: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        for name in names {
            symlink(self.outside.join("secret.key"), dir.join(name)).unwrap();
        }
    }
}

/// Every file under `dir`, by relative path, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let key = path.strip_prefix(base).unwrap().display().to_string();
            if meta.is_dir() {
                out.insert(format!("{key}/"), Vec::new());
                walk(base, &path, out);
            } else {
                out.insert(key, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

const OWN_FILES: &[&str] = &["_ctasd_schema.json", "_ctasd_commit", "_ctasd_attempt"];

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink())
}

#[tokio::test]
async fn links_planted_as_ctasds_own_files_in_a_staging_are_replaced_never_written_through() {
    let scene = Scene::new().await;
    let (id, staging) = scene.submit("batch", "create_table_as", "orders").await;
    // The engine's writer made the staging first, with links under the
    // names of ctasd's own files.
    scene.plant_file_links(&staging, OWN_FILES);
    std::fs::write(staging.join("part-1"), b"row").unwrap();

    scene.report(&id, &["CREATED", "RUNNING"]).await;
    for name in OWN_FILES {
        assert!(!is_link(&staging.join(name)), "{name} is ctasd's file now");
    }
    scene.assert_outside_untouched();

    scene.report(&id, &["FINISHED"]).await;
    let actions = scene.actions(&id).await;
    assert_eq!(actions[1]["outcome"], "committed", "{actions:?}");
    let published = scene.db().join("orders");
    assert_eq!(std::fs::read(published.join("part-1")).unwrap(), b"row");
    assert!(!is_link(&published.join("_ctasd_schema.json")));
    scene.assert_outside_untouched();
}

#[tokio::test]
async fn a_replacement_path_holding_what_ctasd_did_not_make_is_refused_at_restart() {
    for plant in ["directory with links", "link to a directory"] {
        let scene = Scene::new().await;
        let (id, staging) = scene.submit("batch", "create_table_as", "orders").await;
        scene.report(&id, &["CREATED", "RUNNING"]).await;
        let fresh = staging.with_file_name(
            staging
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace("_ctasd_stg_", "_ctasd_new_"),
        );
        match plant {
            "directory with links" => scene.plant_file_links(&fresh, OWN_FILES),
            _ => symlink(scene.outside.join("dir"), &fresh).unwrap(),
        }

        let moved = scene.report(&id, &["RESTARTING", "CREATED"]).await;

        let begin = moved["actions_taken"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["action"] == "begin")
            .unwrap_or_else(|| panic!("{plant}: a begin ran: {moved}"))
            .clone();
        assert_eq!(begin["state"], "failed", "{plant}: {begin}");
        let error = begin["last_error"].as_str().unwrap();
        assert!(
            error.contains("not ctasd's to replace or remove"),
            "{plant}: {error}"
        );
        scene.assert_outside_untouched();
        assert!(
            is_link(&fresh) || is_link(&fresh.join("_ctasd_commit")),
            "{plant}: what was planted is left as it was"
        );
    }
}

#[tokio::test]
async fn a_streaming_replace_never_writes_through_a_planted_replacement_path() {
    let scene = Scene::new().await;
    let (first, _) = scene.submit("streaming", "create_table_as", "events").await;
    scene.report(&first, &["CREATED"]).await;
    let (id, _) = scene
        .submit("streaming", "create_or_replace_table_as", "events")
        .await;
    let fresh = scene.db().join(format!("_ctasd_new_{id}_0"));
    scene.plant_file_links(&fresh, OWN_FILES);

    let created = scene.report(&id, &["CREATED"]).await;

    let create = &created["actions_taken"][0];
    assert_eq!(create["state"], "failed", "{created}");
    assert!(
        create["last_error"]
            .as_str()
            .unwrap()
            .contains("not ctasd's to replace or remove"),
        "{create}"
    );
    assert!(
        scene
            .db()
            .join("events")
            .join("_ctasd_schema.json")
            .is_file(),
        "the existing table stays"
    );
    scene.assert_outside_untouched();
}

#[tokio::test]
async fn a_staging_that_is_a_link_is_refused_and_an_abort_removes_nothing_outside() {
    for target in ["file", "directory"] {
        let scene = Scene::new().await;
        let (id, staging) = scene.submit("batch", "create_table_as", "orders").await;
        let outside = match target {
            "file" => scene.outside.join("secret.key"),
            _ => scene.outside.join("dir"),
        };
        symlink(&outside, &staging).unwrap();

        let created = scene.report(&id, &["CREATED"]).await;
        let begin = &created["actions_taken"][0];
        assert_eq!(begin["state"], "failed", "{target}: {created}");
        assert!(
            begin["last_error"]
                .as_str()
                .unwrap()
                .contains("symbolic link"),
            "{target}: {begin}"
        );

        let failed = scene.report(&id, &["FAILED"]).await;
        assert!(
            failed["actions_taken"]
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a["state"] != "done" || a["action"] != "abort" || is_link(&staging)),
            "{target}: {failed}"
        );
        assert!(is_link(&staging), "{target}: the link is left as it was");
        scene.assert_outside_untouched();
    }
}

#[tokio::test]
async fn links_inside_data_are_removed_as_links_on_abort_and_replace() {
    let scene = Scene::new().await;
    // A table ctasd published, whose data holds a link out.
    let (first, _) = scene.submit("streaming", "create_table_as", "orders").await;
    scene.report(&first, &["CREATED"]).await;
    symlink(
        scene.outside.join("dir"),
        scene.db().join("orders").join("linked"),
    )
    .unwrap();
    // A batch replace of it whose staging also holds links out.
    let (id, staging) = scene.submit("batch", "replace_table_as", "orders").await;
    scene.report(&id, &["CREATED", "RUNNING"]).await;
    std::fs::create_dir_all(staging.join("nested")).unwrap();
    symlink(
        scene.outside.join("dir"),
        staging.join("nested").join("out"),
    )
    .unwrap();
    symlink(scene.outside.join("secret.key"), staging.join("part-1")).unwrap();

    scene.report(&id, &["FINISHED"]).await;

    let actions = scene.actions(&id).await;
    assert_eq!(actions[1]["outcome"], "committed", "{actions:?}");
    assert!(
        !scene.db().join("orders").join("linked").exists(),
        "the replaced table is gone"
    );
    scene.assert_outside_untouched();

    // And an abort of a staging holding links out removes the links only.
    let (aborted, staging) = scene.submit("batch", "create_table_as", "other").await;
    scene.report(&aborted, &["CREATED"]).await;
    symlink(scene.outside.join("dir"), staging.join("out")).unwrap();
    scene.report(&aborted, &["FAILED"]).await;
    assert!(
        !staging.exists() && !is_link(&staging),
        "the staging is gone"
    );
    scene.assert_outside_untouched();
}

#[tokio::test]
async fn a_database_directory_that_is_a_link_is_neither_browsed_nor_written() {
    let scene = Scene::new().await;
    symlink(scene.outside.join("dir"), scene.warehouse.join("linked")).unwrap();
    std::fs::create_dir_all(scene.outside.join("dir").join("looks_like_a_table")).unwrap();
    let before = snapshot(&scene.outside);

    let databases = scene.app.get("/v1/catalogs/c/databases").await;
    assert_eq!(databases.status, 200, "{}", databases.text);
    assert!(
        !databases.text.contains("linked"),
        "a link is not a database: {}",
        databases.text
    );
    let tables = scene
        .app
        .get("/v1/catalogs/c/databases/linked/tables")
        .await;
    assert!(tables.status.is_client_error(), "{}", tables.text);
    assert!(
        !tables.text.contains("looks_like_a_table"),
        "nothing outside is listed: {}",
        tables.text
    );

    let job = scene
        .app
        .post(
            "/v1/jobs",
            &json!({"name": "j", "mode": "streaming", "hooks": [{"kind": "create_table_as",
                "target": {"catalog": "c", "database": "linked", "table": "t"},
                "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]}),
        )
        .await;
    if job.status == 201 {
        let id = job.body["id"].as_str().unwrap();
        let created = scene.report(id, &["CREATED"]).await;
        assert_eq!(created["actions_taken"][0]["state"], "failed", "{created}");
    } else {
        assert!(job.status.is_client_error(), "{}", job.text);
        let detail = job.detail();
        assert!(
            detail.contains("symbolic link") || detail.contains("'linked' does not exist"),
            "{}",
            job.text
        );
    }
    assert_eq!(snapshot(&scene.outside), before);
}
