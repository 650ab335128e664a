//! Staging and atomic publication in every catalog type, checked in the
//! external system: rows written into the staging appear in the target on
//! commit and nowhere on abort; commits and aborts are idempotent.

use std::sync::Arc;

use ctasd::catalog::{
    BeginOutcome, Catalog, CatalogError, CommitOutcome, CreateOutcome, Publish, Staging, StagingKey,
};
use ctasd::domain::flink::table::TableDefinition;
use ctasd::domain::{CatalogName, CatalogOptions};
use serde_json::{Value, json};
use sqlx::Connection;

use crate::helpers::{
    TestMysql, TestPostgres, mysql_options, mysql_url, postgres_options, postgres_url,
    sqlite_database,
};

async fn open(options: Value) -> Arc<dyn Catalog> {
    let options: std::collections::BTreeMap<String, String> =
        serde_json::from_value(options).unwrap();
    ctasd::catalog::builtin::registry(Default::default(), Default::default())
        .open(
            &CatalogName::parse("t").unwrap(),
            &CatalogOptions::new(options).unwrap(),
        )
        .await
        .unwrap()
}

fn staging(database: &str, table: &str) -> Staging {
    let job = uuid::Uuid::new_v4().simple().to_string();
    let definition: TableDefinition = serde_json::from_value(json!({
        "columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "VARCHAR(20)"}]
    }))
    .unwrap();
    Staging {
        key: StagingKey::new(&job, 0).unwrap(),
        database: database.into(),
        table: table.into(),
        definition,
    }
}

