//! What clients read back from `/v1/jobs` and send besides submissions:
//! jobs as shown (hooks, write locations, the action ledger, the watch),
//! status reports and list filters. Only shapes and their conversions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::{ApiError, ProblemCode};
use crate::api::openapi::StringMap;
use crate::domain::audit::{Audit, OnAuditFailure};
use crate::domain::engine::{EngineObservation, FLINK_FIXED_JOB_ID_KEY, Reachability};
use crate::domain::flink::table::TableDefinition;
use crate::domain::job::{JobMode, JobStatus};
use crate::domain::job_record::{HookKind, JobFilter, JobRecord};
use crate::domain::ledger::{ActionOutcome, ActionRecord, ActionState, HookAction, Settlement};
use crate::domain::options::masked_map;
use crate::domain::{WriteLocation, non_null};
use crate::service::WriteLocations;

/// A hook's target as the job keeps it, its database resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct HookTarget {
    pub catalog: String,
    pub database: String,
    pub table: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Hook {
    pub index: u32,
    pub kind: HookKind,
    pub target: HookTarget,
    pub if_not_exists: bool,
    /// The target existed at submission and `if_not_exists` was set: nothing happens.
    pub skipped: bool,
    pub table: TableDefinition,
    /// The table as Flink's property map, exactly as stored.
    #[schema(value_type = StringMap)]
    pub table_properties: BTreeMap<String, String>,
    /// Where the engine writes; `null` for a skipped hook.
    #[schema(required = true)]
    pub write_location: Option<WriteLocation>,
    /// The checks on the staging before it is published.
    pub audits: Vec<Audit>,
    /// What the audits found when they last ran (none before `FINISHED`).
    pub audit_results: Vec<AuditOutcome>,
}

/// What one audit found on a staging.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "audit": 1, "name": "not_null(id)", "passed": false, "observed": "3",
    "expected": "0 rows with a null", "duration_ms": 4, "at": "2026-12-03T12:00:02Z"
}))]
pub struct AuditOutcome {
    /// Its place in the hook's `audits`.
    pub audit: u32,
    pub name: String,
    pub passed: bool,
    /// What it observed: a count, a ratio, the query's answer, or why it
    /// could not run (which fails it).
    pub observed: String,
    pub expected: String,
    pub duration_ms: u64,
    pub at: DateTime<Utc>,
}

