//! Scale: how listing jobs costs as the store grows. For each store (SQLite,
//! PostgreSQL) and size, it fills a fresh store with that many jobs (one
//! submitted through the API, the rest copied from it in SQL: a third each
//! RUNNING, FINISHED and FAILED, one in ten on catalog `mem`, one second
//! apart), starts ctasd on it and times `GET /v1/jobs` pages: the first, a
//! deep one (`created_before` half way back), and each with a status or a
//! catalog filter. Prints the median of 20 reads of each, its ratio to the
//! smallest store, the jobs on the page, and the server's peak RSS. Pages
//! hold 50 jobs, so that each is full in a store of 1,000 too (half way
//! back, 50 jobs of 500 are on `mem`): a page half full would be half the
//! work, and its ratio would flatter nothing but mislead.
//!
//! ```sh
//! cargo bench --bench scale -- --sizes 1000,100000,1000000
//! ```

use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::Value;
use sqlx::{AssertSqlSafe, Connection};

mod support;
use support::{Server, admin, ms, unique_database, with_database};

#[derive(Parser)]
struct Args {
    /// Store sizes, in jobs.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000,1000000")]
    sizes: Vec<u64>,
    /// Jobs on a page.
    #[arg(long, default_value_t = 50)]
    page_size: u32,
    /// Reads of each page, for the median.
    #[arg(long, default_value_t = 20)]
    reads: usize,
    #[command(flatten)]
    common: support::CommonArgs,
}

/// The pages timed, as query strings of `GET /v1/jobs` (`{deep}`: the
/// creation time half way back).
const PAGES: [(&str, &str); 5] = [
    ("first page", ""),
    ("deep page", "created_before={deep}"),
    ("first page, status=FAILED", "status=FAILED"),
    ("first page, catalog=mem", "catalog=mem"),
    (
        "deep page, catalog=mem",
        "catalog=mem&created_before={deep}",
    ),
];

#[tokio::main]
async fn main() {
    let args = Args::parse();
    println!(
        "scale: {:<10} {:>9} {:<28} {:>10} {:>8} {:>5}",
        "store", "jobs", "page", "median ms", "× first", "rows"
    );
    for postgres in [false, true] {
        let mut baseline: Vec<(f64, usize)> = Vec::new();
        for &size in &args.sizes {
            let (medians, rss_kib) = measure(&args, postgres, size).await;
            let store = if postgres { "PostgreSQL" } else { "SQLite" };
            if baseline.is_empty() {
                baseline = medians.clone();
            }
            for (((page, _), (median, rows)), (base, _)) in
                PAGES.iter().zip(&medians).zip(&baseline)
            {
                println!(
                    "scale: {store:<10} {size:>9} {page:<28} {median:>10.2} {:>8.2} {rows:>5}",
                    median / base
                );
            }
            println!(
                "scale: {store:<10} {size:>9} server peak RSS {:.1} MiB",
                rss_kib as f64 / 1024.0
            );
        }
    }
}

