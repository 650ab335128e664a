//! Watching at scale: ctasd (the bench build, embedded SQLite) watching
//! thousands of jobs on a stand-in Flink JobManager that answers
//! `/config`, `/jobs/overview`, `/jobs/<id>` and `/jobs/<id>/exceptions`
//! in Flink 2.3's format, each answer in one write with `TCP_NODELAY`, and
//! counts every request.
//!
//! For each size it submits that many jobs (a hook each on the in-memory
//! catalog, or with `--catalog filesystem` on a filesystem catalog in a
//! scratch directory) whose Flink jobs the stand-in lists as RUNNING, and
//! prints:
//!
//! - **catch-up**: from the last submission until ctasd shows every job
//!   RUNNING, at the engine's default request budget;
//! - **idle**, nothing moving: ctasd's own CPU (`/proc/<pid>/stat`) per
//!   watched job per poll, the poll period (gaps between overview
//!   requests) p50/p99/max, requests per poll, resident memory;
//! - **finishing**, `--finish-rate` jobs a second: the poll period again,
//!   requests per finished job, and the publish latency, from the Flink
//!   job's end time to its commit done in ctasd's ledger, p50/p99/max,
//!   with its steps: until a listing the stand-in served showed the job
//!   ended (the wait for a poll), until ctasd read the job's details (the
//!   listing read up to its entry), until the commit was done.
//!
//! `--listed` adds that many ended jobs the cluster lists and ctasd does
//! not watch (a busy cluster keeps ended jobs an hour).
//!
//! ```sh
//! cargo bench --bench watch -- --watched 1000,10000,50000
//! cargo bench --bench watch -- --watched 1000 --listed 200000
//! ```

use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use clap::Parser;
use serde_json::{Value, json};

mod support;
use support::{Samples, Server, get_json, ms, post_ok};

#[derive(Parser)]
struct Args {
    /// Watched jobs, one run each.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
    watched: Vec<usize>,
    /// Ended jobs the cluster lists besides, not watched.
    #[arg(long, default_value_t = 0)]
    listed: usize,
    /// The engine's poll interval.
    #[arg(long, default_value_t = 500)]
    poll_interval_ms: u64,
    /// How long nothing moves while idle cost is measured.
    #[arg(long, default_value_t = 20)]
    idle_seconds: u64,
    /// Jobs finished a second while publish latency is measured.
    #[arg(long, default_value_t = 10)]
    finish_rate: usize,
    #[arg(long, default_value_t = 20)]
    finish_seconds: u64,
    /// Where the jobs' tables go.
    #[arg(long, value_enum, default_value_t = Catalog::Memory)]
    catalog: Catalog,
    /// Submissions in flight at once.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    #[command(flatten)]
    common: support::CommonArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Catalog {
    /// The in-memory catalog: every table kept in ctasd's memory.
    Memory,
    /// A scratch warehouse directory: submissions are slower, each staging
    /// synced to disk.
    Filesystem,
}

/// Flink's job statuses, in the order `/jobs/<id>` lists their timestamps.
const FLINK_STATUSES: [&str; 11] = [
    "INITIALIZING",
    "CREATED",
    "RUNNING",
    "FAILING",
    "FAILED",
    "CANCELLING",
    "CANCELED",
    "FINISHED",
    "RESTARTING",
    "SUSPENDED",
    "RECONCILING",
];

/// One Flink job of the stand-in.
struct FlinkJob {
    id: String,
    state: &'static str,
    started: i64,
    running: i64,
    ended: i64,
    /// Its line of `/jobs/overview`, rendered when it changes.
    line: String,
}

impl FlinkJob {
    fn new(id: String, state: &'static str, started: i64, ended: i64) -> Self {
        let mut job = Self {
            id,
            state,
            started,
            running: started + 150,
            ended,
            line: String::new(),
        };
        job.render();
        job
    }

    fn render(&mut self) {
        let last_modification = if self.ended > 0 {
            self.ended
        } else {
            self.running + 40
        };
        let duration = if self.ended > 0 {
            self.ended - self.started
        } else {
            now_ms() - self.started
        };
        let (running, finished) = if self.ended > 0 { (0, 1) } else { (1, 0) };
        self.line = json!({
            "jid": self.id, "name": "insert-into_ctas", "state": self.state,
            "start-time": self.started, "end-time": if self.ended > 0 { self.ended } else { -1 },
            "duration": duration, "last-modification": last_modification,
            "tasks": {"total": 1, "created": 0, "scheduled": 0, "deploying": 0,
                      "running": running, "finished": finished, "canceling": 0,
                      "canceled": 0, "failed": 0, "reconciling": 0, "initializing": 0}
        })
        .to_string();
    }

