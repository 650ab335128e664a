//! Two `ctasd serve` processes on one PostgreSQL store, with every status of
//! hundreds of jobs reported to both at the same moment, as an engine that
//! retries against another replica might: each table is published exactly
//! once, by one commit, with its rows; failed jobs leave nothing; no 5xx.
//! And a replica killed in the middle of an action: the other takes the
//! action over once the dead one's lease runs out.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::helpers::{Reply, ServerProcess, TestPostgres, figure, postgres_options};

const JOBS: usize = 240;
const CONCURRENT_JOBS: usize = 16;

/// Two `ctasd serve` processes on one fresh PostgreSQL store, with a
/// catalog `pg` on a fresh PostgreSQL target.
struct Pair {
    first: ServerProcess,
    second: ServerProcess,
    target: TestPostgres,
    _store: TestPostgres,
    _data_dir: tempfile::TempDir,
}

impl Pair {
    /// `kill_at` arms a crash point in the first process only.
    async fn start(kill_at: Option<&str>) -> Option<Self> {
        let store = TestPostgres::create().await?;
        let target = TestPostgres::create().await?;
        let data_dir = tempfile::tempdir().unwrap();
        let mut env = vec![("CTASD_DATABASE_URL", store.url.as_str())];
        // One after the other: the first writes the secret key both use.
        let second = ServerProcess::start_with_env(data_dir.path(), &env);
        env.extend(kill_at.map(|spec| ("CTASD_FAULT_KILL_AT", spec)));
        let first = ServerProcess::start_with_env(data_dir.path(), &env);
        let registered = reqwest::Client::new()
            .post(format!("{}/v1/catalogs", second.base))
            .json(&json!({"name": "pg", "options": postgres_options(&target)}))
            .send()
            .await
            .unwrap();
        assert_eq!(registered.status(), 201);
        Some(Self {
            first,
            second,
            target,
            _store: store,
            _data_dir: data_dir,
        })
    }
}

fn fails(job: usize) -> bool {
    job % 4 == 3
}

#[tokio::test]
async fn two_replicas_on_one_postgres_store_commit_every_table_exactly_once() {
    let Some(pair) = Pair::start(None).await else {
        return;
    };
    // Every field bound by name: the store and data directory must outlive the test.
    let Pair {
        first,
        second,
        target,
        _store,
        _data_dir,
    } = pair;
    let replicas = [first.base.clone(), second.base.clone()];
    let client = reqwest::Client::new();

    let started = Instant::now();
    let replies: Vec<Vec<Reply>> = futures_util::stream::iter(0..JOBS)
        .map(|job| lifecycle(&client, &replicas, &target, job))
        .buffer_unordered(CONCURRENT_JOBS)
        .collect()
        .await;
    let elapsed = started.elapsed();

    let replies: Vec<Reply> = replies.into_iter().flatten().collect();
    let server_errors: Vec<&Reply> = replies
        .iter()
        .filter(|r| r.status.is_server_error())
        .collect();
    assert!(server_errors.is_empty(), "5xx: {:?}", server_errors.first());
    for reply in &replies {
        assert!(reply.status.is_success(), "{} {}", reply.status, reply.text);
    }

    let mut conn = target.connect().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut expected: Vec<String> = (0..JOBS)
        .filter(|job| !fails(*job))
        .map(|job| format!("t{job}"))
        .collect();
    expected.sort();
    assert_eq!(
        tables, expected,
        "the finished jobs' tables, and no staging"
    );
    for job in (0..JOBS).filter(|job| !fails(*job)) {
        let ids: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT id FROM t{job} ORDER BY id"
        )))
        .fetch_all(&mut conn)
        .await
        .unwrap();
        assert_eq!(ids, rows(job), "t{job}");
    }

    // The ledger: one commit per finished job, run once by one replica.
    let (mut commits, mut retried) = (0, 0);
    let mut page: Option<String> = None;
    loop {
        let url = match &page {
            Some(token) => format!("{}/v1/jobs?page_size=100&page_token={token}", replicas[1]),
            None => format!("{}/v1/jobs?page_size=100", replicas[1]),
        };
        let listed: Value = client.get(url).send().await.unwrap().json().await.unwrap();
        for job in listed["jobs"].as_array().unwrap() {
            for action in job["actions"].as_array().unwrap() {
                assert_eq!(action["state"], "done", "{job}");
                if action["action"] == "commit" {
                    commits += 1;
                    // A second run, by either replica, would have found the
                    // table published and said "already_committed".
                    assert_eq!(action["outcome"], "committed", "{job}");
                    if action["attempts"] != 1 {
                        retried += 1;
                    }
                }
            }
        }
        match listed["next_page_token"].as_str() {
            Some(token) => page = Some(token.to_owned()),
            None => break,
        }
    }
    let finished = (0..JOBS).filter(|job| !fails(*job)).count();
    assert_eq!(commits, finished);
    figure(&format!(
        "replicas: {JOBS} jobs ({finished} finished, {} failed), {} requests (every status \
         report to both replicas at once) in {:.1} s; 0 5xx; {commits} commits, each once \
         ({retried} needed a second attempt)",
        JOBS - finished,
        replies.len(),
        elapsed.as_secs_f64()
    ));
    first.stop();
    second.stop();
}

