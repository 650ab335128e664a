//! Recovery and retention, at scale, on both stores.
//!
//! - **Resume**: a store holding N batch jobs in `CREATED`, each with its
//!   `begin` claimed by a process that was killed (pending, one attempt, a
//!   lease that ran out), copied in SQL from one job submitted through the
//!   API. ctasd starts on it; the time from starting the process until no
//!   action is pending (`GET /v1/overview`), and every action is done.
//! - **Retention**: a store holding M jobs (a third each RUNNING, FINISHED,
//!   FAILED, one second apart going back, with their hooks, a history row
//!   and an action each), started with `--ended-job-retention-days 1`: how
//!   long until the purge at start is over, and the store's size before and
//!   after (SQLite: the pages in use, and the file, whose free pages new
//!   jobs reuse; PostgreSQL: the database, and what `VACUUM FULL` would
//!   return to the system).
//!
//! ```sh
//! cargo bench --bench recovery -- --due-actions 10000 --jobs 1000000
//! ```

use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection};

mod support;
use support::{Server, admin, unique_database, with_database};

#[derive(Parser)]
struct Args {
    /// Due actions left by the killed process.
    #[arg(long, default_value_t = 10_000)]
    due_actions: u64,
    /// Jobs in the store that retention purges from.
    #[arg(long, default_value_t = 1_000_000)]
    jobs: u64,
    #[command(flatten)]
    common: support::CommonArgs,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    for postgres in [false, true] {
        let store = Store::fresh(&args, postgres).await;
        resume(&store, args.due_actions).await;
        store.drop_database(&args).await;
        let store = Store::fresh(&args, postgres).await;
        retention(&store, args.jobs).await;
        store.drop_database(&args).await;
    }
}

/// A fresh store: a PostgreSQL database, or an SQLite file.
struct Store {
    name: &'static str,
    url: String,
    database: Option<String>,
    _dir: tempfile::TempDir,
}

impl Store {
    async fn fresh(args: &Args, postgres: bool) -> Store {
        let dir = tempfile::tempdir().unwrap();
        if postgres {
            let database = unique_database("ctasd_recovery");
            admin(
                &args.common.postgres_url,
                &format!("CREATE DATABASE {database}"),
            )
            .await;
            Store {
                name: "PostgreSQL",
                url: with_database(&args.common.postgres_url, &database),
                database: Some(database),
                _dir: dir,
            }
        } else {
            Store {
                name: "SQLite",
                url: format!("sqlite:{}", dir.path().join("store.db").display()),
                database: None,
                _dir: dir,
            }
        }
    }

    fn postgres(&self) -> bool {
        self.database.is_some()
    }

    async fn drop_database(self, args: &Args) {
        if let Some(database) = &self.database {
            admin(
                &args.common.postgres_url,
                &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
            )
            .await;
        }
    }

    /// Runs `sql` (several statements) on the store, outside ctasd.
    async fn run(&self, sql: &str) {
        if self.postgres() {
            admin(&self.url, sql).await;
        } else {
            let mut db = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
            sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
                .execute(&mut db)
                .await
                .unwrap();
        }
    }

    /// `(bytes in use, bytes on disk)`.
    async fn size(&self) -> (i64, i64) {
        if let Some(database) = &self.database {
            let mut db = sqlx::PgConnection::connect(&self.url).await.unwrap();
            let (on_disk,): (i64,) = sqlx::query_as("SELECT pg_database_size($1)")
                .bind(database)
                .fetch_one(&mut db)
                .await
                .unwrap();
            (on_disk, on_disk)
        } else {
            let mut db = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
            let (pages, free, page_size): (i64, i64, i64) = sqlx::query_as(
                "SELECT (SELECT page_count FROM pragma_page_count()), \
                        (SELECT freelist_count FROM pragma_freelist_count()), \
                        (SELECT page_size FROM pragma_page_size())",
            )
            .fetch_one(&mut db)
            .await
            .unwrap();
            ((pages - free) * page_size, pages * page_size)
        }
    }

    /// The SQL that numbers `1..=n` as `g(n)` for an `INSERT … SELECT`.
    fn series(&self, n: u64) -> (String, String) {
        if self.postgres() {
            (String::new(), format!("generate_series(1, {n}) g(n)"))
        } else {
            (
                format!(
                    "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {n}) "
                ),
                "g".into(),
            )
        }
    }

