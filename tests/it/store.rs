//! One conformance suite for every store backend: each test below runs
//! against SQLite always, and against PostgreSQL when it is configured.

use std::sync::Arc;

use ctasd::domain::{CatalogDescriptor, CatalogName, CatalogOptions};
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
    an_inserted_catalog_reads_back_identically,
    a_taken_name_is_refused,
    listing_is_bytewise_ordered_and_keyset_paginated,
    an_update_applies_once_per_version,
    delete_says_whether_it_deleted,
    migrations_are_idempotent_and_readiness_checks_them,
    secrets_do_not_open_without_their_key,
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
    assert!(backend.store.delete_catalog(&name("a")).await.unwrap());
    assert!(!backend.store.delete_catalog(&name("a")).await.unwrap());
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
    let other_key = open_store(backend.url.as_deref(), backend.dir.path(), fresh_keyring()).await;

    let error = other_key.get_catalog(&name("a")).await.unwrap_err();

    assert!(matches!(error, StoreError::Secret { .. }), "{error}");
    assert!(!error.to_string().contains("pw"));
}
