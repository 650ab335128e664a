//! Submitting a job: each hook is planned against its live catalog (names,
//! the definition, what the system would refuse, what the kind makes of an
//! existing target) and takes the catalog's snapshot. Nothing is created
//! yet, except for a job ctasd watches on an engine: it learns of CREATED
//! only after the engine may have written, so such a job's staging (or
//! streaming table) is prepared before the submission answers. The same
//! submission again is the same job.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{ServiceError, Services, unavailable};
use crate::catalog::CatalogError;
use crate::domain::audit::{
    Audit, AuditPolicy, MOST_QUARANTINE, OnAuditFailure, audits_from_properties, check_audits,
};
use crate::domain::engine::flink_job_id;
use crate::domain::flink::table::TableDefinition;
use crate::domain::job::{JobId, JobMode};
use crate::domain::job_record::{HookFate, HookKind, JobRecord, NewHook, NewJob, TargetRefusal};
use crate::domain::{CatalogName, EngineName, ObjectName};
use crate::store::StoreError;

/// Most hooks a job may have.
pub const MAX_HOOKS: usize = 64;

/// A job as a client submits it.
#[derive(Debug, Clone, Serialize)]
pub struct JobRequest {
    /// Generated when absent.
    pub id: Option<String>,
    pub name: String,
    pub mode: JobMode,
    pub statement: Option<String>,
    pub engine_job_id: Option<String>,
    /// The engine ctasd watches the job on, if it watches it.
    pub engine: Option<String>,
    pub hooks: Vec<HookRequest>,
    /// What a failed audit does to the staging; quarantine by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_audit_failure: Option<OnAuditFailure>,
    /// How long a quarantined staging is kept, in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantine_seconds: Option<u64>,
}

/// One hook as submitted: the table as JSON or as a property map.
#[derive(Debug, Clone, Serialize)]
pub struct HookRequest {
    pub kind: HookKind,
    pub catalog: String,
    pub database: Option<String>,
    pub table: String,
    pub if_not_exists: bool,
    pub definition: Option<TableDefinition>,
    pub properties: Option<BTreeMap<String, String>>,
    /// Checks on the staging before it is published (batch jobs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub audits: Vec<Audit>,
    /// The audits in their property-map form, instead of `audits`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_properties: Option<BTreeMap<String, String>>,
}

/// What a submission did.
pub enum Submission {
    Created(JobRecord),
    /// The same submission again (same id, same body): the job as it is.
    Existing(JobRecord),
}

/// An engine's job id: 1 to 128 printable characters (Flink's are 32 hex).
pub fn check_engine_job_id(id: &str) -> Result<(), ServiceError> {
    if id.is_empty() || id.chars().count() > 128 || id.chars().any(char::is_control) {
        return Err(ServiceError::job_invalid(
            "engine_job_id",
            "engine_job_id must be 1 to 128 characters without control characters",
        ));
    }
    Ok(())
}

/// A watched job's engine job id: Flink's `JobID`, 32 hex digits.
pub fn check_watched_engine_job_id(id: &str) -> Result<String, ServiceError> {
    flink_job_id(id).ok_or_else(|| {
        ServiceError::job_invalid(
            "engine_job_id",
            "a job watched on a Flink engine needs Flink's JobID as engine_job_id: 32 hex digits",
        )
    })
}

impl Services {
    /// The engine a submission names (it must exist) and the engine job
    /// id the job will have: on a Flink engine, Flink's `JobID`, by default
    /// the job's own id, which the engine's job is then told to take.
    async fn engine_of(
        &self,
        request: &JobRequest,
        id: &JobId,
    ) -> Result<(Option<EngineName>, Option<String>), ServiceError> {
        let Some(name) = &request.engine else {
            return Ok((None, request.engine_job_id.clone()));
        };
        let name = EngineName::parse(name).map_err(|e| ServiceError::name_invalid("engine", e))?;
        if self.store.get_engine(&name).await?.is_none() {
            return Err(ServiceError::EngineNotFound {
                name: name.to_string(),
                field: Some("engine".into()),
            });
        }
        let engine_job_id = match &request.engine_job_id {
            Some(given) => check_watched_engine_job_id(given)?,
            None => id.to_string(),
        };
        Ok((Some(name), Some(engine_job_id)))
    }