    /// Job id number `n` (32 hex digits), as SQL.
    fn id(&self, n: &str) -> String {
        if self.postgres() {
            format!("lpad(to_hex({n}), 32, '0')")
        } else {
            format!("printf('%032x', {n})")
        }
    }

    /// Unix milliseconds now, as SQL.
    fn now_ms(&self) -> &'static str {
        if self.postgres() {
            "(extract(epoch FROM now()) * 1000)::bigint"
        } else {
            "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
        }
    }
}

/// Registers `mem` and submits one batch job on it; its id.
async fn template(store: &Store, report: &[&str]) -> String {
    let server = Server::start(Some(&store.url)).await;
    let client = reqwest::Client::new();
    let id = support::submit_mem_job(&client, &server.base, "template").await;
    for status in report {
        let reply = client
            .put(format!("{}/v1/jobs/{id}/status", server.base))
            .json(&json!({"status": status}))
            .send()
            .await
            .unwrap();
        assert!(reply.status().is_success(), "{status}");
    }
    id
}

async fn resume(store: &Store, due: u64) {
    let template = template(store, &["CREATED"]).await;
    let (with, g) = store.series(due);
    let id = store.id("n");
    let now_ms = store.now_ms();
    store
        .run(&format!(
            "{with}INSERT INTO jobs (id, name, mode, status, statement, failure, fingerprint, created_at, updated_at, moved_at) \
             SELECT {id}, t.name || ' ' || n, t.mode, t.status, t.statement, t.failure, t.fingerprint, \
                    t.created_at, t.updated_at, t.moved_at FROM jobs t, {g} WHERE t.id = '{template}';
             {with}INSERT INTO hooks (job_id, hook_index, kind, catalog, database_name, table_name, if_not_exists, skipped, \
                                table_properties, catalog_options, catalog_sealed_options, catalog_comment) \
             SELECT {id}, h.hook_index, h.kind, h.catalog, h.database_name, h.table_name || n, h.if_not_exists, \
                    h.skipped, h.table_properties, h.catalog_options, h.catalog_sealed_options, h.catalog_comment \
             FROM hooks h, {g} WHERE h.job_id = '{template}';
             {with}INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, not_before, lease_until, \
                                  created_at, updated_at) \
             SELECT {id}, 0, 'begin', 'CREATED', 'pending', 1, {now_ms} - 60000, {now_ms} - 1000, \
                    t.created_at, t.created_at FROM jobs t, {g} WHERE t.id = '{template}';"
        ))
        .await;

    let started = Instant::now();
    let server = Server::start(Some(&store.url)).await;
    let listening = started.elapsed();
    let client = reqwest::Client::new();
    let overview = || async {
        let body = support::get_json(&client, &format!("{}/v1/overview", server.base)).await;
        (
            body["pending_actions"].as_i64().unwrap(),
            body["failed_actions"].as_i64().unwrap(),
        )
    };
    let deadline = started + Duration::from_secs(300);
    let (pending, failed) = loop {
        let (pending, failed) = overview().await;
        if pending == 0 || Instant::now() > deadline {
            break (pending, failed);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let resumed = started.elapsed();
    println!(
        "recovery: {:<10} {due} due actions left by a killed process: all resumed {:.2} s after start \
         (listening after {:.2} s); {pending} pending, {failed} failed; peak RSS {:.1} MiB",
        store.name,
        resumed.as_secs_f64(),
        listening.as_secs_f64(),
        server.peak_rss_kib().unwrap_or(0) as f64 / 1024.0
    );
    assert_eq!((pending, failed), (0, 0), "every action resumed and done");
}

async fn retention(store: &Store, jobs: u64) {
    let template = template(store, &["CREATED", "RUNNING", "FINISHED"]).await;
    let copies = jobs - 1;
    let (with, g) = store.series(copies);
    let id = store.id("n");
    // Job n is n seconds old, and those past the first YOUNG are older by
    // GAP more: nobody is near the day's boundary while the bench runs.
    const YOUNG: u64 = 80_000;
    const GAP: u64 = 10_000;
    let age = format!("n + CASE WHEN n > {YOUNG} THEN {GAP} ELSE 0 END");
    let (status, at) = if store.postgres() {
        (
            "(ARRAY['RUNNING', 'FINISHED', 'FAILED'])[n % 3 + 1]",
            format!("t.created_at - ({age}) * interval '1 second'"),
        )
    } else {
        (
            "CASE n % 3 WHEN 0 THEN 'RUNNING' WHEN 1 THEN 'FINISHED' ELSE 'FAILED' END",
            format!(
                "strftime('%Y-%m-%dT%H:%M:%f', substr(t.created_at, 1, 23), '-' || ({age}) || ' seconds') || '000000+00:00'"
            ),
        )
    };
    let begun = Instant::now();
    store
        .run(&format!(
            "{with}INSERT INTO jobs (id, name, mode, status, statement, failure, fingerprint, created_at, updated_at, moved_at) \
             SELECT {id}, t.name || ' ' || n, t.mode, {status}, t.statement, t.failure, t.fingerprint, \
                    {at}, {at}, {at} FROM jobs t, {g} WHERE t.id = '{template}';
             {with}INSERT INTO hooks (job_id, hook_index, kind, catalog, database_name, table_name, if_not_exists, skipped, \
                                table_properties, catalog_options, catalog_sealed_options, catalog_comment) \
             SELECT {id}, h.hook_index, h.kind, h.catalog, h.database_name, h.table_name || n, h.if_not_exists, \
                    h.skipped, h.table_properties, h.catalog_options, h.catalog_sealed_options, h.catalog_comment \
             FROM hooks h, {g} WHERE h.job_id = '{template}';
             {with}INSERT INTO job_transitions (job_id, from_status, to_status, at) \
             SELECT {id}, 'RUNNING', j.status, j.updated_at FROM {g} JOIN jobs j ON j.id = {id};
             {with}INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, outcome, not_before, \
                                  created_at, updated_at) \
             SELECT {id}, 0, 'begin', 'CREATED', 'done', 1, 'staged', 0, j.created_at, j.created_at \
             FROM {g} JOIN jobs j ON j.id = {id};"
        ))
        .await;
    let filled = begun.elapsed();
    let before = store.size().await;

    let started = Instant::now();
    let server = Server::start_with(Some(&store.url), &["--ended-job-retention-days", "1"]).await;
    let client = reqwest::Client::new();
    // The ended jobs among those older than a day go; RUNNING ones stay.
    let older = copies.saturating_sub(YOUNG);
    let ended_older = (1..=copies).filter(|n| *n > YOUNG && n % 3 != 0).count() as i64;
    let expected_left = jobs as i64 - ended_older;
    let count = || async {
        let body = support::get_json(&client, &format!("{}/v1/overview", server.base)).await;
        body["jobs"]
            .as_array()
            .map(|by| by.iter().filter_map(|s| s["jobs"].as_i64()).sum::<i64>())
            .unwrap_or_else(|| panic!("an overview: {body}"))
    };
    let deadline = started + Duration::from_secs(900);
    let left = loop {
        let left = count().await;
        if left <= expected_left || Instant::now() > deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let purged_in = started.elapsed();
    let rss = server.peak_rss_kib().unwrap_or(0);
    drop(server);
    let after = store.size().await;
    let mib = |bytes: i64| bytes as f64 / (1024.0 * 1024.0);
    println!(
        "recovery: {:<10} {jobs} jobs (filled in {:.1} s; {older} older than a day, {ended_older} of them ended): \
         {left} left {:.1} s after start; peak RSS {:.1} MiB",
        store.name,
        filled.as_secs_f64(),
        purged_in.as_secs_f64(),
        rss as f64 / 1024.0
    );
    println!(
        "recovery: {:<10} store before the purge {:.1} MiB in use ({:.1} MiB on disk), after {:.1} MiB in use ({:.1} MiB on disk)",
        store.name,
        mib(before.0),
        mib(before.1),
        mib(after.0),
        mib(after.1)
    );
    if store.postgres() {
        store.run("VACUUM FULL").await;
        let compacted = store.size().await;
        println!(
            "recovery: {:<10} after VACUUM FULL {:.1} MiB on disk",
            store.name,
            mib(compacted.1)
        );
    }
    assert_eq!(left, expected_left, "the purge deleted the ended old jobs");
}
