//! The `ctasd` command line: `serve`, `migrate`, `openapi`, `token`, and the
//! client commands (`jobs`, `catalogs`, `engines`, `report`) that speak to a
//! running server. Everything else lives in the library.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ctasd::client::{self, Connection, Request};
use ctasd::config::{LogSettings, ServeSettings, StoreSettings};

#[derive(Parser)]
#[command(
    name = "ctasd",
    version,
    about = "A control plane for atomic CREATE TABLE ... AS SELECT jobs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,

    #[command(flatten)]
    log: LogSettings,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service (migrates the store first).
    #[command(args_override_self = true)]
    Serve(ServeSettings),
    /// Apply the store's pending migrations and exit.
    Migrate(StoreSettings),
    /// Print the OpenAPI document.
    Openapi,
    /// Create a bearer token: prints the token (give it to the client) and
    /// the line that admits it (add it to the tokens file).
    Token {
        /// A name for logs, e.g. `flink-prod`.
        #[arg(long)]
        name: String,
        #[arg(long, value_enum)]
        role: ctasd::api::auth::Role,
    },
    /// Jobs on a running server: list, get, events.
    Jobs {
        #[command(subcommand)]
        what: client::Jobs,
        #[command(flatten)]
        connection: Connection,
    },
    /// Catalogs on a running server: list, get.
    Catalogs {
        #[command(subcommand)]
        what: client::Catalogs,
        #[command(flatten)]
        connection: Connection,
    },
    /// Engines on a running server: list.
    Engines {
        #[command(subcommand)]
        what: client::Engines,
        #[command(flatten)]
        connection: Connection,
    },
    /// Report a job's status, as an engine does: `ctasd report JOB FINISHED`.
    Report {
        job: String,
        /// A Flink status: CREATED, RUNNING, FINISHED, FAILED, CANCELED, ...
        status: String,
        /// Why the job failed (with FAILED).
        #[arg(long)]
        failure: Option<String>,
        #[command(flatten)]
        connection: Connection,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let command = Cli::command();
    let (args, from_file) =
        ctasd::config::file::with_config_file(std::env::args_os().collect(), &command)?;
    let matches = command.clone().get_matches_from(args);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let (connection, request) = match cli.command {
        Command::Serve(settings) if settings.print_config => {
            let serve = command
                .find_subcommand("serve")
                .expect("serve is a command");
            let chosen = matches
                .subcommand_matches("serve")
                .expect("serve was chosen");
            print!(
                "{}",
                ctasd::config::file::effective(serve, chosen, &from_file)
            );
            return Ok(ExitCode::SUCCESS);
        }
        Command::Openapi => {
            println!("{}", ctasd::api::openapi_json());
            return Ok(ExitCode::SUCCESS);
        }
        Command::Token { name, role } => {
            use secrecy::ExposeSecret;
            let (token, line) = ctasd::api::auth::generate(&name, role);
            println!("token: {}", token.expose_secret());
            println!("tokens file line: {line}");
            return Ok(ExitCode::SUCCESS);
        }
        Command::Migrate(store) => {
            ctasd::telemetry::init(&cli.log);
            ctasd::server::migrate(&store).await?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Serve(settings) => {
            ctasd::telemetry::init(&cli.log);
            ctasd::server::serve_until_signal(settings).await?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::Jobs { what, connection } => (connection, Request::Jobs(what)),
        Command::Catalogs { what, connection } => (connection, Request::Catalogs(what)),
        Command::Engines { what, connection } => (connection, Request::Engines(what)),
        Command::Report {
            job,
            status,
            failure,
            connection,
        } => (
            connection,
            Request::Report {
                job,
                status,
                failure,
            },
        ),
    };
    Ok(client::run(connection, request).await)
}
