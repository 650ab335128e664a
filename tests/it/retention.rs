//! Retention: jobs that ended (FINISHED, FAILED, CANCELED, nothing left to
//! do) longer ago than `--ended-job-retention-days` are deleted with their
//! hooks, actions and history, in batches; running jobs and recent ones
//! stay. On SQLite and PostgreSQL.

use std::time::Duration;

use chrono::Utc;
use ctasd::domain::job::JobId;
use ctasd::domain::job::JobStatus::*;
use serde_json::json;
use sqlx::Connection;

use crate::helpers::{TestApp, TestPostgres};

/// Where a test's store is, for changing its rows behind ctasd's back.
enum StoreAt {
    Sqlite(std::path::PathBuf),
    Postgres(String),
}

impl StoreAt {
    fn of(app: &TestApp) -> Self {
        let store = &app.settings().store;
        match store.database_url() {
            Some(url) => StoreAt::Postgres(url.to_owned()),
            None => StoreAt::Sqlite(store.data_dir.join("ctasd.db")),
        }
    }

    /// Makes the jobs look as if they last changed `days` ago.
    async fn age(&self, ids: &[&str], days: i64) {
        let then = Utc::now() - chrono::Duration::days(days);
        for id in ids {
            match self {
                StoreAt::Sqlite(file) => {
                    let url = format!("sqlite:{}", file.display());
                    let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
                    sqlx::query("UPDATE jobs SET updated_at = ? WHERE id = ?")
                        .bind(then)
                        .bind(*id)
                        .execute(&mut db)
                        .await
                        .unwrap();
                }
                StoreAt::Postgres(url) => {
                    let mut db = sqlx::PgConnection::connect(url).await.unwrap();
                    sqlx::query("UPDATE jobs SET updated_at = $1 WHERE id = $2")
                        .bind(then)
                        .bind(*id)
                        .execute(&mut db)
                        .await
                        .unwrap();
                }
            }
        }
    }

    /// Rows of `table` (with a `job_id`) that belong to `id`.
    async fn rows_of(&self, table: &str, id: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table} WHERE job_id = ");
        match self {
            StoreAt::Sqlite(file) => {
                let url = format!("sqlite:{}", file.display());
                let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("{sql}?")))
                    .bind(id)
                    .fetch_one(&mut db)
                    .await
                    .unwrap()
            }
            StoreAt::Postgres(url) => {
                let mut db = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("{sql}$1")))
                    .bind(id)
                    .fetch_one(&mut db)
                    .await
                    .unwrap()
            }
        }
    }
}

fn job(table: &str) -> serde_json::Value {
    json!({"name": table, "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "mem", "table": table},
        "table": {"columns": [{"name": "n", "type": "INT"}]}}]})
}

async fn ended_jobs_past_the_retention_go_with_their_history(app: TestApp) {
    let at = StoreAt::of(&app);
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let finished = app.submit(&job("finished")).await.id;
    app.report_all(&finished, &[Created, Running, Finished])
        .await;
    let failed = app.submit(&job("failed")).await.id;
    app.report_all(&failed, &[Created, Failed]).await;
    let running = app.submit(&job("running")).await.id;
    app.report_all(&running, &[Created, Running]).await;
    let recent = app.submit(&job("recent")).await.id;
    app.report_all(&recent, &[Created, Running, Finished]).await;
    assert!(at.rows_of("job_transitions", &finished).await >= 4);
    assert!(at.rows_of("actions", &finished).await >= 2);

    let stopped = app.stop_keeping_store().await;
    at.age(&[&finished, &failed, &running], 40).await;
    let store = stopped.store().await;
    let cutoff = Utc::now() - chrono::Duration::days(30);
    // In batches: one, then the rest, then nothing.
    assert_eq!(store.purge_ended_jobs(cutoff, 1).await.unwrap(), 1);
    assert_eq!(store.purge_ended_jobs(cutoff, 1000).await.unwrap(), 1);
    assert_eq!(store.purge_ended_jobs(cutoff, 1000).await.unwrap(), 0);
    for gone in [&finished, &failed] {
        let id = JobId::parse(gone).unwrap();
        assert!(store.get_job(&id).await.unwrap().is_none(), "{gone}");
        for table in ["hooks", "actions", "job_transitions"] {
            assert_eq!(at.rows_of(table, gone).await, 0, "{table} of {gone}");
        }
    }
    for kept in [&running, &recent] {
        let id = JobId::parse(kept).unwrap();
        assert!(store.get_job(&id).await.unwrap().is_some(), "{kept}");
    }

    // A server purges at start, with the default retention (30 days).
    drop(store);
    at.age(&[&recent], 31).await;
    let again = stopped.start_again().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while again.get(&format!("/v1/jobs/{recent}")).await.status != 404 {
        assert!(
            std::time::Instant::now() < deadline,
            "the server purged at start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(again.get(&format!("/v1/jobs/{running}")).await.status, 200);
}

#[tokio::test]
async fn ended_jobs_past_the_retention_go_with_their_history_on_sqlite() {
    ended_jobs_past_the_retention_go_with_their_history(TestApp::spawn().await).await;
}

#[tokio::test]
async fn ended_jobs_past_the_retention_go_with_their_history_on_postgres() {
    let Some(store) = TestPostgres::create().await else {
        return;
    };
    ended_jobs_past_the_retention_go_with_their_history(
        TestApp::spawn_with(Some(&store.url)).await,
    )
    .await;
}

#[tokio::test]
async fn a_retention_of_zero_days_keeps_every_job() {
    let app = TestApp::spawn_with_settings(|s| s.ended_job_retention_days = 0).await;
    assert_eq!(app.settings().ended_job_retention(), None);
    app.register("mem", json!({"type": "generic_in_memory"}))
        .await;
    let id = app.submit(&job("kept")).await.id;
    app.report_all(&id, &[Created, Running, Finished]).await;
    let at = StoreAt::of(&app);
    let stopped = app.stop_keeping_store().await;
    at.age(&[&id], 10_000).await;
    let again = stopped.start_again().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(again.get(&format!("/v1/jobs/{id}")).await.status, 200);
}
