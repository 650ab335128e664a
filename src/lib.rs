//! ctasd: a control plane for atomic `CREATE TABLE ... AS SELECT` jobs.
//!
//! Read the modules in this order; data flows the same way:
//! `api` / `background` → `service` → `hooks` → `store` / `catalog` /
//! `engine` → `domain`, and `server` wires them together
//! (`tests/it/architecture.rs` holds every arrow).

#![forbid(unsafe_code)]

/// HTTP only: one file per resource, problem+json errors, the OpenAPI document.
pub mod api;
/// The loops beside the requests: resuming due actions, watching engines,
/// delivering events, purging ended jobs.
pub mod background;
/// The external systems that hold tables: the `Catalog` trait, the one list of
/// catalog types, the live cache.
pub mod catalog;
/// The client command line (`ctasd jobs list`, ...): ctasd's HTTP API from a
/// terminal, knowing nothing of the rest.
pub mod client;
/// Settings from flags and `CTASD_*` variables, with secrets that never print.
pub mod config;
/// Pure types and rules, no I/O: names, catalog options and their sensitivity.
pub mod domain;
/// Engines as ctasd reaches them: a Flink cluster's REST API, bounded in time and size.
pub mod engine;
/// Crash points that kill the process on purpose, for the crash suite.
pub mod fault;
/// Carries out the ledger's actions on the catalogs, and resumes them after a crash.
pub mod hooks;
/// Prometheus metrics: counters where things happen, store gauges when scraped.
pub mod metrics;
/// Start-up and shutdown: wires the store, the catalogs and the router together.
pub mod server;
/// The application: one use case per function, between the API and the rest.
pub mod service;
/// Persistence: the store traits, each recipe written once over SQLite and
/// PostgreSQL, secret encryption.
pub mod store;
/// Log output (text or JSON) that never carries a secret.
pub mod telemetry;
