//! The client command line, as `flink list` or `kubectl get` are:
//! `ctasd jobs list|get|events`, `ctasd catalogs list|get`,
//! `ctasd engines list`, `ctasd report JOB STATUS`. It speaks to a running
//! ctasd over its HTTP API only, prints aligned tables (or the API's JSON
//! with `--json`), and says what went wrong with the problem's title and
//! detail and an exit code that names the kind of failure.
//!
//! Where the server is and the token: `--server` / `--token`, else
//! `CTASD_SERVER` / `CTASD_TOKEN`, else the config file
//! (`$XDG_CONFIG_HOME/ctasd/client.toml` or `~/.config/ctasd/client.toml`,
//! or `--config`), else `http://127.0.0.1:8080` and no token.

mod table;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use table::{Table, facts, field, short_time};

/// How to reach the server, shared by every client command.
#[derive(Debug, Clone, clap::Args)]
pub struct Connection {
    /// The server's base URL [default: the config file's, else http://127.0.0.1:8080].
    #[arg(long, env = "CTASD_SERVER", global = true)]
    server: Option<String>,
    /// A bearer token [default: the config file's].
    #[arg(long, env = "CTASD_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// A client config file (`server = "…"`, `token = "…"`).
    #[arg(long, env = "CTASD_CLIENT_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

/// `ctasd jobs …`
#[derive(Debug, clap::Subcommand)]
pub enum Jobs {
    /// Jobs, newest first.
    List {
        /// Only jobs in this status (e.g. RUNNING).
        #[arg(long)]
        status: Option<String>,
        /// Only jobs with a hook on this catalog.
        #[arg(long)]
        catalog: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// One job: its hooks and its actions.
    Get { job: String },
    /// A job's timeline, oldest first.
    Events { job: String },
}

/// `ctasd catalogs …`
#[derive(Debug, clap::Subcommand)]
pub enum Catalogs {
    /// Registered catalogs, by name.
    List,
    /// One catalog and its options (secrets masked by the server).
    Get { name: String },
}

/// `ctasd engines …`
#[derive(Debug, clap::Subcommand)]
pub enum Engines {
    /// Registered engines and whether ctasd reaches them.
    List,
}

/// What a client command asks of the server.
#[derive(Debug)]
pub enum Request {
    Jobs(Jobs),
    Catalogs(Catalogs),
    Engines(Engines),
    Report {
        job: String,
        status: String,
        failure: Option<String>,
    },
}

/// Exit codes, by what went wrong.
pub mod exit {
    /// The server refused the request (400, 409, 412, 422…).
    pub const REFUSED: u8 = 3;
    /// What was asked for does not exist (404).
    pub const NOT_FOUND: u8 = 4;
    /// No token, or one that may not do this (401, 403).
    pub const NOT_ALLOWED: u8 = 5;
    /// The server failed or is not ready (5xx).
    pub const SERVER: u8 = 6;
    /// The server could not be reached, or the config file not read.
    pub const UNREACHABLE: u8 = 7;
}

/// A failure, as the user reads it, and its exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// Runs a client command; what it printed, or why not, as the exit code.
pub async fn run(connection: Connection, request: Request) -> ExitCode {
    match run_request(&connection, request).await {
        Ok(output) => {
            print!("{output}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

async fn run_request(connection: &Connection, request: Request) -> Result<String, Failure> {
    let client = Client::new(connection)?;
    let json = connection.json;
    let rendered = match request {
        Request::Jobs(Jobs::List {
            status,
            catalog,
            limit,
        }) => {
            let mut query = vec![("page_size", limit.to_string())];
            query.extend(status.map(|s| ("status", s)));
            query.extend(catalog.map(|c| ("catalog", c)));
            let page = client.get("/v1/jobs", &query).await?;
            if json {
                return Ok(pretty(&page));
            }
            job_table(&page["jobs"])
        }
        Request::Jobs(Jobs::Get { job }) => {
            let job = client
                .get(&format!("/v1/jobs/{}", segment(&job)), &[])
                .await?;
            if json {
                return Ok(pretty(&job));
            }
            job_details(&job)
        }
        Request::Jobs(Jobs::Events { job }) => {
            let path = format!("/v1/jobs/{}/events", segment(&job));
            let events = client.get(&path, &[("page_size", "1000".into())]).await?;
            if json {
                return Ok(pretty(&events));
            }
            event_table(&events["events"])
        }
        Request::Catalogs(Catalogs::List) => {
            let page = client
                .get("/v1/catalogs", &[("page_size", "1000".into())])
                .await?;
            if json {
                return Ok(pretty(&page));
            }
            let mut table = Table::new(["NAME", "TYPE", "COMMENT", "REGISTERED"]);
            for c in page["catalogs"].as_array().into_iter().flatten() {
                table.row([
                    field(&c["name"]),
                    field(&c["type"]),
                    field(&c["comment"]),
                    short_time(&c["created_at"]),
                ]);
            }
            table.render()
        }
        Request::Catalogs(Catalogs::Get { name }) => {
            let catalog = client
                .get(&format!("/v1/catalogs/{}", segment(&name)), &[])
                .await?;
            if json {
                return Ok(pretty(&catalog));
            }
            let mut table = Table::new(["OPTION", "VALUE"]);
            for (key, value) in catalog["options"].as_object().into_iter().flatten() {
                table.row([key.clone(), field(value)]);
            }
            let about = facts(&[
                ("name", field(&catalog["name"])),
                ("type", field(&catalog["type"])),
                ("comment", field(&catalog["comment"])),
            ]);
            format!("{about}\n{}", table.render())
        }
        Request::Engines(Engines::List) => {
            let page = client
                .get("/v1/engines", &[("page_size", "1000".into())])
                .await?;
            if json {
                return Ok(pretty(&page));
            }
            let mut table = Table::new(["NAME", "URL", "REACHABLE", "WATCHED JOBS", "VERSION"]);
            for e in page["engines"].as_array().into_iter().flatten() {
                table.row([
                    field(&e["name"]),
                    field(&e["url"]),
                    field(&e["reachability"]["state"]),
                    field(&e["watched_jobs"]),
                    field(&e["reachability"]["engine_version"]),
                ]);
            }
            table.render()
        }
        Request::Report {
            job,
            status,
            failure,
        } => {
            let mut body = serde_json::json!({"status": status});
            if let Some(failure) = failure {
                body["failure"] = Value::String(failure);
            }
            let path = format!("/v1/jobs/{}/status", segment(&job));
            let answer = client.put(&path, &body).await?;
            if json {
                return Ok(pretty(&answer));
            }
            let mut out = format!(
                "job {} is {} ({})\n",
                field(&answer["job"]["id"]),
                field(&answer["job"]["status"]),
                field(&answer["job"]["settlement"])
            );
            for action in answer["actions_taken"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "  hook {} {}: {}\n",
                    field(&action["hook"]),
                    field(&action["action"]),
                    action["outcome"]
                        .as_str()
                        .unwrap_or(action["state"].as_str().unwrap_or("-"))
                ));
            }
            out
        }
    };
    Ok(rendered)
}

fn pretty(value: &Value) -> String {
    format!(
        "{}\n",
        serde_json::to_string_pretty(value).expect("JSON prints")
    )
}

/// A path segment, escaped: ids and names reach the URL as they are typed.
fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn job_table(jobs: &Value) -> String {
    let mut table = Table::new(["ID", "NAME", "MODE", "STATUS", "SETTLEMENT", "CREATED"]);
    for job in jobs.as_array().into_iter().flatten() {
        table.row([
            field(&job["id"]),
            field(&job["name"]),
            field(&job["mode"]),
            field(&job["status"]),
            field(&job["settlement"]),
            short_time(&job["created_at"]),
        ]);
    }
    table.render()
}

fn job_details(job: &Value) -> String {
    let mut fields = vec![
        ("id", field(&job["id"])),
        ("name", field(&job["name"])),
        ("mode", field(&job["mode"])),
        ("status", field(&job["status"])),
        ("settlement", field(&job["settlement"])),
        ("created", short_time(&job["created_at"])),
    ];
    if let Some(failure) = job["failure"].as_str() {
        fields.push(("failure", failure.to_owned()));
    }
    let out = facts(&fields);
    let mut hooks = Table::new(["HOOK", "KIND", "TARGET", "WRITES TO"]);
    for hook in job["hooks"].as_array().into_iter().flatten() {
        let target = &hook["target"];
        hooks.row([
            field(&hook["index"]),
            field(&hook["kind"]),
            format!(
                "{}.{}.{}",
                field(&target["catalog"]),
                field(&target["database"]),
                field(&target["table"])
            ),
            field(&hook["write_location"]["name"]),
        ]);
    }
    let mut actions = Table::new([
        "#", "HOOK", "ACTION", "ON", "STATE", "ATTEMPTS", "OUTCOME", "ERROR",
    ]);
    for a in job["actions"].as_array().into_iter().flatten() {
        actions.row([
            field(&a["id"]),
            field(&a["hook"]),
            field(&a["action"]),
            field(&a["trigger"]),
            field(&a["state"]),
            field(&a["attempts"]),
            field(&a["outcome"]),
            field(&a["last_error"]),
        ]);
    }
    format!("{out}\n{}\n{}", hooks.render(), actions.render())
}

fn event_table(events: &Value) -> String {
    let mut table = Table::new(["AT", "KIND", "WHAT"]);
    for e in events.as_array().into_iter().flatten() {
        let what = match e["kind"].as_str() {
            Some("status") => format!("{} -> {}", field(&e["from"]), field(&e["to"])),
            Some("action") => format!(
                "hook {} {} {}",
                field(&e["hook"]),
                field(&e["action"]),
                field(&e["outcome"])
            ),
            Some("audit") => format!(
                "hook {} {} {}",
                field(&e["hook"]),
                field(&e["name"]),
                if e["passed"] == true {
                    "passed"
                } else {
                    "failed"
                }
            ),
            Some("intervention") => format!("{} {}", field(&e["decision"]), field(&e["reason"])),
            _ => String::new(),
        };
        table.row([short_time(&e["at"]), field(&e["kind"]), what]);
    }
    table.render()
}

/// The server, and the token it is given.
struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    server: Option<String>,
    token: Option<String>,
}

impl Client {
    fn new(connection: &Connection) -> Result<Self, Failure> {
        let file = config_file(connection.config.as_deref())?;
        let base = connection
            .server
            .clone()
            .or(file.server)
            .unwrap_or_else(|| "http://127.0.0.1:8080".into());
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("ctasd-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Failure::new(exit::UNREACHABLE, e.to_string()))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: connection.token.clone().or(file.token),
        })
    }

    async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, Failure> {
        let mut url = url::Url::parse(&format!("{}{path}", self.base)).map_err(|e| {
            Failure::new(
                exit::UNREACHABLE,
                format!("'{}' is not a server URL: {e}", self.base),
            )
        })?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        self.send(self.http.get(url)).await
    }

    async fn put(&self, path: &str, body: &Value) -> Result<Value, Failure> {
        self.send(self.http.put(format!("{}{path}", self.base)).json(body))
            .await
    }

    async fn send(&self, mut request: reqwest::RequestBuilder) -> Result<Value, Failure> {
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await.map_err(|e| {
            Failure::new(
                exit::UNREACHABLE,
                format!("ctasd at {} cannot be reached: {e}", self.base),
            )
        })?;
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let code = match status.as_u16() {
            401 | 403 => exit::NOT_ALLOWED,
            404 => exit::NOT_FOUND,
            500.. => exit::SERVER,
            _ => exit::REFUSED,
        };
        let title = body["title"]
            .as_str()
            .unwrap_or(status.canonical_reason().unwrap_or("error"));
        let mut message = match body["detail"].as_str() {
            Some(detail) => format!("{title}: {detail}"),
            None => format!("{title} ({status})"),
        };
        for error in body["errors"].as_array().into_iter().flatten() {
            message.push_str(&format!(
                "\n  {}: {}",
                field(&error["field"]),
                field(&error["message"])
            ));
        }
        Err(Failure::new(code, message))
    }
}

/// The config file given, or the default one if it exists.
fn config_file(given: Option<&std::path::Path>) -> Result<ConfigFile, Failure> {
    let default = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .map(|dir| dir.join("ctasd").join("client.toml"));
    let path = match (given, default) {
        (Some(path), _) => path.to_owned(),
        (None, Some(path)) if path.is_file() => path,
        _ => return Ok(ConfigFile::default()),
    };
    let unreadable = |why: String| {
        Failure::new(
            exit::UNREACHABLE,
            format!("config file {}: {why}", path.display()),
        )
    };
    let text = std::fs::read_to_string(&path).map_err(|e| unreadable(e.to_string()))?;
    toml::from_str(&text).map_err(|e| unreadable(e.to_string()))
}
