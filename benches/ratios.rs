//! Ratios: ctasd against what the same machine does in the same minute,
//! with the same number of clients.
//!
//! - A whole batch lifecycle over HTTP (submit, CREATED: staging created,
//!   RUNNING, FINISHED: staging renamed, read), against the same store
//!   statements and DDL replayed as raw SQL by `pgbench` through the same
//!   PostgreSQL (no rows written by either; the replay also drops the table,
//!   so its target does not grow); and the statements each sent its store
//!   per lifecycle, ctasd's counted by a relay in front of PostgreSQL.
//! - Status reports that imply no action (a streaming job moving between
//!   `RUNNING` and `RESTARTING`) over HTTP, against one `UPDATE` of the job's
//!   row replayed by `pgbench` through the same PostgreSQL.
//! - `GET /v1/jobs/{job}` of a finished job against `/healthz` of the same
//!   process, with `wrk`, on the SQLite store and on PostgreSQL.
//!
//! ```sh
//! cargo bench --bench ratios -- --clients 16 --seconds 20
//! ```
//!
//! Needs `pgbench` (it comes with PostgreSQL) and `wrk` (`apt-get install
//! wrk`). Every database it creates is dropped at the end.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::{Value, json};
use tokio::sync::Mutex;

mod support;
use support::{Samples, Server, StatementCounter, admin, ms, unique_database, with_database};

#[derive(Parser)]
struct Args {
    /// Concurrent clients on each side; several (`1,4,16,64`) measure each
    /// in turn, for the curve.
    #[arg(long, value_delimiter = ',', default_value = "16")]
    clients: Vec<usize>,
    /// How long each side runs, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Which ratios to measure (all by default): `lifecycle`, `report`,
    /// `read` (both stores).
    #[arg(long, value_delimiter = ',', default_values = ["lifecycle", "report", "read"])]
    work: Vec<Work>,
    #[command(flatten)]
    common: support::CommonArgs,
}

#[derive(Clone, Copy, PartialEq, clap::ValueEnum)]
enum Work {
    Lifecycle,
    Report,
    Read,
}

/// One run of every side: how many clients, for how long, where.
struct Load {
    clients: usize,
    seconds: u64,
    postgres_url: String,
}

