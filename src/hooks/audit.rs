//! The gate before a commit (write–audit–publish): the audits of the
//! commits that publish together run on their stagings, what they found is
//! recorded with the hook, and one failure holds back every commit of the
//! batch. The job's policy then keeps the stagings in quarantine (the
//! commits stay pending, due again when the quarantine ends, which then
//! discards them) or discards them at once. A commit an operator chose to
//! publish anyway passes the gate; a retried one is audited again.

use std::time::Instant;

use chrono::Utc;

use super::HookRunner;
use super::execute::{Failure, recorded_result};
use crate::catalog::{Catalog, CatalogError, Staging};
use crate::domain::audit::{AuditResult, OnAuditFailure};
use crate::domain::job_record::{JobRecord, NewHook};
use crate::domain::ledger::{ActionOutcome, ActionRecord, ActionResult, retry};
use crate::fault::{self, Point};

impl HookRunner {
    /// What becomes of the commits of `batch` that their audits hold back;
    /// `None` when the batch may publish.
    pub(super) async fn audit_gate(
        &self,
        job: &JobRecord,
        catalog: &dyn Catalog,
        batch: &[ActionRecord],
        stagings: &[(Staging, &NewHook)],
    ) -> Option<Vec<ActionResult>> {
        let audited = stagings.iter().any(|(_, hook)| !hook.audits.is_empty());
        if !audited || batch.iter().any(|a| a.audits_waived) {
            return None;
        }
        let now = Utc::now();
        let quarantine_over = batch.iter().any(|a| {
            a.outcome == Some(ActionOutcome::Quarantined) && now >= job.quarantine_ends(a)
        });
        if quarantine_over {
            let veto = "its audits failed and its quarantine ended".to_owned();
            return Some(self.discard(catalog, batch, stagings, &veto).await);
        }
        let mut failed = Vec::new();
        for (action, (staging, hook)) in batch.iter().zip(stagings) {
            let results = match self.run_audits(catalog, action, staging, hook).await {
                Ok(results) => results,
                Err(failure) => {
                    return Some(
                        batch
                            .iter()
                            .map(|a| recorded_result(a, Err(failure.clone())))
                            .collect(),
                    );
                }
            };
            if let Err(error) = self
                .store
                .record_audit_results(&job.id, action.hook_index, &results)
                .await
            {
                return Some(batch.iter().map(|a| retry(a, error.to_string())).collect());
            }
            failed.extend(results.into_iter().filter(|r| !r.passed));
        }
        if failed.is_empty() {
            return None;
        }
        let veto = failed
            .iter()
            .map(|r| {
                format!(
                    "audit {} of hook {} failed: observed {}, expected {}",
                    r.name, r.hook_index, r.observed, r.expected
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let until = job.quarantine_ends(&batch[0]);
        Some(match job.audit_policy.on_failure {
            OnAuditFailure::Quarantine if now < until => {
                let error = format!(
                    "{veto}; the staging is kept until {}: publish it anyway or give up to discard it",
                    until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                );
                batch
                    .iter()
                    .map(|_| ActionResult::Quarantined {
                        error: error.clone(),
                        until,
                    })
                    .collect()
            }
            _ => self.discard(catalog, batch, stagings, &veto).await,
        })
    }

    /// Each audit of `hook` on its staging, judged and timed.
    async fn run_audits(
        &self,
        catalog: &dyn Catalog,
        action: &ActionRecord,
        staging: &Staging,
        hook: &NewHook,
    ) -> Result<Vec<AuditResult>, Failure> {
        let mut results = Vec::with_capacity(hook.audits.len());
        for (index, audit) in hook.audits.iter().enumerate() {
            let started = Instant::now();
            let observed = catalog
                .audit(staging, std::slice::from_ref(audit))
                .await
                .map_err(Failure::from)?;
            let (passed, observed) = match observed.first() {
                Some(observed) => observed.judge(audit),
                None => (false, "the catalog observed nothing".into()),
            };
            fault::reached(Point::AuditRan);
            let verdict = if passed { "passed" } else { "failed" };
            self.metrics.audits.with_label_values(&[verdict]).inc();
            tracing::info!(hook = action.hook_index, audit = %audit.name(), %observed, verdict, "audit ran");
            results.push(AuditResult {
                hook_index: action.hook_index,
                audit_index: index as u32,
                name: audit.name(),
                passed,
                observed,
                expected: audit.expected(),
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                at: Utc::now(),
            });
        }
        Ok(results)
    }

    /// Discards every staging of a vetoed batch.
    async fn discard(
        &self,
        catalog: &dyn Catalog,
        batch: &[ActionRecord],
        stagings: &[(Staging, &NewHook)],
        veto: &str,
    ) -> Vec<ActionResult> {
        let mut results = Vec::with_capacity(batch.len());
        for (action, (staging, _)) in batch.iter().zip(stagings) {
            results.push(match catalog.abort(staging).await {
                Ok(()) => ActionResult::Vetoed {
                    error: format!("{veto}; staging discarded"),
                },
                // The staging itself is not ctasd's: it is left alone.
                Err(CatalogError::NotOwned { .. }) => ActionResult::Failed {
                    error: format!("{veto}; the staging was left, as it is not ctasd's"),
                },
                Err(e) => retry(action, e.to_string()),
            });
        }
        results
    }
}
