//! OpenLineage RunEvents for subscriptions in that format, made from the
//! same outbox rows as ctasd's own events: START once the job runs (its
//! RUNNING, reported or passed over), and once the job has ended and has
//! nothing left to do, one of COMPLETE (every table published), FAIL or
//! ABORT (cancelled). The run is the job: its `runId` is the job's id as a
//! UUID, stable however often the events are made. Each event's id names
//! the run and the event type, so making one again (a replica, a repeated
//! fan-out, a row after the end) adds no second delivery.

use chrono::Utc;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::catalog::lineage::dataset_name;
use crate::domain::event::{OutboxEntry, OutboxRow, counted_rows};
use crate::domain::flink::table::TableDefinition;
use crate::domain::job::{JobMode, JobStatus};
use crate::domain::job_record::{HookKind, JobRecord};
use crate::domain::ledger::{ActionOutcome, ActionState, HookAction};

const PRODUCER: &str = concat!("urn:ctasd:", env!("CARGO_PKG_VERSION"));
const RUN_EVENT: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
const SCHEMA_FACET: &str =
    "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet";
const LIFECYCLE_FACET: &str = "https://openlineage.io/spec/facets/1-0-1/LifecycleStateChangeDatasetFacet.json#/$defs/LifecycleStateChangeDatasetFacet";
const STATISTICS_FACET: &str = "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet";
const ERROR_FACET: &str = "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet";
const JOB_TYPE_FACET: &str =
    "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet";
const SQL_FACET: &str =
    "https://openlineage.io/spec/facets/1-1-0/SQLJobFacet.json#/$defs/SQLJobFacet";

/// The jobs' namespace: ctasd runs them.
const JOB_NAMESPACE: &str = "ctasd";

/// The run events (id, type, body) an outbox row makes, in order.
pub(super) fn run_events(row: &OutboxRow, job: &JobRecord) -> Vec<(String, String, String)> {
    let started = matches!(&row.entry, OutboxEntry::Status { to, .. } if to == "RUNNING");
    let ended = at_rest(job).then(|| terminal(job));
    let mut events = Vec::new();
    if started || ended.is_some() {
        // A job that ended without running (refused, cancelled early)
        // still has its one START first, as the specification asks.
        events.push(event(job, "START", Value::Null, Vec::new()));
    }
    if let Some((kind, error)) = ended {
        let outputs = match kind {
            "COMPLETE" => outputs(job),
            _ => Vec::new(),
        };
        events.push(event(job, kind, error, outputs));
    }
    events
        .into_iter()
        .map(|(kind, body)| {
            let id = format!("ol_{}_{kind}", job.id);
            (id, format!("openlineage.{kind}"), body.to_string())
        })
        .collect()
}

/// Ended, with no action left to run: the run's outcome is known.
fn at_rest(job: &JobRecord) -> bool {
    job.status.is_globally_terminal()
        && !job.actions.iter().any(|a| a.state == ActionState::Pending)
}

/// The terminal event type and, for a failure, why.
fn terminal(job: &JobRecord) -> (&'static str, Value) {
    let failed: Vec<&str> = job
        .failures()
        .filter_map(|a| a.last_error.as_deref())
        .collect();
    match job.status {
        JobStatus::Canceled => ("ABORT", Value::Null),
        JobStatus::Finished if failed.is_empty() => ("COMPLETE", Value::Null),
        _ => {
            let mut message = job.failure.clone().unwrap_or_default();
            for error in failed {
                if !message.is_empty() {
                    message.push_str("; ");
                }
                message.push_str(error);
            }
            if message.is_empty() {
                message = format!("the job ended {}", job.status.as_str());
            }
            ("FAIL", Value::String(message))
        }
    }
}

