//! Test harness: servers on `127.0.0.1:0`, fresh databases per test, typed
//! request helpers.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::{Mutex, mpsc};

use ctasd::config::{ServeSettings, StoreSettings};
use ctasd::server::RunningServer;
use ctasd::store::{Keyring, Store};
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};
use sqlx::Connection;

/// The password every test registers; it must never appear anywhere else.
pub const SECRET: &str = "s3cret-Value";

pub fn postgres_url() -> Option<String> {
    service_url("CTASD_TEST_POSTGRES_URL", "PostgreSQL")
}

pub fn mysql_url() -> Option<String> {
    service_url("CTASD_TEST_MYSQL_URL", "MariaDB/MySQL")
}

fn service_url(variable: &str, service: &str) -> Option<String> {
    match std::env::var(variable) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            eprintln!("SKIPPED: {service} test skipped because {variable} is not set");
            None
        }
    }
}

fn unique(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

/// Replace the database of a `scheme://authority/database` URL.
fn with_database(url: &str, database: &str) -> String {
    let (base, _) = url
        .rsplit_once('/')
        .expect("a database URL names a database");
    format!("{base}/{database}")
}

fn run_blocking_cleanup(cleanup: impl std::future::Future<Output = ()> + Send + 'static) {
    // Drop cannot await; run the cleanup on a runtime of its own, on a thread
    // of its own, so it works inside and outside a Tokio runtime.
    let _ = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(cleanup)
    })
    .join();
}

/// A PostgreSQL database made for one test and dropped after it.
pub struct TestPostgres {
    admin_url: String,
    pub database: String,
    pub url: String,
}

impl TestPostgres {
    pub async fn create() -> Option<Self> {
        Self::create_named(&unique("ctasd_test")).await
    }

    /// A database with exactly this name (which should be unique), for
    /// names that are themselves the test.
    pub async fn create_named(database: &str) -> Option<Self> {
        let admin_url = postgres_url()?;
        let database = database.to_owned();
        let mut admin = sqlx::PgConnection::connect(&admin_url)
            .await
            .expect("connect to test PostgreSQL");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "CREATE DATABASE \"{}\"",
            database.replace('"', "\"\"")
        )))
        .execute(&mut admin)
        .await
        .unwrap();
        let url = with_database(
            &admin_url,
            &database
                .replace('?', "%3F")
                .replace('&', "%26")
                .replace('=', "%3D"),
        );
        Some(Self {
            admin_url,
            database,
            url,
        })
    }

    pub async fn connect(&self) -> sqlx::PgConnection {
        sqlx::PgConnection::connect(&self.url).await.unwrap()
    }

    pub async fn execute(&self, sql: &str) {
        let mut conn = self.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
    }

    /// `host:port` of the server, for jdbc base URLs.
    pub fn host_port(&self) -> String {
        let after_at = self
            .admin_url
            .rsplit_once('@')
            .map(|(_, r)| r)
            .unwrap_or(&self.admin_url);
        let after_scheme = after_at
            .rsplit_once("//")
            .map(|(_, r)| r)
            .unwrap_or(after_at);
        after_scheme.split('/').next().unwrap().to_owned()
    }

    pub fn username(&self) -> String {
        let rest = self.admin_url.split_once("//").unwrap().1;
        let userinfo = rest.split_once('@').map(|(u, _)| u).unwrap_or("postgres");
        userinfo.split(':').next().unwrap().to_owned()
    }
}

/// A PostgreSQL role with [`SECRET`] as password, allowed to connect to a
/// test database and create tables in its `public` schema; dropped after
/// the test (roles belong to the whole server).
pub struct TestRole {
    admin_url: String,
    database_url: String,
    pub name: String,
}

