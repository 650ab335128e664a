//! The crash suite: a real `ctasd serve` kills itself with SIGKILL at each
//! crash point of the transition path (`crate::fault`), in the middle of a
//! dozen concurrent batch jobs, and is started again; the engines' reports
//! are retried as a real engine would. After each trial: every finished job's
//! tables hold exactly its rows, published once; failed and cancelled jobs
//! left the targets as they were and no staging behind; no action is left
//! unfinished. Trials per crash point: `CTASD_CRASH_TRIALS` (default 10).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{ServerProcess, figure, sqlite_database};
use crate::staging::part_ids;

const JOBS: usize = 12;

/// Where one trial's systems live: the store, a SQLite database, a warehouse.
struct World {
    _temp: tempfile::TempDir,
    data_dir: PathBuf,
    lite: PathBuf,
    warehouse: PathBuf,
}

impl World {
    async fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let (data_dir, lite, warehouse) = (
            temp.path().join("data"),
            temp.path().join("lite"),
            temp.path().join("warehouse"),
        );
        std::fs::create_dir_all(&lite).unwrap();
        std::fs::create_dir_all(warehouse.join("db")).unwrap();
        sqlite_database(&lite, "main", "SELECT 1").await;
        // Every other job replaces a table that exists already.
        for job in (0..JOBS).filter(|job| replaces(*job)) {
            sqlite_database(
                &lite,
                "main",
                &format!("CREATE TABLE t{job} (id BIGINT NOT NULL, note TEXT); INSERT INTO t{job} VALUES (999, 'old')"),
            )
            .await;
            let table = warehouse.join("db").join(format!("t{job}"));
            std::fs::create_dir_all(&table).unwrap();
            std::fs::write(table.join("part-999"), b"old").unwrap();
        }
        Self {
            _temp: temp,
            data_dir,
            lite,
            warehouse,
        }
    }

    async fn sqlite_ids(&self, table: &str) -> Option<Vec<i64>> {
        use sqlx::Connection;
        let path = self.lite.join("main.db");
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let sql = format!("SELECT id FROM \"{table}\" ORDER BY id");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut conn)
            .await
            .ok()
    }

    async fn sqlite_tables(&self) -> Vec<String> {
        use sqlx::Connection;
        let path = self.lite.join("main.db");
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&mut conn)
            .await
            .unwrap()
    }

    fn file_ids(&self, table: &str) -> Option<Vec<i64>> {
        part_ids(&self.warehouse.join("db").join(table))
    }

    fn directories(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.warehouse.join("db"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }
}

fn replaces(job: usize) -> bool {
    job % 2 == 1
}

fn final_statuses(job: usize) -> &'static [&'static str] {
    match job % 3 {
        0 => &["FINISHED"],
        1 => &["FAILED"],
        _ => &["CANCELLING", "CANCELED"],
    }
}

fn rows(job: usize) -> Vec<i64> {
    vec![job as i64 * 10 + 1, job as i64 * 10 + 2]
}

fn job_id(trial: u64, job: usize) -> String {
    format!("{:016x}{:016x}", trial, job as u64 + 1)
}

/// One simulated engine: submits its job, reports its statuses and writes
/// its rows, and retries the step it was at when the server went away.
struct Engine {
    job: usize,
    id: String,
    /// Steps done: 0 submitted, 1 CREATED (and rows written), 2 RUNNING, ...
    done: usize,
}

impl Engine {
    fn steps(&self) -> usize {
        3 + final_statuses(self.job).len()
    }

