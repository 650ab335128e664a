//! A real Flink standalone cluster for one test: the `pyflink` package's
//! Flink (`CTASD_TEST_FLINK_HOME`) with the Python of its virtualenv
//! (`CTASD_TEST_FLINK_PYTHON`), its configuration in a directory of its
//! own (127.0.0.1, free ports, small memory, no restarts), started and
//! stopped with Flink's own scripts. Skipped, loudly, when unset.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct FlinkCluster {
    home: PathBuf,
    python: PathBuf,
    conf: tempfile::TempDir,
    /// The JVM options Flink's own configuration gives every process.
    java_opts: String,
    /// A lib directory of its own (links to Flink's jars, and more), when
    /// jars were added: `bin/config.sh` honours `FLINK_LIB_DIR`.
    lib: Option<tempfile::TempDir>,
    pub rest_port: u16,
    running: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl FlinkCluster {
    /// A cluster configured (not started) from the environment, or `None`.
    pub fn configured() -> Option<Self> {
        let (Ok(home), Ok(python)) = (
            std::env::var("CTASD_TEST_FLINK_HOME"),
            std::env::var("CTASD_TEST_FLINK_PYTHON"),
        ) else {
            super::skipped(
                "Flink test skipped because CTASD_TEST_FLINK_HOME and \
                 CTASD_TEST_FLINK_PYTHON are not set",
            );
            return None;
        };
        let conf = tempfile::tempdir().unwrap();
        let home = PathBuf::from(home);
        for file in std::fs::read_dir(home.join("conf")).unwrap() {
            let file = file.unwrap().path();
            if file
                .extension()
                .is_some_and(|e| e == "properties" || e == "xml")
            {
                std::fs::copy(&file, conf.path().join(file.file_name().unwrap())).unwrap();
            }
        }
        let shipped = std::fs::read_to_string(home.join("conf/config.yaml")).unwrap();
        let java_opts = shipped
            .lines()
            .find_map(|l| l.trim().strip_prefix("all:"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        std::fs::write(conf.path().join("workers"), "127.0.0.1\n").unwrap();
        std::fs::create_dir_all(conf.path().join("log")).unwrap();
        Some(Self {
            home,
            python: PathBuf::from(python),
            conf,
            java_opts,
            lib: None,
            rest_port: 0,
            running: false,
        })
    }

    /// Puts `jar` in the cluster's `lib/` (its own, of links), as a Flink
    /// plugin is deployed: on the JobManager, the TaskManagers and the
    /// client. Before [`FlinkCluster::start`].
    pub fn add_to_lib(&mut self, jar: &Path) {
        let lib = self.lib.get_or_insert_with(|| {
            let lib = tempfile::tempdir().unwrap();
            for shipped in std::fs::read_dir(self.home.join("lib")).unwrap() {
                let shipped = shipped.unwrap().path();
                std::os::unix::fs::symlink(&shipped, lib.path().join(shipped.file_name().unwrap()))
                    .unwrap();
            }
            lib
        });
        std::os::unix::fs::symlink(jar, lib.path().join(jar.file_name().unwrap())).unwrap();
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.rest_port)
    }

    /// Flink's scripts, with this cluster's configuration and the
    /// virtualenv's `python` first on `PATH`.
    fn command(&self, script: &str) -> Command {
        let mut command = Command::new(self.home.join("bin").join(script));
        let venv_bin = self.python.parent().unwrap();
        let path = format!(
            "{}:{}",
            venv_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .env("FLINK_CONF_DIR", self.conf.path())
            .env("FLINK_LOG_DIR", self.conf.path().join("log"))
            .env("PATH", path)
            .stdin(Stdio::null());
        if let Some(lib) = &self.lib {
            command.env("FLINK_LIB_DIR", lib.path());
        }
        command
    }

    /// The cluster's configuration, on free ports, kept for its restarts.
    fn write_config(&mut self) {
        let rest_port = free_port();
        let dir = self.conf.path().display();
        let config = format!(
            "env.java.opts.all: {java_opts}\n\
             env.pid.dir: {dir}\n\
             env.log.dir: {dir}/log\n\
             jobmanager.bind-host: 127.0.0.1\n\
             jobmanager.rpc.address: 127.0.0.1\n\
             jobmanager.rpc.port: {rpc}\n\
             jobmanager.memory.process.size: 1024m\n\
             taskmanager.bind-host: 127.0.0.1\n\
             taskmanager.host: 127.0.0.1\n\
             taskmanager.rpc.port: 0\n\
             taskmanager.data.port: 0\n\
             taskmanager.numberOfTaskSlots: 8\n\
             taskmanager.memory.process.size: 1600m\n\
             blob.server.port: 0\n\
             parallelism.default: 1\n\
             rest.address: 127.0.0.1\n\
             rest.bind-address: 127.0.0.1\n\
             rest.port: {rest_port}\n\
             restart-strategy.type: none\n\
             python.client.executable: {python}\n\
             python.executable: {python}\n",
            rpc = free_port(),
            python = self.python.display(),
            java_opts = self.java_opts,
        );
        std::fs::write(self.conf.path().join("config.yaml"), config).unwrap();
        std::fs::write(
            self.conf.path().join("masters"),
            format!("127.0.0.1:{rest_port}\n"),
        )
        .unwrap();
        self.rest_port = rest_port;
    }

    /// Starts the cluster and waits until a TaskManager has registered.
    /// Clusters start one at a time: each picks free ports and binds them
    /// before the next one looks.
    pub async fn start(&mut self) {
        static STARTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        let _one_at_a_time = STARTING.lock().await;
        if self.rest_port == 0 {
            self.write_config();
        }
        let output = self.command("start-cluster.sh").output().unwrap();
        assert!(output.status.success(), "start-cluster.sh: {output:?}");
        self.running = true;
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let overview = client.get(format!("{}/overview", self.url())).send().await;
            if let Ok(response) = overview
                && let Ok(body) = response.json::<Value>().await
                && body["taskmanagers"].as_u64().unwrap_or(0) >= 1
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Flink cluster did not start; log: {}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops the cluster with Flink's script (its jobs are lost: no HA).
    pub fn stop(&mut self) {
        if self.running {
            let _ = self.command("stop-cluster.sh").output();
            self.running = false;
        }
    }

    /// `flink run -py <script> <spec>`, attached, whatever its outcome.
    pub fn try_python(&self, script: &Path, spec: &Value) -> Output {
        self.python_run(script, spec, false).output().unwrap()
    }

    /// `flink run -py <script> <spec>`: detached (`-d`) answers once the job
    /// is submitted; attached waits for it and keeps its output.
    pub fn run_python(&self, script: &Path, spec: &Value, detached: bool) -> Output {
        let output = self.python_run(script, spec, detached).output().unwrap();
        assert!(
            output.status.success(),
            "flink run {}: {}\n{}",
            script.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// The `flink run` of `script` with `spec` written to a file beside
    /// the cluster's configuration.
    fn python_run(&self, script: &Path, spec: &Value, detached: bool) -> Command {
        let spec_file = self
            .conf
            .path()
            .join(format!("spec-{}.json", uuid::Uuid::new_v4().simple()));
        std::fs::write(&spec_file, spec.to_string()).unwrap();
        let mut command = self.command("flink");
        command.args(["run", "-m", &format!("127.0.0.1:{}", self.rest_port)]);
        if detached {
            command.arg("-d");
        }
        command.arg("-py").arg(script).arg(&spec_file);
        command
    }

    /// Cancels a job through Flink's REST API, as an operator would.
    pub async fn cancel(&self, flink_job: &str) {
        let response = reqwest::Client::new()
            .patch(format!("{}/jobs/{flink_job}?mode=cancel", self.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202, "cancel {flink_job}");
    }

    /// Every line the cluster's processes logged.
    pub fn logs(&self) -> String {
        let mut logs = String::new();
        if let Ok(entries) = std::fs::read_dir(self.conf.path().join("log")) {
            for entry in entries.flatten() {
                logs.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
        logs
    }

    pub fn log_tail(&self) -> String {
        let mut tail = String::new();
        if let Ok(entries) = std::fs::read_dir(self.conf.path().join("log")) {
            for entry in entries.flatten() {
                let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let from = lines.len().saturating_sub(20);
                tail.push_str(&format!(
                    "== {}\n{}\n",
                    entry.path().display(),
                    lines[from..].join("\n")
                ));
            }
        }
        tail
    }
}

impl Drop for FlinkCluster {
    /// A test that fails half-way leaves no cluster behind.
    fn drop(&mut self) {
        self.stop();
    }
}

/// The directory of the scripts the end-to-end tests run on Flink.
pub fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/flink")
}
