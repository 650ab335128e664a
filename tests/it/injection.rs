//! No string becomes SQL: hostile texts (quotes, backslashes, `\'`, `;`,
//! `--`, `/*`, `#`, NUL, quote look-alikes, long runs) as table and column
//! comments, column names and key names, submitted over HTTP and carried to
//! FINISHED on real PostgreSQL, MariaDB and SQLite. Each is refused with a
//! 4xx naming it, or reads back from the system exactly; a canary table
//! beside the targets keeps its row.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::helpers::TestApp;
use crate::staging::{World, world_options};

/// The texts the issue found or the dialects' quoting could get wrong.
const CORPUS: &[&str] = &[
    "x\\'; DROP TABLE canary; -- ",
    "x'; DROP TABLE canary; -- ",
    "\\",
    "\\\\'",
    "a''b",
    "--",
    "/* x",
    "# x\n; DROP TABLE canary",
    "E'\\x41'",
    "$$; DROP TABLE canary; $$",
    "\u{2019}\u{02BC}\u{FF07}\u{201C}",
    "nul\u{0}x",
    "`; DROP TABLE canary; `",
    "\"; DROP TABLE canary; \"",
];

/// Texts built from the pieces that matter to a quoting function.
fn hostile_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("'".to_owned()),
        Just("\\".to_owned()),
        Just("\\'".to_owned()),
        Just(";".to_owned()),
        Just("--".to_owned()),
        Just("/*".to_owned()),
        Just("*/".to_owned()),
        Just("#".to_owned()),
        Just("\u{0}".to_owned()),
        Just("`".to_owned()),
        Just("\"".to_owned()),
        Just("$$".to_owned()),
        Just("\u{2019}".to_owned()),
        Just("\u{FF07}".to_owned()),
        Just("\n".to_owned()),
        Just(" DROP TABLE canary ".to_owned()),
        Just("y".repeat(400)),
        "[a-z ]{0,6}",
    ];
    prop::collection::vec(piece, 1..8).prop_map(|pieces| pieces.concat())
}

/// One system with a catalog `c` on it and a canary table holding id 999.
struct Target {
    world: World,
    app: TestApp,
    database: String,
    next: std::sync::atomic::AtomicUsize,
}

impl Target {
    fn table_name(&self) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("t{n}")
    }

    /// Submits `definition` as a batch CTAS into a fresh table and carries
    /// it to FINISHED: `Some(table)` when it was published, `None` when the
    /// submission was refused with a 4xx problem that names `text`.
    async fn publish(&self, definition: Value, text: &str) -> Option<String> {
        let table = self.table_name();
        let job = json!({"name": "q", "mode": "batch", "hooks": [{"kind": "create_table_as",
            "target": {"catalog": "c", "database": self.database, "table": table},
            "table": definition}]});
        let reply = self.app.post("/v1/jobs", &job).await;
        if reply.status.is_client_error() {
            assert_eq!(reply.content_type, "application/problem+json", "{text:?}");
            assert!(!reply.detail().is_empty(), "{text:?}: {}", reply.text);
            return None;
        }
        assert_eq!(reply.status, 201, "{text:?}: {}", reply.text);
        let id = reply.body["id"].as_str().unwrap().to_owned();
        for status in ["CREATED", "RUNNING", "FINISHED"] {
            let moved = self.app.put_status(&id, status).await;
            assert_eq!(moved.status, 200, "{text:?} {status}: {}", moved.text);
        }
        let job = self.app.get(&format!("/v1/jobs/{id}")).await.body;
        assert_eq!(job["actions"][1]["outcome"], "committed", "{text:?}: {job}");
        Some(table)
    }

    async fn assert_canary_kept(&self) {
        assert_eq!(
            self.world.ids("canary").await,
            Some(vec![999]),
            "the canary beside the targets keeps its row"
        );
    }
}

/// The table's comment and column `c`'s comment, as the system keeps them
/// (`None` where it keeps none: SQLite).
async fn comments(world: &World, table: &str) -> Option<(String, String)> {
    match world {
        World::Postgres(pg) => {
            let row: (Option<String>, Option<String>) = sqlx::query_as(
                "SELECT obj_description(c.oid, 'pg_class'), col_description(c.oid, a.attnum) \
                 FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'c' \
                 WHERE c.relname = $1 AND c.relnamespace = 'public'::regnamespace",
            )
            .bind(table)
            .fetch_one(&mut pg.connect().await)
            .await
            .unwrap();
            Some((row.0.unwrap_or_default(), row.1.unwrap_or_default()))
        }
        World::Mysql(my) => Some(
            sqlx::query_as(
                "SELECT CAST(t.table_comment AS CHAR), CAST(c.column_comment AS CHAR) \
                 FROM information_schema.tables t JOIN information_schema.columns c \
                 ON c.table_schema = t.table_schema AND c.table_name = t.table_name \
                 WHERE t.table_schema = DATABASE() AND t.table_name = ? AND c.column_name = 'c'",
            )
            .bind(table)
            .fetch_one(&mut my.connect().await)
            .await
            .unwrap(),
        ),
        World::Sqlite(_) | World::Files(_) => None,
    }
}

