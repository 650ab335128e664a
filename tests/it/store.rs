//! One conformance suite for every store backend: each test below runs
//! against SQLite always, and against PostgreSQL when it is configured.

use std::sync::Arc;

use std::time::Duration;

use ctasd::domain::engine::{EngineDescriptor, EngineKind, EngineObservation, EngineSettings};
use ctasd::domain::job::{JobId, JobMode, JobStatus, StatusReport, Transition};
use ctasd::domain::job_record::{HookKind, JobFilter, JobRecord, JobWatch, NewHook, NewJob};
use ctasd::domain::ledger::{
    ActionOutcome, ActionResult, ActionState, HookAction, moves_without_actions,
};
use ctasd::domain::{CatalogDescriptor, CatalogName, CatalogOptions, EngineName};
use ctasd::store::{Store, StoreError};

use crate::helpers::{TestPostgres, fresh_keyring, open_store};

/// A store for one test, and what must outlive it.
pub struct Backend {
    pub store: Arc<dyn Store>,
    pub url: Option<String>,
    pub dir: tempfile::TempDir,
    _postgres: Option<TestPostgres>,
}

async fn sqlite() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(None, dir.path(), fresh_keyring()).await;
    Backend {
        store,
        url: None,
        dir,
        _postgres: None,
    }
}

async fn postgres() -> Option<Backend> {
    let pg = TestPostgres::create().await?;
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(Some(&pg.url), dir.path(), fresh_keyring()).await;
    Some(Backend {
        store,
        url: Some(pg.url.clone()),
        dir,
        _postgres: Some(pg),
    })
}

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $test() {
                    super::$test(super::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $test() {
                    let Some(backend) = super::postgres().await else { return };
                    super::$test(backend).await;
                }
            )*
        }
    };
}

conformance!(
    outcomes_stored_in_words_by_earlier_versions_are_renamed_by_their_migration,
    an_inserted_catalog_reads_back_identically,
    a_taken_name_is_refused,
    listing_is_bytewise_ordered_and_keyset_paginated,
    an_update_applies_once_per_version,
    delete_says_whether_it_deleted,
    migrations_are_idempotent_and_readiness_checks_them,
    secrets_do_not_open_without_their_key,
    a_submitted_job_reads_back_with_its_hooks_and_sealed_snapshot,
    a_job_on_a_dropped_catalog_is_refused_and_a_catalog_in_use_is_kept,
    a_job_id_is_taken_once,
    a_transition_records_the_planned_actions_in_the_same_step,
    a_report_that_skips_statuses_records_each_step_and_its_actions_in_order,
    terminal_statuses_cannot_be_left,
    due_actions_are_leased_once_and_in_hook_order,
    a_failed_attempt_waits_for_its_retry_time,
    concurrent_claimers_never_share_an_action,
    a_renewed_lease_holds_and_a_released_one_is_not_renewed,
    an_untried_action_is_left_to_its_report_for_the_grace_period,
    a_watched_job_is_prepared_at_submission_and_not_again_at_created,
    an_engine_observation_older_than_one_applied_changes_nothing,
    one_poller_holds_an_engine_until_its_lease_runs_out,
    an_engine_watching_unfinished_jobs_is_kept,
    watched_jobs_are_read_a_page_at_a_time_in_id_order_unfinished_only,
    a_watched_jobs_changes_show_its_last_change_and_status_and_it_reads_whole_by_id,
    a_batch_of_watches_is_written_whole_whatever_its_size,
    a_move_that_plans_nothing_is_made_in_one_statement_where_the_store_can,
);

fn descriptor(name: &str, pairs: &[(&str, &str)], comment: Option<&str>) -> CatalogDescriptor {
    CatalogDescriptor {
        name: CatalogName::parse(name).unwrap(),
        options: CatalogOptions::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap(),
        comment: comment.map(str::to_owned),
    }
}

fn name(n: &str) -> CatalogName {
    CatalogName::parse(n).unwrap()
}

