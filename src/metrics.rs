//! Prometheus metrics: what operators graph and alert on. Counters move
//! where things happen (requests in the API, status moves in the services,
//! action results in the runner); gauges that describe the store (pending
//! and failed actions, pool connections) are read from it when scraped.
//!
//! One registry per server, so that servers in one process (tests) do not
//! count each other's work.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    /// By route template, method and status.
    pub http_requests: IntCounterVec,
    /// By route template and method.
    pub http_seconds: HistogramVec,
    /// Status changes, by the status reached (passed-over statuses too).
    pub transitions: IntCounterVec,
    /// Action attempts, by action and result (an outcome, `retry` or `failed`).
    pub actions: IntCounterVec,
    /// Audits run on stagings, by result (`passed`, `failed`).
    pub audits: IntCounterVec,
    /// Actions by ledger state (`pending`, `failed`), as the store holds them.
    pub actions_in_state: IntGaugeVec,
    /// Event delivery attempts, by result (`delivered`, `failed`, `parked`).
    pub deliveries: IntCounterVec,
    /// Deliveries by subscription and state, as the store holds them.
    pub deliveries_in_state: IntGaugeVec,
    /// The store's connections: `in_use`, `idle`, `max`.
    pub store_connections: IntGaugeVec,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric")
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid metric")
        };
        let metrics = Self {
            registry: Registry::new(),
            http_requests: counter(
                "ctasd_http_requests_total",
                "HTTP requests answered, by route, method and status.",
                &["route", "method", "status"],
            ),
            http_seconds: HistogramVec::new(
                HistogramOpts::new(
                    "ctasd_http_request_duration_seconds",
                    "Time to answer an HTTP request, by route and method.",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                    10.0,
                ]),
                &["route", "method"],
            )
            .expect("a valid metric"),
            transitions: counter(
                "ctasd_job_transitions_total",
                "Job status changes, by the status reached.",
                &["status"],
            ),
            actions: counter(
                "ctasd_actions_total",
                "Hook action attempts, by action and result (an outcome, retry or failed).",
                &["action", "result"],
            ),
            audits: counter(
                "ctasd_audits_total",
                "Audits run on stagings before their commit, by result (passed or failed).",
                &["result"],
            ),
            actions_in_state: gauge(
                "ctasd_actions",
                "Hook actions in the store, by state (pending, failed).",
                &["state"],
            ),
            deliveries: counter(
                "ctasd_event_deliveries_total",
                "Event delivery attempts to subscribers, by result (delivered, failed, parked).",
                &["result"],
            ),
            deliveries_in_state: gauge(
                "ctasd_event_deliveries",
                "Event deliveries in the store, by subscription and state (pending, delivered, parked).",
                &["subscription", "state"],
            ),
            store_connections: gauge(
                "ctasd_store_connections",
                "Connections of the store's pool, by state (in_use, idle, max).",
                &["state"],
            ),
        };
        for collector in [
            Box::new(metrics.http_requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(metrics.http_seconds.clone()),
            Box::new(metrics.transitions.clone()),
            Box::new(metrics.actions.clone()),
            Box::new(metrics.audits.clone()),
            Box::new(metrics.actions_in_state.clone()),
            Box::new(metrics.deliveries.clone()),
            Box::new(metrics.deliveries_in_state.clone()),
            Box::new(metrics.store_connections.clone()),
        ] {
            metrics
                .registry
                .register(collector)
                .expect("each metric is registered once");
        }
        metrics
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut text = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut text)
            .expect("metrics encode as text");
        String::from_utf8(text).expect("the text format is UTF-8")
    }
}