fn rows(job: usize) -> Vec<i64> {
    vec![job as i64 * 10, job as i64 * 10 + 1]
}

/// Submits job `job` to one replica, then reports each status to both at once.
async fn lifecycle(
    client: &reqwest::Client,
    replicas: &[String; 2],
    target: &TestPostgres,
    job: usize,
) -> Vec<Reply> {
    let submitted = Reply::from(
        client
            .post(format!("{}/v1/jobs", replicas[job % 2]))
            .json(&json!({"name": format!("j{job}"), "mode": "batch",
                "hooks": [{"kind": "create_table_as", "target": {"catalog": "pg", "table": format!("t{job}")},
                           "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(submitted.status, 201, "{}", submitted.text);
    let id = submitted.body["id"].as_str().unwrap().to_owned();
    let mut replies = vec![submitted];
    let last = if fails(job) { "FAILED" } else { "FINISHED" };
    for status in ["CREATED", "RUNNING", last] {
        let report = |base: &String| {
            client
                .put(format!("{base}/v1/jobs/{id}/status"))
                .json(&json!({"status": status}))
                .send()
        };
        let (a, b) = tokio::join!(report(&replicas[0]), report(&replicas[1]));
        let (a, b) = (Reply::from(a.unwrap()).await, Reply::from(b.unwrap()).await);
        if status == "CREATED" && a.status.is_success() {
            let staging = a.body["job"]["hooks"][0]["write_location"]["name"]
                .as_str()
                .unwrap()
                .to_owned();
            let values: Vec<String> = rows(job).iter().map(|id| format!("({id})")).collect();
            target
                .execute(&format!(
                    "INSERT INTO \"{staging}\" VALUES {}",
                    values.join(", ")
                ))
                .await;
        }
        // Both answers show the actions done, whichever replica ran them:
        // the other waited for them rather than answer "pending".
        for reply in [&a, &b] {
            for action in reply.body["actions_taken"].as_array().into_iter().flatten() {
                assert_eq!(action["state"], "done", "{status}: {}", reply.text);
            }
        }
        replies.extend([a, b]);
    }
    replies
}

#[tokio::test]
async fn a_replica_killed_after_its_commit_leaves_the_recording_to_the_other_once_its_lease_runs_out()
 {
    let Some(pair) = Pair::start(Some("commit-applied:1")).await else {
        return;
    };
    let Pair {
        first: mut doomed,
        second: survivor,
        target,
        _store,
        _data_dir,
    } = pair;
    let client = reqwest::Client::new();
    let send = |request: reqwest::RequestBuilder| async move {
        Reply::from(request.send().await.unwrap()).await
    };
    let job = send(
        client
            .post(format!("{}/v1/jobs", survivor.base))
            .json(&json!({
        "name": "j", "mode": "batch",
        "hooks": [{"kind": "create_table_as", "target": {"catalog": "pg", "table": "orders"},
                   "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"}]}}]})),
    )
    .await;
    let id = job.body["id"].as_str().unwrap().to_owned();
    let status = |base: &str| format!("{base}/v1/jobs/{id}/status");
    let created = send(
        client
            .put(status(&survivor.base))
            .json(&json!({"status": "CREATED"})),
    )
    .await;
    let staging = created.body["job"]["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    target
        .execute(&format!("INSERT INTO \"{staging}\" VALUES (1), (2)"))
        .await;
    send(
        client
            .put(status(&survivor.base))
            .json(&json!({"status": "RUNNING"})),
    )
    .await;

    // The doomed replica publishes the table and dies before recording it.
    let lost = client
        .put(status(&doomed.base))
        .json(&json!({"status": "FINISHED"}))
        .send()
        .await;
    assert!(lost.is_err(), "the replica died during the report");
    assert_eq!(doomed.wait_for_sigkill(Duration::from_secs(10)), Some(true));
    let killed_at = Instant::now();

    let mut commit = Value::Null;
    while killed_at.elapsed() < Duration::from_secs(60) {
        let job = send(client.get(format!("{}/v1/jobs/{id}", survivor.base))).await;
        commit = job.body["actions"][1].clone();
        if commit["state"] == "done" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let recovered_in = killed_at.elapsed();

    assert_eq!(commit["action"], "commit");
    assert_eq!(commit["state"], "done", "{commit}");
    assert_eq!(
        commit["outcome"], "already_committed",
        "the survivor found the table published"
    );
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM orders ORDER BY id")
        .fetch_all(&mut target.connect().await)
        .await
        .unwrap();
    assert_eq!(ids, [1, 2]);
    figure(&format!(
        "replicas: a replica killed between its commit and recording it; the other recorded \
         the commit {:.1} s later (lease 15 s, renewed every 5 s while held)",
        recovered_in.as_secs_f64()
    ));
    survivor.stop();
}