impl TestPostgres {
    pub async fn limited_role(&self) -> TestRole {
        let name = unique("ctasd_role");
        self.execute(&format!(
            "CREATE ROLE \"{name}\" LOGIN PASSWORD '{SECRET}'; \
             GRANT CONNECT ON DATABASE \"{db}\" TO \"{name}\"; \
             GRANT USAGE, CREATE ON SCHEMA public TO \"{name}\"",
            db = self.database
        ))
        .await;
        TestRole {
            admin_url: self.admin_url.clone(),
            database_url: self.url.clone(),
            name,
        }
    }
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let (admin_url, database_url, name) = (
            self.admin_url.clone(),
            self.database_url.clone(),
            self.name.clone(),
        );
        run_blocking_cleanup(async move {
            if let Ok(mut db) = sqlx::PgConnection::connect(&database_url).await {
                let sql = format!("DROP OWNED BY \"{name}\"");
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(&mut db)
                    .await;
            }
            if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                let sql = format!("DROP ROLE IF EXISTS \"{name}\"");
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(&mut admin)
                    .await;
            }
        });
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let database = self.database.clone();
        run_blocking_cleanup(async move {
            if let Ok(mut admin) = sqlx::PgConnection::connect(&admin_url).await {
                let sql = format!("DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)");
                let _ = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&mut admin)
                    .await;
            }
        });
    }
}

/// A MariaDB database, and a user whose password is [`SECRET`], made for one
/// test and dropped after it.
pub struct TestMysql {
    admin_url: String,
    pub database: String,
    pub user: String,
}

impl TestMysql {
    pub async fn create() -> Option<Self> {
        let admin_url = mysql_url()?;
        let database = unique("ctasd_test");
        let user = unique("ctasd").chars().take(30).collect::<String>();
        let mut admin = sqlx::MySqlConnection::connect(&admin_url)
            .await
            .expect("connect to test MariaDB");
        for sql in [
            format!("CREATE DATABASE `{database}`"),
            format!("CREATE USER '{user}'@'%' IDENTIFIED BY '{SECRET}'"),
            format!("GRANT ALL ON `{database}`.* TO '{user}'@'%'"),
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut admin)
                .await
                .unwrap();
        }
        Some(Self {
            admin_url,
            database,
            user,
        })
    }

    pub async fn connect(&self) -> sqlx::MySqlConnection {
        let url = with_database(&self.admin_url, &self.database);
        sqlx::MySqlConnection::connect(&url).await.unwrap()
    }

    pub async fn execute(&self, sql: &str) {
        let mut conn = self.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap();
    }

    pub fn host_port(&self) -> String {
        let rest = self.admin_url.split_once("//").unwrap().1;
        let after_at = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
        after_at.split('/').next().unwrap().to_owned()
    }
}

impl Drop for TestMysql {
    fn drop(&mut self) {
        let (admin_url, database, user) = (
            self.admin_url.clone(),
            self.database.clone(),
            self.user.clone(),
        );
        run_blocking_cleanup(async move {
            if let Ok(mut admin) = sqlx::MySqlConnection::connect(&admin_url).await {
                for sql in [
                    format!("DROP DATABASE IF EXISTS `{database}`"),
                    format!("DROP USER IF EXISTS '{user}'@'%'"),
                ] {
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut admin)
                        .await;
                }
            }
        });
    }
}

/// A ctasd server in this process.
pub struct TestApp {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    settings: ServeSettings,
    server: Option<RunningServer>,
    _temp: Arc<tempfile::TempDir>,
}

impl TestApp {
    /// On the embedded default: SQLite in a fresh data directory.
    pub async fn spawn() -> Self {
        Self::spawn_with(None).await
    }

    /// On the store at `database_url` (e.g. a [`TestPostgres`] URL).
    pub async fn spawn_with(database_url: Option<&str>) -> Self {
        let temp = Arc::new(tempfile::tempdir().unwrap());
        let mut store = StoreSettings::for_data_dir(temp.path().join("data"));
        store.database_url = database_url.map(|u| SecretString::from(u.to_owned()));
        let settings = ServeSettings::new("127.0.0.1:0".parse().unwrap(), store);
        Self::start(settings, temp).await
    }

    pub async fn spawn_with_settings(adjust: impl FnOnce(&mut ServeSettings)) -> Self {
        let temp = Arc::new(tempfile::tempdir().unwrap());
        let mut settings = ServeSettings::new(
            "127.0.0.1:0".parse().unwrap(),
            StoreSettings::for_data_dir(temp.path().join("data")),
        );
        adjust(&mut settings);
        Self::start(settings, temp).await
    }

