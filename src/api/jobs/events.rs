//! A job's events as clients read them: status changes, action results,
//! audits' last results and operators' decisions in one timeline, oldest first, paged by a
//! token that names where the last page ended.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::page;
use crate::domain::job::JobStatus;
use crate::domain::ledger::{ActionOutcome, ActionState, Decision, HookAction};
use crate::service::{self};

/// One event in a job's history, told apart by `kind`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[schema(discriminator(property_name = "kind", mapping(
    ("status" = "#/components/schemas/StatusEvent"),
    ("action" = "#/components/schemas/ActionEvent"),
    ("intervention" = "#/components/schemas/InterventionEvent"),
    ("audit" = "#/components/schemas/AuditEvent"),
)))]
pub enum JobEvent {
    Status(StatusEvent),
    Action(ActionEvent),
    Intervention(InterventionEvent),
    Audit(AuditEvent),
}

/// The kind of an [`AuditEvent`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditEventKind {
    Audit,
}

/// An audit ran on a hook's staging (its latest run).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"kind": "audit", "at": "2026-12-03T12:00:02Z", "hook": 0, "name": "not_null(id)",
                          "passed": false, "observed": "3", "expected": "0 rows with a null", "duration_ms": 4}))]
pub struct AuditEvent {
    pub kind: AuditEventKind,
    pub at: DateTime<Utc>,
    pub hook: u32,
    pub name: String,
    pub passed: bool,
    pub observed: String,
    pub expected: String,
    pub duration_ms: u64,
}

/// The kind of a [`StatusEvent`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusEventKind {
    Status,
}

/// The kind of an [`ActionEvent`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActionEventKind {
    Action,
}

/// The kind of an [`InterventionEvent`].
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum InterventionEventKind {
    Intervention,
}

/// The job reached a status.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"kind": "status", "at": "2026-12-03T12:00:00Z", "from": "CREATED", "to": "RUNNING",
                          "failure": null, "inferred": true, "engine_at": "2026-12-03T11:59:59.912Z"}))]
pub struct StatusEvent {
    pub kind: StatusEventKind,
    pub at: DateTime<Utc>,
    /// `null` for the status the job was submitted with.
    #[schema(required = true)]
    pub from: Option<JobStatus>,
    pub to: JobStatus,
    #[schema(required = true)]
    pub failure: Option<String>,
    /// Passed over between two reports: a later status was reported.
    pub inferred: bool,
    /// When the engine says the job reached it, if it said.
    #[schema(required = true)]
    pub engine_at: Option<DateTime<Utc>>,
}

/// An action was recorded (pending) or finished (done, failed).
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"kind": "action", "at": "2026-12-03T12:00:01Z", "hook": 0, "action": "commit",
                          "state": "done", "attempts": 1, "outcome": "committed", "last_error": null}))]
pub struct ActionEvent {
    pub kind: ActionEventKind,
    pub at: DateTime<Utc>,
    pub hook: u32,
    pub action: HookAction,
    pub state: ActionState,
    pub attempts: u32,
    #[schema(required = true)]
    pub outcome: Option<ActionOutcome>,
    #[schema(required = true)]
    pub last_error: Option<String>,
}

/// An operator decided about an action: retry it now, give up, or
/// publish a staging its audits held back anyway.
#[derive(Debug, Serialize, ToSchema)]
pub struct InterventionEvent {
    pub kind: InterventionEventKind,
    pub at: DateTime<Utc>,
    pub action_id: i64,
    pub decision: Decision,
    /// The token that decided, when ctasd requires tokens.
    #[schema(required = true)]
    pub decided_by: Option<String>,
    /// Why, in the operator's words.
    #[schema(required = true)]
    pub reason: Option<String>,
}

/// One page of a job's events, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobEvents {
    pub events: Vec<JobEvent>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_page_token: Option<String>,
    /// Earlier restart cycles (a `RESTARTING` and the statuses up to the
    /// next one) folded out of the history, which keeps the latest 20.
    pub folded_restarts: u64,
}