/// Commits one staging, as a batch of one.
async fn commit_one(
    catalog: &dyn Catalog,
    staging: &Staging,
    publish: Publish,
) -> Result<CommitOutcome, CatalogError> {
    catalog
        .commit(&[(staging.clone(), publish)])
        .await
        .remove(0)
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn backticked(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The external system, seen the way an engine and a reader see it.
pub enum World {
    Postgres(TestPostgres),
    Mysql(TestMysql),
    Sqlite(tempfile::TempDir),
    Files(tempfile::TempDir),
}

impl World {
    /// The system's name, for messages.
    pub fn label(&self) -> &'static str {
        match self {
            World::Postgres(_) => "PostgreSQL",
            World::Mysql(_) => "MariaDB",
            World::Sqlite(_) => "SQLite",
            World::Files(_) => "filesystem",
        }
    }

    pub fn staging_name(&self, staging: &Staging) -> String {
        match self {
            World::Files(_) => format!("_ctasd_stg_{}", staging.key.as_str()),
            _ => format!("__ctasd_stg_{}", staging.key.as_str()),
        }
    }

    /// Writes rows as an engine would; `None` when the table is missing.
    pub async fn insert(&self, table: &str, ids: &[i64]) {
        let values: Vec<String> = ids.iter().map(|id| format!("({id}, 'n{id}')")).collect();
        match self {
            World::Postgres(pg) => {
                pg.execute(&format!(
                    "INSERT INTO {} VALUES {}",
                    quoted(table),
                    values.join(", ")
                ))
                .await
            }
            World::Mysql(my) => {
                my.execute(&format!(
                    "INSERT INTO {} VALUES {}",
                    backticked(table),
                    values.join(", ")
                ))
                .await
            }
            World::Sqlite(dir) => {
                sqlite_database(
                    dir.path(),
                    "main",
                    &format!("INSERT INTO {} VALUES {}", quoted(table), values.join(", ")),
                )
                .await
            }
            World::Files(root) => {
                for id in ids {
                    std::fs::write(
                        root.path()
                            .join("db")
                            .join(table)
                            .join(format!("part-{id}")),
                        b"row",
                    )
                    .unwrap();
                }
            }
        }
    }

    /// A table `table` that was there before: one row, id 999.
    pub async fn create_old(&self, table: &str) {
        match self {
            World::Postgres(pg) => {
                let t = quoted(table);
                pg.execute(&format!("CREATE TABLE {t} (id BIGINT NOT NULL, note VARCHAR(20)); INSERT INTO {t} VALUES (999, 'old')")).await
            }
            World::Mysql(my) => {
                let t = backticked(table);
                my.execute(&format!(
                    "CREATE TABLE {t} (id BIGINT NOT NULL, note VARCHAR(20))"
                ))
                .await;
                my.execute(&format!("INSERT INTO {t} VALUES (999, 'old')"))
                    .await
            }
            World::Sqlite(dir) => {
                let t = quoted(table);
                sqlite_database(dir.path(), "main", &format!("CREATE TABLE {t} (id BIGINT NOT NULL, note TEXT); INSERT INTO {t} VALUES (999, 'old')")).await
            }
            World::Files(root) => {
                // A table ctasd published earlier (a streaming create), so
                // that it is ctasd's to replace.
                let catalog = open(
                    json!({"type": "filesystem", "path": root.path(), "default-database": "db"}),
                )
                .await;
                assert_eq!(
                    catalog
                        .create_table(&staging("db", table), false)
                        .await
                        .unwrap(),
                    CreateOutcome::Created
                );
                std::fs::write(root.path().join("db").join(table).join("part-999"), b"old")
                    .unwrap();
            }
        }
    }

    /// Drops a table (or removes a table directory), as its owner would.
    pub async fn drop_table(&self, table: &str) {
        match self {
            World::Postgres(pg) => pg.execute(&format!("DROP TABLE {}", quoted(table))).await,
            World::Mysql(my) => {
                my.execute(&format!("DROP TABLE {}", backticked(table)))
                    .await
            }
            World::Sqlite(dir) => {
                sqlite_database(dir.path(), "main", &format!("DROP TABLE {}", quoted(table))).await
            }
            World::Files(root) => {
                std::fs::remove_dir_all(root.path().join("db").join(table)).unwrap()
            }
        }
    }

    /// Every table (or table directory) in the database, hidden ones too, by
    /// name; but MySQL's publication log, the one table ctasd keeps there
    /// for good once it has published.
    pub async fn tables(&self) -> Vec<String> {
        let mut names: Vec<String> = match self {
            World::Postgres(pg) => sqlx::query_scalar(
                "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()",
            )
            .fetch_all(&mut pg.connect().await)
            .await
            .unwrap(),
            World::Mysql(my) => sqlx::query_scalar(
                "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE table_schema = DATABASE()",
            )
            .fetch_all(&mut my.connect().await)
            .await
            .unwrap(),
            World::Sqlite(dir) => {
                let path = dir.path().join("main.db");
                let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
                    .await
                    .unwrap();
                sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
                    .fetch_all(&mut conn)
                    .await
                    .unwrap()
            }
            World::Files(root) => std::fs::read_dir(root.path().join("db"))
                .into_iter()
                .flatten()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
        };
        names.retain(|name| name != "__ctasd_published");
        names.sort();
        names
    }

    /// Whether `table` (or its directory) is there.
    pub async fn exists(&self, table: &str) -> bool {
        self.tables().await.iter().any(|t| t == table)
    }

    /// The ids a reader sees in `table`, or `None` when it does not exist.
    pub async fn ids(&self, table: &str) -> Option<Vec<i64>> {
        let sql = format!(
            "SELECT id FROM {} ORDER BY id",
            match self {
                World::Mysql(_) => backticked(table),
                _ => quoted(table),
            }
        );
        let result: Result<Vec<i64>, sqlx::Error> = match self {
            World::Postgres(pg) => {
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .fetch_all(&mut pg.connect().await)
                    .await
            }
            World::Mysql(my) => {
                let mut conn = my.connect().await;
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .fetch_all(&mut conn)
                    .await
            }
            World::Sqlite(dir) => {
                let mut conn = sqlx::SqliteConnection::connect(&format!(
                    "sqlite://{}",
                    dir.path().join("main.db").display()
                ))
                .await
                .unwrap();
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                    .fetch_all(&mut conn)
                    .await
            }
            World::Files(root) => return part_ids(&root.path().join("db").join(table)),
        };
        match result {
            Ok(ids) => Some(ids),
            Err(sqlx::Error::Database(e))
                if e.message().contains("exist") || e.message().contains("no such table") =>
            {
                None
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// The ids of the `part-<id>` files an engine wrote into a table directory,
/// or `None` when there is no such directory.
pub fn part_ids(dir: &std::path::Path) -> Option<Vec<i64>> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut ids: Vec<i64> = entries
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("part-")?
                .parse()
                .ok()
        })
        .collect();
    ids.sort();
    Some(ids)
}

/// Each available system, with the options of a catalog on it and the
/// database its tables go to (`main` for SQLite).
pub async fn world_options() -> Vec<(World, Value, String)> {
    let mut worlds = Vec::new();
    if let Some(pg) = TestPostgres::create().await {
        let (options, database) = (postgres_options(&pg), pg.database.clone());
        worlds.push((World::Postgres(pg), options, database));
    }
    if let Some(my) = TestMysql::create().await {
        let (options, database) = (mysql_options(&my), my.database.clone());
        worlds.push((World::Mysql(my), options, database));
    }
    let dir = tempfile::tempdir().unwrap();
    sqlite_database(dir.path(), "main", "SELECT 1").await;
    let url = format!("jdbc:sqlite:{}", dir.path().display());
    let lite = json!({"type": "jdbc", "base-url": url, "default-database": "main"});
    worlds.push((World::Sqlite(dir), lite, "main".into()));
    let root = tempfile::tempdir().unwrap();
    let files = json!({"type": "filesystem", "path": root.path(), "default-database": "db"});
    worlds.push((World::Files(root), files, "db".into()));
    let expected = 2 + usize::from(postgres_url().is_some()) + usize::from(mysql_url().is_some());
    assert_eq!(
        worlds.len(),
        expected,
        "every configured system is exercised"
    );
    worlds
}

/// A catalog on each available system.
async fn worlds() -> Vec<(World, Arc<dyn Catalog>, String)> {
    let mut worlds = Vec::new();
    for (world, options, database) in world_options().await {
        worlds.push((world, open(options).await, database));
    }
    worlds
}

#[tokio::test]
async fn a_batch_commit_publishes_exactly_the_staged_rows_once() {
    for (world, catalog, database) in worlds().await {
        let staging = staging(&database, "orders");

        catalog.begin(&staging, 1).await.unwrap();
        catalog.begin(&staging, 1).await.unwrap();
        assert_eq!(
            world.ids("orders").await,
            None,
            "the target is not visible before the commit"
        );
        assert!(
            !catalog
                .list_tables(&database)
                .await
                .unwrap()
                .iter()
                .any(|t| t.contains("ctasd")),
            "staging is hidden"
        );
        world
            .insert(&world.staging_name(&staging), &[1, 2, 3])
            .await;

        let first = commit_one(catalog.as_ref(), &staging, Publish::Create)
            .await
            .unwrap();
        let second = commit_one(catalog.as_ref(), &staging, Publish::Create)
            .await
            .unwrap();

        assert_eq!(first, CommitOutcome::Committed);
        assert_eq!(second, CommitOutcome::AlreadyCommitted);
        assert_eq!(world.ids("orders").await, Some(vec![1, 2, 3]));
        assert_eq!(
            world.ids(&world.staging_name(&staging)).await,
            None,
            "the staging is gone"
        );
        assert_eq!(catalog.list_tables(&database).await.unwrap(), ["orders"]);
    }
}

#[tokio::test]
async fn an_abort_removes_the_staging_and_leaves_no_target() {
    for (world, catalog, database) in worlds().await {
        let staging = staging(&database, "orders");
        catalog.begin(&staging, 1).await.unwrap();
        world.insert(&world.staging_name(&staging), &[1]).await;

        catalog.abort(&staging).await.unwrap();
        catalog.abort(&staging).await.unwrap();

        assert_eq!(world.ids(&world.staging_name(&staging)).await, None);
        assert_eq!(world.ids("orders").await, None);
        let late = commit_one(catalog.as_ref(), &staging, Publish::Create)
            .await
            .unwrap_err();
        assert!(
            matches!(late, CatalogError::StagingMissing { .. }),
            "{late}"
        );
    }
}

#[tokio::test]
async fn a_replacement_shows_old_rows_until_the_commit_and_only_new_rows_after() {
    for (world, catalog, database) in worlds().await {
        let existing = staging(&database, "orders");
        assert_eq!(
            catalog.create_table(&existing, false).await.unwrap(),
            CreateOutcome::Created
        );
        world.insert("orders", &[1, 2]).await;
        let replacement = staging(&database, "orders");
        catalog.begin(&replacement, 1).await.unwrap();
        world
            .insert(&world.staging_name(&replacement), &[7, 8, 9])
            .await;
        assert_eq!(
            world.ids("orders").await,
            Some(vec![1, 2]),
            "readers see the old rows meanwhile"
        );

        let outcome = commit_one(catalog.as_ref(), &replacement, Publish::Replace)
            .await
            .unwrap();

        assert_eq!(outcome, CommitOutcome::Committed);
        assert_eq!(world.ids("orders").await, Some(vec![7, 8, 9]));
        let leftovers = [
            world.staging_name(&replacement),
            format!("__ctasd_old_{}", replacement.key.as_str()),
        ];
        for leftover in leftovers {
            assert_eq!(
                world.ids(&leftover).await,
                None,
                "{leftover} is left behind by the commit"
            );
        }
        assert_eq!(
            commit_one(catalog.as_ref(), &replacement, Publish::Replace)
                .await
                .unwrap(),
            CommitOutcome::AlreadyCommitted
        );
        assert_eq!(
            world.ids("orders").await,
            Some(vec![7, 8, 9]),
            "a retried commit does not swap back"
        );
        assert_eq!(
            catalog.list_tables(&database).await.unwrap(),
            ["orders"],
            "no staging or old table is left"
        );
    }
}

#[tokio::test]
async fn a_target_created_by_someone_else_meanwhile_makes_the_commit_a_conflict() {
    for (world, catalog, database) in worlds().await {
        let staging = staging(&database, "orders");
        catalog.begin(&staging, 1).await.unwrap();
        world.insert(&world.staging_name(&staging), &[1]).await;
        let intruder = self::staging(&database, "orders");
        catalog.create_table(&intruder, false).await.unwrap();
        world.insert("orders", &[42]).await;

        let conflict = commit_one(catalog.as_ref(), &staging, Publish::Create)
            .await
            .unwrap_err();
        catalog.abort(&staging).await.unwrap();

        assert!(
            matches!(conflict, CatalogError::TableExists { .. }),
            "{conflict}"
        );
        assert_eq!(
            world.ids("orders").await,
            Some(vec![42]),
            "the other table is untouched"
        );
        assert_eq!(world.ids(&world.staging_name(&staging)).await, None);
    }
}

#[tokio::test]
async fn a_streaming_table_is_created_once_and_visible_at_once() {
    for (world, catalog, database) in worlds().await {
        let staging = staging(&database, "events");
        assert_eq!(
            catalog.create_table(&staging, false).await.unwrap(),
            CreateOutcome::Created
        );
        assert_eq!(
            catalog.create_table(&staging, false).await.unwrap(),
            CreateOutcome::AlreadyExisted,
            "a repeated CREATED creates nothing"
        );
        assert_eq!(world.ids("events").await, Some(vec![]));
        assert!(catalog.table_exists(&database, "events").await.unwrap());
    }
}

#[tokio::test]
async fn an_in_memory_catalog_stages_invisibly_and_publishes_on_commit() {
    let catalog = open(json!({"type": "generic_in_memory"})).await;
    let staging = staging("default", "orders");
    catalog.begin(&staging, 1).await.unwrap();
    assert!(catalog.list_tables("default").await.unwrap().is_empty());

    assert_eq!(
        commit_one(catalog.as_ref(), &staging, Publish::Create)
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
    assert_eq!(
        commit_one(catalog.as_ref(), &staging, Publish::Create)
            .await
            .unwrap(),
        CommitOutcome::AlreadyCommitted
    );
    let table = catalog.get_table("default", "orders").await.unwrap();
    assert_eq!(table.columns.len(), 2);
    let aborted = self::staging("default", "other");
    catalog.begin(&aborted, 1).await.unwrap();
    catalog.abort(&aborted).await.unwrap();
    assert_eq!(catalog.list_tables("default").await.unwrap(), ["orders"]);
}

#[tokio::test]
async fn a_begin_for_a_new_attempt_empties_the_staging_and_a_repeated_one_keeps_its_rows() {
    for (world, catalog, database) in worlds().await {
        let staging = staging(&database, "orders");
        let name = world.staging_name(&staging);
        assert_eq!(
            catalog.begin(&staging, 1).await.unwrap(),
            BeginOutcome::Staged
        );
        world.insert(&name, &[1, 2]).await;

        let repeated = catalog.begin(&staging, 1).await.unwrap();
        let kept = world.ids(&name).await;
        let restarted = catalog.begin(&staging, 5).await.unwrap();
        let emptied = world.ids(&name).await;
        world.insert(&name, &[3]).await;
        let again = catalog.begin(&staging, 5).await.unwrap();
        commit_one(catalog.as_ref(), &staging, Publish::Create)
            .await
            .unwrap();

        assert_eq!(repeated, BeginOutcome::AlreadyStaged);
        assert_eq!(kept, Some(vec![1, 2]), "the same attempt keeps its rows");
        assert_eq!(restarted, BeginOutcome::Restaged);
        assert_eq!(emptied, Some(vec![]), "a new attempt starts empty");
        assert_eq!(again, BeginOutcome::AlreadyStaged);
        assert_eq!(
            world.ids("orders").await,
            Some(vec![3]),
            "only the last attempt's rows"
        );
        let mut tables = world.tables().await;
        tables.retain(|t| t.contains("ctasd"));
        assert_eq!(
            tables,
            Vec::<String>::new(),
            "no staging, parked or fresh table is left"
        );
    }
}

#[tokio::test]
async fn a_streaming_replace_puts_the_declared_table_in_place_of_the_old_one() {
    for (world, catalog, database) in worlds().await {
        world.create_old("events").await;
        let mut replacement = staging(&database, "events");
        replacement.definition = serde_json::from_value(json!({
            "columns": [{"name": "id", "type": "BIGINT NOT NULL"}, {"name": "note", "type": "VARCHAR(20)"},
                        {"name": "added", "type": "INT"}]
        }))
        .unwrap();

        let kept = catalog.create_table(&replacement, false).await.unwrap();
        let replaced = catalog.create_table(&replacement, true).await.unwrap();

        assert_eq!(kept, CreateOutcome::AlreadyExisted);
        assert_eq!(replaced, CreateOutcome::Replaced);
        let columns: Vec<String> = catalog
            .get_table(&database, "events")
            .await
            .unwrap()
            .columns
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(columns, ["id", "note", "added"], "the new definition");
        assert_eq!(
            world.ids("events").await,
            Some(vec![]),
            "the old rows are gone"
        );
        let mut tables = world.tables().await;
        tables.retain(|t| t.contains("ctasd"));
        assert_eq!(tables, Vec::<String>::new());
    }
}

#[tokio::test]
async fn hooks_on_one_database_publish_all_together_or_not_at_all() {
    for (world, catalog, database) in worlds().await {
        if matches!(world, World::Files(_)) {
            // A directory rename publishes one table at a time.
            continue;
        }
        let (first, second) = (staging(&database, "first"), staging(&database, "second"));
        for staging in [&first, &second] {
            catalog.begin(staging, 1).await.unwrap();
            world.insert(&world.staging_name(staging), &[1]).await;
        }
        catalog
            .create_table(&self::staging(&database, "second"), false)
            .await
            .unwrap();

        let conflicted = catalog
            .commit(&[
                (first.clone(), Publish::Create),
                (second.clone(), Publish::Create),
            ])
            .await;
        world.insert("second", &[42]).await;

        assert!(
            conflicted
                .iter()
                .all(|r| matches!(r, Err(CatalogError::TableExists { .. }))),
            "{conflicted:?}"
        );
        assert_eq!(world.ids("first").await, None, "nothing published");

        let dropped = staging(&database, "third");
        catalog.begin(&dropped, 1).await.unwrap();
        let published = catalog
            .commit(&[
                (first.clone(), Publish::Create),
                (dropped.clone(), Publish::Create),
            ])
            .await;
        assert!(
            published.iter().all(|r| r == &Ok(CommitOutcome::Committed)),
            "{published:?}"
        );
        assert_eq!(world.ids("first").await, Some(vec![1]));
        assert_eq!(world.ids("third").await, Some(vec![]));
    }
}

#[tokio::test]
async fn a_table_published_from_another_jobs_staging_is_not_taken_for_this_ones() {
    for (world, catalog, database) in worlds().await {
        let theirs = staging(&database, "orders");
        catalog.begin(&theirs, 1).await.unwrap();
        world.insert(&world.staging_name(&theirs), &[4]).await;
        let published = commit_one(catalog.as_ref(), &theirs, Publish::Create).await;
        assert_eq!(published.unwrap(), CommitOutcome::Committed);

        // Another job's commit, with no staging of its own, finds the table
        // there: it is not this job's, whatever the kind.
        let ours = staging(&database, "orders");
        for publish in [Publish::Create, Publish::Replace] {
            let claimed = commit_one(catalog.as_ref(), &ours, publish).await;
            assert!(
                matches!(
                    claimed,
                    Err(CatalogError::NotOwned { .. } | CatalogError::StagingMissing { .. })
                ),
                "{} {publish:?}: {claimed:?}",
                world.label()
            );
        }
        assert_eq!(
            world.ids("orders").await,
            Some(vec![4]),
            "{}",
            world.label()
        );
        // The job that published it still finds it its own.
        let again = commit_one(catalog.as_ref(), &theirs, Publish::Create).await;
        assert_eq!(
            again.unwrap(),
            CommitOutcome::AlreadyCommitted,
            "{}",
            world.label()
        );
    }
}