/// One line of the result: what was measured, the machine's limit for
/// it and ctasd's figure, both in operations per second.
struct Ratio {
    work: String,
    limit_name: String,
    limit: f64,
    ctasd: f64,
    details: Vec<String>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    for tool in ["pgbench", "wrk"] {
        if Command::new(tool).arg("--version").output().is_err() {
            eprintln!(
                "ratios: '{tool}' is missing (pgbench comes with PostgreSQL; apt-get install wrk)"
            );
            std::process::exit(1);
        }
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut curve = Vec::new();
    for &clients in &args.clients {
        let load = Load {
            clients,
            seconds: args.seconds,
            postgres_url: args.common.postgres_url.clone(),
        };
        println!(
            "ratios: {clients} clients, {} s per side, on {cores} cores",
            load.seconds
        );
        let mut ratios = Vec::new();
        if args.work.contains(&Work::Lifecycle) {
            ratios.push(lifecycle_ratio(&load).await);
        }
        if args.work.contains(&Work::Report) {
            ratios.push(report_ratio(&load).await);
        }
        if args.work.contains(&Work::Read) {
            for store in [Store::Sqlite, Store::Postgres] {
                ratios.push(read_ratio(&load, store).await);
            }
        }
        print_table(&ratios);
        for r in &ratios {
            for line in &r.details {
                println!("ratios: {}: {line}", r.work);
            }
        }
        curve.push((clients, ratios));
    }
    if curve.len() > 1 {
        println!("ratios: the curve, ctasd's figure and ratio by clients");
        for (clients, ratios) in &curve {
            println!("ratios: {clients} clients");
            print_table(ratios);
        }
    }
}

fn print_table(ratios: &[Ratio]) {
    println!(
        "ratios: {:<44} {:>28} {:>16} {:>6}",
        "work", "limit (same machine, same run)", "ctasd", "ratio"
    );
    for r in ratios {
        println!(
            "ratios: {:<44} {:>28} {:>16} {:>6.2}",
            r.work,
            format!("{:.0}/s {}", r.limit, r.limit_name),
            format!("{:.0}/s", r.ctasd),
            r.ctasd / r.limit
        );
    }
}

/// Replayed statements of one lifecycle, for pgbench: what ctasd's store
/// and catalog must write (the job, its hook and first status; each status
/// change with its lock, row, history and actions; each action's DDL and
/// result), then the read, then a drop.
const REPLAYED_LIFECYCLE: &str = r#"
\set n random(1, 2000000000)
SELECT md5(:client_id || '-' || :n || '-' || clock_timestamp()::text) AS id \gset
BEGIN;
INSERT INTO jobs (id, name, mode, status, fingerprint, created_at, updated_at, moved_at) VALUES (':id', 'replay', 'batch', 'INITIALIZING', ':id', now(), now(), now());
INSERT INTO hooks (job_id, hook_index, kind, catalog, database_name, table_name, if_not_exists, skipped, table_properties, catalog_options, catalog_sealed_options) VALUES (':id', 0, 'create_table_as', 'pg', 'target', 't_:id', false, false, '{"schema.0.name": "n", "schema.0.data-type": "INT"}', '{"type": "jdbc"}', '{}');
INSERT INTO job_transitions (job_id, from_status, to_status, at) VALUES (':id', NULL, 'INITIALIZING', now());
COMMIT;
BEGIN;
SELECT status, mode, engine, engine_applied_until FROM jobs WHERE id = ':id' FOR UPDATE;
UPDATE jobs SET status = 'CREATED', updated_at = now(), moved_at = now() WHERE id = ':id';
INSERT INTO job_transitions (job_id, from_status, to_status, at) VALUES (':id', 'INITIALIZING', 'CREATED', now());
INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, not_before, lease_until, created_at, updated_at) VALUES (':id', 0, 'begin', 'CREATED', 'pending', 1, (extract(epoch FROM now()) * 1000)::bigint, (extract(epoch FROM now()) * 1000)::bigint + 15000, now(), now());
COMMIT;
CREATE TABLE target.stg_:id (n INTEGER);
UPDATE actions SET state = 'done', outcome = 'staged', lease_until = NULL, updated_at = now() WHERE job_id = ':id' AND action = 'begin';
BEGIN;
SELECT status, mode, engine, engine_applied_until FROM jobs WHERE id = ':id' FOR UPDATE;
UPDATE jobs SET status = 'RUNNING', updated_at = now(), moved_at = now() WHERE id = ':id';
INSERT INTO job_transitions (job_id, from_status, to_status, at) VALUES (':id', 'CREATED', 'RUNNING', now());
COMMIT;
BEGIN;
SELECT status, mode, engine, engine_applied_until FROM jobs WHERE id = ':id' FOR UPDATE;
UPDATE jobs SET status = 'FINISHED', updated_at = now(), moved_at = now() WHERE id = ':id';
INSERT INTO job_transitions (job_id, from_status, to_status, at) VALUES (':id', 'RUNNING', 'FINISHED', now());
INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, not_before, lease_until, created_at, updated_at) VALUES (':id', 0, 'commit', 'FINISHED', 'pending', 1, (extract(epoch FROM now()) * 1000)::bigint, (extract(epoch FROM now()) * 1000)::bigint + 15000, now(), now());
COMMIT;
ALTER TABLE target.stg_:id RENAME TO t_:id;
UPDATE actions SET state = 'done', outcome = 'committed', lease_until = NULL, updated_at = now() WHERE job_id = ':id' AND action = 'commit';
SELECT * FROM jobs WHERE id = ':id';
SELECT * FROM hooks WHERE job_id = ':id' ORDER BY hook_index;
SELECT * FROM actions WHERE job_id = ':id' ORDER BY id;
DROP TABLE target.t_:id;
"#;

