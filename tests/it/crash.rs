//! The crash suite: a real `ctasd serve` kills itself with SIGKILL at each
//! crash point of the transition path (`crate::fault`), in the middle of a
//! dozen concurrent batch jobs, and is started again; the engines' reports
//! are retried as a real engine would. Each job has a hook on every
//! available system (SQLite and a warehouse directory always, PostgreSQL
//! and MariaDB when configured). After each trial: every finished job's
//! tables hold exactly its rows, published once; failed and cancelled jobs
//! left the targets as they were and no staging behind; no action is left
//! unfinished. Trials per crash point: `CTASD_CRASH_TRIALS` (default 10).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{ServerProcess, figure};
use crate::staging::{World, world_options};

const JOBS: usize = 12;

/// One trial's store, and every available system with a catalog on it:
/// SQLite and a warehouse always, PostgreSQL and MariaDB when configured.
struct Systems {
    _temp: tempfile::TempDir,
    data_dir: PathBuf,
    /// Each system, its catalog options, and the database its tables go to.
    worlds: Vec<(World, Value, String)>,
}

impl Systems {
    async fn new() -> Self {
        let temp = tempfile::tempdir().unwrap();
        let worlds = world_options().await;
        for (world, _, _) in &worlds {
            if let World::Files(root) = world {
                std::fs::create_dir_all(root.path().join("db")).unwrap();
            }
            // Every other job replaces a table that exists already.
            for job in (0..JOBS).filter(|job| replaces(*job)) {
                world.create_old(&format!("t{job}")).await;
            }
        }
        Self {
            data_dir: temp.path().join("data"),
            _temp: temp,
            worlds,
        }
    }

