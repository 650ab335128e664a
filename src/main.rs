//! The `ctasd` command line: `serve`, `migrate`, `openapi`. Everything else
//! lives in the library.

#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => {
            println!("{}", ctasd::api::openapi_json());
            Ok(())
        }
        Command::Token { name, role } => {
            use secrecy::ExposeSecret;
            let (token, line) = ctasd::api::auth::generate(&name, role);
            println!("token: {}", token.expose_secret());
            println!("tokens file line: {line}");
            Ok(())
        }
        Command::Migrate(store) => {
            ctasd::telemetry::init(&cli.log);
            ctasd::server::migrate(&store).await
        }
        Command::Serve(settings) => {
            ctasd::telemetry::init(&cli.log);
            ctasd::server::serve_until_signal(settings).await
        }
    }
}