/// One entry of the action ledger.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": 1, "hook": 0, "action": "begin", "trigger": "CREATED", "state": "done", "attempts": 1,
    "in_progress": false, "outcome": "staged", "last_error": null,
    "created_at": "2026-12-03T12:00:00Z", "updated_at": "2026-12-03T12:00:00.120Z"
}))]
pub struct LedgerAction {
    pub id: i64,
    pub hook: u32,
    pub action: HookAction,
    /// The status whose arrival recorded it.
    pub trigger: JobStatus,
    pub state: ActionState,
    pub attempts: u32,
    pub in_progress: bool,
    /// What it found or did, once done (or superseded, or given up).
    #[schema(required = true)]
    pub outcome: Option<ActionOutcome>,
    #[schema(required = true)]
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A failed action that counts against the job.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionFailure {
    pub action_id: i64,
    pub hook: u32,
    pub action: HookAction,
    /// Why, in the words of the system that refused (or `given up`).
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "1b49f930063d45d6be461c4744606de0", "name": "daily totals", "mode": "batch",
    "status": "FINISHED", "settlement": "settled", "failures": [], "statement": null,
    "engine_job_id": null, "engine": null, "engine_options": {}, "watch": null, "failure": null,
    "hooks": [{"index": 0, "kind": "create_table_as",
               "target": {"catalog": "pg", "database": "test", "table": "daily_totals"},
               "if_not_exists": false, "skipped": false,
               "table": {"columns": [{"name": "day", "type": "DATE NOT NULL"}]},
               "table_properties": {"schema.0.name": "day", "schema.0.data-type": "DATE NOT NULL"},
               "write_location": {"kind": "table", "name": "__ctasd_stg_1b49f930063d45d6be461c4744606de0_0",
                                  "url": "jdbc:postgresql://127.0.0.1:5432/test", "path": null,
                                  "sink_options": {"connector": "jdbc"}, "sink_statement": "CREATE TEMPORARY TABLE ..."}}],
    "actions": [],
    "created_at": "2026-12-03T12:00:00Z", "updated_at": "2026-12-03T12:00:01Z"
}))]
pub struct Job {
    pub id: String,
    pub name: String,
    pub mode: JobMode,
    pub status: JobStatus,
    /// Where everything ctasd had to do for the job stands: a failed commit
    /// shows here, not only in its action.
    pub settlement: Settlement,
    /// The actions behind a `failed` settlement.
    pub failures: Vec<ActionFailure>,
    #[schema(required = true)]
    pub statement: Option<String>,
    /// The engine's own id for the job.
    #[schema(required = true)]
    pub engine_job_id: Option<String>,
    /// The engine ctasd watches the job on, if it does.
    #[schema(required = true)]
    pub engine: Option<String>,
    /// Settings the engine's job must have for ctasd to find it: on Flink,
    /// `$internal.pipeline.job-id` (set it in the job's configuration).
    #[schema(value_type = StringMap)]
    pub engine_options: BTreeMap<String, String>,
    /// What ctasd's watcher last saw of the job and its engine.
    #[schema(required = true)]
    pub watch: Option<Watch>,
    /// Why the job failed: the reporter's words, or the root cause the
    /// watcher copied from the engine.
    #[schema(required = true)]
    pub failure: Option<String>,
    pub hooks: Vec<Hook>,
    /// What a failed audit does to the stagings it holds back.
    pub on_audit_failure: OnAuditFailure,
    pub quarantine_seconds: u64,
    /// While a failed audit holds a commit back: when its staging is
    /// discarded unless an operator publishes it anyway
    /// (`POST …/actions/{action}/publish-anyway`) or gives up first.
    #[schema(required = true)]
    pub quarantined_until: Option<DateTime<Utc>>,
    /// Every action, oldest first.
    pub actions: Vec<LedgerAction>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What ctasd's watcher last saw of a job and of its engine.
#[derive(Debug, Serialize, ToSchema)]
pub struct Watch {
    /// Whether ctasd reached the engine when it last tried.
    pub engine_reachability: Reachability,
    /// Since when the engine has been so.
    #[schema(required = true)]
    pub engine_reachability_since: Option<DateTime<Utc>>,
    /// Why ctasd cannot reach the engine, while it cannot.
    #[schema(required = true)]
    pub engine_error: Option<String>,
    /// The job's status as the engine last gave it.
    #[schema(required = true)]
    pub engine_status: Option<JobStatus>,
    #[schema(required = true)]
    pub first_seen_at: Option<DateTime<Utc>>,
    /// When the engine last listed the job: while it lists the job, the
    /// engine's latest check (the watcher writes nothing per job for that).
    #[schema(required = true)]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// Since when the engine, reachable, has not known the job.
    #[schema(required = true)]
    pub missing_since: Option<DateTime<Utc>>,
    /// What the watcher waits for, or why it settled the job, in words.
    #[schema(required = true)]
    pub note: Option<String>,
}

pub(super) fn watch_view(job: &JobRecord) -> Option<Watch> {
    job.engine.as_ref()?;
    let engine = job
        .engine_observation
        .clone()
        .unwrap_or_else(EngineObservation::unknown);
    let watch = job.watch.clone().unwrap_or_default();
    let still_listed = !job.status.is_globally_terminal()
        && engine.reachability == Reachability::Reachable
        && watch.first_seen_at.is_some()
        && watch.missing_since.is_none();
    let last_seen_at = match still_listed {
        true => watch.last_seen_at.max(engine.checked_at),
        false => watch.last_seen_at,
    };
    Some(Watch {
        engine_reachability: engine.reachability,
        engine_reachability_since: engine.since,
        engine_error: engine.last_error,
        engine_status: watch.engine_status,
        first_seen_at: watch.first_seen_at,
        last_seen_at,
        missing_since: watch.missing_since,
        note: watch.note,
    })
}

/// The settings an engine's job takes so that ctasd finds it.
fn engine_options(job: &JobRecord) -> BTreeMap<String, String> {
    match (&job.engine, &job.engine_job_id) {
        (Some(_), Some(id)) => [(FLINK_FIXED_JOB_ID_KEY.to_owned(), id.clone())].into(),
        _ => BTreeMap::new(),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "FINISHED", "timestamps": {"CREATED": 1764763200000_i64, "RUNNING": 1764763200120_i64, "FINISHED": 1764763200410_i64}}))]
