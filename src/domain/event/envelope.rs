//! ctasd's own event format: the envelope a receiver of a `ctasd`
//! subscription gets, typed in the OpenAPI document, and how an outbox row
//! becomes one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{EventType, OutboxEntry, OutboxRow};
use crate::domain::job::{JobMode, JobStatus};
use crate::domain::job_record::{JobRecord, NewHook};
use crate::domain::ledger::{ActionOutcome, HookAction};

/// An event in ctasd's own format, as a receiver gets it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({
    "id": "evt_42_table.published", "type": "table.published", "sequence": 42,
    "at": "2026-12-07T12:00:00Z",
    "job": {"id": "1b49f930063d45d6be461c4744606de0", "name": "daily totals", "mode": "batch",
            "status": "FINISHED", "engine": null, "engine_job_id": null},
    "data": {"hook": 0, "target": {"catalog": "pg", "database": "analytics", "table": "daily_totals"},
             "action": "commit", "outcome": "committed", "rows": 2}
}))]
pub struct CtasdEvent {
    /// The event's id, also its `webhook-id`: the same on every attempt,
    /// so a receiver drops what it already has.
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// Its place among ctasd's events, increasing in the order they were
    /// committed.
    pub sequence: i64,
    pub at: DateTime<Utc>,
    pub job: EventJob,
    pub data: EventData,
}

/// The job an event is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventJob {
    pub id: String,
    pub name: String,
    pub mode: JobMode,
    /// Its status when the event was made.
    pub status: JobStatus,
    #[schema(required = true)]
    pub engine: Option<String>,
    #[schema(required = true)]
    pub engine_job_id: Option<String>,
}

/// A hook's target table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventTarget {
    pub catalog: String,
    pub database: String,
    pub table: String,
}

/// What the event says, by its type: `from`/`to`/`failure` for a status
/// change; `hook`, `target` and the action's `action`, `outcome`, `error`
/// for the hook events; `reason` and `by` for one given up; `results` for
/// audits. Fields that do not apply are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<EventTarget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<HookAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ActionOutcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Rows published, when an audit counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub results: Option<serde_json::Value>,
}

impl EventTarget {
    pub fn of(hook: &NewHook) -> Self {
        Self {
            catalog: hook.catalog.name.to_string(),
            database: hook.database.clone(),
            table: hook.table.clone(),
        }
    }
}

/// Rows a hook's staging held, when a `row_count` audit counted them.
pub fn counted_rows(hook: &NewHook) -> Option<u64> {
    hook.audit_results
        .iter()
        .find(|r| r.name == "row_count")
        .and_then(|r| r.observed.parse().ok())
}

/// The ctasd event an outbox row stands for, told of `job` (as it is now;
/// its status is the one the event was made in only for status events,
/// whose `to` says it).
pub fn ctasd_event(row: &OutboxRow, job: &JobRecord) -> Option<CtasdEvent> {
    let event_type = row.entry.event_type()?;
    let hook_of = |index: u32| job.hooks.get(index as usize);
    let mut data = EventData::default();
    match &row.entry {
        OutboxEntry::Status { from, to, failure } => {
            data.from = from.clone();
            data.to = Some(to.clone());
            data.failure = failure.clone();
        }
        OutboxEntry::Action {
            hook_index,
            action,
            outcome,
            error,
            ..
        } => {
            data.hook = Some(*hook_index);
            data.target = hook_of(*hook_index).map(EventTarget::of);
            data.action = Some(*action);
            data.outcome = *outcome;
            data.error = error.clone();
            if event_type == EventType::TablePublished {
                data.rows = hook_of(*hook_index).and_then(counted_rows);
            }
        }
        OutboxEntry::Intervention {
            action_id,
            reason,
            by,
            ..
        } => {
            let action = job.actions.iter().find(|a| a.id == *action_id);
            data.hook = action.map(|a| a.hook_index);
            data.target = action
                .and_then(|a| hook_of(a.hook_index))
                .map(EventTarget::of);
            data.action = action.map(|a| a.action);
            data.reason = reason.clone();
            data.by = by.clone();
        }
        OutboxEntry::Audits {
            hook_index,
            results,
        } => {
            data.hook = Some(*hook_index);
            data.target = hook_of(*hook_index).map(EventTarget::of);
            data.results = serde_json::from_str(results).ok();
        }
    }
    let status = match &row.entry {
        OutboxEntry::Status { to, .. } => to.parse().unwrap_or(job.status),
        _ => job.status,
    };
    Some(CtasdEvent {
        id: format!("evt_{}_{}", row.id, event_type.as_str()),
        event_type,
        sequence: row.id,
        at: row.at.unwrap_or_else(Utc::now),
        job: EventJob {
            id: job.id.to_string(),
            name: job.name.clone(),
            mode: job.mode,
            status,
            engine: job.engine.as_ref().map(ToString::to_string),
            engine_job_id: job.engine_job_id.clone(),
        },
        data,
    })
}
