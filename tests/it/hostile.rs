//! Hostile table names on every system: each is refused with a 4xx naming
//! the problem, or handled exactly (the table with that very name appears);
//! never a 5xx, and a neighbouring table is never touched.

use serde_json::{Value, json};

use crate::helpers::TestApp;
use crate::staging::{World, world_options};

const HOSTILE: &[&str] = &[
    "a\"b",
    "a'b",
    "a;DROP TABLE victim;--",
    "a`b",
    "../victim",
    "a/b",
    "nul\u{0}name",
    "tab\tname",
    "оrders",
    "__ctasd_stg_x",
    "_hidden",
    "x234567890123456789012345678901234567890123456789012345678901234",
];

fn is_filesystem(world: &World) -> bool {
    matches!(world, World::Files(_))
}

#[tokio::test]
async fn hostile_table_names_are_refused_or_created_exactly_and_touch_nothing_else() {
    for (world, options, database) in world_options().await {
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        let victim = app
            .post("/v1/jobs", &json!({"name": "v", "mode": "streaming", "hooks": [{"kind": "create_table_as",
                "target": {"catalog": "c", "database": database, "table": "victim"},
                "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "VARCHAR(20)"}]}}]}))
            .await;
        app.put_status(victim.body["id"].as_str().unwrap(), "CREATED")
            .await;
        world.insert("victim", &[7]).await;

        let mut created = Vec::new();
        for name in HOSTILE {
            let job = app
                .post("/v1/jobs", &json!({"name": "h", "mode": "batch", "hooks": [{"kind": "create_table_as",
                    "target": {"catalog": "c", "database": database, "table": name},
                    "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "VARCHAR(20)"}]}}]}))
                .await;
            assert!(
                job.status.is_client_error() || job.status == 201,
                "{name:?}: {} {}",
                job.status,
                job.text
            );
            if job.status.is_client_error() {
                assert_eq!(job.content_type, "application/problem+json");
                assert!(!job.detail().is_empty());
                continue;
            }
            let id = job.body["id"].as_str().unwrap().to_owned();
            for status in ["CREATED", "RUNNING", "FINISHED"] {
                let reply = app.put_status(&id, status).await;
                assert_eq!(reply.status, 200, "{name:?} {status}: {}", reply.text);
            }
            let finished: Value = app.get(&format!("/v1/jobs/{id}")).await.body;
            assert_eq!(
                finished["actions"][1]["outcome"], "committed",
                "{name:?}: {finished}"
            );
            assert_eq!(
                world.ids(name).await,
                Some(vec![]),
                "{name:?} exists under its exact name"
            );
            created.push(*name);
        }

        assert_eq!(
            world.ids("victim").await,
            Some(vec![7]),
            "the neighbour is untouched"
        );
        for refused in ["../victim", "a/b", "nul\u{0}name", "tab\tname"] {
            assert!(!created.contains(&refused), "{refused:?} must be refused");
        }
        let reserved = if is_filesystem(&world) {
            "_hidden"
        } else {
            "__ctasd_stg_x"
        };
        assert!(!created.contains(&reserved), "{reserved} would be hidden");
        for kept in ["a\"b", "a'b", "a;DROP TABLE victim;--", "оrders"] {
            assert!(
                created.contains(&kept),
                "{kept:?} is a legal name and must work"
            );
        }
        if let World::Files(root) = &world {
            let mut top: Vec<String> = std::fs::read_dir(root.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            top.sort();
            assert_eq!(
                top,
                [database.as_str()],
                "nothing was written outside the database directory"
            );
        }
    }
}