pub struct StatusReport {
    /// The status the engine reports. Statuses it passed through since the
    /// last report (a poller misses short ones) are applied first, in order.
    pub status: JobStatus,
    /// Why the job failed, for `FAILED`/`FAILING`.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub failure: Option<String>,
    /// When the engine says the job reached each status, in milliseconds
    /// since the epoch, as Flink's `/jobs/<id>` gives them (0: not reached).
    /// Recorded in the history beside ctasd's own times.
    #[serde(default)]
    pub timestamps: BTreeMap<JobStatus, i64>,
}

/// A span ahead, in the largest unit that says it.
fn humanize_ahead(ahead: chrono::Duration) -> String {
    match ahead.num_days() {
        days if days >= 365 => format!("{} years", days / 365),
        days if days >= 1 => format!("{days} days"),
        _ => format!("{} minutes", ahead.num_minutes()),
    }
}

impl StatusReport {
    /// The report as the domain takes it; a time more than `max_ahead`
    /// ahead of this clock is refused.
    pub(super) fn into_domain(
        self,
        max_ahead: chrono::Duration,
    ) -> Result<crate::domain::job::StatusReport, ApiError> {
        let mut engine_times = BTreeMap::new();
        for (status, millis) in self.timestamps.into_iter().filter(|(_, m)| *m > 0) {
            let invalid = |message: String| {
                ApiError::new(ProblemCode::BodyInvalid, message.clone())
                    .with_field(format!("timestamps.{status}"), message)
            };
            let at = DateTime::from_timestamp_millis(millis).ok_or_else(|| {
                invalid(format!(
                    "{millis} is not a time in milliseconds since the epoch"
                ))
            })?;
            let latest = Utc::now() + max_ahead;
            if at > latest {
                return Err(invalid(format!(
                    "{millis} is {} ahead of ctasd's clock, more than the {} s a clock may be; \
                     times are milliseconds since the epoch (is it in microseconds?)",
                    humanize_ahead(at - Utc::now()),
                    max_ahead.num_seconds()
                )));
            }
            engine_times.insert(status, at);
        }
        Ok(crate::domain::job::StatusReport {
            status: self.status,
            failure: self.failure,
            engine_times,
        })
    }
}

/// The job after a status report, and the actions that status implied.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "actions_taken": [{
        "id": 2, "hook": 0, "action": "commit", "trigger": "FINISHED", "state": "done", "attempts": 1,
        "in_progress": false, "outcome": "committed", "last_error": null,
        "created_at": "2026-12-03T12:01:00Z", "updated_at": "2026-12-03T12:01:00.050Z"
    }],
    "job": {"id": "1b49f930063d45d6be461c4744606de0", "status": "FINISHED", "settlement": "settled", "...": "..."}
}))]
pub struct StatusOutcome {
    /// The actions the report's move recorded (for every status it passed
    /// through), with their results.
    pub actions_taken: Vec<LedgerAction>,
    pub job: Job,
}

pub(super) fn action_view(action: &ActionRecord) -> LedgerAction {
    LedgerAction {
        id: action.id,
        hook: action.hook_index,
        action: action.action,
        trigger: action.trigger,
        state: action.state,
        attempts: action.attempts,
        in_progress: action.in_progress,
        outcome: action.outcome,
        last_error: action.last_error.clone(),
        created_at: action.created_at,
        updated_at: action.updated_at,
    }
}

