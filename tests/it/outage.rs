//! Outages, made with a TCP proxy the test controls (the machine's shared
//! database services are never stopped): a target database (PostgreSQL and
//! MariaDB) refusing connections during a commit or vanishing in the middle
//! of one, the PostgreSQL store going away while requests flow, and the
//! store away when `ctasd serve` starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Reply, TcpProxy, TestApp, TestPostgres, figure};
use crate::staging::{World, world_options};

/// Each available server database with a catalog reaching it through a
/// proxy the test controls.
async fn proxied_targets() -> Vec<(World, Value, TcpProxy)> {
    let mut targets = Vec::new();
    for (world, mut options, _) in world_options().await {
        let host_port = match &world {
            World::Postgres(pg) => pg.host_port(),
            World::Mysql(my) => my.host_port(),
            _ => continue,
        };
        let proxy = TcpProxy::start(host_port.parse().unwrap()).await;
        let url = options["base-url"]
            .as_str()
            .unwrap()
            .replace(&host_port, &format!("127.0.0.1:{}", proxy.port));
        options["base-url"] = json!(url);
        targets.push((world, options, proxy));
    }
    targets
}

fn system(world: &World) -> &'static str {
    match world {
        World::Postgres(_) => "PostgreSQL",
        _ => "MariaDB",
    }
}

/// A job on catalog `db` with its rows staged, RUNNING; returns its id and staging.
async fn running_job(app: &TestApp, world: &World) -> (String, String) {
    let job = app
        .post(
            "/v1/jobs",
            &json!({"name": "j", "mode": "batch", "hooks": [{"kind": "create_table_as",
            "target": {"catalog": "db", "table": "orders"},
            "table": {"columns": [{"name": "id", "type": "BIGINT NOT NULL"},
                                  {"name": "note", "type": "VARCHAR(20)"}]}}]}),
        )
        .await;
    let id = job.body["id"].as_str().unwrap().to_owned();
    let created = app.put_status(&id, "CREATED").await;
    let staging = created.body["job"]["hooks"][0]["write_location"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    world.insert(&staging, &[1, 2]).await;
    app.put_status(&id, "RUNNING").await;
    (id, staging)
}

/// The job once its commit is no longer pending; its one commit action.
async fn settled_commit(app: &TestApp, id: &str) -> Value {
    let mut job = Value::Null;
    for _ in 0..300 {
        job = app.get(&format!("/v1/jobs/{id}")).await.body;
        if job["actions"][1]["state"] != "pending" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let commits: Vec<&Value> = job["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["action"] == "commit")
        .collect();
    assert_eq!(commits.len(), 1, "{job}");
    assert_eq!(commits[0]["state"], "done", "{job}");
    commits[0].clone()
}

#[tokio::test]
async fn a_commit_waits_out_a_database_refusing_connections_and_then_happens_once() {
    for (world, options, proxy) in proxied_targets().await {
        let app = TestApp::spawn().await;
        assert_eq!(app.register("db", options).await.status, 201);
        let (id, staging) = running_job(&app, &world).await;

        proxy.refuse();
        let finished = app.put_status(&id, "FINISHED").await;

        let system = system(&world);
        assert_eq!(finished.status, 200, "{system}: {}", finished.text);
        let commit = &finished.body["actions_taken"][0];
        assert_eq!(commit["action"], "commit");
        assert_eq!(commit["state"], "pending", "{system}: {}", finished.text);
        assert!(
            !commit["last_error"].as_str().unwrap_or_default().is_empty(),
            "{system}: the job shows the error"
        );
        assert_eq!(
            world.ids("orders").await,
            None,
            "{system}: nothing is published while the database is away"
        );

        proxy.accept_again().await;
        let commit = settled_commit(&app, &id).await;
        assert_eq!(commit["outcome"], "committed", "{system}");
        assert!(
            commit["attempts"].as_u64().unwrap() >= 2,
            "{system}: it was retried"
        );
        assert_eq!(world.ids("orders").await, Some(vec![1, 2]), "{system}");
        assert_eq!(world.ids(&staging).await, None, "{system}: staging gone");
    }
}

/// A reader holding `table` in an open transaction: DDL on it waits.
enum Reader {
    Postgres(sqlx::PgConnection),
    Mysql(sqlx::MySqlConnection),
}

impl Reader {
    async fn hold(world: &World, table: &str) -> Self {
        let (begin, read) = (
            "BEGIN",
            format!("SELECT COUNT(*) FROM {}", quoted(world, table)),
        );
        match world {
            World::Postgres(pg) => {
                let mut conn = pg.connect().await;
                for sql in [begin.to_owned(), read] {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut conn)
                        .await
                        .unwrap();
                }
                Reader::Postgres(conn)
            }
            World::Mysql(my) => {
                let mut conn = my.connect().await;
                for sql in [begin.to_owned(), read] {
                    sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut conn)
                        .await
                        .unwrap();
                }
                Reader::Mysql(conn)
            }
            _ => unreachable!("only server databases have readers here"),
        }
    }

    /// Whether some statement in the database waits for this reader's lock.
    async fn blocks_someone(world: &World) -> bool {
        match world {
            World::Postgres(pg) => {
                let waiting: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'",
                )
                .bind(&pg.database)
                .fetch_one(&mut pg.connect().await)
                .await
                .unwrap();
                waiting > 0
            }
            World::Mysql(my) => {
                let waiting: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND STATE LIKE '%metadata lock%'",
                )
                .bind(&my.database)
                .fetch_one(&mut my.connect().await)
                .await
                .unwrap();
                waiting > 0
            }
            _ => false,
        }
    }

    async fn release(self) {
        match self {
            Reader::Postgres(mut conn) => {
                sqlx::raw_sql("COMMIT").execute(&mut conn).await.unwrap();
            }
            Reader::Mysql(mut conn) => {
                sqlx::raw_sql("COMMIT").execute(&mut conn).await.unwrap();
            }
        }
    }
}