async fn lifecycle_ratio(args: &Load) -> Ratio {
    // The machine's limit: the statements above, through the same PostgreSQL,
    // on ctasd's own schema (as `ctasd migrate` makes it).
    let replay_db = migrated_database(args, "ctasd_ratio_replay").await;
    let replay_url = with_database(&args.postgres_url, &replay_db);
    let scratch = tempfile::tempdir().unwrap();
    admin(&replay_url, "CREATE SCHEMA target").await;
    let script = scratch.path().join("lifecycle.sql");
    std::fs::write(&script, REPLAYED_LIFECYCLE).unwrap();
    let replay = pgbench(&replay_url, &script, args);

    // ctasd: the same lifecycle over HTTP, a PostgreSQL store and target.
    let (store_db, target_db) = (
        unique_database("ctasd_ratio_store"),
        unique_database("ctasd_ratio_target"),
    );
    for database in [&store_db, &target_db] {
        admin(&args.postgres_url, &format!("CREATE DATABASE {database}")).await;
    }
    // ctasd's store statements pass through a counter on their way.
    let store_url = with_database(&args.postgres_url, &store_db);
    let counter = StatementCounter::start(StatementCounter::upstream_of(&store_url)).await;
    let server = Server::start(Some(&counter.relayed(&store_url))).await;
    let counted_from = counter.statements();
    let lifecycles = http_lifecycles(&server, args, &target_db).await;
    let statements = counter.statements() - counted_from;
    drop(server);
    for database in [&replay_db, &store_db, &target_db] {
        admin(
            &args.postgres_url,
            &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        )
        .await;
    }

    let (lifecycles, finished, mut samples, errors) = lifecycles;
    let replayed_statements = REPLAYED_LIFECYCLE
        .lines()
        .filter(|l| l.ends_with(';') && !l.contains("target."))
        .count();
    let mut details = vec![
        format!(
            "replay {:.1} lifecycles/s, {:.1} ms a lifecycle on average; ctasd {lifecycles:.1} jobs/s, {errors} errors",
            replay.0, replay.1
        ),
        format!(
            "store statements per lifecycle: ctasd {:.1} (sent to its store, background work included), replay {replayed_statements}",
            statements as f64 / finished.max(1) as f64
        ),
    ];
    for (step, latencies) in samples.iter_mut() {
        latencies.0.sort();
        details.push(format!(
            "{step:<16} p50 {:>6.1} ms  p99 {:>6.1} ms  p99/p50 {:.1}",
            ms(latencies.quantile(0.5)),
            ms(latencies.quantile(0.99)),
            latencies.quantile(0.99).as_secs_f64() / latencies.quantile(0.5).as_secs_f64()
        ));
    }
    Ratio {
        work: "batch lifecycle, PostgreSQL store and target".into(),
        limit_name: "replayed".into(),
        limit: replay.0,
        ctasd: lifecycles,
        details,
    }
}

/// The replayed report that implies no action: one statement, the job's
/// row, one job per client.
const REPLAYED_REPORT: &str = "UPDATE jobs SET status = CASE status WHEN 'RUNNING' THEN 'RESTARTING' \
     ELSE 'RUNNING' END, updated_at = now(), moved_at = now() WHERE id = 'replay' || :client_id;\n";

async fn report_ratio(args: &Load) -> Ratio {
    let replay_db = migrated_database(args, "ctasd_ratio_report_replay").await;
    let replay_url = with_database(&args.postgres_url, &replay_db);
    admin(
        &replay_url,
        &format!(
            "INSERT INTO jobs (id, name, mode, status, fingerprint, created_at, updated_at, moved_at) \
             SELECT 'replay' || n, 'replay', 'streaming', 'RUNNING', 'replay' || n, now(), now(), now() \
             FROM generate_series(0, {}) n",
            args.clients - 1
        ),
    )
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("report.sql");
    std::fs::write(&script, REPLAYED_REPORT).unwrap();
    let replay = pgbench(&replay_url, &script, args);

    let store_db = unique_database("ctasd_ratio_report_store");
    admin(&args.postgres_url, &format!("CREATE DATABASE {store_db}")).await;
    let server = Server::start(Some(&with_database(&args.postgres_url, &store_db))).await;
    let (reports, mut latencies, errors) = http_reports(&server, args).await;
    drop(server);
    for database in [&replay_db, &store_db] {
        admin(
            &args.postgres_url,
            &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        )
        .await;
    }
    latencies.0.sort();
    Ratio {
        work: "report with no action, PostgreSQL store".into(),
        limit_name: "UPDATE".into(),
        limit: replay.0,
        ctasd: reports,
        details: vec![format!(
            "replay {:.0} updates/s; ctasd {reports:.0} reports/s, {errors} errors, \
             p50 {:.1} ms  p99 {:.1} ms  p99/p50 {:.1}",
            replay.0,
            ms(latencies.quantile(0.5)),
            ms(latencies.quantile(0.99)),
            latencies.quantile(0.99).as_secs_f64() / latencies.quantile(0.5).as_secs_f64()
        )],
    }
}

