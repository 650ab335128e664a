//! The embedded store: one SQLite file in WAL mode.
//!
//! WAL lets readers proceed while the single writer commits; `busy_timeout`
//! makes concurrent writers queue instead of failing.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use sqlx::SqlitePool;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::codec::{
    APPLIED_MIGRATIONS, CatalogRow, encode_options, insert_failed, migration_failed, readiness,
    update_missed,
};
use super::{Keyring, Store, StoreError};
use crate::domain::{CatalogDescriptor, CatalogName, CatalogRecord};

static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

/// The catalog columns as [`CatalogRow`] reads them (a macro, so queries stay literals).
macro_rules! catalog_columns {
    () => {
        "name, options, sealed_options, comment, version, created_at, updated_at"
    };
}

pub struct SqliteStore {
    pool: SqlitePool,
    description: String,
    keyring: Arc<Keyring>,
}

impl SqliteStore {
    pub async fn open_file(path: &Path, keyring: Arc<Keyring>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new().filename(path);
        Self::open(options, format!("SQLite at {}", path.display()), keyring).await
    }

    pub async fn open_url(url: &str, keyring: Arc<Keyring>) -> Result<Self, StoreError> {
        let options =
            SqliteConnectOptions::from_str(url).map_err(|e| StoreError::Internal(e.to_string()))?;
        let description = format!("SQLite at {}", options.get_filename().display());
        Self::open(options, description, keyring).await
    }

    async fn open(
        options: SqliteConnectOptions,
        description: String,
        keyring: Arc<Keyring>,
    ) -> Result<Self, StoreError> {
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(10))
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
impl Store for SqliteStore {
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
        let now = Utc::now();
        let row: CatalogRow = sqlx::query_as(concat!(
            "INSERT INTO catalogs (name, options, sealed_options, comment, version, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, 1, ?5, ?5) RETURNING ",
            catalog_columns!()
        ))
        .bind(catalog.name.as_str())
        .bind(options)
        .bind(sealed)
        .bind(&catalog.comment)
        .bind(now)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| insert_failed(&catalog.name, e))?;
        self.decode(row)
    }

    async fn get_catalog(&self, name: &CatalogName) -> Result<Option<CatalogRecord>, StoreError> {
        let row: Option<CatalogRow> = sqlx::query_as(concat!(
            "SELECT ",
            catalog_columns!(),
            " FROM catalogs WHERE name = ?1"
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
            " FROM catalogs WHERE name > ?1 ORDER BY name LIMIT ?2"
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
            "UPDATE catalogs SET options = ?2, sealed_options = ?3, comment = ?4, version = version + 1, updated_at = ?5 \
             WHERE name = ?1 AND version = ?6 RETURNING ",
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
        let result = sqlx::query("DELETE FROM catalogs WHERE name = ?1")
            .bind(name.as_str())
            .execute(&self.pool)
            .await
            .map_err(StoreError::from_sqlx)?;
        Ok(result.rows_affected() > 0)
    }
}
