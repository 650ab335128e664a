//! Settings from flags, each also readable from a `CTASD_*` variable, and
//! for `serve` from a config file ([`file`]).
//!
//! Values that may carry credentials (the database URL, the secret key) are
//! wrapped in [`SecretString`], so `Debug` and `--help` never print them.

pub mod file;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use secrecy::{ExposeSecret, SecretString};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Where the store lives and how secrets are sealed: what `serve` and
/// `migrate` share.
#[derive(Debug, Clone, Args)]
pub struct StoreSettings {
    /// Store URL: `sqlite:<path>` or `postgres://...`. Default: `<data-dir>/ctasd.db` (SQLite).
    #[arg(long, env = "CTASD_DATABASE_URL", hide_env_values = true, value_parser = secret)]
    pub database_url: Option<SecretString>,

    /// Directory for the embedded store and the generated secret key.
    #[arg(long, env = "CTASD_DATA_DIR", default_value = "./ctasd-data")]
    pub data_dir: PathBuf,

    /// Keys that seal secrets at rest: `<key-id>:<base64 of 32 bytes>`, several
    /// separated by commas, the first one active. Default: the key file.
    #[arg(long, env = "CTASD_SECRET_KEY", hide_env_values = true, value_parser = secret)]
    pub secret_key: Option<SecretString>,

    /// File holding the keys (one per line); created with a fresh key, mode
    /// 0600, when missing. Default: `<data-dir>/secret.key`.
    #[arg(long, env = "CTASD_SECRET_KEY_FILE")]
    pub secret_key_file: Option<PathBuf>,
}

impl StoreSettings {
    pub fn for_data_dir(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            database_url: None,
            data_dir: data_dir.into(),
            secret_key: None,
            secret_key_file: None,
        }
    }

    pub fn database_url(&self) -> Option<&str> {
        self.database_url.as_ref().map(|u| u.expose_secret())
    }

    pub fn secret_key_file(&self) -> PathBuf {
        self.secret_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join("secret.key"))
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeSettings {
    /// Address and port to listen on.
    #[arg(long, env = "CTASD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub store: StoreSettings,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "CTASD_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Longest a request may take before it is answered with 408, in seconds.
    #[arg(long, env = "CTASD_REQUEST_TIMEOUT_SECS", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Largest total size of a request's header names and values, in bytes;
    /// larger requests get 431.
    #[arg(long, env = "CTASD_MAX_HEADER_BYTES", default_value_t = 16 * 1024)]
    pub max_header_bytes: usize,

    /// Most connections open at once; the next one is answered 503.
    #[arg(long, env = "CTASD_MAX_CONNECTIONS", default_value_t = 512)]
    pub max_connections: usize,

    /// Longest a client may take to send a request's headers, in seconds;
    /// a keep-alive connection with no new request is closed after it too.
    #[arg(long, env = "CTASD_HEADER_READ_TIMEOUT_SECS", default_value_t = 10)]
    pub header_read_timeout_secs: u64,

    /// Longest a connection may stay silent in the middle of a request or
    /// an answer (no byte sent or read), in seconds.
    #[arg(long, env = "CTASD_IDLE_TIMEOUT_SECS", default_value_t = 60)]
    pub idle_timeout_secs: u64,

    /// How long the answer to a POST sent with an `Idempotency-Key` is kept
    /// and replayed to a retry with the same key, in seconds.
    #[arg(long, env = "CTASD_IDEMPOTENCY_KEY_LIFETIME_SECS", default_value_t = 24 * 60 * 60)]
    pub idempotency_key_lifetime_secs: u64,

    /// How far ahead of this server's clock an engine time in a status
    /// report may be, in seconds; further is refused (a time in
    /// microseconds reads as thousands of years ahead).
    #[arg(long, env = "CTASD_MAX_ENGINE_TIME_AHEAD_SECS", default_value_t = 300)]
    pub max_engine_time_ahead_secs: u32,

    /// Days a job is kept after it ended (FINISHED, FAILED or CANCELED with
    /// nothing left to do); older ones are deleted with their history, in
    /// batches, at start and every hour. 0 keeps every job.
    #[arg(long, env = "CTASD_ENDED_JOB_RETENTION_DAYS", default_value_t = 30)]
    pub ended_job_retention_days: u32,

    /// Hosts an engine URL may name, separated by commas: host names,
    /// `*.domain`, IP addresses or ranges (`10.1.0.0/16`). None by default:
    /// any host.
    #[arg(long, env = "CTASD_ENGINE_ALLOWED_HOSTS", value_delimiter = ',')]
    pub engine_allowed_hosts: Vec<String>,

    /// Origins a browser app on another origin may call ctasd from (CORS),
    /// separated by commas, e.g. `https://dash.example.com`; `*` for any.
    /// None by default: browsers then allow only ctasd's own pages.
    #[arg(long, env = "CTASD_CORS_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub cors_allowed_origins: Vec<String>,

    /// Bearer tokens, one per line: `<name>:<role>:<sha256 hex of the token>`
    /// (create them with `ctasd token`).
    #[arg(long, env = "CTASD_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,

    /// Bearer tokens as in the file, separated by commas.
    #[arg(long, env = "CTASD_TOKENS", hide_env_values = true, value_parser = secret)]
    pub tokens: Option<SecretString>,

    /// Serve without tokens on a non-loopback address. Anyone who can reach
    /// the port can then read and change everything.
    #[arg(long, env = "CTASD_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,

    /// A TOML file with any of these settings, named as their flags
    /// without the dashes; flags and variables win over it.
    #[arg(long, env = "CTASD_CONFIG")]
    pub config: Option<PathBuf>,

    /// Print the settings serve would run with (secrets masked), each with
    /// where it came from, and exit.
    #[arg(long)]
    pub print_config: bool,

    /// For crash tests only: `<point>:<n>` kills the process with SIGKILL the
    /// n-th time it reaches that crash point (see `crate::fault`).
    #[cfg(feature = "crash-points")]
    #[arg(long, env = "CTASD_FAULT_KILL_AT", hide = true)]
    pub fault_kill_at: Option<crate::fault::KillAt>,
}