/// K clients, each with its own streaming job on an in-memory catalog,
/// reporting RESTARTING and RUNNING in turn for the configured time:
/// reports per second, their latencies, errors.
async fn http_reports(server: &Server, args: &Load) -> (f64, Samples, usize) {
    let client = reqwest::Client::new();
    let base = server.base.clone();
    let registered = client
        .post(format!("{base}/v1/catalogs"))
        .json(&json!({"name": "mem", "options": {"type": "generic_in_memory"}}))
        .send()
        .await
        .unwrap();
    assert!(registered.status().is_success());
    let mut jobs = Vec::new();
    for worker in 0..args.clients {
        let job = json!({"name": format!("reporter {worker}"), "mode": "streaming", "hooks": [{"kind": "create_table_as",
            "target": {"catalog": "mem", "table": format!("t{worker}")},
            "table": {"columns": [{"name": "n", "type": "INT"}]}}]});
        let submitted: Value = client
            .post(format!("{base}/v1/jobs"))
            .json(&job)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = submitted["id"].as_str().expect("a job id").to_owned();
        for status in ["CREATED", "RUNNING"] {
            let reply = client
                .put(format!("{base}/v1/jobs/{id}/status"))
                .json(&json!({"status": status}))
                .send()
                .await
                .unwrap();
            assert!(reply.status().is_success());
        }
        jobs.push(id);
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let workers: Vec<_> = jobs
        .into_iter()
        .map(|id| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move {
                let (mut latencies, mut errors) = (Vec::new(), 0);
                for status in ["RESTARTING", "RUNNING"].iter().cycle() {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let begun = Instant::now();
                    let reply = client
                        .put(format!("{base}/v1/jobs/{id}/status"))
                        .json(&json!({"status": status}))
                        .send()
                        .await;
                    match reply {
                        Ok(reply) if reply.status().is_success() => {
                            let _ = reply.bytes().await;
                            latencies.push(begun.elapsed());
                        }
                        _ => errors += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let (mut latencies, mut errors) = (Samples::default(), 0);
    for worker in workers {
        let (times, failed) = worker.await.unwrap();
        latencies.0.extend(times);
        errors += failed;
    }
    let elapsed = started.elapsed().as_secs_f64();
    (latencies.0.len() as f64 / elapsed, latencies, errors)
}

/// A new database with ctasd's schema, as `ctasd migrate` makes it.
async fn migrated_database(args: &Load, prefix: &str) -> String {
    let database = unique_database(prefix);
    admin(&args.postgres_url, &format!("CREATE DATABASE {database}")).await;
    let scratch = tempfile::tempdir().unwrap();
    let migrated = Command::new(env!("CARGO_BIN_EXE_ctasd"))
        .args([
            "migrate",
            "--log",
            "warn",
            "--database-url",
            &with_database(&args.postgres_url, &database),
            "--data-dir",
        ])
        .arg(scratch.path())
        .status()
        .expect("run ctasd migrate");
    assert!(migrated.success(), "ctasd migrate on {database}");
    database
}

/// Runs `script` with pgbench; transactions (lifecycles) per second and
/// the average latency in ms.
fn pgbench(url: &str, script: &Path, args: &Load) -> (f64, f64) {
    let output = Command::new("pgbench")
        .args([
            "-n",
            "-c",
            &args.clients.to_string(),
            "-j",
            "2",
            "-T",
            &args.seconds.to_string(),
            "-f",
        ])
        .arg(script)
        .arg(url)
        .output()
        .expect("run pgbench");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pgbench failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let figure = |prefix: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("pgbench printed no '{prefix}': {text}"))
    };
    (figure("tps = "), figure("latency average = "))
}

type StepSamples = std::collections::BTreeMap<&'static str, Samples>;

/// K clients running lifecycles for the configured time: jobs per
/// second, latencies by step, errors.
async fn http_lifecycles(
    server: &Server,
    args: &Load,
    target_db: &str,
) -> (f64, usize, StepSamples, usize) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients)
        .build()
        .unwrap();
    let base = server.base.clone();
    let target_url = with_database(&args.postgres_url, target_db);
    let rest = target_url.split_once("//").unwrap().1;
    let (user, rest) = rest.split_once('@').unwrap_or(("postgres", rest));
    let host_port = rest.split('/').next().unwrap();
    let registered = client
        .post(format!("{base}/v1/catalogs"))
        .json(&json!({"name": "pg", "options": {"type": "jdbc",
            "base-url": format!("jdbc:postgresql://{host_port}"),
            "default-database": target_db, "username": user, "password": "unused"}}))
        .send()
        .await
        .unwrap();
    assert!(
        registered.status().is_success(),
        "{}",
        registered.text().await.unwrap_or_default()
    );

    let samples: Arc<Mutex<StepSamples>> = Arc::default();
    let errors = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let workers: Vec<_> = (0..args.clients)
        .map(|worker| {
            let (client, base, samples) = (client.clone(), base.clone(), samples.clone());
            let (errors, finished) = (errors.clone(), finished.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while Instant::now() < deadline {
                    let table = format!("t_{worker}_{n}");
                    n += 1;
                    let job = json!({"name": table, "mode": "batch", "hooks": [{"kind": "create_table_as",
                        "target": {"catalog": "pg", "table": table},
                        "table": {"columns": [{"name": "n", "type": "INT"}]}}]});
                    let timed = |step: &'static str, request: reqwest::RequestBuilder| {
                        let samples = samples.clone();
                        async move {
                            let begun = Instant::now();
                            let reply = request.send().await.ok().filter(|r| r.status().is_success());
                            let body: Option<Value> = match reply {
                                Some(reply) => reply.json().await.ok(),
                                None => None,
                            };
                            samples.lock().await.entry(step).or_default().0.push(begun.elapsed());
                            body
                        }
                    };
                    let Some(submitted) = timed("POST /v1/jobs", client.post(format!("{base}/v1/jobs")).json(&job)).await else {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    };
                    let id = submitted["id"].as_str().unwrap_or_default().to_owned();
                    let mut ok = true;
                    for (step, status) in [("PUT CREATED", "CREATED"), ("PUT RUNNING", "RUNNING"), ("PUT FINISHED", "FINISHED")] {
                        let request = client.put(format!("{base}/v1/jobs/{id}/status")).json(&json!({"status": status}));
                        ok = ok && timed(step, request).await.is_some();
                    }
                    ok = ok && timed("GET /v1/jobs/{job}", client.get(format!("{base}/v1/jobs/{id}"))).await.is_some();
                    let counter = if ok { &finished } else { &errors };
                    counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let samples = std::mem::take(&mut *samples.lock().await);
    let finished = finished.load(std::sync::atomic::Ordering::Relaxed);
    (
        finished as f64 / elapsed,
        finished,
        samples,
        errors.load(std::sync::atomic::Ordering::Relaxed),
    )
}

#[derive(Clone, Copy)]
enum Store {
    Sqlite,
    Postgres,
}

async fn read_ratio(args: &Load, store: Store) -> Ratio {
    let database = unique_database("ctasd_ratio_reads");
    let (server, name) = match store {
        Store::Sqlite => (Server::start(None).await, "SQLite"),
        Store::Postgres => {
            admin(&args.postgres_url, &format!("CREATE DATABASE {database}")).await;
            (
                Server::start(Some(&with_database(&args.postgres_url, &database))).await,
                "PostgreSQL",
            )
        }
    };
    let client = reqwest::Client::new();
    let base = &server.base;
    let id = support::submit_mem_job(&client, base, "read me").await;
    for status in ["CREATED", "RUNNING", "FINISHED"] {
        let reply = client
            .put(format!("{base}/v1/jobs/{id}/status"))
            .json(&json!({"status": status}))
            .send()
            .await
            .unwrap();
        assert!(reply.status().is_success());
    }
    let health = wrk(&format!("{base}/healthz"), args);
    let get_job = wrk(&format!("{base}/v1/jobs/{id}"), args);
    drop(server);
    if let Store::Postgres = store {
        admin(
            &args.postgres_url,
            &format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        )
        .await;
    }
    Ratio {
        work: format!("GET /v1/jobs/{{job}}, {name} store"),
        limit_name: "/healthz".into(),
        limit: health.0,
        ctasd: get_job.0,
        details: vec![
            format!("/healthz p50 {:.2} ms p99 {:.2} ms", health.1, health.2),
            format!(
                "GET /v1/jobs/{{job}} p50 {:.2} ms p99 {:.2} ms, {} non-2xx",
                get_job.1, get_job.2, get_job.3
            ),
        ],
    }
}

/// wrk on `url`: requests per second, p50 and p99 in ms, non-2xx answers.
fn wrk(url: &str, args: &Load) -> (f64, f64, f64, u64) {
    let output = Command::new("wrk")
        .args([
            "-t",
            // wrk refuses more threads than connections.
            &args.clients.min(2).to_string(),
            "-c",
            &args.clients.to_string(),
            "-d",
            &format!("{}s", args.seconds),
            "--latency",
            url,
        ])
        .output()
        .expect("run wrk");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "wrk failed: {text}");
    let after = |prefix: &str| -> Option<&str> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .map(str::trim)
    };
    let per_second = after("Requests/sec:")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("wrk: {text}"));
    let latency = |q: &str| after(q).map_or(f64::NAN, parse_duration_ms);
    let non_2xx = after("Non-2xx or 3xx responses:")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (per_second, latency("50%"), latency("99%"), non_2xx)
}

/// `812.00us`, `1.20ms`, `2.00s` as milliseconds.
fn parse_duration_ms(text: &str) -> f64 {
    let number = |suffix: &str| {
        text.strip_suffix(suffix)
            .and_then(|n| n.parse::<f64>().ok())
    };
    number("us")
        .map(|us| us / 1000.0)
        .or_else(|| number("ms"))
        .or_else(|| number("s").map(|s| s * 1000.0))
        .unwrap_or(f64::NAN)
}
