//! The PostgreSQL store, for production and for several replicas sharing one
//! database. JSON columns are `jsonb`; names sort with `COLLATE "C"` so that
//! keyset pages match SQLite's bytewise order.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::PgPool;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::codec::{
    APPLIED_MIGRATIONS, CatalogRow, encode_options, insert_failed, migration_failed, readiness,
    update_missed,
};
use super::{Keyring, OpenStoreError, Store, StoreError};
use crate::domain::{CatalogDescriptor, CatalogName, CatalogRecord};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// The catalog columns as [`CatalogRow`] reads them (a macro, so queries stay literals).
macro_rules! catalog_columns {
    () => {
        "name, options::text AS options, sealed_options::text AS sealed_options, comment, version, created_at, updated_at"
    };
}

pub struct PostgresStore {
    pool: PgPool,
    description: String,
    keyring: Arc<Keyring>,
}

impl PostgresStore {
    pub async fn open_url(url: &str, keyring: Arc<Keyring>) -> Result<Self, OpenStoreError> {
        // Never log the URL itself: it may carry a password.
        let options = PgConnectOptions::from_str(url).map_err(|_| {
            OpenStoreError::InvalidUrl(
                "expected postgres://user[:password]@host[:port]/database".into(),
            )
        })?;
        let description = format!(
            "PostgreSQL at {}:{}, database '{}'",
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or("(default)")
        );
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Unavailable(format!("{description}: {e}")))?;
        Ok(Self {
            pool,
            description,
            keyring,
        })
    }

    fn decode(&self, row: CatalogRow) -> Result<CatalogRecord, StoreError> {
        row.decode(&self.keyring)
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn describe(&self) -> String {
        self.description.clone()
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await.map_err(migration_failed)
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        let applied = sqlx::query_scalar(APPLIED_MIGRATIONS)
            .fetch_one(&self.pool)
            .await;
        readiness(applied, &MIGRATOR)
    }

    async fn insert_catalog(
        &self,
        catalog: &CatalogDescriptor,
    ) -> Result<CatalogRecord, StoreError> {
        let (options, sealed) = encode_options(&catalog.options, &self.keyring);
        let row: CatalogRow = sqlx::query_as(concat!(
            "INSERT INTO catalogs (name, options, sealed_options, comment, version, created_at, updated_at) \
             VALUES ($1, $2::jsonb, $3::jsonb, $4, 1, $5, $5) RETURNING ",
            catalog_columns!()
        ))
        .bind(catalog.name.as_str())
        .bind(options)
        .bind(sealed)
        .bind(&catalog.comment)
        .bind(Utc::now())
        .fetch_one(&self.pool)
        .await
        .map_err(|e| insert_failed(&catalog.name, e))?;
        self.decode(row)
    }

    async fn get_catalog(&self, name: &CatalogName) -> Result<Option<CatalogRecord>, StoreError> {
        let row: Option<CatalogRow> = sqlx::query_as(concat!(
            "SELECT ",
            catalog_columns!(),
            " FROM catalogs WHERE name = $1"
        ))
        .bind(name.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        row.map(|r| self.decode(r)).transpose()
    }

    async fn list_catalogs(
        &self,
        after: Option<&CatalogName>,
        limit: u32,
    ) -> Result<Vec<CatalogRecord>, StoreError> {
        let rows: Vec<CatalogRow> = sqlx::query_as(concat!(
            "SELECT ",
            catalog_columns!(),
            " FROM catalogs WHERE name > $1 ORDER BY name LIMIT $2"
        ))
        .bind(after.map(CatalogName::as_str).unwrap_or(""))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        rows.into_iter().map(|r| self.decode(r)).collect()
    }

    async fn update_catalog(
        &self,
        catalog: &CatalogDescriptor,
        expected_version: i64,
    ) -> Result<CatalogRecord, StoreError> {
        let (options, sealed) = encode_options(&catalog.options, &self.keyring);
        let row: Option<CatalogRow> = sqlx::query_as(concat!(
            "UPDATE catalogs SET options = $2::jsonb, sealed_options = $3::jsonb, comment = $4, \
             version = version + 1, updated_at = $5 WHERE name = $1 AND version = $6 RETURNING ",
            catalog_columns!()
        ))
        .bind(catalog.name.as_str())
        .bind(options)
        .bind(sealed)
        .bind(&catalog.comment)
        .bind(Utc::now())
        .bind(expected_version)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::from_sqlx)?;
        match row {
            Some(row) => self.decode(row),
            None => Err(update_missed(
                &catalog.name,
                self.get_catalog(&catalog.name).await?,
            )),
        }
    }

    async fn delete_catalog(&self, name: &CatalogName) -> Result<bool, StoreError> {
        let result = sqlx::query("DELETE FROM catalogs WHERE name = $1")
            .bind(name.as_str())
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(result.rows_affected() > 0)
    }
}
