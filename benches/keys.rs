//! Keyed POSTs as keys pile up: a store (SQLite, PostgreSQL) already
//! holding N answered `Idempotency-Key`s (inserted in SQL, all within their
//! lifetime), then keyed job submissions one after another; how many a
//! second. Each keyed POST first purges expired and abandoned keys, so its
//! cost must not grow with the keys kept (issue 37).
//!
//! ```sh
//! cargo bench --bench keys -- --kept 0,100000,1000000 --posts 500 --stores sqlite,postgres
//! ```

use std::time::Instant;

use clap::Parser;
use sqlx::Connection;

mod support;
use support::{Server, admin, unique_database, with_database};

#[derive(Parser)]
struct Args {
    /// Keys already in the store, one run each.
    #[arg(long, value_delimiter = ',', default_value = "0,20000,100000")]
    kept: Vec<u64>,
    /// Keyed POSTs timed per run.
    #[arg(long, default_value_t = 500)]
    posts: u64,
    /// The stores measured: `sqlite`, `postgres`.
    #[arg(long, value_delimiter = ',', default_value = "sqlite")]
    stores: Vec<String>,
    #[command(flatten)]
    common: support::CommonArgs,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let client = reqwest::Client::new();
    for store in &args.stores {
        for kept in &args.kept {
            run(&args, &client, store, *kept).await;
        }
    }
}

async fn run(args: &Args, client: &reqwest::Client, store: &str, kept: u64) {
    let database = unique_database("ctasd_keys");
    let store_url = match store {
        "postgres" => {
            let create = format!("CREATE DATABASE {database}");
            admin(&args.common.postgres_url, &create).await;
            Some(with_database(&args.common.postgres_url, &database))
        }
        "sqlite" => None,
        other => panic!("no store '{other}': sqlite or postgres"),
    };
    let server = Server::start(store_url.as_deref()).await;
    let job = |n: u64| {
        serde_json::json!({"name": format!("keyed {n}"), "mode": "batch", "hooks": [{"kind": "create_table_as",
                "target": {"catalog": "mem", "table": format!("t{n}")},
                "table": {"columns": [{"name": "n", "type": "INT"}]}}]})
    };
    support::submit_mem_job(client, &server.base, "warm-up").await;
    match &store_url {
        Some(url) => keep_keys_in_postgres(url, kept).await,
        None => keep_keys(&server, kept).await,
    }
    let started = Instant::now();
    for n in 0..args.posts {
        let answer = client
            .post(format!("{}/v1/jobs", server.base))
            .header("Idempotency-Key", format!("bench-{n}"))
            .json(&job(n))
            .send()
            .await
            .expect("a keyed POST");
        assert!(answer.status().is_success(), "{}", answer.status());
    }
    let rate = args.posts as f64 / started.elapsed().as_secs_f64();
    println!(
        "{store:<8} keys kept {kept:>7}: {rate:>6.0} keyed POSTs/s ({} submissions)",
        args.posts
    );
    drop(server);
    if store_url.is_some() {
        let drop = format!("DROP DATABASE {database} WITH (FORCE)");
        admin(&args.common.postgres_url, &drop).await;
    }
}

/// As [`keep_keys`], in the PostgreSQL store at `url`.
async fn keep_keys_in_postgres(url: &str, count: u64) {
    if count == 0 {
        return;
    }
    let now_ms = chrono::Utc::now().timestamp_millis();
    admin(
        url,
        &format!(
            "INSERT INTO idempotency_keys (caller, key, request, status, content_type, body, created_at) \
             SELECT '', 'kept-' || i, 'r', 201, 'application/json', '{{}}', {now_ms} - i \
             FROM generate_series(1, {count}) AS i; ANALYZE idempotency_keys"
        ),
    )
    .await;
}

/// `count` answered keys, created over the last minutes: none expired.
async fn keep_keys(server: &Server, count: u64) {
    if count == 0 {
        return;
    }
    let path = server.data_dir().join("ctasd.db");
    let mut store = sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
        .await
        .expect("the embedded store");
    let now_ms = chrono::Utc::now().timestamp_millis();
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1) \
         INSERT INTO idempotency_keys (caller, key, request, status, content_type, body, created_at) \
         SELECT '', 'kept-' || i, 'r', 201, 'application/json', '{}', ?2 - i FROM n",
    )
    .bind(count as i64)
    .bind(now_ms)
    .execute(&mut store)
    .await
    .expect("keys inserted");
}
