//! What one request costs the store, counted from the statements a real
//! `ctasd serve` logs (sqlx logs each at debug, inside the request's span).

use serde_json::{Value, json};

use crate::helpers::{ServerProcess, TestPostgres, figure};

/// The statements the server ran while serving the request `request_id`.
fn statements_of(log: &str, request_id: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["target"] == "sqlx::query")
        .filter(|event| {
            event["spans"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|span| span["request_id"] == request_id)
        })
        .map(|event| {
            event["db.statement"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// A full read of a job: its row with every column (the transition's own
/// lock reads only `status, mode`).
fn is_job_read(statement: &str) -> bool {
    let statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
    statement.starts_with("SELECT j.id, j.name, j.mode, j.status")
        && statement.contains("FROM jobs")
}

/// The statement that moves a job and reads it back, for a report that
/// plans no action (PostgreSQL).
fn is_one_statement_move(statement: &str) -> bool {
    statement.trim_start().starts_with("WITH report") && statement.contains("UPDATE jobs")
}

/// How a report that plans no action is made.
enum QuietMove {
    /// In a transaction of a few statements (SQLite: no round trips).
    Transaction,
    /// In one statement that also reads the job back.
    OneStatement,
}

/// What a job read again costs once it is kept rendered.
enum KeptRead {
    /// Nothing: the process is the store's only user (SQLite).
    NoStatement,
    /// One read of `updated_at`: another replica may have changed it.
    FreshnessRead,
}

#[tokio::test]
async fn a_status_report_reads_the_job_once_and_a_kept_job_costs_no_read_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path());
    count_statements(
        server,
        "SQLite",
        KeptRead::NoStatement,
        QuietMove::Transaction,
    )
    .await;
}

#[tokio::test]
async fn a_status_report_reads_the_job_once_and_a_kept_job_costs_one_read_on_postgres() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start_with_env(dir.path(), &[("CTASD_DATABASE_URL", &store.url)]);
    count_statements(
        server,
        "PostgreSQL",
        KeptRead::FreshnessRead,
        QuietMove::OneStatement,
    )
    .await;
}

