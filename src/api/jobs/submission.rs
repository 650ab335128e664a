//! What clients send to submit a job: its hooks, each table as JSON or as
//! Flink's property map, audits in either form, and the job's policy for
//! failed audits; turned into the service's request.

use std::collections::BTreeMap;

use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::openapi::StringMap;
use crate::domain::audit::{Audit, OnAuditFailure};
use crate::domain::flink::table::TableDefinition;
use crate::domain::job::JobMode;
use crate::domain::job_record::HookKind;
use crate::domain::non_null;
use crate::service::{HookRequest, JobRequest};

/// A target table: `catalog.database.table`; the catalog's default
/// database when `database` is absent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"catalog": "pg", "database": "analytics", "table": "daily"}))]
pub struct Target {
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
    pub catalog: String,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub database: Option<String>,
    pub table: String,
}

/// One CTAS target of a job. Give the table either as `table` (JSON) or as
/// `table_properties` (Flink's `CatalogPropertiesUtil` map).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitHook {
    pub kind: HookKind,
    pub target: Target,
    /// With `create_table_as`: an existing target makes the hook do nothing.
    #[serde(default)]
    pub if_not_exists: bool,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub table: Option<TableDefinition>,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(value_type = StringMap, nullable = false)]
    pub table_properties: Option<BTreeMap<String, String>>,
    /// Checks on the staging that decide, at `FINISHED`, whether it is
    /// published (batch jobs only). One failure holds back every commit
    /// that publishes with this one; see `on_audit_failure`.
    #[serde(default)]
    pub audits: Vec<Audit>,
    /// The same audits in their property-map form (`audit.0.kind`,
    /// `audit.0.columns.0`, ...), as a Flink table's options carry them;
    /// instead of `audits`, not with it.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(value_type = StringMap, nullable = false)]
    pub audit_properties: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "orders by day",
    "mode": "batch",
    "statement": "CREATE TABLE pg.analytics.daily AS SELECT ...",
    "hooks": [{
        "kind": "create_table_as",
        "target": {"catalog": "pg", "database": "analytics", "table": "daily"},
        "table": {"columns": [{"name": "day", "type": "DATE NOT NULL"}, {"name": "total", "type": "DECIMAL(12, 2)"}],
                  "primary_key": {"name": "pk_day", "columns": ["day"]}}
    }]
}))]
pub struct SubmitJob {
    /// A Flink job id (32 hex digits); generated when absent.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(pattern = r"^[0-9a-fA-F]{32}$", nullable = false)]
    pub id: Option<String>,
    pub name: String,
    pub mode: JobMode,
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub statement: Option<String>,
    /// The engine's own id for the job (Flink's `JobID`), if known now; it
    /// can be attached later with `PATCH /v1/jobs/{job}`. On an `engine`,
    /// it defaults to the job's id, which the Flink job takes by setting
    /// the job's `engine_options`.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub engine_job_id: Option<String>,
    /// A registered engine (`/v1/engines`) ctasd watches the job on: it
    /// follows the job's statuses itself, and nobody reports them. The
    /// staging (batch) or table (streaming) is then prepared at once, before
    /// the engine writes.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(pattern = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$", nullable = false)]
    pub engine: Option<String>,
    pub hooks: Vec<SubmitHook>,
    /// What a failed audit does to the stagings it holds back:
    /// `quarantine` (the default) keeps them for `quarantine_seconds`, for
    /// an operator to publish anyway or discard; `abort` discards them.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false)]
    pub on_audit_failure: Option<OnAuditFailure>,
    /// How long a quarantined staging is kept before it is discarded: 1 to
    /// 2592000 seconds (30 days); a day by default.
    #[serde(default, deserialize_with = "non_null")]
    #[schema(nullable = false, minimum = 1, maximum = 2592000)]
    pub quarantine_seconds: Option<u64>,
}

impl From<SubmitJob> for JobRequest {
    fn from(job: SubmitJob) -> Self {
        JobRequest {
            id: job.id,
            name: job.name,
            mode: job.mode,
            statement: job.statement,
            engine_job_id: job.engine_job_id,
            engine: job.engine,
            on_audit_failure: job.on_audit_failure,
            quarantine_seconds: job.quarantine_seconds,
            hooks: job
                .hooks
                .into_iter()
                .map(|hook| HookRequest {
                    kind: hook.kind,
                    catalog: hook.target.catalog,
                    database: hook.target.database,
                    table: hook.target.table,
                    if_not_exists: hook.if_not_exists,
                    definition: hook.table,
                    properties: hook.table_properties,
                    audits: hook.audits,
                    audit_properties: hook.audit_properties,
                })
                .collect(),
        }
    }
}