impl ServeSettings {
    pub fn new(listen: SocketAddr, store: StoreSettings) -> Self {
        Self {
            listen,
            store,
            max_body_bytes: 1024 * 1024,
            request_timeout_secs: 30,
            max_header_bytes: 16 * 1024,
            max_connections: 512,
            header_read_timeout_secs: 10,
            idle_timeout_secs: 60,
            idempotency_key_lifetime_secs: 24 * 60 * 60,
            max_engine_time_ahead_secs: 300,
            ended_job_retention_days: 30,
            engine_allowed_hosts: Vec::new(),
            cors_allowed_origins: Vec::new(),
            tokens_file: None,
            tokens: None,
            insecure_no_auth: false,
            config: None,
            print_config: false,
            #[cfg(feature = "crash-points")]
            fault_kill_at: None,
        }
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }

    /// How long ended jobs are kept; `None`: for ever.
    pub fn ended_job_retention(&self) -> Option<Duration> {
        (self.ended_job_retention_days > 0)
            .then(|| Duration::from_secs(u64::from(self.ended_job_retention_days) * 24 * 60 * 60))
    }
}

#[derive(Debug, Clone, Args)]
pub struct LogSettings {
    /// Log line format.
    #[arg(
        long,
        env = "CTASD_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,

    /// Log filter, e.g. `info` or `ctasd=debug,sqlx=warn`.
    #[arg(long, env = "CTASD_LOG", default_value = "info", global = true)]
    pub log: String,
}

fn secret(value: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(SecretString::from(value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_never_shows_the_database_url_or_the_key() {
        let mut settings = StoreSettings::for_data_dir("/tmp/x");
        settings.database_url = Some(SecretString::from("postgres://u:hunter2@h/db".to_owned()));
        settings.secret_key = Some(SecretString::from("k:c2VjcmV0".to_owned()));
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("c2VjcmV0"),
            "{shown}"
        );
    }
}
