//! What the bench programs share: a real `ctasd serve` (the bench profile's
//! build) on a free port, PostgreSQL administration, latency samples.

#![allow(dead_code)] // Each bench program uses its own part.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Connection};

/// What every bench program takes.
#[derive(clap::Args)]
pub struct CommonArgs {
    /// A PostgreSQL server (superuser) for stores and targets.
    #[arg(
        long,
        env = "CTASD_BENCH_POSTGRES_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    pub postgres_url: String,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    pub bench: bool,
}

/// POSTs `body` to `url` and reads the JSON answer; panics, with the
/// answer, unless it is a success.
pub async fn post_ok(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> serde_json::Value {
    let answer = client.post(url).json(body).send().await.unwrap();
    let status = answer.status();
    let text = answer.text().await.unwrap_or_default();
    assert!(status.is_success(), "POST {url}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

/// Registers the in-memory catalog `mem` on the server at `base`.
pub async fn register_mem(client: &reqwest::Client, base: &str) {
    let catalog = serde_json::json!({"name": "mem", "options": {"type": "generic_in_memory"}});
    post_ok(client, &format!("{base}/v1/catalogs"), &catalog).await;
}

/// Registers the in-memory catalog `mem` on the server at `base` and
/// submits a batch job `name` with one hook on it; the job's id.
pub async fn submit_mem_job(client: &reqwest::Client, base: &str, name: &str) -> String {
    register_mem(client, base).await;
    let job = serde_json::json!({"name": name, "mode": "batch", "hooks": [{"kind": "create_table_as",
        "target": {"catalog": "mem", "table": "t"},
        "table": {"columns": [{"name": "n", "type": "INT"}]}}]});
    let submitted = post_ok(client, &format!("{base}/v1/jobs"), &job).await;
    submitted["id"].as_str().expect("a job id").to_owned()
}

/// A `ctasd serve` child process, killed when dropped.
pub struct Server {
    child: Child,
    pub base: String,
    _data_dir: tempfile::TempDir,
}

impl Server {
    /// Starts ctasd on a free loopback port with a fresh data directory, on
    /// the store at `database_url` (`None`: the embedded SQLite), and waits
    /// until it is ready.
    pub async fn start(database_url: Option<&str>) -> Server {
        Self::start_with(database_url, &[]).await
    }

    /// As [`Server::start`], with more arguments to `ctasd serve`.
    pub async fn start_with(database_url: Option<&str>, more: &[&str]) -> Server {
        let data_dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_ctasd"));
        command
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--log",
                "warn",
                "--data-dir",
            ])
            .arg(data_dir.path())
            .args(more)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(url) = database_url {
            command.env("CTASD_DATABASE_URL", url);
        }
        let server = Server {
            child: command.spawn().expect("start ctasd"),
            base: format!("http://127.0.0.1:{port}"),
            _data_dir: data_dir,
        };
        let client = reqwest::Client::new();
        for _ in 0..100 {
            let ready = client.get(format!("{}/readyz", server.base)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("ctasd did not become ready at {}", server.base);
    }

    /// The data directory (the embedded store is `ctasd.db` there).
    pub fn data_dir(&self) -> &std::path::Path {
        self._data_dir.path()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident set size, from the kernel's own high-water mark.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `url` with its database replaced by `database`.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, _) = url.rsplit_once('/').expect("a URL with a database");
    format!("{base}/{database}")
}

/// Runs `sql` on `url`, panicking with the statement when it fails.
pub async fn admin(url: &str, sql: &str) {
    let mut conn = PgConnection::connect(url)
        .await
        .expect("connect to PostgreSQL");
    sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A fresh database name with `prefix`.
pub fn unique_database(prefix: &str) -> String {
    format!(
        "{prefix}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Latencies of one kind of request.
#[derive(Default)]
pub struct Samples(pub Vec<Duration>);

impl Samples {
    /// The `q` quantile (0 to 1); call after sorting.
    pub fn quantile(&self, q: f64) -> Duration {
        let index = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[index]
    }
}

/// Milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// GETs `url` and reads its JSON body; panics on any failure (a bench that
/// cannot read what it measures has nothing to report).
pub async fn get_json(client: &reqwest::Client, url: &str) -> serde_json::Value {
    client.get(url).send().await.unwrap().json().await.unwrap()
}

/// A relay to PostgreSQL that counts the statements its clients send: each
/// simple-protocol `Query` and each extended-protocol `Execute` (sqlx sends
/// a statement as Parse/Bind/Execute, `BEGIN` and `COMMIT` as queries).
/// Point a client at `127.0.0.1:<port>` with `sslmode=disable`, so that
/// the messages stay readable.
pub struct StatementCounter {
    pub port: u16,
    counted: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl StatementCounter {
    /// Relays every connection to `upstream` (`host:port`).
    pub async fn start(upstream: &str) -> StatementCounter {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (upstream, counting) = (upstream.to_owned(), counted.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, counting) = (upstream.clone(), counting.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = (client.set_nodelay(true), server.set_nodelay(true));
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut server_read, mut server_write) = server.into_split();
                    let answers = tokio::io::copy(&mut server_read, &mut client_write);
                    let asks = relay_counting(&mut client_read, &mut server_write, &counting);
                    let _ = tokio::join!(answers, asks);
                });
            }
        });
        StatementCounter { port, counted }
    }

    /// `url` (`postgres://user@host:port/database`) through this relay.
    pub fn relayed(&self, url: &str) -> String {
        let (scheme_user, rest) = url.split_once('@').expect("a URL with a user");
        let (_, database) = rest.split_once('/').expect("a URL with a database");
        format!(
            "{scheme_user}@127.0.0.1:{}/{database}?sslmode=disable",
            self.port
        )
    }

    /// The `host:port` of the PostgreSQL in `url`.
    pub fn upstream_of(url: &str) -> &str {
        let rest = url.split_once('@').map_or(url, |(_, rest)| rest);
        let rest = rest.split_once("//").map_or(rest, |(_, rest)| rest);
        rest.split('/').next().expect("a host")
    }

    /// Statements sent so far, by every connection.
    pub fn statements(&self) -> u64 {
        self.counted.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Copies a client's messages to the server, counting `Q` and `E` ones.
async fn relay_counting(
    from: &mut tokio::net::tcp::OwnedReadHalf,
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    counted: &std::sync::atomic::AtomicU64,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The startup message, and an SSL or GSS request before it, carry no
    // type byte; every message after the startup does.
    const ENCRYPTION_REQUESTS: [u32; 2] = [80877103, 80877104];
    let mut typed = false;
    let mut unread: Vec<u8> = Vec::new();
    let mut buffer = vec![0; 64 << 10];
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buffer[..read]).await?;
        unread.extend_from_slice(&buffer[..read]);
        let mut at = 0;
        loop {
            let length_at = at + usize::from(typed);
            let Some(length) = unread.get(length_at..length_at + 4) else {
                break;
            };
            let end = length_at + u32::from_be_bytes(length.try_into().unwrap()) as usize;
            if unread.len() < end {
                break;
            }
            if typed {
                if matches!(unread[at], b'Q' | b'E') {
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            } else {
                let code = u32::from_be_bytes(unread[at + 4..at + 8].try_into().unwrap());
                typed = !ENCRYPTION_REQUESTS.contains(&code);
            }
            at = end;
        }
        unread.drain(..at);
    }
}
