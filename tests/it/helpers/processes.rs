//! `ctasd serve` as a child process, as a user runs it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};

use serde_json::Value;

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

    /// Started, once it says it is ready (its store reached, every request
    /// served).
    pub fn start_with_env(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_until(data_dir, env, "ctasd ready")
    }

    /// Started, once its port is bound (its store perhaps not reached yet).
    pub fn start_listening(data_dir: &Path, env: &[(&str, &str)]) -> Self {
        Self::start_until(data_dir, env, "ctasd listening")
    }

    fn start_until(data_dir: &Path, env: &[(&str, &str)], announced: &'static str) -> Self {
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
                    && event["message"] == announced
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

    /// One JSON request as a client sends it: the status and the JSON
    /// answer, or the transport error when the server is gone.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> reqwest::Result<(u16, Value)> {
        let mut request = reqwest::Client::new().request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(body);
        }
        let reply = request.send().await?;
        let status = reply.status().as_u16();
        Ok((status, reply.json().await.unwrap_or(Value::Null)))
    }

    /// The job once none of its actions is pending (or after 10 s).
    pub async fn job_once_settled(&self, id: &str) -> Value {
        let mut job = Value::Null;
        for _ in 0..100 {
            job = self
                .call(reqwest::Method::GET, &format!("/v1/jobs/{id}"), None)
                .await
                .unwrap()
                .1;
            let pending = job["actions"]
                .as_array()
                .is_some_and(|actions| actions.iter().any(|a| a["state"] == "pending"));
            if !pending {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        job
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