/// Where an event stands in a job's history: its time, then a status
/// before the actions it recorded, then the decisions about them.
pub(super) type EventKey = (DateTime<Utc>, u8, i64);

pub(super) fn event_token(key: &EventKey) -> String {
    let (at, kind, id) = key;
    let nanos = at.timestamp_nanos_opt().unwrap_or(i64::MAX);
    page::encode_token("v", &format!("{nanos}.{kind}.{id}"))
}

pub(super) fn parse_event_key(text: &str) -> Option<EventKey> {
    let mut parts = text.splitn(3, '.');
    let nanos: i64 = parts.next()?.parse().ok()?;
    let kind: u8 = parts.next()?.parse().ok()?;
    let id: i64 = parts.next()?.parse().ok()?;
    Some((DateTime::from_timestamp_nanos(nanos), kind, id))
}

/// The `size` events after `after` (from the first without it).
pub(super) fn page_of_events(
    history: service::JobEvents,
    after: Option<EventKey>,
    size: usize,
) -> JobEvents {
    let folded_restarts = history.folded_restarts;
    let mut events = keyed_events(history)
        .into_iter()
        .filter(|(key, _)| after.is_none_or(|after| *key > after))
        .peekable();
    let mut page = Vec::with_capacity(size.min(events.size_hint().0));
    let mut last = None;
    while page.len() < size
        && let Some((key, event)) = events.next()
    {
        page.push(event);
        last = Some(key);
    }
    let next_page_token = events
        .peek()
        .is_some()
        .then(|| last.as_ref().map(event_token))
        .flatten();
    JobEvents {
        events: page,
        next_page_token,
        folded_restarts,
    }
}

/// Statuses, actions and decisions, oldest first; at one instant, a status
/// before the actions it recorded.
fn keyed_events(history: service::JobEvents) -> Vec<(EventKey, JobEvent)> {
    {
        let mut events: Vec<(DateTime<Utc>, u8, i64, JobEvent)> = Vec::new();
        for (i, change) in history.statuses.into_iter().enumerate() {
            let event = JobEvent::Status(StatusEvent {
                kind: StatusEventKind::Status,
                at: change.at,
                from: change.from,
                to: change.to,
                failure: change.failure,
                inferred: change.inferred,
                engine_at: change.engine_at,
            });
            events.push((change.at, 0, i as i64, event));
        }
        for action in &history.job.actions {
            let at = if action.state == ActionState::Pending {
                action.created_at
            } else {
                action.updated_at
            };
            let event = JobEvent::Action(ActionEvent {
                kind: ActionEventKind::Action,
                at,
                hook: action.hook_index,
                action: action.action,
                state: action.state,
                attempts: action.attempts,
                outcome: action.outcome,
                last_error: action.last_error.clone(),
            });
            events.push((at, 1, action.id, event));
        }
        for intervention in history.interventions {
            let event = JobEvent::Intervention(InterventionEvent {
                kind: InterventionEventKind::Intervention,
                at: intervention.at,
                action_id: intervention.action_id,
                decision: intervention.decision,
                decided_by: intervention.decided_by,
                reason: intervention.reason,
            });
            events.push((intervention.at, 2, intervention.action_id, event));
        }
        for hook in &history.job.hooks {
            for result in &hook.audit_results {
                let event = JobEvent::Audit(AuditEvent {
                    kind: AuditEventKind::Audit,
                    at: result.at,
                    hook: result.hook_index,
                    name: result.name.clone(),
                    passed: result.passed,
                    observed: result.observed.clone(),
                    expected: result.expected.clone(),
                    duration_ms: result.duration_ms,
                });
                let id = i64::from(result.hook_index) * 1000 + i64::from(result.audit_index);
                events.push((result.at, 3, id, event));
            }
        }
        events.sort_by_key(|e| (e.0, e.1, e.2));
        events
            .into_iter()
            .map(|(at, kind, id, event)| ((at, kind, id), event))
            .collect()
    }
}