async fn an_inserted_catalog_reads_back_identically(backend: Backend) {
    let catalog = descriptor(
        "pg",
        &[
            ("type", "jdbc"),
            ("password", "pw"),
            ("api-key", "k"),
            ("username", "u"),
        ],
        Some("c"),
    );

    let inserted = backend.store.insert_catalog(&catalog).await.unwrap();
    let read = backend
        .store
        .get_catalog(&name("pg"))
        .await
        .unwrap()
        .unwrap();

    assert_eq!(inserted.descriptor, catalog);
    assert_eq!(read, inserted);
    assert_eq!(read.version, 1);
    assert!(
        backend
            .store
            .get_catalog(&name("other"))
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_taken_name_is_refused(backend: Backend) {
    backend
        .store
        .insert_catalog(&descriptor("a", &[("type", "x")], None))
        .await
        .unwrap();
    let error = backend
        .store
        .insert_catalog(&descriptor("a", &[("type", "y")], None))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::CatalogExists(n) if n == "a"));
    let kept = backend
        .store
        .get_catalog(&name("a"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.descriptor.options.catalog_type(), Some("x"));
}

async fn listing_is_bytewise_ordered_and_keyset_paginated(backend: Backend) {
    for n in ["b", "a_b", "B", "a-b", "a", "Z9"] {
        backend
            .store
            .insert_catalog(&descriptor(n, &[("type", "x")], None))
            .await
            .unwrap();
    }
    let names = |records: Vec<ctasd::domain::CatalogRecord>| -> Vec<String> {
        records
            .into_iter()
            .map(|r| r.descriptor.name.to_string())
            .collect()
    };

    let all = names(backend.store.list_catalogs(None, 100).await.unwrap());
    let first = names(backend.store.list_catalogs(None, 2).await.unwrap());
    let next = names(
        backend
            .store
            .list_catalogs(Some(&name("Z9")), 2)
            .await
            .unwrap(),
    );

    assert_eq!(all, ["B", "Z9", "a", "a-b", "a_b", "b"]);
    assert_eq!(first, ["B", "Z9"]);
    assert_eq!(next, ["a", "a-b"]);
}

async fn an_update_applies_once_per_version(backend: Backend) {
    backend
        .store
        .insert_catalog(&descriptor("a", &[("type", "x"), ("k", "1")], None))
        .await
        .unwrap();
    let changed = descriptor(
        "a",
        &[("type", "x"), ("k", "2"), ("token", "t")],
        Some("new"),
    );

    let updated = backend.store.update_catalog(&changed, 1).await.unwrap();
    let stale = backend
        .store
        .update_catalog(&descriptor("a", &[("type", "x")], None), 1)
        .await
        .unwrap_err();
    let missing = backend
        .store
        .update_catalog(&descriptor("zz", &[("type", "x")], None), 1)
        .await
        .unwrap_err();

    assert_eq!(updated.version, 2);
    assert_eq!(updated.descriptor, changed);
    assert!(updated.updated_at >= updated.created_at);
    assert!(
        matches!(stale, StoreError::ConcurrentModification(_)),
        "{stale}"
    );
    assert!(
        matches!(missing, StoreError::CatalogNotFound(_)),
        "{missing}"
    );
    assert_eq!(
        backend
            .store
            .get_catalog(&name("a"))
            .await
            .unwrap()
            .unwrap()
            .descriptor,
        changed
    );
}

async fn delete_says_whether_it_deleted(backend: Backend) {
    backend
        .store
        .insert_catalog(&descriptor("a", &[("type", "x")], None))
        .await
        .unwrap();
    let altered = descriptor("a", &[("type", "x")], Some("now version 2"));
    backend.store.update_catalog(&altered, 1).await.unwrap();

    let stale = backend.store.delete_catalog(&name("a"), Some(1)).await;
    assert!(
        matches!(stale, Err(StoreError::ConcurrentModification(_))),
        "{stale:?}"
    );
    assert!(
        backend
            .store
            .get_catalog(&name("a"))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        backend
            .store
            .delete_catalog(&name("a"), Some(2))
            .await
            .unwrap()
    );
    backend
        .store
        .insert_catalog(&descriptor("a", &[("type", "x")], None))
        .await
        .unwrap();
    assert!(
        backend
            .store
            .delete_catalog(&name("a"), None)
            .await
            .unwrap()
    );
    assert!(
        !backend
            .store
            .delete_catalog(&name("a"), None)
            .await
            .unwrap()
    );
    assert!(
        backend
            .store
            .get_catalog(&name("a"))
            .await
            .unwrap()
            .is_none()
    );
}

async fn migrations_are_idempotent_and_readiness_checks_them(backend: Backend) {
    backend.store.check_ready().await.unwrap();
    backend.store.migrate().await.unwrap();
    backend.store.check_ready().await.unwrap();
}

async fn secrets_do_not_open_without_their_key(backend: Backend) {
    backend
        .store
        .insert_catalog(&descriptor("a", &[("type", "x"), ("password", "pw")], None))
        .await
        .unwrap();
    // Closed first: a SQLite store serves one handle at a time.
    let Backend {
        store, url, dir, ..
    } = backend;
    drop(store);
    let other_key = open_store(url.as_deref(), dir.path(), fresh_keyring()).await;

    let error = other_key.get_catalog(&name("a")).await.unwrap_err();

    assert!(matches!(error, StoreError::Secret { .. }), "{error}");
    assert!(!error.to_string().contains("pw"));
}

fn job(mode: JobMode, hooks: usize, skipped: &[usize]) -> NewJob {
    NewJob {
        id: JobId::generate(),
        name: "ctas orders".into(),
        mode,
        statement: Some("CREATE TABLE t AS SELECT 1".into()),
        engine_job_id: None,
        engine: None,
        fingerprint: "f1".into(),
        hooks: (0..hooks)
            .map(|i| NewHook {
                kind: HookKind::CreateTableAs,
                database: "db".into(),
                table: format!("t{i}"),
                if_not_exists: skipped.contains(&i),
                skipped: skipped.contains(&i),
                table_properties: [
                    ("schema.0.name".into(), "id".into()),
                    ("schema.0.data-type".into(), "BIGINT".into()),
                ]
                .into(),
                catalog: descriptor(
                    "pg",
                    &[("type", "jdbc"), ("password", "pw"), ("username", "u")],
                    None,
                ),
                audits: Vec::new(),
                audit_results: Vec::new(),
            })
            .collect(),
        audit_policy: Default::default(),
    }
}

/// Moves a job as a report would, claiming nothing, and reads it back.
trait MoveJob {
    async fn move_job(
        &self,
        id: &JobId,
        report: &StatusReport,
    ) -> Result<(JobRecord, Transition), StoreError>;
}

impl MoveJob for Arc<dyn Store> {
    async fn move_job(
        &self,
        id: &JobId,
        report: &StatusReport,
    ) -> Result<(JobRecord, Transition), StoreError> {
        let moved = self.transition_job(id, report, None).await?;
        Ok((self.get_job(id).await?.unwrap(), moved.transition))
    }
}

/// A report of `status`, with `failure`.
fn report(status: JobStatus, failure: Option<&str>) -> StatusReport {
    StatusReport {
        failure: failure.map(str::to_owned),
        ..StatusReport::new(status)
    }
}

/// Stores `new`, with the catalogs its hooks name registered first.
async fn insert(store: &Arc<dyn Store>, new: &NewJob) -> JobRecord {
    for hook in &new.hooks {
        match store.insert_catalog(&hook.catalog).await {
            Ok(_) | Err(StoreError::CatalogExists(_)) => {}
            Err(other) => panic!("{other}"),
        }
    }
    store.insert_job(new).await.unwrap()
}

async fn a_job_on_a_dropped_catalog_is_refused_and_a_catalog_in_use_is_kept(backend: Backend) {
    let new = job(JobMode::Batch, 1, &[]);
    let orphan = backend.store.insert_job(&new).await.unwrap_err();
    assert!(
        matches!(&orphan, StoreError::CatalogNotFound(name) if name == "pg"),
        "{orphan}"
    );

    insert(&backend.store, &new).await;
    let kept = backend
        .store
        .delete_catalog(&name("pg"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(kept, StoreError::CatalogInUse { jobs: 1, .. }),
        "{kept}"
    );
    for status in [JobStatus::Created, JobStatus::Failed] {
        backend
            .store
            .move_job(&new.id, &report(status, None))
            .await
            .unwrap();
    }
    // Begin, then abort: each claimed once the one before it is done.
    loop {
        let due = backend
            .store
            .claim_due_actions(None, Duration::from_secs(15), 10, Duration::ZERO)
            .await
            .unwrap();
        if due.is_empty() {
            break;
        }
        for action in due {
            let done = ActionResult::Done {
                outcome: ActionOutcome::Staged,
            };
            backend.store.record_action(action.id, &done).await.unwrap();
        }
    }
    assert!(
        backend
            .store
            .delete_catalog(&name("pg"), None)
            .await
            .unwrap(),
        "droppable once the job ended"
    );
}

async fn a_submitted_job_reads_back_with_its_hooks_and_sealed_snapshot(backend: Backend) {
    let new = job(JobMode::Batch, 2, &[1]);

    let inserted = insert(&backend.store, &new).await;
    let read = backend.store.get_job(&new.id).await.unwrap().unwrap();

    assert_eq!(read, inserted);
    assert_eq!(read.status, JobStatus::Initializing);
    assert_eq!(
        read.hooks, new.hooks,
        "hooks and their catalog snapshots round-trip"
    );
    assert!(read.actions.is_empty());
    assert!(
        backend
            .store
            .get_job(&JobId::generate())
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_job_id_is_taken_once(backend: Backend) {
    let new = job(JobMode::Batch, 1, &[]);
    insert(&backend.store, &new).await;
    let error = backend.store.insert_job(&new).await.unwrap_err();
    assert!(matches!(error, StoreError::JobExists(_)), "{error}");
}

async fn a_transition_records_the_planned_actions_in_the_same_step(backend: Backend) {
    let new = job(JobMode::Batch, 3, &[1]);
    insert(&backend.store, &new).await;

    let (created, moved) = backend
        .store
        .move_job(&new.id, &report(JobStatus::Created, None))
        .await
        .unwrap();
    let (again, repeat) = backend
        .store
        .move_job(&new.id, &report(JobStatus::Created, None))
        .await
        .unwrap();

    assert_eq!(
        moved,
        Transition::Move {
            from: JobStatus::Initializing,
            path: vec![JobStatus::Created]
        }
    );
    assert_eq!(created.status, JobStatus::Created);
    let planned: Vec<(u32, HookAction, ActionState)> = created
        .actions
        .iter()
        .map(|a| (a.hook_index, a.action, a.state))
        .collect();
    assert_eq!(
        planned,
        [
            (0, HookAction::Begin, ActionState::Pending),
            (2, HookAction::Begin, ActionState::Pending)
        ],
        "the skipped hook takes no action"
    );
    assert_eq!(repeat, Transition::Repeat);
    assert_eq!(again.actions.len(), 2, "repeating a status records nothing");

    let (running, _) = backend
        .store
        .move_job(&new.id, &report(JobStatus::Running, None))
        .await
        .unwrap();
    assert_eq!(running.actions.len(), 2, "RUNNING implies no action");
    let (failed, _) = backend
        .store
        .move_job(&new.id, &report(JobStatus::Failed, Some("out of memory")))
        .await
        .unwrap();
    assert_eq!(failed.failure.as_deref(), Some("out of memory"));
    let aborts = failed
        .actions
        .iter()
        .filter(|a| a.action == HookAction::Abort && a.trigger == JobStatus::Failed)
        .count();
    assert_eq!(aborts, 2);
}

async fn a_report_that_skips_statuses_records_each_step_and_its_actions_in_order(backend: Backend) {
    let new = job(JobMode::Batch, 2, &[]);
    insert(&backend.store, &new).await;
    let created_at = chrono::DateTime::from_timestamp_millis(1_700_000_000_123).unwrap();
    let finished = StatusReport {
        engine_times: [(JobStatus::Created, created_at)].into(),
        ..StatusReport::new(JobStatus::Finished)
    };

    let (job, moved) = backend.store.move_job(&new.id, &finished).await.unwrap();

    assert!(matches!(moved, Transition::Move { .. }));
    assert_eq!(job.status, JobStatus::Finished);
    let history = backend.store.status_history(&new.id).await.unwrap();
    let steps: Vec<(JobStatus, bool, Option<_>)> = history
        .iter()
        .skip(1)
        .map(|h| (h.to, h.inferred, h.engine_at))
        .collect();
    assert_eq!(
        steps,
        [
            (JobStatus::Created, true, Some(created_at)),
            (JobStatus::Running, true, None),
            (JobStatus::Finished, false, None)
        ]
    );
    let planned: Vec<(u32, HookAction, JobStatus)> = job
        .actions
        .iter()
        .map(|a| (a.hook_index, a.action, a.trigger))
        .collect();
    assert_eq!(
        planned,
        [
            (0, HookAction::Begin, JobStatus::Created),
            (1, HookAction::Begin, JobStatus::Created),
            (0, HookAction::Commit, JobStatus::Finished),
            (1, HookAction::Commit, JobStatus::Finished)
        ],
        "the begins are recorded, and so run, before the commits"
    );
}

async fn terminal_statuses_cannot_be_left(backend: Backend) {
    let new = job(JobMode::Streaming, 1, &[]);
    insert(&backend.store, &new).await;
    for status in [JobStatus::Created, JobStatus::Running, JobStatus::Finished] {
        backend
            .store
            .move_job(&new.id, &report(status, None))
            .await
            .unwrap();
    }
    let terminal = backend
        .store
        .move_job(&new.id, &report(JobStatus::Running, None))
        .await
        .unwrap_err();
    assert!(
        terminal.to_string().contains("globally terminal"),
        "{terminal}"
    );
    let job = backend.store.get_job(&new.id).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Finished);
    let actions: Vec<HookAction> = job.actions.iter().map(|a| a.action).collect();
    assert_eq!(
        actions,
        [HookAction::Create],
        "a streaming job acts only on CREATED"
    );
    let missing = backend
        .store
        .move_job(&JobId::generate(), &report(JobStatus::Created, None))
        .await
        .unwrap_err();
    assert!(matches!(missing, StoreError::JobNotFound(_)), "{missing}");
}

async fn due_actions_are_leased_once_and_in_hook_order(backend: Backend) {
    let new = job(JobMode::Batch, 1, &[]);
    insert(&backend.store, &new).await;
    for status in [JobStatus::Created, JobStatus::Running, JobStatus::Finished] {
        backend
            .store
            .move_job(&new.id, &report(status, None))
            .await
            .unwrap();
    }

    let first = backend
        .store
        .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
        .await
        .unwrap();
    let while_leased = backend
        .store
        .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
        .await
        .unwrap();

    let claimed: Vec<HookAction> = first.iter().map(|a| a.action).collect();
    assert_eq!(
        claimed,
        [HookAction::Begin],
        "the commit waits for its begin"
    );
    assert_eq!(first[0].attempts, 1);
    assert!(
        while_leased.is_empty(),
        "a leased action is not handed out twice"
    );

    backend
        .store
        .record_action(
            first[0].id,
            &ActionResult::Done {
                outcome: ActionOutcome::Staged,
            },
        )
        .await
        .unwrap();
    let next = backend
        .store
        .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        next.iter().map(|a| a.action).collect::<Vec<_>>(),
        [HookAction::Commit]
    );
    backend
        .store
        .record_action(
            next[0].id,
            &ActionResult::Done {
                outcome: ActionOutcome::Committed,
            },
        )
        .await
        .unwrap();
    let job = backend.store.get_job(&new.id).await.unwrap().unwrap();
    let ledger: Vec<(HookAction, ActionState, Option<ActionOutcome>)> = job
        .actions
        .iter()
        .map(|a| (a.action, a.state, a.outcome))
        .collect();
    assert_eq!(
        ledger,
        [
            (
                HookAction::Begin,
                ActionState::Done,
                Some(ActionOutcome::Staged)
            ),
            (
                HookAction::Commit,
                ActionState::Done,
                Some(ActionOutcome::Committed)
            )
        ]
    );
    assert!(
        backend
            .store
            .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_failed_attempt_waits_for_its_retry_time(backend: Backend) {
    let new = job(JobMode::Streaming, 1, &[]);
    insert(&backend.store, &new).await;
    backend
        .store
        .move_job(&new.id, &report(JobStatus::Created, None))
        .await
        .unwrap();
    let claimed = backend
        .store
        .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
        .await
        .unwrap();
    let retry_at = chrono::Utc::now() + chrono::Duration::milliseconds(300);

    backend
        .store
        .record_action(
            claimed[0].id,
            &ActionResult::Retry {
                error: "connection refused".into(),
                retry_at,
            },
        )
        .await
        .unwrap();

    assert!(
        backend
            .store
            .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "not before its time"
    );
    let job = backend.store.get_job(&new.id).await.unwrap().unwrap();
    assert_eq!(job.actions[0].state, ActionState::Pending);
    assert_eq!(
        job.actions[0].last_error.as_deref(),
        Some("connection refused")
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let again = backend
        .store
        .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].attempts, 2);
    backend
        .store
        .record_action(
            again[0].id,
            &ActionResult::Failed {
                error: "conflict".into(),
            },
        )
        .await
        .unwrap();
    let job = backend.store.get_job(&new.id).await.unwrap().unwrap();
    assert_eq!(job.actions[0].state, ActionState::Failed);
}

async fn concurrent_claimers_never_share_an_action(backend: Backend) {
    for _ in 0..10 {
        let new = job(JobMode::Batch, 3, &[]);
        insert(&backend.store, &new).await;
        backend
            .store
            .move_job(&new.id, &report(JobStatus::Created, None))
            .await
            .unwrap();
    }

    let claimers = (0..8).map(|_| {
        let store = backend.store.clone();
        tokio::spawn(async move {
            let mut claimed = Vec::new();
            loop {
                let batch = store
                    .claim_due_actions(None, Duration::from_secs(60), 2, Duration::ZERO)
                    .await
                    .unwrap();
                if batch.is_empty() {
                    return claimed;
                }
                claimed.extend(batch.into_iter().map(|a| a.id));
            }
        })
    });
    let mut all: Vec<i64> = Vec::new();
    for claimer in claimers {
        all.extend(claimer.await.unwrap());
    }

    let total = all.len();
    all.sort();
    all.dedup();
    assert_eq!(total, 30, "every pending action was claimed");
    assert_eq!(all.len(), 30, "no action was claimed twice");
}

async fn a_renewed_lease_holds_and_a_released_one_is_not_renewed(backend: Backend) {
    let store = &backend.store;
    let (held, released) = (
        job(JobMode::Streaming, 1, &[]),
        job(JobMode::Streaming, 1, &[]),
    );
    for new in [&held, &released] {
        insert(store, new).await;
        store
            .move_job(&new.id, &report(JobStatus::Created, None))
            .await
            .unwrap();
    }
    let lease = Duration::from_millis(1000);
    let claimed = store
        .claim_due_actions(None, lease, 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let retry_at = chrono::Utc::now();
    store
        .record_action(
            claimed[1].id,
            &ActionResult::Retry {
                error: "down".into(),
                retry_at,
            },
        )
        .await
        .unwrap();

    tokio::time::sleep(Duration::from_millis(600)).await;
    let ids: Vec<i64> = claimed.iter().map(|a| a.id).collect();
    store.renew_leases(&ids, lease).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;

    // Past the first lease: the renewed claim still holds; the released
    // action is due again, not leased by the renewal.
    let due = store
        .claim_due_actions(None, lease, 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        due.iter().map(|a| a.id).collect::<Vec<_>>(),
        [claimed[1].id]
    );
    let done = ActionResult::Done {
        outcome: ActionOutcome::Created,
    };
    store.record_action(due[0].id, &done).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let expired = store
        .claim_due_actions(None, lease, 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        expired.iter().map(|a| a.id).collect::<Vec<_>>(),
        [claimed[0].id],
        "without renewal the claim runs out"
    );
}

async fn an_untried_action_is_left_to_its_report_for_the_grace_period(backend: Backend) {
    let store = &backend.store;
    let new = job(JobMode::Streaming, 1, &[]);
    insert(store, &new).await;
    store
        .move_job(&new.id, &report(JobStatus::Created, None))
        .await
        .unwrap();
    let (lease, grace) = (Duration::from_secs(60), Duration::from_millis(800));

    let early = store
        .claim_due_actions(None, lease, 10, grace)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let late = store
        .claim_due_actions(None, lease, 10, grace)
        .await
        .unwrap();

    assert!(early.is_empty(), "left to the report that recorded it");
    assert_eq!(late.len(), 1, "taken over once the grace has passed");
}

fn engine(name: &str) -> EngineDescriptor {
    EngineDescriptor {
        name: EngineName::parse(name).unwrap(),
        kind: EngineKind::Flink,
        settings: EngineSettings::new("http://127.0.0.1:8081", None, None, None, None).unwrap(),
        comment: None,
    }
}

/// A batch job watched on engine `flink`, which is registered.
async fn watched_job(store: &Arc<dyn Store>) -> NewJob {
    match store
        .insert_engine(&engine("flink"), &EngineObservation::unknown())
        .await
    {
        Ok(_) | Err(StoreError::EngineExists(_)) => {}
        Err(other) => panic!("{other}"),
    }
    let mut new = job(JobMode::Batch, 2, &[1]);
    new.engine = Some(EngineName::parse("flink").unwrap());
    new.engine_job_id = Some(new.id.to_string());
    new
}

/// A report of `status` as the engine timed it (unix ms).
fn observed(status: JobStatus, at_millis: i64) -> StatusReport {
    let at = chrono::DateTime::from_timestamp_millis(at_millis).unwrap();
    StatusReport {
        engine_times: [(status, at)].into(),
        ..StatusReport::new(status)
    }
}

async fn a_watched_job_is_prepared_at_submission_and_not_again_at_created(backend: Backend) {
    let new = watched_job(&backend.store).await;
    let inserted = insert(&backend.store, &new).await;
    let prepared: Vec<(u32, HookAction, JobStatus)> = inserted
        .actions
        .iter()
        .map(|a| (a.hook_index, a.action, a.trigger))
        .collect();
    assert_eq!(
        prepared,
        [(0, HookAction::Begin, JobStatus::Initializing)],
        "the staging is begun at submission; the skipped hook takes none"
    );
    assert_eq!(
        inserted.engine.as_ref().map(EngineName::as_str),
        Some("flink")
    );

    let (finished, _) = backend
        .store
        .move_job(&new.id, &report(JobStatus::Finished, None))
        .await
        .unwrap();
    let actions: Vec<HookAction> = finished.actions.iter().map(|a| a.action).collect();
    assert_eq!(
        actions,
        [HookAction::Begin, HookAction::Commit],
        "CREATED, passed over, begins nothing more: a second begin would empty the staging"
    );
}

async fn an_engine_observation_older_than_one_applied_changes_nothing(backend: Backend) {
    let new = watched_job(&backend.store).await;
    insert(&backend.store, &new).await;
    let store = &backend.store;
    store
        .move_job(&new.id, &observed(JobStatus::Running, 2_000))
        .await
        .unwrap();
    let (restarting, _) = store
        .move_job(&new.id, &observed(JobStatus::Restarting, 3_000))
        .await
        .unwrap();
    assert_eq!(restarting.status, JobStatus::Restarting);

    // A second replica's late answer: RUNNING as Flink saw it before.
    let (after, transition) = store
        .move_job(&new.id, &observed(JobStatus::Running, 2_000))
        .await
        .unwrap();
    assert_eq!(transition, Transition::Repeat);
    assert_eq!(after.status, JobStatus::Restarting);
    assert_eq!(
        after.actions.len(),
        restarting.actions.len(),
        "nothing recorded"
    );

    let (running, _) = store
        .move_job(&new.id, &observed(JobStatus::Running, 4_000))
        .await
        .unwrap();
    assert_eq!(
        running.status,
        JobStatus::Running,
        "a newer observation moves it"
    );
}

async fn one_poller_holds_an_engine_until_its_lease_runs_out(backend: Backend) {
    let store = &backend.store;
    let name = EngineName::parse("flink").unwrap();
    store
        .insert_engine(&engine("flink"), &EngineObservation::unknown())
        .await
        .unwrap();
    let lease = Duration::from_millis(300);
    assert!(store.lease_engine(&name, "replica-a", lease).await.unwrap());
    assert!(!store.lease_engine(&name, "replica-b", lease).await.unwrap());
    assert!(
        store.lease_engine(&name, "replica-a", lease).await.unwrap(),
        "renewed"
    );
    tokio::time::sleep(lease * 2).await;
    assert!(
        store.lease_engine(&name, "replica-b", lease).await.unwrap(),
        "taken over"
    );
    assert!(!store.lease_engine(&name, "replica-a", lease).await.unwrap());
}

async fn watched_jobs_are_read_a_page_at_a_time_in_id_order_unfinished_only(backend: Backend) {
    let mut ids = Vec::new();
    for _ in 0..5 {
        let new = watched_job(&backend.store).await;
        insert(&backend.store, &new).await;
        ids.push(new.id);
    }
    let finished = ids.pop().unwrap();
    backend
        .store
        .move_job(&finished, &report(JobStatus::Canceled, None))
        .await
        .unwrap();
    ids.sort();
    let name = EngineName::parse("flink").unwrap();

    let mut read = Vec::new();
    let mut pages = 0;
    let mut after: Option<JobId> = None;
    loop {
        let page = backend
            .store
            .watched_jobs(&name, after.as_ref(), 3)
            .await
            .unwrap();
        pages += 1;
        after = page.last().map(|job| job.id.clone());
        let full = page.len() == 3;
        read.extend(page.into_iter().map(|job| job.id));
        if !full {
            break;
        }
    }
    assert_eq!(read, ids, "every unfinished job once, in id order");
    assert_eq!(pages, 2);
    let other = EngineName::parse("other").unwrap();
    assert!(
        backend
            .store
            .watched_jobs(&other, None, 3)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_watched_jobs_changes_show_its_last_change_and_status_and_it_reads_whole_by_id(
    backend: Backend,
) {
    let store = &backend.store;
    let name = EngineName::parse("flink").unwrap();
    let (kept, ended) = (watched_job(store).await, watched_job(store).await);
    insert(store, &kept).await;
    insert(store, &ended).await;
    let since = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .move_job(&ended.id, &report(JobStatus::Canceled, None))
        .await
        .unwrap();

    // Only what changed since, finished included, with its status.
    let changes = store.watched_changes(&name, since).await.unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].id, ended.id);
    assert_eq!(changes[0].status, JobStatus::Canceled);
    let earlier = since - chrono::Duration::seconds(60);
    let mut all = store.watched_changes(&name, earlier).await.unwrap();
    all.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(all.len(), 2);
    let other = EngineName::parse("other").unwrap();
    assert!(
        store
            .watched_changes(&other, earlier)
            .await
            .unwrap()
            .is_empty()
    );

    // Read whole by id: the same last change, so a poll can tell a job it
    // keeps as it is from one that moved.
    let ids = [
        kept.id.as_str(),
        ended.id.as_str(),
        "0123456789abcdef0123456789abcdef",
    ];
    let mut whole = store.watched_jobs_among(&ids).await.unwrap();
    whole.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(whole.len(), 2, "a job not there is left out");
    for (job, change) in whole.iter().zip(&all) {
        assert_eq!(
            (&job.id, job.status, job.updated_at),
            (&change.id, change.status, change.updated_at)
        );
    }
    let [one] = &store.watched_jobs_among(&[kept.id.as_str()]).await.unwrap()[..] else {
        panic!("one job asked, one read");
    };
    assert_eq!(one.id, kept.id);
}

async fn a_batch_of_watches_is_written_whole_whatever_its_size(backend: Backend) {
    let store = &backend.store;
    // 261 goes in statements of 256, 4 and 1 rows.
    let mut ids = Vec::new();
    for _ in 0..261 {
        let new = watched_job(store).await;
        insert(store, &new).await;
        ids.push(new.id);
    }
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(1_765_000_000_000 + ms);
    let watch = |n: usize| JobWatch {
        engine_status: Some(JobStatus::Running),
        first_seen_at: at(n as i64),
        last_seen_at: at(n as i64 + 1),
        missing_since: n.is_multiple_of(2).then(|| at(n as i64 + 2)).flatten(),
        note: n.is_multiple_of(3).then(|| format!("note {n}")),
        examined_until: Some(n as i64),
    };
    let batch: Vec<(JobId, JobWatch)> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| (id.clone(), watch(n)))
        .collect();
    store.record_watches(&batch).await.unwrap();

    let name = EngineName::parse("flink").unwrap();
    let read = store.watched_jobs(&name, None, 1_000).await.unwrap();
    assert_eq!(read.len(), ids.len());
    for job in read {
        let n = ids.iter().position(|id| *id == job.id).unwrap();
        assert_eq!(job.watch, Some(watch(n)), "job {n}");
    }
}

async fn an_engine_watching_unfinished_jobs_is_kept(backend: Backend) {
    let new = watched_job(&backend.store).await;
    insert(&backend.store, &new).await;
    let name = EngineName::parse("flink").unwrap();
    let refused = backend.store.delete_engine(&name).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::EngineInUse { jobs: 1, .. }),
        "{refused}"
    );
    assert_eq!(
        backend
            .store
            .watched_jobs(&name, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );

    backend
        .store
        .move_job(&new.id, &report(JobStatus::Canceled, None))
        .await
        .unwrap();
    assert!(
        backend
            .store
            .watched_jobs(&name, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(backend.store.delete_engine(&name).await.unwrap());
    let orphan = backend
        .store
        .insert_job(&watched_job_without_engine(&new))
        .await;
    assert!(
        matches!(orphan, Err(StoreError::EngineNotFound(_))),
        "{orphan:?}"
    );
}

/// Another job naming the same (now dropped) engine.
fn watched_job_without_engine(like: &NewJob) -> NewJob {
    NewJob {
        id: JobId::generate(),
        engine_job_id: None,
        ..like.clone()
    }
}

/// Runs `sql` on the backend's database, beside the store.
async fn raw_sql(backend: &Backend, sql: &str) {
    use sqlx::Connection;
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    match &backend.url {
        Some(url) => {
            let mut db = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::raw_sql(sql).execute(&mut db).await.unwrap();
        }
        None => {
            let file = backend.dir.path().join("ctasd.db");
            let mut db = sqlx::SqliteConnection::connect(&format!("sqlite:{}", file.display()))
                .await
                .unwrap();
            sqlx::raw_sql(sql).execute(&mut db).await.unwrap();
        }
    }
}

async fn outcomes_stored_in_words_by_earlier_versions_are_renamed_by_their_migration(
    backend: Backend,
) {
    let new = job(JobMode::Batch, 1, &[]);
    insert(&backend.store, &new).await;
    for status in [JobStatus::Created, JobStatus::Running, JobStatus::Finished] {
        backend
            .store
            .move_job(&new.id, &report(status, None))
            .await
            .unwrap();
    }
    for outcome in [
        ActionOutcome::AlreadyStaged,
        ActionOutcome::AlreadyCommitted,
    ] {
        let claimed = backend
            .store
            .claim_due_actions(None, Duration::from_secs(60), 10, Duration::ZERO)
            .await
            .unwrap();
        let done = ActionResult::Done { outcome };
        backend
            .store
            .record_action(claimed[0].id, &done)
            .await
            .unwrap();
    }
    // As version 0.1 stored them, before outcomes were an enum.
    raw_sql(
        &backend,
        "UPDATE actions SET outcome = 'already staged' WHERE action = 'begin'; \
         UPDATE actions SET outcome = 'already committed' WHERE action = 'commit'",
    )
    .await;
    assert!(
        backend.store.get_job(&new.id).await.is_err(),
        "an outcome the store does not know is not guessed at"
    );

    let migration = match backend.url {
        Some(_) => include_str!("../../migrations/postgres/0009_outcome_names.sql"),
        None => include_str!("../../migrations/sqlite/0009_outcome_names.sql"),
    };
    raw_sql(&backend, migration).await;

    let outcomes: Vec<_> = backend
        .store
        .get_job(&new.id)
        .await
        .unwrap()
        .unwrap()
        .actions
        .iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(
        outcomes,
        [
            Some(ActionOutcome::AlreadyStaged),
            Some(ActionOutcome::AlreadyCommitted)
        ]
    );
}

/// A streaming job with `hooks` hooks, reported CREATED and RUNNING.
async fn running_streaming_job(store: &Arc<dyn Store>, hooks: usize) -> NewJob {
    use JobStatus::{Created, Running};
    let new = job(JobMode::Streaming, hooks, &[]);
    insert(store, &new).await;
    for (status, at) in [(Created, 1_000), (Running, 2_000)] {
        store
            .move_job(&new.id, &observed(status, at))
            .await
            .unwrap();
    }
    new
}

/// A connection to the PostgreSQL store with a transaction open, in which
/// `statement` ran on the job `id` (`$1`): it holds the job's row.
async fn in_transaction(backend: &Backend, statement: &str, id: &JobId) -> sqlx::PgConnection {
    use sqlx::Connection;
    let url = backend.url.as_deref().unwrap();
    let mut other = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut other).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
        .bind(id.as_str())
        .execute(&mut other)
        .await
        .unwrap();
    other
}

async fn a_move_that_plans_nothing_is_made_in_one_statement_where_the_store_can(backend: Backend) {
    use JobStatus::{Restarting, Running};
    let store = &backend.store;
    let new = running_streaming_job(store, 2).await;
    // A job read alone (one statement where the store can) answers as the
    // same job read among others (hooks and actions queried apiece).
    insert(store, &job(JobMode::Batch, 1, &[])).await;
    let alone = store.get_job(&new.id).await.unwrap().unwrap();
    let listed = store
        .list_jobs(&JobFilter::default(), None, 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed.iter().find(|j| j.id == new.id), Some(&alone));

    let shapes = |to| moves_without_actions(to);
    let moved = store
        .move_without_actions(&new.id, &observed(Restarting, 3_000), &shapes(Restarting))
        .await
        .unwrap();
    let Some(_) = &backend.url else {
        assert!(moved.is_none(), "SQLite moves in its transaction");
        let unmoved = store.get_job(&new.id).await.unwrap().unwrap();
        assert_eq!(unmoved.status, Running);
        return;
    };
    let moved = moved.expect("a streaming job restarts in one statement");
    assert_eq!(
        moved.transition,
        Transition::Move {
            from: Running,
            path: vec![Restarting]
        }
    );
    let stored = store.get_job(&new.id).await.unwrap().unwrap();
    assert_eq!(
        moved.job, stored,
        "answered as stored, hooks and actions too"
    );
    assert_eq!(stored.status, Restarting);
    assert_eq!(stored.hooks.len(), 2);
    assert_eq!(stored.actions.len(), 2, "the creates, and nothing more");
    let history = store.status_history(&new.id).await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.from, last.to, last.inferred),
        (Some(Running), Restarting, false)
    );
    assert_eq!(last.engine_at.map(|at| at.timestamp_millis()), Some(3_000));

    // Not moved, left to the transaction: an engine time already applied,
    // a shape the job is not in.
    let late = store
        .move_without_actions(&new.id, &observed(Running, 2_500), &shapes(Running))
        .await
        .unwrap();
    assert!(late.is_none(), "an older observation moves nothing");
    let batch_only: Vec<_> = shapes(Running)
        .into_iter()
        .filter(|s| s.mode == JobMode::Batch)
        .collect();
    let other_shape = store
        .move_without_actions(&new.id, &observed(Running, 4_000), &batch_only)
        .await
        .unwrap();
    assert!(
        other_shape.is_none(),
        "a streaming job is in no batch shape"
    );

    // A job another transaction holds is not waited for: it moves
    // nothing (the hooks and actions read could be older than its row),
    // and the transaction decides once the holder is done.
    let mut other = in_transaction(
        &backend,
        "UPDATE jobs SET updated_at = now() WHERE id = $1",
        &new.id,
    )
    .await;
    let held = tokio::time::timeout(
        Duration::from_secs(10),
        store.move_without_actions(&new.id, &observed(Running, 4_000), &shapes(Running)),
    )
    .await
    .expect("a held job is passed over, not waited for")
    .unwrap();
    assert!(held.is_none(), "held by another transaction: {held:?}");
    sqlx::raw_sql("COMMIT").execute(&mut other).await.unwrap();
    let (running, transition) = store
        .move_job(&new.id, &observed(Running, 4_000))
        .await
        .unwrap();
    assert_eq!(
        running.status, Running,
        "the transaction moves it: {transition:?}"
    );
    assert_eq!(
        store.status_history(&new.id).await.unwrap().len(),
        history.len() + 1
    );
}

/// Cuts every connection the store holds to its PostgreSQL database.
async fn cut_store_connections(backend: &Backend) {
    raw_sql(
        backend,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .await;
}

#[tokio::test]
async fn postgres_connections_cut_by_the_server_fail_only_the_statements_under_way() {
    let Some(backend) = postgres().await else {
        return;
    };
    let store = &backend.store;
    let mem = descriptor("mem", &[("type", "generic_in_memory")], None);
    store.insert_catalog(&mem).await.unwrap();
    let mem_name = name("mem");
    // Several connections kept idle, from statements run side by side.
    let reads: Vec<_> = (0..4).map(|_| store.get_catalog(&mem_name)).collect();
    for read in futures_util::future::join_all(reads).await {
        assert!(read.unwrap().is_some());
    }

    // Idle longer than a second: each is checked before use, and a cut one
    // replaced, so the statement does not notice.
    cut_store_connections(&backend).await;
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(store.get_catalog(&name("mem")).await.unwrap().is_some());

    // Cut while in steady use: the statement that meets a cut connection
    // fails as unavailable, and takes the other idle ones with it.
    let reads: Vec<_> = (0..4).map(|_| store.get_catalog(&mem_name)).collect();
    futures_util::future::join_all(reads).await;
    cut_store_connections(&backend).await;
    let failed = store.get_catalog(&name("mem")).await;
    assert!(
        matches!(failed, Err(StoreError::Unavailable(_))),
        "{failed:?}"
    );
    for _ in 0..4 {
        assert!(store.get_catalog(&name("mem")).await.unwrap().is_some());
    }
    // A statement refused by the database keeps its connection.
    let taken = store.insert_catalog(&mem).await.unwrap_err();
    assert!(matches!(taken, StoreError::CatalogExists(_)), "{taken}");
    assert!(store.get_catalog(&name("mem")).await.unwrap().is_some());
}

#[tokio::test]
async fn quiet_moves_of_many_jobs_at_once_each_move_their_own_job_and_a_held_job_holds_up_none() {
    use JobStatus::{Restarting, Running};
    let Some(backend) = postgres().await else {
        return;
    };
    let store = &backend.store;
    let mut jobs = Vec::new();
    for _ in 0..12 {
        jobs.push(running_streaming_job(store, 1).await.id);
    }
    // Another transaction holds the first job's row for the whole run.
    let mut other = in_transaction(
        &backend,
        "SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE",
        &jobs[0],
    )
    .await;

    // Every job reports at once, ten times in turn; two reporters on the
    // last job race each other, one of them a step behind.
    const REPORTS: i64 = 10;
    let reporters: Vec<_> = jobs
        .iter()
        .chain(std::iter::once(&jobs[11]))
        .enumerate()
        .map(|(reporter, id)| {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let behind = i64::from(reporter == 12);
                for n in 0..REPORTS {
                    let status = if (n + behind) % 2 == 0 {
                        Restarting
                    } else {
                        Running
                    };
                    let at = 3_000 + n * 100 + reporter as i64;
                    let moved = store
                        .move_without_actions(
                            &id,
                            &observed(status, at),
                            &moves_without_actions(status),
                        )
                        .await
                        .unwrap();
                    answers.push((status, moved));
                }
                (id, answers)
            })
        })
        .collect();
    let answered = tokio::time::timeout(
        Duration::from_secs(30),
        futures_util::future::join_all(reporters),
    )
    .await
    .expect("no report waits for the held job");
    sqlx::raw_sql("COMMIT").execute(&mut other).await.unwrap();

    let mut moves = std::collections::HashMap::new();
    for (reporter, joined) in answered.into_iter().enumerate() {
        let (id, answers) = joined.unwrap();
        let moved: Vec<_> = answers
            .iter()
            .filter_map(|(status, moved)| moved.as_ref().map(|m| (*status, m)))
            .collect();
        if reporter == 0 {
            assert!(moved.is_empty(), "the held job moves in no batch");
            continue;
        }
        for (status, m) in &moved {
            assert_eq!(m.job.id, id, "each report is answered with its own job");
            assert_eq!(m.job.status, *status);
            let from = if *status == Restarting {
                Running
            } else {
                Restarting
            };
            assert_eq!(
                m.transition,
                Transition::Move {
                    from,
                    path: vec![*status]
                }
            );
        }
        if reporter < 11 {
            assert_eq!(
                moved.len() as i64,
                REPORTS,
                "a job alone moves on every report"
            );
        }
        *moves.entry(id).or_insert(0) += moved.len();
    }
    // What the answers said is what the store holds: one history row per
    // move, each from the status the one before left.
    for (index, id) in jobs.iter().enumerate() {
        let history = store.status_history(id).await.unwrap();
        let quiet = history.len() - 3;
        assert_eq!(
            quiet,
            moves.get(id).copied().unwrap_or(0),
            "job {index}: one move recorded per report answered as moved: {history:?}"
        );
        for pair in history.windows(2) {
            assert_eq!(pair[1].from, Some(pair[0].to), "job {index}: {history:?}");
        }
        let stored = store.get_job(id).await.unwrap().unwrap();
        assert_eq!(stored.status, history.last().unwrap().to);
    }
}