async fn count_statements(
    server: ServerProcess,
    store: &str,
    kept_read: KeptRead,
    quiet_move: QuietMove,
) {
    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", server.base);

    let catalog = json!({"name": "mem", "options": {"type": "generic_in_memory"}});
    let created = client
        .post(url("/v1/catalogs"))
        .json(&catalog)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let job = json!({"name": "counted", "mode": "batch", "hooks": [{
        "kind": "create_table_as",
        "target": {"catalog": "mem", "database": "default", "table": "orders"},
        "table": {"columns": [{"name": "id", "type": "BIGINT"}]}
    }]});
    let submitted: Value = client
        .post(url("/v1/jobs"))
        .json(&job)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = submitted["id"].as_str().unwrap().to_owned();

    // CREATED runs a begin, RUNNING runs nothing, FINISHED runs the commit.
    let mut reports = Vec::new();
    for status in ["CREATED", "RUNNING", "FINISHED"] {
        let request_id = format!("count-{status}");
        let reply = client
            .put(url(&format!("/v1/jobs/{id}/status")))
            .header("x-request-id", &request_id)
            .json(&json!({"status": status}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{status}");
        let body: Value = reply.json().await.unwrap();
        assert_eq!(body["job"]["status"], status);
        reports.push((status, request_id));
    }
    let published: Value = client
        .get(url("/v1/catalogs/mem/databases/default/tables/orders"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(published["name"], "orders", "the commit ran: {published}");

    // The finished job, read twice: rendered once, then kept.
    let mut bodies = Vec::new();
    for read in ["first", "again"] {
        let reply = client
            .get(url(&format!("/v1/jobs/{id}")))
            .header("x-request-id", format!("read-{read}"))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200);
        bodies.push(reply.text().await.unwrap());
    }
    assert_eq!(bodies[0], bodies[1], "the kept job answers as read");

    let log = server.stop();
    let first_read = statements_of(&log, "read-first");
    let read_again = statements_of(&log, "read-again");
    assert_eq!(first_read.iter().filter(|s| is_job_read(s)).count(), 1);
    if let QuietMove::OneStatement = quiet_move {
        assert_eq!(
            first_read.len(),
            1,
            "a job is read in one statement on {store}:\n{}",
            first_read.join("\n")
        );
    }
    assert!(
        !first_read
            .iter()
            .any(|s| s.contains("updated_at FROM jobs")),
        "a job not kept is read once, with no freshness check:\n{}",
        first_read.join("\n")
    );
    match kept_read {
        KeptRead::NoStatement => assert!(
            read_again.is_empty(),
            "a finished job read again on {store} runs no statement:\n{}",
            read_again.join("\n")
        ),
        KeptRead::FreshnessRead => {
            assert_eq!(
                read_again.len(),
                1,
                "a finished job read again on {store} costs one statement:\n{}",
                read_again.join("\n")
            );
            assert!(read_again[0].contains("SELECT id, updated_at FROM jobs"));
        }
    }
    figure(&format!(
        "queries: {store}: GET of a finished job ran {} statements, then {}",
        first_read.len(),
        read_again.len()
    ));
    for (status, request_id) in reports {
        let statements = statements_of(&log, &request_id);
        assert!(
            !statements.is_empty(),
            "no statement was logged for the {status} report"
        );
        let reads = statements
            .iter()
            .filter(|s| is_job_read(s) || is_one_statement_move(s))
            .count();
        assert_eq!(
            reads,
            1,
            "the {status} report read the job {reads} times:\n{}",
            statements.join("\n")
        );
        if status == "RUNNING" {
            // A move that implies no action reads no hooks to plan and
            // claims nothing.
            let planning_or_claiming = statements
                .iter()
                .filter(|s| {
                    s.contains("SELECT hook_index, skipped") || s.contains("UPDATE actions")
                })
                .count();
            assert_eq!(
                planning_or_claiming,
                0,
                "the RUNNING report planned or claimed actions:\n{}",
                statements.join("\n")
            );
            if let QuietMove::OneStatement = quiet_move {
                assert!(
                    statements.len() == 1 && is_one_statement_move(&statements[0]),
                    "the RUNNING report on {store} is one statement:\n{}",
                    statements.join("\n")
                );
            }
        }
        figure(&format!(
            "queries: {store}: report {status} ran {} statements, {reads} job read",
            statements.len()
        ));
    }
}

/// The statements of `statements` that run `fragment`.
fn running<'a>(statements: &'a [String], fragment: &str) -> Vec<&'a String> {
    statements.iter().filter(|s| s.contains(fragment)).collect()
}

#[tokio::test]
async fn a_postgres_target_is_tried_once_per_definition_and_looked_up_once_per_submission() {
    let Some(target) = TestPostgres::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start(dir.path());
    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", server.base);
    let options = crate::helpers::postgres_options(&target);
    let registered = client
        .post(url("/v1/catalogs"))
        .json(&json!({"name": "pg", "options": options}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        registered.status(),
        201,
        "{}",
        registered.text().await.unwrap()
    );

    // Two jobs of one definition and one of another, each submitted and
    // taken through its whole lifecycle.
    let definitions = [("a", "BIGINT"), ("b", "BIGINT"), ("c", "STRING")];
    for (table, data_type) in definitions {
        let job = json!({"name": table, "mode": "batch", "hooks": [{
            "kind": "create_table_as",
            "target": {"catalog": "pg", "table": table},
            "table": {"columns": [{"name": "id", "type": data_type}]}
        }]});
        let submitted = client
            .post(url("/v1/jobs"))
            .header("x-request-id", format!("submit-{table}"))
            .json(&job)
            .send()
            .await
            .unwrap();
        let status = submitted.status();
        let body: Value = submitted.json().await.unwrap();
        assert_eq!(status, 201, "{body}");
        let id = body["id"].as_str().unwrap().to_owned();
        for status in ["CREATED", "RUNNING", "FINISHED"] {
            let reply = client
                .put(url(&format!("/v1/jobs/{id}/status")))
                .header("x-request-id", format!("{status}-{table}"))
                .json(&json!({"status": status}))
                .send()
                .await
                .unwrap();
            assert_eq!(reply.status(), 200, "{status}");
        }
    }

    let log = server.stop();
    let mut tables: Vec<String> = sqlx::query_scalar(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
    )
    .fetch_all(&mut target.connect().await)
    .await
    .unwrap();
    tables.retain(|t| !t.starts_with("__ctasd_"));
    assert_eq!(tables, ["a", "b", "c"], "every job published its table");
    for (table, _) in definitions {
        let submit = statements_of(&log, &format!("submit-{table}"));
        // The first job also has the catalog find the database (and see
        // that it holds no store); the others find it found.
        assert_eq!(
            running(&submit, "FROM pg_database").len(),
            if table == "a" { 2 } else { 1 },
            "submitting {table} looks its database up once:\n{}",
            submit.join("\n")
        );
        let tried = running(&submit, "CREATE TABLE \"__ctasd_probe").len();
        assert_eq!(
            tried,
            usize::from(table != "b"),
            "{table}'s definition is tried unless it passed a moment ago:\n{}",
            submit.join("\n")
        );
        for status in ["CREATED", "FINISHED"] {
            let action = statements_of(&log, &format!("{status}-{table}"));
            assert!(!action.is_empty(), "{status} of {table} logged nothing");
            assert!(
                running(&action, "pg_database").is_empty(),
                "{status} of {table} takes its database as found:\n{}",
                action.join("\n")
            );
        }
    }
    figure(
        "queries: a PostgreSQL target: one database lookup per submission, one dry run per definition",
    );
}