    async fn start(settings: ServeSettings, temp: Arc<tempfile::TempDir>) -> Self {
        let server = ctasd::server::start(settings.clone())
            .await
            .expect("server starts");
        Self {
            addr: server.addr,
            client: reqwest::Client::new(),
            settings,
            server: Some(server),
            _temp: temp,
        }
    }

    /// A scratch directory that lives as long as this app.
    pub fn scratch(&self, name: &str) -> PathBuf {
        let dir = self._temp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Another server on the same store and data directory, as a second replica.
    pub async fn sibling(&self) -> Self {
        Self::start(self.settings.clone(), self._temp.clone()).await
    }

    /// Stop this server and start another on the same store and data directory.
    pub async fn restart(self) -> Self {
        self.stop_keeping_store().await.start_again().await
    }

    /// The settings this server was started with.
    pub fn settings(&self) -> &ServeSettings {
        &self.settings
    }

    /// Stop the server; its store and data directory stay.
    pub async fn stop_keeping_store(mut self) -> StoppedApp {
        self.server.take().unwrap().stop().await;
        StoppedApp {
            settings: self.settings.clone(),
            temp: self._temp.clone(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn get(&self, path: &str) -> Reply {
        Reply::from(self.client.get(self.url(path)).send().await.unwrap()).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        Reply::from(
            self.client
                .post(self.url(path))
                .json(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn patch(&self, path: &str, body: &Value) -> Reply {
        Reply::from(
            self.client
                .patch(self.url(path))
                .json(body)
                .send()
                .await
                .unwrap(),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        Reply::from(self.client.delete(self.url(path)).send().await.unwrap()).await
    }

    /// `PUT /v1/jobs/{job}/status` with `{"status": status}`.
    pub async fn put_status(&self, job: &str, status: &str) -> Reply {
        self.spawn_put_status(job, status).await.unwrap()
    }

    /// The same report on a task of its own, to run beside others.
    pub fn spawn_put_status(&self, job: &str, status: &str) -> tokio::task::JoinHandle<Reply> {
        let request = self
            .client
            .put(self.url(&format!("/v1/jobs/{job}/status")))
            .json(&json!({"status": status}));
        tokio::spawn(async move { Reply::from(request.send().await.unwrap()).await })
    }

    pub async fn register(&self, name: &str, options: Value) -> Reply {
        self.post("/v1/catalogs", &json!({"name": name, "options": options}))
            .await
    }
}

/// A server that was stopped, with what it needs to start again.
pub struct StoppedApp {
    settings: ServeSettings,
    temp: Arc<tempfile::TempDir>,
}

impl StoppedApp {
    /// A handle on the stopped server's store (same database, same keys).
    pub async fn store(&self) -> Arc<dyn Store> {
        ctasd::server::open_store(&self.settings.store)
            .await
            .unwrap()
    }

    pub async fn start_again(self) -> TestApp {
        let mut settings = self.settings;
        settings.listen = "127.0.0.1:0".parse().unwrap();
        TestApp::start(settings, self.temp).await
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub body: Value,
}

impl Reply {
    pub async fn from(response: reqwest::Response) -> Self {
        let status = response.status();
        let headers = response.headers().clone();
        let content_type = headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Self {
            status,
            content_type,
            headers,
            text,
            body,
        }
    }

    /// Asserts a problem+json answer with this status and code.
    #[track_caller]
    pub fn assert_problem(&self, status: u16, code: &str) -> &Self {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.text
        );
        assert_eq!(
            self.content_type, "application/problem+json",
            "body: {}",
            self.text
        );
        assert_eq!(self.body["code"], code, "body: {}", self.text);
        assert_eq!(self.body["status"], status);
        assert!(
            self.body["type"]
                .as_str()
                .unwrap()
                .starts_with("urn:ctasd:problem:")
        );
        assert!(!self.body["title"].as_str().unwrap().is_empty());
        self
    }

    pub fn detail(&self) -> &str {
        self.body["detail"].as_str().unwrap_or_default()
    }
}

/// jdbc options for a [`TestPostgres`] database, with [`SECRET`] as password.
pub fn postgres_options(pg: &TestPostgres) -> Value {
    json!({
        "type": "jdbc",
        "base-url": format!("jdbc:postgresql://{}", pg.host_port()),
        "default-database": pg.database,
        "username": pg.username(),
        "password": SECRET,
    })
}

pub fn mysql_options(my: &TestMysql) -> Value {
    json!({
        "type": "jdbc",
        "base-url": format!("jdbc:mariadb://{}", my.host_port()),
        "default-database": my.database,
        "username": my.user,
        "password": SECRET,
    })
}

/// A SQLite database file `<dir>/<name>.db` with the given DDL applied.
pub async fn sqlite_database(dir: &Path, name: &str, ddl: &str) {
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.join(format!("{name}.db")))
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl.to_owned()))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}

/// Prints a figure a test measured, and appends it to the file named by
/// `CTASD_TEST_FIGURES` when that is set: cargo shows a passing test's output
/// only with `--nocapture`, and `.ci/run` prints that file after the tests.
pub fn figure(line: &str) {
    eprintln!("{line}");
    if let Ok(path) = std::env::var("CTASD_TEST_FIGURES") {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
}

/// A store opened directly (no server), migrated, for the conformance suite.
pub async fn open_store(
    database_url: Option<&str>,
    data_dir: &Path,
    keyring: Keyring,
) -> Arc<dyn Store> {
    let store = ctasd::store::connect(database_url, data_dir, Arc::new(keyring))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

pub fn fresh_keyring() -> Keyring {
    Keyring::parse(&ctasd::store::secrets::generate_key_spec()).unwrap()
}

/// `ctasd serve` as a user runs it, with its log captured.
pub struct ServerProcess {
    child: Child,
    pub base: String,
    log: Arc<Mutex<String>>,
}

impl ServerProcess {
    pub fn start(data_dir: &Path) -> Self {
        Self::start_with_env(data_dir, &[])
    }

    pub fn start_with_env(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctasd"))
            .envs(env.iter().copied())
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
                "--log",
                "debug",
                "--data-dir",
            ])
            .arg(data_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (addr_tx, addr_rx) = mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(event) = serde_json::from_str::<Value>(&line)
                    && event["message"] == "ctasd listening"
                {
                    let _ = addr_tx.send(event["addr"].as_str().unwrap().to_owned());
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let addr = addr_rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("server announces its address");
        Self {
            child,
            base: format!("http://{addr}"),
            log,
        }
    }

    /// Waits up to `timeout` for the process to end by itself; whether it
    /// was killed by SIGKILL, or `None` if it is still running.
    pub fn wait_for_sigkill(&mut self, timeout: std::time::Duration) -> Option<bool> {
        use std::os::unix::process::ExitStatusExt;
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status.signal() == Some(9));
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// SIGTERM, and the log it wrote.
    pub fn stop(mut self) -> String {
        Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        self.child.wait().unwrap();
        // Let the reader thread drain the pipe.
        std::thread::sleep(std::time::Duration::from_millis(200));
        self.log.lock().unwrap().clone()
    }
}

impl Drop for ServerProcess {
    /// A test that fails half-way leaves no server behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy in front of a real server, which a test can make refuse
/// connections (and cut the open ones) and accept again, on the same port.
pub struct TcpProxy {
    pub port: u16,
    target: SocketAddr,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl TcpProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = Self::bind(0).await;
        let proxy = Self {
            port: listener.local_addr().unwrap().port(),
            target,
            tasks: Default::default(),
        };
        proxy.serve(listener);
        proxy
    }

    async fn bind(port: u16) -> tokio::net::TcpListener {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], port)))
            .unwrap();
        socket.listen(64).unwrap()
    }

    fn serve(&self, listener: tokio::net::TcpListener) {
        let (target, tasks) = (self.target, self.tasks.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                    continue;
                };
                let pipe = tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
                tasks.lock().unwrap().push(pipe);
            }
        });
        self.tasks.lock().unwrap().push(accept);
    }

    /// Close the port and cut every open connection.
    pub fn refuse(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// Listen on the same port again.
    pub async fn accept_again(&self) {
        // The aborted accept task drops its listener asynchronously.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let listener = Self::bind(self.port).await;
        self.serve(listener);
    }
}
