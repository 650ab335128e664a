//! The load program: K concurrent clients drive full batch lifecycles
//! (submit, CREATED, rows written into the staging, RUNNING, FINISHED, read
//! back) against a real `ctasd serve` on a PostgreSQL store, with a jdbc
//! catalog on PostgreSQL as the target, then lists every job, 1000 a page.
//! Prints throughput, latency per endpoint, errors, lost or double commits,
//! the server's peak RSS, and what each finished job cost the store: the
//! statements ctasd sent it (counted by a relay in front of PostgreSQL) and
//! the database's growth.
//!
//! ```sh
//! cargo bench --bench load -- --clients 64 --seconds 60
//! ```
//!
//! It creates two databases on `--postgres-url` (store and target) and drops
//! them at the end.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};
use sqlx::AssertSqlSafe;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::sync::Mutex;

mod support;
use support::{Samples, Server, StatementCounter, admin, ms, with_database};

#[derive(Parser)]
struct Args {
    /// Concurrent clients, each running one lifecycle after another.
    #[arg(long, default_value_t = 64)]
    clients: usize,
    /// How long to start new lifecycles, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Rows each job writes into its staging table.
    #[arg(long, default_value_t = 100)]
    rows: u32,
    #[command(flatten)]
    common: support::CommonArgs,
}

#[derive(Default)]
struct Figures {
    latencies: BTreeMap<&'static str, Samples>,
    errors: Vec<String>,
    finished_jobs: Vec<String>,
}

struct Bench {
    client: reqwest::Client,
    base: String,
    target: PgPool,
    rows: u32,
    figures: Mutex<Figures>,
    transitions: AtomicU64,
}

impl Bench {
    /// One request, timed under `endpoint`; the body of a 2xx answer.
    async fn call(
        &self,
        endpoint: &'static str,
        request: reqwest::RequestBuilder,
    ) -> Option<Value> {
        let started = Instant::now();
        let outcome = match request.send().await {
            Ok(reply) if reply.status().is_success() => {
                reply.json::<Value>().await.map_err(|e| e.to_string())
            }
            Ok(reply) => Err(format!(
                "{endpoint}: {} {}",
                reply.status(),
                reply.text().await.unwrap_or_default()
            )),
            Err(e) => Err(format!("{endpoint}: {e}")),
        };
        let elapsed = started.elapsed();
        let mut figures = self.figures.lock().await;
        figures
            .latencies
            .entry(endpoint)
            .or_default()
            .0
            .push(elapsed);
        match outcome {
            Ok(body) => Some(body),
            Err(error) => {
                figures.errors.push(error);
                None
            }
        }
    }

    async fn report(
        &self,
        id: &str,
        status: &'static str,
        endpoint: &'static str,
    ) -> Option<Value> {
        let body = self
            .call(
                endpoint,
                self.client
                    .put(format!("{}/v1/jobs/{id}/status", self.base))
                    .json(&json!({"status": status})),
            )
            .await?;
        self.transitions.fetch_add(1, Ordering::Relaxed);
        Some(body)
    }

