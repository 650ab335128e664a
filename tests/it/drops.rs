//! `DELETE /v1/catalogs/{catalog}/databases/{database}/tables/{table}`:
//! ctasd drops a table only when it can prove it published it, and none an
//! unfinished job targets. Checked in each system: what ctasd published is
//! gone, what someone else made (or a link planted at a table's name
//! points at) is still there with its rows.

use serde_json::json;

use crate::helpers::TestApp;
use crate::staging::{World, world_options};

#[tokio::test]
async fn ctasd_drops_the_tables_it_published_and_nothing_else() {
    for (world, options, database) in world_options().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let table_path =
            |table: &str| format!("/v1/catalogs/c/databases/{database}/tables/{table}");
        let job = |table: &str| {
            json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
                "target": {"catalog": "c", "database": database, "table": table},
                "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                                      {"name": "note", "type": "VARCHAR(20)"}]}}]})
        };

        // Published by a batch job: while the job runs the table is in use
        // (and not there); once published, it is dropped.
        let submitted = app.post("/v1/jobs", &job("ours")).await;
        assert_eq!(submitted.status, 201, "{}", submitted.text);
        let id = submitted.body["id"].as_str().unwrap().to_owned();
        app.put_status(&id, "CREATED").await;
        app.put_status(&id, "RUNNING").await;
        app.delete(&table_path("ours"))
            .await
            .assert_problem(409, "TABLE_IN_USE");
        app.put_status(&id, "FINISHED").await;
        assert!(world.exists("ours").await, "{}", world.label());
        let dropped = app.delete(&table_path("ours")).await;
        let mysql = matches!(world, World::Mysql(_));
        if mysql {
            // MySQL keeps no mark on a table: ctasd cannot prove it is its.
            dropped.assert_problem(409, "TABLE_NOT_OWNED");
            assert!(world.exists("ours").await);
        } else {
            assert_eq!(dropped.status, 204, "{}: {}", world.label(), dropped.text);
            assert!(!world.exists("ours").await, "{}: gone", world.label());
        }

        // Someone else's table: refused, kept with its rows.
        match &world {
            World::Files(root) => {
                let theirs = root.path().join("db/theirs");
                std::fs::create_dir_all(&theirs).unwrap();
                std::fs::write(theirs.join("part-0.csv"), "1,a\n").unwrap();
            }
            _ => world.create_old("theirs").await,
        }
        let refused = app.delete(&table_path("theirs")).await;
        refused.assert_problem(409, "TABLE_NOT_OWNED");
        match &world {
            World::Files(root) => assert!(root.path().join("db/theirs/part-0.csv").exists()),
            _ => assert_eq!(
                world.ids("theirs").await,
                Some(vec![999]),
                "{}",
                world.label()
            ),
        }

        // A link at a table's name, to a table ctasd published elsewhere:
        // refused, and what it points at stays.
        if let World::Files(root) = &world {
            let elsewhere = tempfile::tempdir().unwrap();
            let outside = elsewhere.path().join("precious");
            std::fs::create_dir_all(&outside).unwrap();
            std::fs::write(outside.join("part-0.csv"), "1,a\n").unwrap();
            std::os::unix::fs::symlink(&outside, root.path().join("db/linked")).unwrap();
            let refused = app.delete(&table_path("linked")).await;
            refused.assert_problem(409, "TABLE_NOT_OWNED");
            assert!(
                refused.detail().contains("symbolic link"),
                "{}",
                refused.text
            );
            assert!(
                outside.join("part-0.csv").exists(),
                "the link's target stays"
            );
        }

        // Missing, and ctasd's own hidden names: not tables.
        app.delete(&table_path("absent"))
            .await
            .assert_problem(404, "TABLE_NOT_FOUND");
        app.delete(&table_path("__ctasd_stg_x"))
            .await
            .assert_problem(404, "TABLE_NOT_FOUND");
    }
}