    pub async fn submit_job(&self, request: JobRequest) -> Result<Submission, ServiceError> {
        let id = match &request.id {
            Some(id) => {
                JobId::parse(id).map_err(|e| ServiceError::job_invalid("id", e.to_string()))?
            }
            None => JobId::generate(),
        };
        if request.name.trim().is_empty() || request.name.chars().count() > 256 {
            return Err(ServiceError::job_invalid(
                "name",
                "name must be 1 to 256 characters",
            ));
        }
        if let Some(engine_job_id) = &request.engine_job_id {
            check_engine_job_id(engine_job_id)?;
        }
        let (engine, engine_job_id) = self.engine_of(&request, &id).await?;
        if request.hooks.is_empty() || request.hooks.len() > MAX_HOOKS {
            let message = format!("a job has 1 to {MAX_HOOKS} hooks");
            return Err(ServiceError::job_invalid("hooks", message));
        }
        let audit_policy = audit_policy(&request)?;
        let fingerprint = fingerprint(&JobRequest {
            id: Some(id.to_string()),
            ..request.clone()
        });
        // A job submitted again under its own id answers as it stands; an
        // id made just now is new (and should it not be, the store says so).
        if request.id.is_some()
            && let Some(existing) = self.store.get_job(&id).await?
        {
            return resubmitted(existing, &fingerprint);
        }
        let mut hooks = Vec::with_capacity(request.hooks.len());
        let mut targets = BTreeSet::new();
        for (index, hook) in request.hooks.iter().enumerate() {
            let planned = self.plan_hook(index, hook, request.mode).await?;
            let target = (
                planned.catalog.name.clone(),
                planned.database.clone(),
                planned.table.clone(),
            );
            if !targets.insert(target) {
                return Err(ServiceError::job_invalid(
                    format!("hooks[{index}].target"),
                    "two hooks of one job name the same target",
                ));
            }
            hooks.push(planned);
        }
        let job = NewJob {
            id,
            name: request.name,
            mode: request.mode,
            statement: request.statement,
            engine_job_id,
            engine,
            fingerprint,
            hooks,
            audit_policy,
        };
        match self.store.insert_job(&job).await {
            Ok(record) => {
                self.events_nudge.notify_one();
                self.shapes.learn(&record);
                let initializing = record.status.as_str();
                self.metrics
                    .transitions
                    .with_label_values(&[initializing])
                    .inc();
                tracing::info!(job = %record.id, mode = record.mode.as_str(), hooks = record.hooks.len(), engine = ?record.engine.as_ref().map(EngineName::as_str), "job submitted");
                if record.engine.is_none() {
                    return Ok(Submission::Created(record));
                }
                let prepared = self.hooks.run_job_actions(&record.id, Vec::new()).await?;
                Ok(Submission::Created(prepared))
            }
            Err(StoreError::JobExists(_)) => match self.store.get_job(&job.id).await? {
                Some(existing) => resubmitted(existing, &job.fingerprint),
                None => Err(ServiceError::Internal(
                    "a job vanished while it was submitted".into(),
                )),
            },
            Err(StoreError::CatalogNotFound(name)) => {
                let index = job
                    .hooks
                    .iter()
                    .position(|h| h.catalog.name.as_str() == name);
                Err(ServiceError::CatalogNotFound {
                    name,
                    field: Some(format!(
                        "hooks[{}].target.catalog",
                        index.unwrap_or_default()
                    )),
                })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Checks one hook against its live catalog and takes the catalog snapshot.
    async fn plan_hook(
        &self,
        index: usize,
        hook: &HookRequest,
        mode: JobMode,
    ) -> Result<NewHook, ServiceError> {
        let field = |name: &str| format!("hooks[{index}].{name}");
        let catalog_name = CatalogName::parse(&hook.catalog)
            .map_err(|e| ServiceError::name_invalid(field("target.catalog"), e))?;
        let record = self
            .store
            .get_catalog(&catalog_name)
            .await?
            .ok_or_else(|| ServiceError::CatalogNotFound {
                name: catalog_name.to_string(),
                field: Some(field("target.catalog")),
            })?;
        let live = self.catalogs.get(&record).await.map_err(unavailable)?;
        let database = hook
            .database
            .clone()
            .unwrap_or_else(|| live.default_database().to_owned());
        ObjectName::parse("database name", &database)
            .map_err(|e| ServiceError::name_invalid(field("target.database"), e))?;
        ObjectName::parse("table name", &hook.table)
            .map_err(|e| ServiceError::name_invalid(field("target.table"), e))?;
        let definition =
            definition_of(hook).map_err(|(part, message)| ServiceError::TableInvalid {
                field: field(part),
                message,
            })?;
        let audits = audits_of(hook, mode, &definition)
            .and_then(|audits| {
                live.check_audits(&audits)
                    .map(|()| audits)
                    .map_err(|reason| {
                        (
                            "audits",
                            format!("catalog '{catalog_name}' cannot run these audits: {reason}"),
                        )
                    })
            })
            .map_err(|(part, message)| ServiceError::job_invalid(field(part), message))?;
        if !live.list_databases().await?.contains(&database) {
            return Err(ServiceError::DatabaseNotFound {
                message: format!(
                    "database '{database}' does not exist in catalog '{catalog_name}'"
                ),
                field: Some(field("target.database")),
            });
        }
        let exists = live.table_exists(&database, &hook.table).await?;
        live.check_target(&database, &hook.table, &definition, exists)
            .await
            .map_err(|e| match e {
                CatalogError::Unsupported(message) => ServiceError::TableUnsupported {
                    message,
                    field: Some(field("table")),
                },
                CatalogError::Protected(message) => ServiceError::TargetProtected {
                    message,
                    field: field("target"),
                },
                other => other.into(),
            })?;
        let target = format!("{catalog_name}.{database}.{}", hook.table);
        let fate = hook
            .kind
            .against_target(exists, hook.if_not_exists)
            .map_err(|refusal| {
                let message = format!("target {target} {refusal}");
                match refusal {
                    TargetRefusal::Exists => ServiceError::TableExists {
                        message,
                        field: field("target"),
                    },
                    TargetRefusal::Missing => ServiceError::TargetMissing {
                        message,
                        field: field("target"),
                    },
                }
            })?;
        if fate == HookFate::Replaces {
            live.check_replaceable(&database, &hook.table)
                .await
                .map_err(|e| match e {
                    CatalogError::NotOwned { .. } => ServiceError::TableNotOwned {
                        message: e.to_string(),
                        field: Some(field("target")),
                    },
                    other => other.into(),
                })?;
        }
        Ok(NewHook {
            kind: hook.kind,
            database,
            table: hook.table.clone(),
            if_not_exists: hook.if_not_exists,
            skipped: fate == HookFate::Skipped,
            table_properties: definition.to_properties(),
            catalog: record.descriptor,
            audits,
            audit_results: Vec::new(),
        })
    }
}

/// The job's policy for failed audits, checked.
fn audit_policy(request: &JobRequest) -> Result<AuditPolicy, ServiceError> {
    let mut policy = AuditPolicy::default();
    if let Some(on_failure) = request.on_audit_failure {
        policy.on_failure = on_failure;
    }
    if let Some(seconds) = request.quarantine_seconds {
        let most = MOST_QUARANTINE.as_secs();
        if seconds == 0 || seconds > most {
            return Err(ServiceError::job_invalid(
                "quarantine_seconds",
                format!("quarantine_seconds must be 1 to {most} (30 days)"),
            ));
        }
        policy.quarantine = std::time::Duration::from_secs(seconds);
    }
    Ok(policy)
}

/// The hook's audits, from JSON or a property map, checked against its
/// table; or the part at fault and why.
fn audits_of(
    hook: &HookRequest,
    mode: JobMode,
    definition: &TableDefinition,
) -> Result<Vec<Audit>, (&'static str, String)> {
    let (part, audits) = match &hook.audit_properties {
        None => ("audits", hook.audits.clone()),
        Some(_) if !hook.audits.is_empty() => {
            return Err((
                "audits",
                "give the audits either as 'audits' or as 'audit_properties', not both".into(),
            ));
        }
        Some(properties) => (
            "audit_properties",
            audits_from_properties(properties).map_err(|e| ("audit_properties", e))?,
        ),
    };
    if audits.is_empty() {
        return Ok(audits);
    }
    if mode == JobMode::Streaming {
        return Err((
            part,
            "a streaming hook's table is written as the job runs, so nothing waits to be \
             audited before it is published; audits are for batch jobs"
                .into(),
        ));
    }
    let replaces = hook.kind != HookKind::CreateTableAs;
    check_audits(&audits, definition, replaces).map_err(|e| (part, e))?;
    Ok(audits)
}

/// The hook's table, from JSON or a property map, validated; or the part
/// at fault and why.
fn definition_of(hook: &HookRequest) -> Result<TableDefinition, (&'static str, String)> {
    match (&hook.definition, &hook.properties) {
        (Some(table), None) => {
            table.validate().map_err(|e| ("table", e.to_string()))?;
            Ok(table.clone())
        }
        (None, Some(properties)) => TableDefinition::from_properties(properties)
            .map_err(|e| ("table_properties", e.to_string())),
        _ => Err((
            "table",
            "give the table either as 'table' or as 'table_properties', not both or neither".into(),
        )),
    }
}

fn fingerprint(request: &JobRequest) -> String {
    let canonical = serde_json::to_vec(request).expect("a request serializes");
    Sha256::digest(canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An existing job with the same id: the same one again, or a clash.
fn resubmitted(existing: JobRecord, fingerprint: &str) -> Result<Submission, ServiceError> {
    if existing.fingerprint == fingerprint {
        Ok(Submission::Existing(existing))
    } else {
        Err(ServiceError::JobExists(format!(
            "job '{}' exists with a different submission",
            existing.id
        )))
    }
}