    fn details(&self) -> Value {
        let mut timestamps = serde_json::Map::new();
        for status in FLINK_STATUSES {
            let at = match status {
                "INITIALIZING" => self.started,
                "CREATED" => self.started + 100,
                "RUNNING" => self.running,
                "FINISHED" if self.ended > 0 => self.ended,
                _ => 0,
            };
            timestamps.insert(status.into(), at.into());
        }
        json!({"jid": self.id, "name": "insert-into_ctas", "isStoppable": false,
               "state": self.state, "job-type": "BATCH", "start-time": self.started,
               "end-time": if self.ended > 0 { self.ended } else { -1 },
               "duration": 1000, "maxParallelism": -1, "now": now_ms(),
               "timestamps": timestamps, "vertices": [],
               "status-counts": {"RUNNING": 1}, "plan": {"jid": self.id, "nodes": []}})
    }
}

#[derive(Default)]
struct Counts {
    overview: u64,
    details: u64,
    exceptions: u64,
    config: u64,
    overview_at: Vec<Instant>,
}

/// When the stand-in first showed each ended job (unix ms): in a listing
/// that ctasd requested, and in its details.
#[derive(Default)]
struct Shown {
    /// Jobs ended and not yet listed so.
    unlisted: Vec<String>,
    listed: HashMap<String, i64>,
    detailed: HashMap<String, i64>,
}

#[derive(Default)]
struct Cluster {
    jobs: Vec<FlinkJob>,
    index: HashMap<String, usize>,
    /// `/jobs/overview` as last rendered; `None` once a job changed.
    rendered: Option<Bytes>,
    counts: Counts,
    shown: Shown,
}

impl Cluster {
    fn add(&mut self, job: FlinkJob) {
        self.index.insert(job.id.clone(), self.jobs.len());
        self.jobs.push(job);
        self.rendered = None;
    }

    fn overview(&mut self) -> Bytes {
        if let Some(rendered) = &self.rendered {
            return rendered.clone();
        }
        let size: usize = self.jobs.iter().map(|j| j.line.len() + 1).sum();
        let mut body = String::with_capacity(size + 16);
        body.push_str("{\"jobs\":[");
        for (i, job) in self.jobs.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(&job.line);
        }
        body.push_str("]}");
        let rendered = Bytes::from(body);
        self.rendered = Some(rendered.clone());
        rendered
    }
}

type Shared = Arc<Mutex<Cluster>>;

fn json_answer(body: Bytes) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json; charset=UTF-8")],
        body,
    )
        .into_response()
}

async fn config(State(cluster): State<Shared>) -> Response {
    cluster.lock().unwrap().counts.config += 1;
    json_answer(Bytes::from_static(
        br#"{"refresh-interval":3000,"timezone-name":"Coordinated Universal Time","timezone-offset":0,"flink-version":"2.3.0","flink-revision":"bench","features":{"web-submit":false,"web-cancel":false,"web-rescale":false,"web-history":false}}"#,
    ))
}

async fn overview(State(cluster): State<Shared>) -> Response {
    let mut cluster = cluster.lock().unwrap();
    cluster.counts.overview += 1;
    cluster.counts.overview_at.push(Instant::now());
    let at = now_ms();
    let shown = &mut cluster.shown;
    for id in std::mem::take(&mut shown.unlisted) {
        shown.listed.insert(id, at);
    }
    json_answer(cluster.overview())
}

