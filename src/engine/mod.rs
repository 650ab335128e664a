//! Engines as ctasd reaches them over the network: today a Flink cluster's
//! REST API. What ctasd asks (the cluster's version, the jobs it knows, one
//! job's statuses and failure), and how an answer that is not one (a
//! refused connection, a timeout, Flink's 500 for a job it does not know)
//! is told apart. Nothing here decides what a job's statuses mean.

pub mod flink;
pub mod hosts;
pub mod listing;

pub use flink::{EngineHttp, FlinkClient, FlinkError, FlinkJobDetails};
pub use hosts::AllowedHosts;
pub use listing::{FlinkJob, ListedJob, ListingReader};