/// Each page's median in ms and its jobs, and the server's peak RSS in KiB.
async fn measure(args: &Args, postgres: bool, size: u64) -> (Vec<(f64, usize)>, u64) {
    let database = unique_database("ctasd_scale");
    let data_dir = tempfile::tempdir().unwrap();
    let store_url = if postgres {
        admin(
            &args.common.postgres_url,
            &format!("CREATE DATABASE {database}"),
        )
        .await;
        with_database(&args.common.postgres_url, &database)
    } else {
        format!("sqlite:{}", data_dir.path().join("jobs.db").display())
    };
    // The template job, through the API.
    let server = Server::start(Some(&store_url)).await;
    let client = reqwest::Client::new();
    let template = support::submit_mem_job(&client, &server.base, "scaled").await;
    drop(server);

    let started = Instant::now();
    fill(&store_url, postgres, &template, size).await;
    let filled = started.elapsed();

    let server = Server::start(Some(&store_url)).await;
    let jobs = support::get_json(&client, &format!("{}/v1/jobs?page_size=1", server.base)).await;
    let newest: chrono::DateTime<chrono::Utc> = jobs["jobs"][0]["created_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let deep = (newest - chrono::Duration::seconds((size / 2) as i64))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut medians = Vec::new();
    for (page, query) in PAGES {
        let url = format!(
            "{}/v1/jobs?page_size={}&{}",
            server.base,
            args.page_size,
            query.replace("{deep}", &deep)
        );
        let mut times: Vec<Duration> = Vec::new();
        let mut rows = 0;
        for _ in 0..args.reads {
            let begun = Instant::now();
            let reply = client.get(&url).send().await.unwrap();
            assert!(reply.status().is_success(), "{page}: {}", reply.status());
            let body: Value = reply.json().await.unwrap();
            times.push(begun.elapsed());
            rows = body["jobs"].as_array().unwrap().len();
            assert!(rows > 0, "{page} found jobs");
        }
        times.sort();
        medians.push((ms(times[times.len() / 2]), rows));
    }
    let rss = server.peak_rss_kib().unwrap_or(0);
    drop(server);
    if postgres {
        admin(
            &args.common.postgres_url,
            &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        )
        .await;
    }
    println!(
        "scale: filled {} with {size} jobs in {:.1} s",
        if postgres { "PostgreSQL" } else { "SQLite" },
        filled.as_secs_f64()
    );
    (medians, rss)
}

/// Copies the template job (and its hook) `size - 1` times, one second
/// apart going back, with ids `000…1`, `000…2`, ….
async fn fill(store_url: &str, postgres: bool, template: &str, size: u64) {
    let copies = size.saturating_sub(1);
    if postgres {
        let sql = format!(
            "INSERT INTO jobs (id, name, mode, status, statement, failure, fingerprint, created_at, updated_at, moved_at) \
             SELECT lpad(to_hex(g), 32, '0'), t.name || ' ' || g, t.mode, \
                    (ARRAY['RUNNING', 'FINISHED', 'FAILED'])[g % 3 + 1], t.statement, t.failure, t.fingerprint, \
                    t.created_at - g * interval '1 second', t.updated_at, t.moved_at \
             FROM jobs t, generate_series(1, {copies}) g WHERE t.id = '{template}';
             INSERT INTO hooks (job_id, hook_index, kind, catalog, database_name, table_name, if_not_exists, skipped, \
                                table_properties, catalog_options, catalog_sealed_options, catalog_comment) \
             SELECT lpad(to_hex(g), 32, '0'), h.hook_index, h.kind, CASE WHEN g % 10 = 0 THEN 'mem' ELSE 'other' END, \
                    h.database_name, h.table_name || g, h.if_not_exists, h.skipped, h.table_properties, \
                    h.catalog_options, h.catalog_sealed_options, h.catalog_comment \
             FROM hooks h, generate_series(1, {copies}) g WHERE h.job_id = '{template}';
             ANALYZE;"
        );
        admin(store_url, &sql).await;
    } else {
        let mut db = sqlx::SqliteConnection::connect(store_url).await.unwrap();
        let sql = format!(
            "BEGIN;
             WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {copies})
             INSERT INTO jobs (id, name, mode, status, statement, failure, fingerprint, created_at, updated_at, moved_at)
             SELECT printf('%032x', n), t.name || ' ' || n, t.mode,
                    CASE n % 3 WHEN 0 THEN 'RUNNING' WHEN 1 THEN 'FINISHED' ELSE 'FAILED' END,
                    t.statement, t.failure, t.fingerprint,
                    strftime('%Y-%m-%dT%H:%M:%f', substr(t.created_at, 1, 23), '-' || n || ' seconds') || '000000+00:00',
                    t.updated_at, t.moved_at
             FROM jobs t, g WHERE t.id = '{template}';
             WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {copies})
             INSERT INTO hooks (job_id, hook_index, kind, catalog, database_name, table_name, if_not_exists, skipped,
                                table_properties, catalog_options, catalog_sealed_options, catalog_comment)
             SELECT printf('%032x', n), h.hook_index, h.kind, CASE WHEN n % 10 = 0 THEN 'mem' ELSE 'other' END,
                    h.database_name, h.table_name || n, h.if_not_exists, h.skipped, h.table_properties,
                    h.catalog_options, h.catalog_sealed_options, h.catalog_comment
             FROM hooks h, g WHERE h.job_id = '{template}';
             COMMIT;
             ANALYZE;"
        );
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(&mut db)
            .await
            .unwrap();
    }
    let _ = Command::new("sync").status();
}