async fn job(State(cluster): State<Shared>, Path(id): Path<String>) -> Response {
    let mut cluster = cluster.lock().unwrap();
    cluster.counts.details += 1;
    match cluster.index.get(&id) {
        Some(&i) => {
            if cluster.jobs[i].ended > 0 {
                cluster.shown.detailed.entry(id).or_insert_with(now_ms);
            }
            json_answer(Bytes::from(cluster.jobs[i].details().to_string()))
        }
        None => (
            StatusCode::NOT_FOUND,
            json_answer(Bytes::from_static(br#"{"errors":["Job not found."]}"#)),
        )
            .into_response(),
    }
}

async fn exceptions(State(cluster): State<Shared>, Path(_id): Path<String>) -> Response {
    cluster.lock().unwrap().counts.exceptions += 1;
    json_answer(Bytes::from_static(
        br#"{"root-exception":null,"timestamp":null,"all-exceptions":[],"truncated":false,"exceptionHistory":{"entries":[],"truncated":false}}"#,
    ))
}

async fn start_stand_in(cluster: Shared) -> String {
    let router = axum::Router::new()
        .route("/config", axum::routing::get(config))
        .route("/jobs/overview", axum::routing::get(overview))
        .route("/jobs/{id}", axum::routing::get(job))
        .route("/jobs/{id}/exceptions", axum::routing::get(exceptions))
        .with_state(cluster);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Each answer goes out at once, not held back to be joined with more.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn flink_id(n: usize) -> String {
    format!("{n:032x}")
}

/// ctasd's own CPU time so far (user and system), from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32, ticks_per_second: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command (which may hold spaces) start at state.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / ticks_per_second
}

/// One `/proc/<pid>/status` figure (`VmRSS`, `RssAnon`, `RssFile`), in MiB.
fn rss_mib(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Gaps between consecutive overview requests made since `from`.
fn poll_periods(cluster: &Shared, from: Instant) -> Samples {
    let cluster = cluster.lock().unwrap();
    let at: Vec<Instant> = cluster
        .counts
        .overview_at
        .iter()
        .copied()
        .filter(|t| *t >= from)
        .collect();
    let mut gaps = Samples(at.windows(2).map(|w| w[1] - w[0]).collect());
    gaps.0.sort();
    gaps
}

fn quantiles(samples: &Samples) -> String {
    if samples.0.is_empty() {
        return "no samples".into();
    }
    format!(
        "{:.0} / {:.0} / {:.0} ms",
        ms(samples.quantile(0.5)),
        ms(samples.quantile(0.99)),
        ms(*samples.0.last().unwrap())
    )
}

async fn count_running(client: &reqwest::Client, base: &str) -> i64 {
    let overview = get_json(client, &format!("{base}/v1/overview")).await;
    overview["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "RUNNING")
        .map(|c| c["jobs"].as_i64().unwrap_or(0))
        .sum()
}

async fn submit_all(
    client: &reqwest::Client,
    base: &str,
    cluster: &Shared,
    watched: usize,
    clients: usize,
) -> Vec<String> {
    let started = now_ms() - 1000;
    {
        let mut cluster = cluster.lock().unwrap();
        for n in 0..watched {
            cluster.add(FlinkJob::new(flink_id(n), "RUNNING", started, 0));
        }
    }
    let ids = Arc::new(Mutex::new(vec![String::new(); watched]));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (client, base, ids, next) =
            (client.clone(), base.to_owned(), ids.clone(), next.clone());
        tasks.spawn(async move {
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= watched {
                    return;
                }
                let job = json!({"name": format!("w{n}"), "mode": "batch", "engine": "flink",
                    "engine_job_id": flink_id(n),
                    "hooks": [{"kind": "create_table_as",
                               "target": {"catalog": "tables", "table": format!("t{n}")},
                               "table": {"columns": [{"name": "n", "type": "INT"}]}}]});
                let job = post_ok(&client, &format!("{base}/v1/jobs"), &job).await;
                ids.lock().unwrap()[n] = job["id"].as_str().unwrap().to_owned();
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    Arc::try_unwrap(ids).unwrap().into_inner().unwrap()
}

async fn run(args: &Args, watched: usize, ticks_per_second: f64) {
    let cluster: Shared = Arc::default();
    let flink_url = start_stand_in(cluster.clone()).await;
    {
        let mut cluster = cluster.lock().unwrap();
        let long_ago = now_ms() - 3_000_000;
        for n in 0..args.listed {
            let id = flink_id(usize::MAX / 2 + n);
            cluster.add(FlinkJob::new(id, "FINISHED", long_ago, long_ago + 60_000));
        }
    }
    let server = Server::start(None).await;
    let (base, pid) = (server.base.clone(), server.pid());
    let client = reqwest::Client::new();
    let warehouse = tempfile::tempdir().unwrap();
    let options = match args.catalog {
        Catalog::Filesystem => {
            json!({"type": "filesystem", "path": warehouse.path(), "default-database": "db"})
        }
        Catalog::Memory => json!({"type": "generic_in_memory"}),
    };
    let catalog = json!({"name": "tables", "options": options});
    post_ok(&client, &format!("{base}/v1/catalogs"), &catalog).await;
    let engine =
        json!({"name": "flink", "url": flink_url, "poll_interval_ms": args.poll_interval_ms});
    post_ok(&client, &format!("{base}/v1/engines"), &engine).await;

    let submitting = Instant::now();
    let ids = submit_all(&client, &base, &cluster, watched, args.clients).await;
    let submitted = submitting.elapsed();
    let caught_up = loop {
        if count_running(&client, &base).await >= watched as i64 {
            break Some(submitting.elapsed().saturating_sub(submitted));
        }
        if submitting.elapsed() > submitted + Duration::from_secs(900) {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let caught_up = match caught_up {
        Some(after) => format!("{:.1} s", after.as_secs_f64()),
        None => "not within 900 s".into(),
    };
    println!(
        "watch: {watched:>6} watched, {:>6} listed besides | submitted in {:.1} s, all RUNNING {caught_up} after the last",
        args.listed,
        submitted.as_secs_f64()
    );

    // Idle: nothing moves.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_from = Instant::now();
    let (cpu_before, counts_before) = (cpu_seconds(pid, ticks_per_second), totals(&cluster));
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let cpu = cpu_seconds(pid, ticks_per_second) - cpu_before;
    let counts = totals(&cluster).minus(counts_before);
    let polls = counts.overview.max(1) as f64;
    let periods = poll_periods(&cluster, idle_from);
    println!(
        "watch: {watched:>6} idle     | CPU {:.3} s/s, {:.2} µs per watched job per poll | poll period p50/p99/max {} | {:.2} requests per poll | RSS {:.0} MiB ({:.0} anonymous, {:.0} file)",
        cpu / args.idle_seconds as f64,
        cpu * 1e6 / (polls * watched as f64),
        quantiles(&periods),
        counts.all() as f64 / polls,
        rss_mib(pid, "VmRSS"),
        rss_mib(pid, "RssAnon"),
        rss_mib(pid, "RssFile"),
    );

    // Finishing: `finish_rate` jobs a second end in Flink.
    let finishing_from = Instant::now();
    let counts_before = totals(&cluster);
    let mut ended: Vec<(usize, i64)> = Vec::new();
    let mut next = 0;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    while finishing_from.elapsed() < Duration::from_secs(args.finish_seconds) && next < watched {
        ticker.tick().await;
        let due = (finishing_from.elapsed().as_secs_f64() * args.finish_rate as f64) as usize;
        let mut cluster = cluster.lock().unwrap();
        while next < due.min(watched) {
            let at = now_ms();
            let index = cluster.index[&flink_id(next)];
            let job = &mut cluster.jobs[index];
            job.state = "FINISHED";
            job.ended = at;
            job.render();
            cluster.rendered = None;
            cluster.shown.unlisted.push(flink_id(next));
            ended.push((next, at));
            next += 1;
        }
    }
    let periods = poll_periods(&cluster, finishing_from);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut latencies = Samples::default();
    // Where the time went: waiting for a poll to list the job ended, ctasd
    // reading the listing up to it and asking its details, and ctasd
    // applying FINISHED and committing.
    let mut steps: [Samples; 3] = Default::default();
    for (n, end) in &ended {
        loop {
            let job = get_json(&client, &format!("{base}/v1/jobs/{}", ids[*n])).await;
            let commit_done = job["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["trigger"] == "FINISHED" && a["state"] == "done")
                .filter_map(|a| a["updated_at"].as_str())
                .filter_map(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                .map(|at| at.timestamp_millis())
                .max();
            if let Some(done) = commit_done {
                let since = |from: i64, to: i64| Duration::from_millis((to - from).max(0) as u64);
                latencies.0.push(since(*end, done));
                let cluster = cluster.lock().unwrap();
                let flink_id = flink_id(*n);
                if let (Some(&listed), Some(&detailed)) = (
                    cluster.shown.listed.get(&flink_id),
                    cluster.shown.detailed.get(&flink_id),
                ) {
                    steps[0].0.push(since(*end, listed));
                    steps[1].0.push(since(listed, detailed));
                    steps[2].0.push(since(detailed, done));
                }
                break;
            }
            assert!(Instant::now() < deadline, "job {} never published", ids[*n]);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let counts = totals(&cluster).minus(counts_before);
    latencies.0.sort();
    for step in &mut steps {
        step.0.sort();
    }
    println!(
        "watch: {watched:>6} finishing {}/s | poll period p50/p99/max {} | {:.2} requests per finished job | end-time → commit done p50/p99/max {}",
        args.finish_rate,
        quantiles(&periods),
        (counts.details + counts.exceptions) as f64 / ended.len().max(1) as f64,
        quantiles(&latencies)
    );
    println!(
        "watch: {watched:>6} its steps p50/p99/max | end-time → listed ended {} | listed → details read {} | details read → commit done {}",
        quantiles(&steps[0]),
        quantiles(&steps[1]),
        quantiles(&steps[2]),
    );
}

#[derive(Clone, Copy)]
struct Totals {
    overview: u64,
    details: u64,
    exceptions: u64,
    config: u64,
}

impl Totals {
    fn minus(self, before: Totals) -> Totals {
        Totals {
            overview: self.overview - before.overview,
            details: self.details - before.details,
            exceptions: self.exceptions - before.exceptions,
            config: self.config - before.config,
        }
    }

    fn all(self) -> u64 {
        self.overview + self.details + self.exceptions + self.config
    }
}

fn totals(cluster: &Shared) -> Totals {
    let counts = &cluster.lock().unwrap().counts;
    Totals {
        overview: counts.overview,
        details: counts.details,
        exceptions: counts.exceptions,
        config: counts.config,
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let ticks = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0);
    for &watched in &args.watched {
        run(&args, watched, ticks).await;
    }
}