    /// Runs until finished or until the server stops answering.
    async fn run(&mut self, client: &reqwest::Client, base: &str, world: &World) {
        while self.done < self.steps() {
            let step = self.done;
            let reply = match step {
                0 => {
                    let hook = |catalog: &str| {
                        json!({"kind": "create_or_replace_table_as",
                               "target": {"catalog": catalog, "table": format!("t{}", self.job)},
                               "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                                                     {"name": "note", "type": "STRING"}]}})
                    };
                    let body = json!({"id": self.id, "name": format!("j{}", self.job),
                                      "mode": "batch", "hooks": [hook("lite"), hook("fs")]});
                    client
                        .post(format!("{base}/v1/jobs"))
                        .json(&body)
                        .send()
                        .await
                }
                _ => {
                    let status = match step {
                        1 => "CREATED",
                        2 => "RUNNING",
                        _ => final_statuses(self.job)[step - 3],
                    };
                    client
                        .put(format!("{base}/v1/jobs/{}/status", self.id))
                        .json(&json!({"status": status}))
                        .send()
                        .await
                }
            };
            let Ok(reply) = reply else { return };
            let code = reply.status();
            let Ok(body) = reply.json::<Value>().await else {
                return;
            };
            assert!(
                code.is_success(),
                "job {} step {step}: {code} {body}",
                self.job
            );
            if step == 1 {
                self.write_rows(&body["job"], world).await;
            }
            self.done += 1;
        }
    }

    /// What the engine's sink does: rows into the staging table and files
    /// into the staging directory. Idempotent, as a retried write would be.
    async fn write_rows(&self, job: &Value, world: &World) {
        let table = job["hooks"][0]["write_location"]["name"].as_str().unwrap();
        let values: Vec<String> = rows(self.job)
            .iter()
            .map(|id| format!("({id}, 'n{id}')"))
            .collect();
        sqlite_database(
            &world.lite,
            "main",
            &format!(
                "DELETE FROM \"{table}\"; INSERT INTO \"{table}\" VALUES {}",
                values.join(", ")
            ),
        )
        .await;
        let directory = Path::new(job["hooks"][1]["write_location"]["path"].as_str().unwrap());
        for id in rows(self.job) {
            std::fs::write(directory.join(format!("part-{id}")), b"row").unwrap();
        }
    }
}

/// What one trial saw, for the figures.
#[derive(Default)]
struct Outcome {
    killed: bool,
    commits_found_done: usize,
    aborts_found_done: usize,
}

async fn start(world: &World, kill_at: Option<&str>) -> ServerProcess {
    let env: Vec<(&str, &str)> = kill_at
        .map(|spec| vec![("CTASD_FAULT_KILL_AT", spec)])
        .unwrap_or_default();
    ServerProcess::start_with_env(&world.data_dir, &env)
}

async fn trial(trial: u64, kill_at: &str) -> Outcome {
    let world = World::new().await;
    let client = reqwest::Client::new();
    let mut server = start(&world, Some(kill_at)).await;
    for (name, options) in [
        (
            "lite",
            json!({"type": "jdbc", "base-url": format!("jdbc:sqlite:{}", world.lite.display()),
                   "default-database": "main"}),
        ),
        (
            "fs",
            json!({"type": "filesystem", "path": world.warehouse, "default-database": "db"}),
        ),
    ] {
        let registered = client
            .post(format!("{}/v1/catalogs", server.base))
            .json(&json!({"name": name, "options": options}))
            .send()
            .await
            .unwrap();
        assert_eq!(registered.status(), 201);
    }

    let mut engines: Vec<Engine> = (0..JOBS)
        .map(|job| Engine {
            job,
            id: job_id(trial, job),
            done: 0,
        })
        .collect();
    run_engines(&mut engines, &client, &server.base, &world).await;
    let killed = server.wait_for_sigkill(Duration::from_secs(10));
    let mut outcome = Outcome {
        killed: killed == Some(true),
        ..Outcome::default()
    };
    if killed.is_none() {
        server.stop();
    }

    // The engines retry against the restarted server.
    let server = start(&world, None).await;
    run_engines(&mut engines, &client, &server.base, &world).await;
    assert!(
        engines.iter().all(|e| e.done == e.steps()),
        "every engine got through after the restart"
    );

    let jobs = settled(&client, &server.base, &engines).await;
    for (engine, job) in engines.iter().zip(&jobs) {
        let context = format!("{kill_at}, job {}: {job}", engine.job);
        let expected = *final_statuses(engine.job).last().unwrap();
        assert_eq!(job["status"], expected, "{context}");
        for action in job["actions"].as_array().unwrap() {
            assert_eq!(action["state"], "done", "{context}");
            match action["action"].as_str().unwrap() {
                "commit" if action["outcome"] == "already committed" => {
                    outcome.commits_found_done += 1
                }
                "abort" if action["attempts"].as_u64() > Some(1) => outcome.aborts_found_done += 1,
                _ => {}
            }
        }
        let table = format!("t{}", engine.job);
        let before = replaces(engine.job).then(|| vec![999]);
        let (in_sqlite, in_files) = (world.sqlite_ids(&table).await, world.file_ids(&table));
        if expected == "FINISHED" {
            let commits = job["actions"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["action"] == "commit")
                .count();
            assert_eq!(commits, 2, "one commit per hook: {context}");
            assert_eq!(in_sqlite, Some(rows(engine.job)), "{context}");
            assert_eq!(in_files, Some(rows(engine.job)), "{context}");
        } else {
            assert_eq!(in_sqlite, before, "target untouched: {context}");
            assert_eq!(in_files, before, "target untouched: {context}");
        }
    }
    let expected_tables: Vec<String> = {
        let mut names: Vec<String> = (0..JOBS)
            .filter(|job| replaces(*job) || final_statuses(*job) == ["FINISHED"])
            .map(|job| format!("t{job}"))
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        world.sqlite_tables().await,
        expected_tables,
        "{kill_at}: no staging or replaced table left in SQLite"
    );
    assert_eq!(
        world.directories(),
        expected_tables,
        "{kill_at}: no staging or replaced directory left in the warehouse"
    );
    server.stop();
    outcome
}

/// Every job once none of its actions is pending any more.
async fn settled(client: &reqwest::Client, base: &str, engines: &[Engine]) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut jobs = Vec::new();
        for engine in engines {
            let job: Value = client
                .get(format!("{base}/v1/jobs/{}", engine.id))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            jobs.push(job);
        }
        let pending = jobs
            .iter()
            .flat_map(|job| job["actions"].as_array().unwrap())
            .any(|a| a["state"] == "pending");
        if !pending || tokio::time::Instant::now() >= deadline {
            return jobs;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// All engines at once, each until it is done or the server stops answering.
async fn run_engines(engines: &mut [Engine], client: &reqwest::Client, base: &str, world: &World) {
    futures_util::future::join_all(engines.iter_mut().map(|e| e.run(client, base, world))).await;
}

/// How often each point is reached in one trial, at least: the kill lands
/// on a reach chosen among these.
fn reaches(point: &str) -> u64 {
    let finished = (0..JOBS).filter(|j| j % 3 == 0).count() as u64;
    let ended = JOBS as u64 - finished;
    match point {
        // CREATED, RUNNING and one or two final statuses per job.
        "status-stored" => (0..JOBS).map(|j| 2 + final_statuses(j).len() as u64).sum(),
        "staging-created" => 2 * JOBS as u64,
        "commit-midway" => 2 * (0..JOBS).filter(|j| j % 3 == 0 && replaces(*j)).count() as u64,
        "commit-applied" => 2 * finished,
        // Only a directory is removed in steps.
        "abort-midway" => ended,
        "abort-applied" => 2 * ended,
        other => panic!("no reach count for {other}"),
    }
}

#[tokio::test]
async fn killed_at_every_crash_point_the_server_publishes_each_table_once_and_leaves_no_staging() {
    let trials: u64 = std::env::var("CTASD_CRASH_TRIALS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    let points = [
        "status-stored",
        "staging-created",
        "commit-midway",
        "commit-applied",
        "abort-midway",
        "abort-applied",
    ];
    let mut report = Vec::new();
    for (p, point) in points.iter().enumerate() {
        let mut figures = (0, 0, 0, 0);
        for t in 0..trials {
            let number = (p as u64) * 1000 + t;
            // Spread the kill over the reaches of the point, reproducibly.
            let nth = 1 + (number.wrapping_mul(2654435761) >> 7) % reaches(point);
            let outcome = trial(number, &format!("{point}:{nth}")).await;
            figures.0 += 1;
            figures.1 += usize::from(outcome.killed);
            figures.2 += outcome.commits_found_done;
            figures.3 += outcome.aborts_found_done;
        }
        assert_eq!(
            figures.1, figures.0,
            "{point}: the process was killed in every trial"
        );
        report.push(format!(
            "crash suite: {point:<16} trials {:>3}, killed {:>3}, all checks passed; \
             commits found already done after the restart {:>3}, aborts attempted more than once {:>3}",
            figures.0, figures.1, figures.2, figures.3
        ));
    }
    for line in report {
        figure(&line);
    }
}