    /// One batch job from submission to publication.
    async fn lifecycle(&self, client: usize, n: usize) -> Option<()> {
        let table = format!("t_{client}_{n}");
        let submitted = self
            .call(
                "POST /v1/jobs",
                self.client.post(format!("{}/v1/jobs", self.base)).json(&json!({
                    "name": table, "mode": "batch",
                    "hooks": [{"kind": "create_table_as", "target": {"catalog": "pg", "table": table},
                               "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                                                     {"name": "note", "type": "STRING"}]}}]})),
            )
            .await?;
        let id = submitted["id"].as_str()?.to_owned();
        let created = self
            .report(&id, "CREATED", "PUT status CREATED (begin)")
            .await?;
        let staging = created["job"]["hooks"][0]["write_location"]["name"]
            .as_str()?
            .to_owned();
        // What the engine's sink does.
        let write = format!(
            "INSERT INTO \"{staging}\" SELECT g, 'row ' || g FROM generate_series(1, {}) g",
            self.rows
        );
        if let Err(e) = sqlx::query(AssertSqlSafe(write))
            .execute(&self.target)
            .await
        {
            self.figures
                .lock()
                .await
                .errors
                .push(format!("engine write: {e}"));
            return None;
        }
        self.report(&id, "RUNNING", "PUT status RUNNING").await?;
        let finished = self
            .report(&id, "FINISHED", "PUT status FINISHED (commit)")
            .await?;
        if finished["actions_taken"][0]["state"] != "done" {
            self.figures
                .lock()
                .await
                .errors
                .push(format!("commit not done: {finished}"));
            return None;
        }
        self.call(
            "GET /v1/jobs/{job}",
            self.client.get(format!("{}/v1/jobs/{id}", self.base)),
        )
        .await?;
        self.figures.lock().await.finished_jobs.push(id);
        Some(())
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let (store_db, target_db) = (
        format!("ctasd_bench_store_{suffix}"),
        format!("ctasd_bench_target_{suffix}"),
    );
    admin(
        &args.common.postgres_url,
        &format!("CREATE DATABASE {store_db}"),
    )
    .await;
    admin(
        &args.common.postgres_url,
        &format!("CREATE DATABASE {target_db}"),
    )
    .await;
    let outcome = run(&args, &store_db, &target_db).await;
    for database in [&store_db, &target_db] {
        admin(
            &args.common.postgres_url,
            &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        )
        .await;
    }
    if let Err(failure) = outcome {
        eprintln!("load: FAILED: {failure}");
        std::process::exit(1);
    }
}

async fn run(args: &Args, store_db: &str, target_db: &str) -> Result<(), String> {
    // The store's statements pass through a counter on their way.
    let store_url = with_database(&args.common.postgres_url, store_db);
    let counter = StatementCounter::start(StatementCounter::upstream_of(&store_url)).await;
    let server = Server::start(Some(&counter.relayed(&store_url))).await;
    let base = server.base.clone();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients)
        .build()
        .unwrap();
    let target_url = with_database(&args.common.postgres_url, target_db);
    let (host_port, user) = {
        let rest = target_url.split_once("//").unwrap().1;
        let (user, rest) = rest.split_once('@').unwrap_or(("postgres", rest));
        (rest.split('/').next().unwrap().to_owned(), user.to_owned())
    };
    let registered = client
        .post(format!("{base}/v1/catalogs"))
        .json(&json!({"name": "pg", "options": {"type": "jdbc",
            "base-url": format!("jdbc:postgresql://{host_port}"),
            "default-database": target_db, "username": user, "password": "unused"}}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !registered.status().is_success() {
        return Err(format!(
            "registering the catalog: {}",
            registered.text().await.unwrap_or_default()
        ));
    }
    let target = PgPoolOptions::new()
        .max_connections(16)
        .connect(&target_url)
        .await
        .map_err(|e| e.to_string())?;

    let bench = Arc::new(Bench {
        client,
        base: base.clone(),
        target: target.clone(),
        rows: args.rows,
        figures: Mutex::default(),
        transitions: AtomicU64::new(0),
    });
    println!(
        "load: {} clients for {} s, {} rows per job, ctasd on a PostgreSQL store, jdbc target on PostgreSQL",
        args.clients, args.seconds, args.rows
    );
    let store_bytes = |db: &str| {
        sqlx::query_scalar::<_, i64>("SELECT pg_database_size($1)")
            .bind(db.to_owned())
            .fetch_one(&target)
    };
    let (statements_before, bytes_before) = (
        counter.statements(),
        store_bytes(store_db).await.map_err(|e| e.to_string())?,
    );
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let clients: Vec<_> = (0..args.clients)
        .map(|client| {
            let bench = bench.clone();
            tokio::spawn(async move {
                let mut n = 0;
                while Instant::now() < deadline {
                    bench.lifecycle(client, n).await;
                    n += 1;
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let statements = counter.statements() - statements_before;
    let stored_bytes = store_bytes(store_db).await.map_err(|e| e.to_string())? - bytes_before;

    // Then the whole list, a page of 1000 jobs at a time.
    let mut page_token: Option<String> = None;
    loop {
        let url = match &page_token {
            Some(token) => format!("{base}/v1/jobs?page_size=1000&page_token={token}"),
            None => format!("{base}/v1/jobs?page_size=1000"),
        };
        let Some(page) = bench
            .call("GET /v1/jobs (1000 a page)", bench.client.get(url))
            .await
        else {
            break;
        };
        match page["next_page_token"].as_str() {
            Some(token) => page_token = Some(token.to_owned()),
            None => break,
        }
    }
    let peak_rss = server.peak_rss_kib();

    // Exactly once: every finished job's table holds its rows, its ledger one
    // commit run once; no staging is left.
    let mut figures = bench.figures.lock().await;
    let (mut lost, mut double) = (0, 0);
    for id in &figures.finished_jobs {
        let job: Value = bench
            .client
            .get(format!("{base}/v1/jobs/{id}"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let commits: Vec<&Value> = job["actions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["action"] == "commit")
            .collect();
        if commits.len() != 1 || commits[0]["attempts"] != 1 || commits[0]["outcome"] != "committed"
        {
            double += 1;
        }
        let table = job["hooks"][0]["target"]["table"]
            .as_str()
            .unwrap_or_default();
        let rows: Result<i64, _> =
            sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM \"{table}\"")))
                .fetch_one(&target)
                .await;
        if rows.ok() != Some(i64::from(args.rows)) {
            lost += 1;
        }
    }
    let staging_left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename LIKE '\\_\\_ctasd%'")
            .fetch_one(&target)
            .await
            .map_err(|e| e.to_string())?;

    let jobs = figures.finished_jobs.len();
    let requests: usize = figures
        .latencies
        .iter()
        .filter(|(endpoint, _)| !endpoint.starts_with("GET /v1/jobs ("))
        .map(|(_, samples)| samples.0.len())
        .sum();
    println!(
        "load: {jobs} jobs finished in {elapsed:.1} s: {:.1} jobs/s, {:.1} transitions/s, {:.1} requests/s",
        jobs as f64 / elapsed,
        bench.transitions.load(Ordering::Relaxed) as f64 / elapsed,
        requests as f64 / elapsed
    );
    println!(
        "load: store cost per finished job: {:.1} statements (queries and executes sent), {:.0} bytes of database growth",
        statements as f64 / jobs.max(1) as f64,
        stored_bytes as f64 / jobs.max(1) as f64
    );
    println!(
        "load: {:<30} {:>8} {:>9} {:>9} {:>9}",
        "endpoint", "requests", "p50 ms", "p99 ms", "max ms"
    );
    for (endpoint, samples) in figures.latencies.iter_mut() {
        samples.0.sort();
        println!(
            "load: {endpoint:<30} {:>8} {:>9.1} {:>9.1} {:>9.1}",
            samples.0.len(),
            ms(samples.quantile(0.50)),
            ms(samples.quantile(0.99)),
            ms(*samples.0.last().unwrap()),
        );
    }
    println!(
        "load: errors {}, lost commits {lost}, double commits {double}, staging tables left {staging_left}",
        figures.errors.len()
    );
    match peak_rss {
        Some(kib) => println!("load: server peak RSS {:.1} MiB", kib as f64 / 1024.0),
        None => println!("load: server peak RSS unknown (no /proc)"),
    }
    for error in figures.errors.iter().take(5) {
        println!("load: error: {error}");
    }
    target.close().await;
    if figures.errors.is_empty() && lost == 0 && double == 0 && staging_left == 0 {
        Ok(())
    } else {
        Err("errors, lost or double commits".into())
    }
}