    fn catalog(index: usize) -> String {
        format!("s{index}")
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
    async fn run(&mut self, client: &reqwest::Client, base: &str, systems: &Systems) {
        while self.done < self.steps() {
            let step = self.done;
            let reply = match step {
                0 => {
                    let hooks: Vec<Value> = (0..systems.worlds.len())
                        .map(|index| {
                            json!({"kind": "create_or_replace_table_as",
                                   "target": {"catalog": Systems::catalog(index),
                                              "database": systems.worlds[index].2,
                                              "table": format!("t{}", self.job)},
                                   "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                                                         {"name": "note", "type": "VARCHAR(20)"}]}})
                        })
                        .collect();
                    let body = json!({"id": self.id, "name": format!("j{}", self.job),
                                      "mode": "batch", "hooks": hooks});
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
                self.write_rows(&body["job"], systems).await;
            }
            self.done += 1;
        }
    }

    /// What the engine's sink does: rows into each staging. Rewritten
    /// whole if the report is retried, as a retried write would be.
    async fn write_rows(&self, job: &Value, systems: &Systems) {
        for (index, (world, _, _)) in systems.worlds.iter().enumerate() {
            let staging = job["hooks"][index]["write_location"]["name"]
                .as_str()
                .unwrap();
            world.insert(staging, &rows(self.job)).await;
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

async fn start(systems: &Systems, kill_at: Option<&str>) -> ServerProcess {
    let env: Vec<(&str, &str)> = kill_at
        .map(|spec| vec![("CTASD_FAULT_KILL_AT", spec)])
        .unwrap_or_default();
    ServerProcess::start_with_env(&systems.data_dir, &env)
}

async fn trial(trial: u64, kill_at: &str) -> Outcome {
    let systems = Systems::new().await;
    let client = reqwest::Client::new();
    let mut server = start(&systems, Some(kill_at)).await;
    for (index, (_, options, _)) in systems.worlds.iter().enumerate() {
        let registered = client
            .post(format!("{}/v1/catalogs", server.base))
            .json(&json!({"name": Systems::catalog(index), "options": options}))
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
    run_engines(&mut engines, &client, &server.base, &systems).await;
    let killed = server.wait_for_sigkill(Duration::from_secs(10));
    let mut outcome = Outcome {
        killed: killed == Some(true),
        ..Outcome::default()
    };
    if killed.is_none() {
        server.stop();
    }

    // The engines retry against the restarted server.
    let server = start(&systems, None).await;
    run_engines(&mut engines, &client, &server.base, &systems).await;
    assert!(
        engines.iter().all(|e| e.done == e.steps()),
        "every engine got through after the restart"
    );

    let jobs = settled(&client, &server.base, &engines).await;
    for (engine, job) in engines.iter().zip(&jobs) {
        let context = format!("{kill_at}, job {}: {job}", engine.job);
        let expected = *final_statuses(engine.job).last().unwrap();
        assert_eq!(job["status"], expected, "{context}");
        let mut commits = 0;
        for action in job["actions"].as_array().unwrap() {
            assert_eq!(action["state"], "done", "{context}");
            match action["action"].as_str().unwrap() {
                "commit" => {
                    commits += 1;
                    if action["outcome"] == "already_committed" {
                        outcome.commits_found_done += 1;
                    }
                }
                "abort" if action["attempts"].as_u64() > Some(1) => outcome.aborts_found_done += 1,
                _ => {}
            }
        }
        let table = format!("t{}", engine.job);
        let finished = expected == "FINISHED";
        assert_eq!(
            commits,
            if finished { systems.worlds.len() } else { 0 },
            "one commit per hook: {context}"
        );
        for (world, _, _) in &systems.worlds {
            let seen = world.ids(&table).await;
            if finished {
                assert_eq!(seen, Some(rows(engine.job)), "{context}");
            } else {
                let before = replaces(engine.job).then(|| vec![999]);
                assert_eq!(seen, before, "target untouched: {context}");
            }
        }
    }
    let mut expected_tables: Vec<String> = (0..JOBS)
        .filter(|job| replaces(*job) || final_statuses(*job) == ["FINISHED"])
        .map(|job| format!("t{job}"))
        .collect();
    expected_tables.sort();
    for (world, _, _) in &systems.worlds {
        assert_eq!(
            world.tables().await,
            expected_tables,
            "{kill_at}: no staging or replaced table left"
        );
    }
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
async fn run_engines(
    engines: &mut [Engine],
    client: &reqwest::Client,
    base: &str,
    systems: &Systems,
) {
    futures_util::future::join_all(engines.iter_mut().map(|e| e.run(client, base, systems))).await;
}

/// How often each point is reached in one trial, at least, with `systems`
/// hooks per job: the kill lands on a reach chosen among these.
fn reaches(point: &str, systems: u64) -> u64 {
    let finished = (0..JOBS).filter(|j| j % 3 == 0).count() as u64;
    let ended = JOBS as u64 - finished;
    match point {
        // CREATED, RUNNING and one or two final statuses per job.
        "status-stored" => (0..JOBS).map(|j| 2 + final_statuses(j).len() as u64).sum(),
        "staging-created" => systems * JOBS as u64,
        // Every system publishes a replacement in more than one step.
        "commit-midway" => {
            systems * (0..JOBS).filter(|j| j % 3 == 0 && replaces(*j)).count() as u64
        }
        "commit-applied" => systems * finished,
        // Only a directory is removed in steps.
        "abort-midway" => ended,
        "abort-applied" => systems * ended,
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
    let systems = Systems::new().await.worlds.len() as u64;
    let mut report = Vec::new();
    for (p, point) in points.iter().enumerate() {
        let mut figures = (0, 0, 0, 0);
        for t in 0..trials {
            let number = (p as u64) * 1000 + t;
            // Spread the kill over the reaches of the point, reproducibly.
            let nth = 1 + (number.wrapping_mul(2654435761) >> 7) % reaches(point, systems);
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
    figure(&format!(
        "crash suite: {JOBS} concurrent jobs per trial, each with a hook on {systems} systems"
    ));
    for line in report {
        figure(&line);
    }
}
