//! The ledger: status changes and the actions they imply, written in one
//! transaction under the job's lock; claims with leases (rows another claim
//! holds are passed over); results; operators' decisions. Written once for
//! both backends.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::rows::{ACTION_COLUMNS, ActionRow, check_transition};
use super::sql::{Backend, Query, Sql, SqlStore};
use super::{Ledger, Moved, MovedJob, StoreError};
use crate::domain::audit::AuditResult;
use crate::domain::job::{JobId, JobMode, JobStatus, StatusReport, Transition};
use crate::domain::ledger::{
    ActionOutcome, ActionRecord, ActionResult, Deciding, Decision, DecisionError, HookAction,
    Preparation, Shape, abort_after_giving_up, decide, history_rows, plan, planned_actions,
};

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn after(duration: Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}

fn decoded(rows: Vec<ActionRow>) -> Result<Vec<ActionRecord>, StoreError> {
    let mut actions: Vec<ActionRecord> = rows
        .into_iter()
        .map(ActionRow::decode)
        .collect::<Result<_, _>>()?;
    actions.sort_by_key(|a| a.id);
    Ok(actions)
}

/// A job as its status changes see it, its row locked until the
/// transaction ends.
struct LockedJob {
    status: String,
    mode: JobMode,
    preparation: Preparation,
    /// The latest engine time applied to the job (unix ms).
    engine_applied_until: Option<i64>,
}

async fn lock_job(tx: &mut impl Sql, id: &JobId) -> Result<LockedJob, StoreError> {
    let for_update = tx.dialect().for_update;
    let (status, mode, engine, engine_applied_until): (String, String, Option<String>, Option<i64>) = tx
        .row(
            Query::new(format!(
                "SELECT status, mode, engine, engine_applied_until FROM jobs WHERE id = $1{for_update}"
            ))
            .text(id.as_str()),
        )
        .await?
        .ok_or_else(|| StoreError::JobNotFound(id.to_string()))?;
    let mode = JobMode::parse(&mode)
        .ok_or_else(|| StoreError::Internal(format!("job {id} has mode {mode}")))?;
    Ok(LockedJob {
        status,
        mode,
        preparation: Preparation::of(engine.is_some()),
        engine_applied_until,
    })
}

/// Records the actions of a move, each hook's begin or create that still
/// waits giving way to an abort recorded for it; whether there were any.
async fn record_move(
    tx: &mut impl Sql,
    id: &JobId,
    job: &LockedJob,
    transition: &Transition,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let plans_any = transition
        .steps()
        .into_iter()
        .any(|(from, to)| plan(job.mode, job.preparation, from, to).is_some());
    if !plans_any {
        return Ok(false);
    }
    let hooks: Vec<(i64, bool)> = tx
        .rows(
            Query::new(
                "SELECT hook_index, skipped FROM hooks WHERE job_id = $1 ORDER BY hook_index",
            )
            .text(id.as_str()),
        )
        .await?;
    for (hook_index, action, trigger) in
        planned_actions(job.mode, job.preparation, transition, &hooks)
    {
        if action == HookAction::Abort {
            // Not one running right now: it finishes, and the abort follows.
            let superseded = ActionOutcome::Superseded.as_str();
            tx.execute(
                Query::new(format!(
                    "UPDATE actions SET state = 'failed', outcome = '{superseded}', \
                     last_error = 'superseded: the job ended before it ran', updated_at = $3 \
                     WHERE job_id = $1 AND hook_index = $2 AND state = 'pending' \
                       AND action IN ('begin', 'create') AND (lease_until IS NULL OR lease_until < $4)"
                ))
                .text(id.as_str())
                .int(hook_index)
                .time(now)
                .int(millis(now)),
            )
            .await?;
        }
        insert_action(tx, id, hook_index, action, trigger, now).await?;
    }
    Ok(true)
}

