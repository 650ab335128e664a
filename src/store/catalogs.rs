//! Registered catalogs: written once for both backends. Secrets are sealed
//! on the way in and opened on the way out; a drop and a job submission
//! that names the catalog are serialized, so no job is stored on a dropped
//! catalog.

use async_trait::async_trait;
use chrono::Utc;

use super::rows::{CATALOG_COLUMNS, CatalogRow, encode_options, insert_failed, update_missed};
use super::sql::{Backend, Deletion, Query, Sql, SqlStore};
use super::{CatalogStore, StoreError};
use crate::domain::{CatalogDescriptor, CatalogName, CatalogRecord};

#[async_trait]
impl<B: Backend> CatalogStore for SqlStore<B> {
    async fn insert_catalog(
        &self,
        catalog: &CatalogDescriptor,
    ) -> Result<CatalogRecord, StoreError> {
        let (options, sealed) = encode_options(&catalog.options, &self.keyring);
        let row: Option<CatalogRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "INSERT INTO catalogs (name, options, sealed_options, comment, version, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, 1, $5, $5) RETURNING {CATALOG_COLUMNS}"
                ))
                .text(catalog.name.as_str())
                .text(&options)
                .text(&sealed)
                .opt_text(catalog.comment.as_deref())
                .time(Utc::now()),
            )
            .await
            .map_err(|e| insert_failed(&catalog.name, e))?;
        row.ok_or_else(|| StoreError::Internal("an insert returned no row".into()))?
            .decode(&self.keyring)
    }

    async fn get_catalog(&self, name: &CatalogName) -> Result<Option<CatalogRecord>, StoreError> {
        let row: Option<CatalogRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "SELECT {CATALOG_COLUMNS} FROM catalogs WHERE name = $1"
                ))
                .text(name.as_str()),
            )
            .await?;
        row.map(|r| r.decode(&self.keyring)).transpose()
    }

    async fn list_catalogs(
        &self,
        after: Option<&CatalogName>,
        limit: u32,
    ) -> Result<Vec<CatalogRecord>, StoreError> {
        let rows: Vec<CatalogRow> = self
            .pool()
            .rows(
                Query::new(format!(
                    "SELECT {CATALOG_COLUMNS} FROM catalogs WHERE name > $1 ORDER BY name LIMIT CAST($2 AS BIGINT)"
                ))
                .text(after.map(CatalogName::as_str).unwrap_or(""))
                .int(i64::from(limit)),
            )
            .await?;
        rows.into_iter().map(|r| r.decode(&self.keyring)).collect()
    }

    async fn update_catalog(
        &self,
        catalog: &CatalogDescriptor,
        expected_version: i64,
    ) -> Result<CatalogRecord, StoreError> {
        let (options, sealed) = encode_options(&catalog.options, &self.keyring);
        let row: Option<CatalogRow> = self
            .pool()
            .row(
                Query::new(format!(
                    "UPDATE catalogs SET options = $2, sealed_options = $3, comment = $4, \
                     version = version + 1, updated_at = $5 WHERE name = $1 AND version = $6 \
                     RETURNING {CATALOG_COLUMNS}"
                ))
                .text(catalog.name.as_str())
                .text(&options)
                .text(&sealed)
                .opt_text(catalog.comment.as_deref())
                .time(Utc::now())
                .int(expected_version),
            )
            .await?;
        match row {
            Some(row) => row.decode(&self.keyring),
            None => Err(update_missed(
                &catalog.name,
                self.get_catalog(&catalog.name).await?,
            )),
        }
    }

    async fn delete_catalog(
        &self,
        name: &CatalogName,
        expected_version: Option<i64>,
    ) -> Result<bool, StoreError> {
        let users = "SELECT count(*) FROM jobs j \
             WHERE EXISTS (SELECT 1 FROM hooks h WHERE h.job_id = j.id AND h.catalog = $1) \
               AND (j.status NOT IN ('FINISHED', 'FAILED', 'CANCELED') \
                    OR EXISTS (SELECT 1 FROM actions a WHERE a.job_id = j.id AND a.state = 'pending'))";
        match self
            .delete_unless_used("catalogs", name.as_str(), expected_version, users)
            .await?
        {
            Deletion::Deleted => Ok(true),
            Deletion::Missing => Ok(false),
            Deletion::Changed => Err(StoreError::ConcurrentModification(name.to_string())),
            Deletion::InUse(jobs) => Err(StoreError::CatalogInUse {
                catalog: name.to_string(),
                jobs,
            }),
        }
    }
}
