//! Log output: human-readable text or one JSON object per line.
//!
//! Nothing logs option values or request bodies; secrets reach log lines only
//! through messages that were redacted where they were made.

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LogSettings};

pub fn init(settings: &LogSettings) {
    let filter = EnvFilter::try_new(&settings.log).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // `try_init`: a second call (tests start many servers) keeps the first subscriber.
    let _ = match settings.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