/// Records an action due now.
pub(crate) async fn insert_action(
    tx: &mut impl Sql,
    id: &JobId,
    hook_index: i64,
    action: HookAction,
    trigger: JobStatus,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    tx.execute(
        Query::new(
            "INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, not_before, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, 'pending', 0, $5, $6, $6)",
        )
        .text(id.as_str())
        .int(hook_index)
        .text(action.as_str())
        .text(trigger.as_str())
        .int(millis(now))
        .time(now),
    )
    .await?;
    Ok(())
}

#[async_trait]
impl<B: Backend> Ledger for SqlStore<B> {
    async fn transition_job(
        &self,
        id: &JobId,
        report: &StatusReport,
        lease: Option<Duration>,
    ) -> Result<Moved, StoreError> {
        let mut tx = self.begin().await?;
        let job = lock_job(&mut tx, id).await?;
        let engine_at = report
            .engine_times
            .get(&report.status)
            .map(|at| millis(*at));
        let stale = engine_at.is_some_and(|at| job.engine_applied_until.is_some_and(|u| at <= u));
        let transition = if stale {
            // The engine said this before what was already applied.
            Transition::Repeat
        } else {
            check_transition(id, &job.status, report.status)?
        };
        let now = Utc::now();
        let mut recorded = false;
        if let Transition::Move { .. } = transition {
            tx.execute(
                Query::new(
                    "UPDATE jobs SET status = $2, failure = coalesce($3, failure), updated_at = $4, \
                     moved_at = $4, engine_applied_until = coalesce($5, engine_applied_until) \
                     WHERE id = $1",
                )
                .text(id.as_str())
                .text(report.status.as_str())
                .opt_text(report.failure.as_deref())
                .time(now)
                .opt_int(engine_at),
            )
            .await?;
            for row in history_rows(&transition, report) {
                tx.execute(
                    Query::new(
                        "INSERT INTO job_transitions (job_id, from_status, to_status, failure, at, \
                         inferred, engine_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    )
                    .text(id.as_str())
                    .text(row.from.as_str())
                    .text(row.to.as_str())
                    .opt_text(row.failure)
                    .time(now)
                    .flag(row.inferred)
                    .opt_time(row.engine_at),
                )
                .await?;
            }
            recorded = record_move(&mut tx, id, &job, &transition, now).await?;
        }
        // The reporter runs what is due for the job at once: claimed in the
        // same transaction, so no other runner starts it meanwhile. A move
        // that recorded nothing leaves older actions to the reporter's own
        // claim, made only when the job has some pending.
        let moved_without_actions = matches!(transition, Transition::Move { .. }) && !recorded;
        let Some(lease) = lease.filter(|_| !moved_without_actions) else {
            self.commit(tx).await?;
            return Ok(Moved {
                transition,
                claimed: Vec::new(),
            });
        };
        let claimed: Vec<ActionRow> = tx
            .rows(
                Query::new(format!(
                    "UPDATE actions SET lease_until = $1, attempts = attempts + 1, updated_at = $2 \
                     WHERE job_id = $3 AND state = 'pending' AND not_before <= $4 \
                       AND (lease_until IS NULL OR lease_until < $4) \
                       AND NOT EXISTS (SELECT 1 FROM actions b WHERE b.job_id = actions.job_id \
                                       AND b.hook_index = actions.hook_index AND b.state = 'pending' \
                                       AND b.id < actions.id) \
                     RETURNING {ACTION_COLUMNS}"
                ))
                .int(millis(after(lease)))
                .time(now)
                .text(id.as_str())
                .int(millis(now)),
            )
            .await?;
        self.commit(tx).await?;
        Ok(Moved {
            transition,
            claimed: decoded(claimed)?,
        })
    }

    async fn move_without_actions(
        &self,
        id: &JobId,
        report: &StatusReport,
        shapes: &[Shape],
    ) -> Result<Option<MovedJob>, StoreError> {
        match &self.quiet_moves {
            Some(quiet_moves) if !shapes.is_empty() => quiet_moves.submit(id, report, shapes).await,
            _ => Ok(None),
        }
    }

    async fn claim_due_actions(
        &self,
        job: Option<&JobId>,
        lease: Duration,
        limit: u32,
        untried_grace: Duration,
    ) -> Result<Vec<ActionRecord>, StoreError> {
        let now = Utc::now();
        let untried_due_by =
            now - chrono::Duration::from_std(untried_grace).unwrap_or(chrono::Duration::MAX);
        let mut pool = self.pool();
        let skip_locked = pool.dialect().skip_locked;
        let rows: Vec<ActionRow> = pool
            .rows(
                Query::new(format!(
                    "UPDATE actions SET lease_until = $1, attempts = attempts + 1, updated_at = $2 WHERE id IN ( \
                       SELECT a.id FROM actions a WHERE a.state = 'pending' AND a.not_before <= $3 \
                         AND (a.lease_until IS NULL OR a.lease_until < $3) \
                         AND (CAST($4 AS TEXT) IS NULL OR a.job_id = $4) \
                         AND (a.attempts > 0 OR a.not_before <= $5) \
                         AND NOT EXISTS (SELECT 1 FROM actions b WHERE b.job_id = a.job_id \
                                         AND b.hook_index = a.hook_index AND b.state = 'pending' AND b.id < a.id) \
                       ORDER BY a.id LIMIT CAST($6 AS BIGINT){skip_locked}) RETURNING {ACTION_COLUMNS}"
                ))
                .int(millis(after(lease)))
                .time(now)
                .int(millis(now))
                .opt_text(job.map(JobId::as_str))
                .int(millis(untried_due_by))
                .int(i64::from(limit)),
            )
            .await?;
        decoded(rows)
    }

    async fn release_orphaned_leases(&self) -> Result<u64, StoreError> {
        if !B::SOLE_PROCESS {
            return Ok(0);
        }
        self.pool()
            .execute(Query::new(
                "UPDATE actions SET lease_until = NULL WHERE state = 'pending' AND lease_until IS NOT NULL",
            ))
            .await
            .map_err(StoreError::from_sqlx)
    }

    async fn renew_leases(&self, ids: &[i64], lease: Duration) -> Result<(), StoreError> {
        let mut pool = self.pool();
        let ids_in = (pool.dialect().in_list)("id", 2);
        pool.execute(
            Query::new(format!(
                "UPDATE actions SET lease_until = $1 \
                 WHERE {ids_in} AND state = 'pending' AND lease_until IS NOT NULL"
            ))
            .int(millis(after(lease)))
            .ints(ids.to_vec()),
        )
        .await?;
        Ok(())
    }

    async fn record_action(
        &self,
        id: i64,
        result: &ActionResult,
    ) -> Result<DateTime<Utc>, StoreError> {
        let now = Utc::now();
        let query = match result {
            ActionResult::Done { outcome } => Query::new(
                "UPDATE actions SET state = 'done', outcome = $2, last_error = NULL, \
                 lease_until = NULL, updated_at = $3 WHERE id = $1",
            )
            .int(id)
            .text(outcome.as_str())
            .time(now),
            ActionResult::Retry { error, retry_at } => Query::new(
                "UPDATE actions SET last_error = $2, not_before = $3, lease_until = NULL, \
                 updated_at = $4 WHERE id = $1",
            )
            .int(id)
            .text(error)
            .int(millis(*retry_at))
            .time(now),
            ActionResult::Failed { error } => Query::new(
                "UPDATE actions SET state = 'failed', last_error = $2, lease_until = NULL, \
                 updated_at = $3 WHERE id = $1",
            )
            .int(id)
            .text(error)
            .time(now),
            ActionResult::Discarded { error } => Query::new(
                "UPDATE actions SET state = 'failed', outcome = 'discarded', last_error = $2, \
                 lease_until = NULL, updated_at = $3 WHERE id = $1",
            )
            .int(id)
            .text(error)
            .time(now),
            ActionResult::Quarantined { error, until } => Query::new(
                "UPDATE actions SET outcome = 'quarantined', last_error = $2, not_before = $3, \
                 lease_until = NULL, updated_at = $4 WHERE id = $1",
            )
            .int(id)
            .text(error)
            .int(millis(*until))
            .time(now),
            ActionResult::Vetoed { error } => Query::new(
                "UPDATE actions SET state = 'failed', outcome = 'vetoed', last_error = $2, \
                 lease_until = NULL, updated_at = $3 WHERE id = $1",
            )
            .int(id)
            .text(error)
            .time(now),
        };
        self.pool().execute(query).await?;
        Ok(now)
    }

    async fn decide_action(
        &self,
        job: &JobId,
        action: i64,
        deciding: &Deciding,
    ) -> Result<(), StoreError> {
        let decision = deciding.decision;
        let mut tx = self.begin().await?;
        let LockedJob { status, mode, .. } = lock_job(&mut tx, job).await?;
        let actions = decoded(
            tx.rows(
                Query::new(format!(
                    "SELECT {ACTION_COLUMNS} FROM actions WHERE job_id = $1 ORDER BY id"
                ))
                .text(job.as_str()),
            )
            .await?,
        )?;
        let target = actions.iter().find(|a| a.id == action).ok_or_else(|| {
            StoreError::Decision(DecisionError::NotFound {
                job: job.to_string(),
                action,
            })
        })?;
        let later = actions
            .iter()
            .any(|a| a.hook_index == target.hook_index && a.id > target.id);
        decide(target, later, decision).map_err(StoreError::Decision)?;
        let now = Utc::now();
        let decided = match decision {
            Decision::Retry => Query::new(
                "UPDATE actions SET state = 'pending', outcome = NULL, not_before = $2, \
                 updated_at = $3 WHERE id = $1",
            )
            .int(action)
            .int(millis(now))
            .time(now),
            Decision::PublishAnyway => Query::new(
                "UPDATE actions SET audits_waived = $2, not_before = $3, updated_at = $4 \
                 WHERE id = $1",
            )
            .int(action)
            .flag(true)
            .int(millis(now))
            .time(now),
            Decision::GiveUp => Query::new(
                "UPDATE actions SET state = 'failed', outcome = 'given_up', \
                 last_error = coalesce(last_error, 'given up by an operator'), lease_until = NULL, \
                 updated_at = $2 WHERE id = $1",
            )
            .int(action)
            .time(now),
        };
        tx.execute(decided).await?;
        if decision == Decision::GiveUp && abort_after_giving_up(mode, target, &actions) {
            tx.execute(
                Query::new(
                    "INSERT INTO actions (job_id, hook_index, action, trigger, state, attempts, \
                     not_before, created_at, updated_at) \
                     VALUES ($1, $2, 'abort', $3, 'pending', 0, $4, $5, $5)",
                )
                .text(job.as_str())
                .int(i64::from(target.hook_index))
                .text(&status)
                .int(millis(now))
                .time(now),
            )
            .await?;
        }
        tx.execute(
            Query::new(
                "INSERT INTO job_interventions (job_id, action_id, decision, at, decided_by, reason) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .text(job.as_str())
            .int(action)
            .text(decision.as_str())
            .time(now)
            .opt_text(deciding.by.as_deref())
            .opt_text(deciding.reason.as_deref()),
        )
        .await?;
        self.commit(tx).await
    }

    async fn record_audit_results(
        &self,
        job: &JobId,
        hook_index: u32,
        results: &[AuditResult],
    ) -> Result<(), StoreError> {
        let results = serde_json::to_string(results)
            .map_err(|e| StoreError::Internal(format!("audit results as JSON: {e}")))?;
        self.pool()
            .execute(
                Query::new(
                    "UPDATE hooks SET audit_results = $3 WHERE job_id = $1 AND hook_index = $2",
                )
                .text(job.as_str())
                .int(i64::from(hook_index))
                .text(&results),
            )
            .await?;
        Ok(())
    }
}