/// One RunEvent of the job.
fn event(
    job: &JobRecord,
    kind: &'static str,
    error: Value,
    outputs: Vec<Value>,
) -> (&'static str, Value) {
    let mut run_facets = serde_json::Map::new();
    if let Value::String(message) = error {
        run_facets.insert(
            "errorMessage".into(),
            json!({"_producer": PRODUCER, "_schemaURL": ERROR_FACET,
                   "message": message, "programmingLanguage": "SQL"}),
        );
    }
    let mut job_facets = serde_json::Map::new();
    job_facets.insert(
        "jobType".into(),
        json!({"_producer": PRODUCER, "_schemaURL": JOB_TYPE_FACET,
               "processingType": match job.mode { JobMode::Batch => "BATCH", JobMode::Streaming => "STREAMING" },
               "integration": "CTASD", "jobType": "JOB"}),
    );
    if let Some(statement) = &job.statement {
        job_facets.insert(
            "sql".into(),
            json!({"_producer": PRODUCER, "_schemaURL": SQL_FACET, "query": statement}),
        );
    }
    let body = json!({
        "eventType": kind,
        "eventTime": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "producer": PRODUCER,
        "schemaURL": RUN_EVENT,
        "run": {"runId": run_id(job.id.as_str()), "facets": run_facets},
        "job": {"namespace": JOB_NAMESPACE, "name": job.name, "facets": job_facets},
        "inputs": [],
        "outputs": outputs,
    });
    (kind, body)
}

/// The tables the job published, each with its schema, whether it was
/// made or replaced, and its row count where an audit counted it.
fn outputs(job: &JobRecord) -> Vec<Value> {
    job.hooks
        .iter()
        .enumerate()
        .filter(|(index, hook)| !hook.skipped && published(job, *index as u32))
        .map(|(_, hook)| {
            let dataset = dataset_name(&hook.catalog, &hook.database, &hook.table);
            let fields: Vec<Value> = TableDefinition::from_properties(&hook.table_properties)
                .map(|table| {
                    table
                        .columns
                        .iter()
                        .filter(|c| c.is_physical())
                        .enumerate()
                        .map(|(at, c)| json!({"name": c.name, "type": c.data_type, "ordinal_position": at + 1}))
                        .collect()
                })
                .unwrap_or_default();
            let lifecycle = match hook.kind {
                HookKind::CreateTableAs => "CREATE",
                _ => "OVERWRITE",
            };
            let mut output_facets = serde_json::Map::new();
            if let Some(rows) = counted_rows(hook) {
                output_facets.insert(
                    "outputStatistics".into(),
                    json!({"_producer": PRODUCER, "_schemaURL": STATISTICS_FACET, "rowCount": rows}),
                );
            }
            json!({
                "namespace": dataset.namespace,
                "name": dataset.name,
                "facets": {
                    "schema": {"_producer": PRODUCER, "_schemaURL": SCHEMA_FACET, "fields": fields},
                    "lifecycleStateChange": {"_producer": PRODUCER, "_schemaURL": LIFECYCLE_FACET,
                                             "lifecycleStateChange": lifecycle},
                },
                "outputFacets": output_facets,
            })
        })
        .collect()
}

/// Whether the hook's table was published by its commit or create.
fn published(job: &JobRecord, hook_index: u32) -> bool {
    job.actions.iter().any(|a| {
        a.hook_index == hook_index
            && a.state == ActionState::Done
            && matches!(a.action, HookAction::Commit | HookAction::Create)
            && matches!(
                a.outcome,
                Some(
                    ActionOutcome::Committed
                        | ActionOutcome::AlreadyCommitted
                        | ActionOutcome::Created
                        | ActionOutcome::Replaced
                )
            )
    })
}

/// The job's id as a UUID: as it is when it is 32 hex digits (ctasd's
/// own ids, Flink's), else from its SHA-256, so it stays the same.
fn run_id(job_id: &str) -> String {
    let hex: String = match job_id.len() == 32 && job_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => job_id.to_ascii_lowercase(),
        false => Sha256::digest(job_id.as_bytes())[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    };
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_the_job_id_as_a_uuid_or_its_digest() {
        assert_eq!(
            run_id("1b49f930063d45d6be461c4744606de0"),
            "1b49f930-063d-45d6-be46-1c4744606de0"
        );
        let other = run_id("nightly-2026-12-07");
        assert_eq!(other.len(), 36);
        assert_eq!(other, run_id("nightly-2026-12-07"));
    }
}