/// The column names of `table` in order, and its primary key's name where
/// the system keeps one (MySQL/MariaDB call every primary key `PRIMARY`).
async fn names(world: &World, table: &str) -> (Vec<String>, Option<String>) {
    match world {
        World::Postgres(pg) => {
            let mut conn = pg.connect().await;
            let columns = sqlx::query_scalar(
                "SELECT a.attname::text FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid \
                 WHERE c.relname = $1 AND c.relnamespace = 'public'::regnamespace \
                 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            )
            .bind(table)
            .fetch_all(&mut conn)
            .await
            .unwrap();
            let key = sqlx::query_scalar(
                "SELECT k.conname::text FROM pg_constraint k JOIN pg_class c ON k.conrelid = c.oid \
                 WHERE c.relname = $1 AND c.relnamespace = 'public'::regnamespace AND k.contype = 'p'",
            )
            .bind(table)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
            (columns, key)
        }
        World::Mysql(my) => {
            let columns = sqlx::query_scalar(
                "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
                 WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position",
            )
            .bind(table)
            .fetch_all(&mut my.connect().await)
            .await
            .unwrap();
            (columns, None)
        }
        World::Sqlite(dir) => {
            let path = dir.path().join("main.db");
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap();
            let columns = sqlx::query_scalar("SELECT name FROM pragma_table_info(?) ORDER BY cid")
                .bind(table)
                .fetch_all(&mut conn)
                .await
                .unwrap();
            (columns, None)
        }
        World::Files(_) => unreachable!("only SQL systems are targets here"),
    }
}

/// `text` as the table comment and as column `c`'s comment.
async fn comment_round_trip(target: &Target, text: &str) {
    let definition = json!({"comment": text,
        "columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                    {"name": "c", "type": "VARCHAR(20)", "comment": text}]});
    if let Some(table) = target.publish(definition, text).await
        && let Some((table_comment, column_comment)) = comments(&target.world, &table).await
    {
        assert_eq!(table_comment, text, "table comment read back");
        assert_eq!(column_comment, text, "column comment read back");
    }
    target.assert_canary_kept().await;
}

/// `text` as a column's name and as the primary key's name.
async fn name_round_trip(target: &Target, text: &str) {
    let definition = json!({
        "columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                    {"name": text, "type": "BIGINT NOT NULL"}],
        "primary_key": {"name": text, "columns": [text]}});
    if let Some(table) = target.publish(definition, text).await {
        let (columns, key) = names(&target.world, &table).await;
        assert_eq!(columns, ["id", text], "column names read back");
        if let Some(key) = key {
            assert_eq!(key, text, "key name read back");
        }
    }
    target.assert_canary_kept().await;
}

async fn sql_targets() -> Vec<Target> {
    let mut targets = Vec::new();
    for (world, options, database) in world_options().await {
        if matches!(world, World::Files(_)) {
            continue;
        }
        let app = TestApp::spawn().await;
        app.register("c", options).await;
        world.create_old("canary").await;
        targets.push(Target {
            world,
            app,
            database,
            next: Default::default(),
        });
    }
    targets
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn check(
    runtime: &tokio::runtime::Runtime,
    target: &Target,
    round_trip: impl AsyncFn(&Target, &str),
) {
    for text in CORPUS {
        runtime.block_on(round_trip(target, text));
    }
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&hostile_text(), |text| {
            runtime.block_on(round_trip(target, &text));
            Ok::<(), TestCaseError>(())
        })
        .unwrap();
}

#[test]
fn hostile_comments_read_back_exactly_or_are_refused_and_touch_nothing_else() {
    let runtime = runtime();
    for target in runtime.block_on(sql_targets()) {
        check(&runtime, &target, comment_round_trip);
    }
}

#[test]
fn hostile_column_and_key_names_read_back_exactly_or_are_refused() {
    let runtime = runtime();
    for target in runtime.block_on(sql_targets()) {
        check(&runtime, &target, name_round_trip);
    }
}
