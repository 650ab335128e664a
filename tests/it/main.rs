//! Integration tests: one binary, a module per concern. Every test talks to
//! real components: a server over real HTTP, SQLite files, and the
//! PostgreSQL and MariaDB named by `CTASD_TEST_POSTGRES_URL` and
//! `CTASD_TEST_MYSQL_URL` (skipped, loudly, when unset).

mod architecture;
mod audits;
mod auth;
mod browse;
mod catalogs;
mod cli;
mod contract;
mod crash;
mod dashboard;
mod ddl;
mod drops;
mod engines;
mod errors;
mod event_faults;
mod events;
mod flink;
mod flink_native;
mod helpers;
mod hostile;
mod idempotency;
mod injection;
mod jobs;
mod limits;
mod links;
mod masking;
mod openapi;
mod outage;
mod outside_text;
mod ownership;
mod parsers;
mod preconditions;
mod queries;
mod replicas;
mod restart;
mod retention;
mod safety;
mod secrets;
mod staging;
mod stale_runs;
mod statements;
mod store;
mod watching;