fn quoted(world: &World, table: &str) -> String {
    match world {
        World::Mysql(_) => format!("`{table}`"),
        _ => format!("\"{table}\""),
    }
}

#[tokio::test]
async fn a_database_vanishing_in_the_middle_of_a_commit_publishes_the_table_exactly_once() {
    for (world, options, proxy) in proxied_targets().await {
        let system = system(&world);
        let app = TestApp::spawn().await;
        assert_eq!(app.register("db", options).await.status, 201);
        let (id, staging) = running_job(&app, &world).await;

        // The commit's DDL is sent and waits behind a reader; then the
        // connection goes away under it.
        let reader = Reader::hold(&world, &staging).await;
        let report = app.spawn_put_status(&id, "FINISHED");
        let mut waited = 0;
        while !Reader::blocks_someone(&world).await {
            waited += 1;
            assert!(
                waited < 200,
                "{system}: the commit's DDL never reached the database"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        proxy.refuse();
        reader.release().await;

        let finished = report.await.unwrap();
        assert_eq!(finished.status, 200, "{system}: {}", finished.text);
        let attempt = &finished.body["actions_taken"][0];
        figure(&format!(
            "{system}: connection cut mid-commit; the report answered with the commit {}",
            attempt["state"]
        ));

        proxy.accept_again().await;
        let commit = settled_commit(&app, &id).await;
        figure(&format!(
            "{system}: after reconnecting, the commit is {} after {} attempts",
            commit["outcome"], commit["attempts"]
        ));
        assert_eq!(
            world.ids("orders").await,
            Some(vec![1, 2]),
            "{system}: published once, whole"
        );
        assert_eq!(world.ids(&staging).await, None, "{system}: staging gone");
    }
}

#[tokio::test]
async fn while_the_postgres_store_is_away_requests_get_503_and_the_service_recovers_by_itself() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let proxy = TcpProxy::start(store.host_port().parse().unwrap()).await;
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        store.username(),
        proxy.port,
        store.database
    );
    let app = TestApp::spawn_with(Some(&url)).await;
    assert_eq!(
        app.register("mem", json!({"type": "generic_in_memory"}))
            .await
            .status,
        201
    );

    // Registrations keep arriving, one after another, through the outage.
    let flowing = Arc::new(AtomicBool::new(true));
    let flow = {
        let (client, url, flowing) = (
            reqwest::Client::new(),
            app.url("/v1/catalogs"),
            flowing.clone(),
        );
        tokio::spawn(async move {
            let mut answers = Vec::new();
            for n in 0.. {
                if !flowing.load(Ordering::SeqCst) {
                    break;
                }
                let name = format!("flow-{n}");
                let body = json!({"name": name, "options": {"type": "generic_in_memory"}});
                let reply = Reply::from(client.post(&url).json(&body).send().await.unwrap()).await;
                answers.push((name, reply));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            answers
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    proxy.refuse();
    let listing = app.get("/v1/catalogs").await;
    let ready = app.get("/readyz").await;
    let register = app
        .register("other", json!({"type": "generic_in_memory"}))
        .await;

    listing.assert_problem(503, "STORE_UNAVAILABLE");
    ready.assert_problem(503, "STORE_UNAVAILABLE");
    register.assert_problem(503, "STORE_UNAVAILABLE");
    assert!(
        !listing.text.contains("127.0.0.1"),
        "no internals in the answer: {}",
        listing.text
    );

    proxy.accept_again().await;
    let mut recovered = None;
    for _ in 0..100 {
        let reply = app.get("/v1/catalogs").await;
        if reply.status == 200 {
            recovered = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    recovered.expect("the service recovers");
    tokio::time::sleep(Duration::from_millis(300)).await;
    flowing.store(false, Ordering::SeqCst);
    let answers = flow.await.unwrap();

    let listed = app.get("/v1/catalogs?page_size=1000").await;
    let names: Vec<&str> = listed.body["catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let (mut acknowledged, mut refused) = (0, 0);
    for (name, reply) in &answers {
        match reply.status.as_u16() {
            201 => {
                acknowledged += 1;
                assert!(
                    names.contains(&name.as_str()),
                    "{name} was acknowledged and is lost"
                );
            }
            503 => {
                refused += 1;
                reply.assert_problem(503, "STORE_UNAVAILABLE");
            }
            other => panic!("{name}: {other} {}", reply.text),
        }
    }
    figure(&format!(
        "PostgreSQL store outage: {} registrations during the run: {acknowledged} acknowledged \
         (all kept), {refused} refused with 503",
        answers.len()
    ));
    assert!(
        acknowledged > 0 && refused > 0,
        "the flow spanned the outage"
    );
    assert!(names.contains(&"mem") && !names.contains(&"other"));
    assert_eq!(app.get("/readyz").await.status, 200);
}

#[tokio::test]
async fn serve_waits_for_a_store_that_is_away_at_start_alive_not_ready_and_then_serves() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let proxy = TcpProxy::start(store.host_port().parse().unwrap()).await;
    proxy.refuse();
    let url = format!(
        "postgres://{}@127.0.0.1:{}/{}",
        store.username(),
        proxy.port,
        store.database
    );
    let data = tempfile::tempdir().unwrap();
    let server = crate::helpers::ServerProcess::start_listening(
        data.path(),
        &[("CTASD_DATABASE_URL", url.as_str())],
    );
    let client = reqwest::Client::new();
    let get = |path: &str| client.get(format!("{}{path}", server.base)).send();

    // Alive at once; not ready, and every other request a 503, which names
    // the failed attempt once there is one.
    let alive = get("/healthz").await.unwrap();
    assert_eq!(alive.status(), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let ready = loop {
        let ready = Reply::from(get("/readyz").await.unwrap()).await;
        ready.assert_problem(503, "STORE_UNAVAILABLE");
        if ready.detail().contains("attempt 1 failed") {
            break ready;
        }
        assert!(std::time::Instant::now() < deadline, "{}", ready.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        ready.detail().contains("waits for its store"),
        "{}",
        ready.text
    );
    let listing = Reply::from(get("/v1/catalogs").await.unwrap()).await;
    listing.assert_problem(503, "STORE_UNAVAILABLE");
    assert_eq!(listing.headers["retry-after"], "1");

    // The store comes back: ctasd gets ready by itself, on the same process.
    proxy.accept_again().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if get("/readyz").await.unwrap().status() == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "ready within seconds");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let registered = client
        .post(format!("{}/v1/catalogs", server.base))
        .json(&json!({"name": "mem", "options": {"type": "generic_in_memory"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);

    let log = server.stop();
    let attempts: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("the store cannot be reached"))
        .collect();
    assert!(!attempts.is_empty(), "each failed attempt is logged: {log}");
    assert!(
        attempts.iter().all(|line| line.contains("\"attempt\"")),
        "{log}"
    );
    assert!(log.contains("the store answers now"), "{log}");
}