pub(super) fn job_view(job: &JobRecord, locations: WriteLocations) -> Job {
    let hooks = job
        .hooks
        .iter()
        .zip(locations)
        .enumerate()
        .map(|(index, (hook, location))| Hook {
            index: index as u32,
            kind: hook.kind,
            target: HookTarget {
                catalog: hook.catalog.name.to_string(),
                database: hook.database.clone(),
                table: hook.table.clone(),
            },
            if_not_exists: hook.if_not_exists,
            skipped: hook.skipped,
            table: TableDefinition::from_properties(&masked_map(&hook.table_properties))
                .expect("stored properties were validated at submission"),
            table_properties: masked_map(&hook.table_properties),
            write_location: location,
            audits: hook.audits.clone(),
            audit_results: hook
                .audit_results
                .iter()
                .map(|r| AuditOutcome {
                    audit: r.audit_index,
                    name: r.name.clone(),
                    passed: r.passed,
                    observed: r.observed.clone(),
                    expected: r.expected.clone(),
                    duration_ms: r.duration_ms,
                    at: r.at,
                })
                .collect(),
        })
        .collect();
    Job {
        id: job.id.to_string(),
        name: job.name.clone(),
        mode: job.mode,
        status: job.status,
        settlement: job.settlement(),
        failures: job
            .failures()
            .map(|a| ActionFailure {
                action_id: a.id,
                hook: a.hook_index,
                action: a.action,
                error: a
                    .last_error
                    .clone()
                    .or_else(|| a.outcome.map(|o| o.as_str().to_owned()))
                    .unwrap_or_default(),
            })
            .collect(),
        statement: job.statement.clone(),
        engine_job_id: job.engine_job_id.clone(),
        engine: job.engine.as_ref().map(ToString::to_string),
        engine_options: engine_options(job),
        watch: watch_view(job),
        failure: job.failure.clone(),
        hooks,
        on_audit_failure: job.audit_policy.on_failure,
        quarantine_seconds: job.audit_policy.quarantine.as_secs(),
        quarantined_until: job.quarantined().map(|a| job.quarantine_ends(a)).min(),
        actions: job.actions.iter().map(action_view).collect(),
        created_at: job.created_at,
        updated_at: job.updated_at,
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListJobsParams {
    /// Only jobs in this status.
    pub status: Option<JobStatus>,
    /// Only jobs with a hook on this catalog.
    pub catalog: Option<String>,
    /// Only the job the engine knows by this id.
    pub engine_job_id: Option<String>,
    /// Only jobs watched on this engine.
    pub engine: Option<String>,
    /// `true`: only jobs with a staging held in quarantine by a failed
    /// audit, waiting for an operator.
    pub quarantined: Option<bool>,
    /// Only jobs created at or after this time (RFC 3339).
    pub created_after: Option<DateTime<Utc>>,
    /// Only jobs created before this time (RFC 3339).
    pub created_before: Option<DateTime<Utc>>,
    /// Only jobs whose id starts with this text or whose name contains it
    /// (ignoring ASCII case); at most 200 characters.
    #[param(max_length = 200)]
    pub search: Option<String>,
    /// Jobs per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub page_size: Option<u32>,
    /// `next_page_token` of the previous page.
    pub page_token: Option<String>,
}

/// What an operator says with a decision.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// Why, for the job's events: at most 1000 characters.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false, max_length = 1000)]
    pub reason: Option<String>,
}

impl DecisionBody {
    /// The body of a decision, which may be empty.
    pub(super) fn read(body: &[u8]) -> Result<Self, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self::default());
        }
        serde_json::from_slice(body).map_err(|e| {
            ApiError::new(
                ProblemCode::BodyInvalid,
                format!("the decision's body: {e}"),
            )
        })
    }
}

/// One page of jobs, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobPage {
    pub jobs: Vec<Job>,
    /// Pass as `page_token` to get the next page; `null` on the last page.
    #[schema(required = true)]
    pub next_page_token: Option<String>,
}

/// The longest `search` text, in characters.
const MAX_SEARCH_CHARS: usize = 200;

pub(super) fn job_filter(params: ListJobsParams) -> Result<JobFilter, ApiError> {
    let search = params.search.filter(|s| !s.is_empty());
    if search
        .as_ref()
        .is_some_and(|s| s.chars().count() > MAX_SEARCH_CHARS)
    {
        return Err(ApiError::new(
            ProblemCode::QueryInvalid,
            format!("search: at most {MAX_SEARCH_CHARS} characters"),
        ));
    }
    Ok(JobFilter {
        status: params.status,
        catalog: params.catalog,
        engine_job_id: params.engine_job_id,
        engine: params.engine,
        quarantined: params.quarantined.unwrap_or(false),
        created_after: params.created_after,
        created_before: params.created_before,
        search,
    })
}

/// What may change about a job after submission.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"engine_job_id": "fd72014d4c864993a2e5a9287b4a9c5d"}))]
pub struct JobUpdate {
    /// The engine's own id for the job; `null` clears it.
    pub engine_job_id: Option<String>,
}
