//! Test harness: servers on `127.0.0.1:0`, fresh databases per test, typed
//! request helpers. One file per concern: `app` (a server in this process
//! and its replies), `databases` (PostgreSQL, MariaDB and SQLite made per
//! test), `processes` (`ctasd serve` as a child), `proxy` (a TCP proxy a
//! test can cut), `receiver` (a webhook receiver), `stand_in_flink` (a Flink REST endpoint whose answers
//! a test sets).

mod app;
mod databases;
pub mod flink;
mod processes;
mod proxy;
mod receiver;
mod stand_in_flink;

pub use app::{Reply, Submitted, TestApp};
pub use databases::{
    TestMysql, TestPostgres, fresh_keyring, mysql_options, mysql_url, open_store, postgres_options,
    postgres_url, sqlite_database,
};
pub use processes::ServerProcess;
pub use proxy::TcpProxy;
pub use receiver::Receiver;
pub use stand_in_flink::{FlinkRun, StandInFlink};

/// The password every test registers; it must never appear anywhere else.
pub const SECRET: &str = "s3cret-Value";

/// Says loudly that a test is skipped (a service it needs is not
/// configured), and appends why to the file named by `CTASD_TEST_SKIPS`
/// when that is set: cargo counts a skipped test as passed, and `.ci/run`
/// fails when that file holds a line.
pub fn skipped(why: &str) {
    say_and_keep(&format!("SKIPPED: {why}"), "CTASD_TEST_SKIPS");
}

/// Prints a figure a test measured, and appends it to the file named by
/// `CTASD_TEST_FIGURES` when that is set: cargo shows a passing test's output
/// only with `--nocapture`, and `.ci/run` prints that file after the tests.
pub fn figure(line: &str) {
    say_and_keep(line, "CTASD_TEST_FIGURES");
}

/// `line` on stderr, and appended to the file `variable` names, if set.
fn say_and_keep(line: &str, variable: &str) {
    eprintln!("{line}");
    if let Ok(path) = std::env::var(variable) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        writeln!(file, "{line}").unwrap();
    }
}
