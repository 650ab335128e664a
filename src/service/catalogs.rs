//! Catalogs: register, alter and drop (validate → open → persist →
//! install, so a stored catalog is always one that could be opened), read,
//! and browse a live catalog's databases and tables.

use std::collections::BTreeMap;

use super::{ServiceError, Services, unavailable};
use crate::catalog::{Catalog, CatalogError};
use crate::domain::catalog::check_comment;
use crate::domain::flink::table::TableInfo;
use crate::domain::options::OptionSpec;
use crate::domain::{
    CatalogAlteration, CatalogDescriptor, CatalogName, CatalogOptions, CatalogRecord, ObjectName,
};
use crate::store::StoreError;

/// A catalog type, as a client builds a form from it.
pub struct CatalogType {
    pub identifier: &'static str,
    pub description: &'static str,
    pub options: Vec<OptionSpec>,
}

/// What a registration did.
pub enum Registration {
    Created(CatalogRecord),
    /// `if_not_exists`, and the name was taken: the catalog as it is.
    Existing(CatalogRecord),
}

impl Services {
    pub fn catalog_types(&self) -> Vec<CatalogType> {
        self.catalogs
            .registry()
            .factories()
            .map(|factory| CatalogType {
                identifier: factory.identifier(),
                description: factory.description(),
                options: factory.all_options(),
            })
            .collect()
    }

    pub async fn register_catalog(
        &self,
        name: &str,
        options: BTreeMap<String, String>,
        comment: Option<String>,
        if_not_exists: bool,
    ) -> Result<Registration, ServiceError> {
        let name = CatalogName::parse(name).map_err(|e| ServiceError::name_invalid("name", e))?;
        let options = CatalogOptions::new(options)?;
        if let Some(comment) = &comment {
            check_comment(comment).map_err(ServiceError::from)?;
        }
        if if_not_exists && let Some(existing) = self.store.get_catalog(&name).await? {
            return Ok(Registration::Existing(existing));
        }
        let descriptor = CatalogDescriptor {
            name,
            options,
            comment,
        };
        let live = self
            .catalogs
            .registry()
            .open(&descriptor.name, &descriptor.options)
            .await?;
        let record = match self.store.insert_catalog(&descriptor).await {
            Ok(record) => record,
            Err(error) => {
                live.close().await;
                return match (error, if_not_exists) {
                    (StoreError::CatalogExists(_), true) => Ok(Registration::Existing(
                        self.catalog(&descriptor.name).await?,
                    )),
                    (error, _) => Err(error.into()),
                };
            }
        };
        self.catalogs.install(&record, live).await;
        tracing::info!(
            catalog = %record.descriptor.name,
            catalog_type = record.descriptor.options.catalog_type().unwrap_or_default(),
            "catalog registered"
        );
        Ok(Registration::Created(record))
    }

    pub async fn catalog(&self, name: &CatalogName) -> Result<CatalogRecord, ServiceError> {
        self.store
            .get_catalog(name)
            .await?
            .ok_or_else(|| ServiceError::CatalogNotFound {
                name: name.to_string(),
                field: None,
            })
    }

    pub async fn list_catalogs(
        &self,
        after: Option<&CatalogName>,
        limit: u32,
    ) -> Result<Vec<CatalogRecord>, ServiceError> {
        Ok(self.store.list_catalogs(after, limit).await?)
    }

    /// ALTER CATALOG. A change of where the catalog connects must give its
    /// secrets again; only the comment changing keeps the live catalog (an
    /// in-memory catalog keeps its tables), anything else reopens it first.
    pub async fn alter_catalog(
        &self,
        name: &CatalogName,
        alteration: CatalogAlteration,
    ) -> Result<CatalogRecord, ServiceError> {
        self.alter_catalog_as_read(self.catalog(name).await?, alteration)
            .await
    }

    /// ALTER CATALOG of the version `current` a client read: refused with
    /// [`ServiceError::CatalogModified`] if the catalog changed since.
    pub async fn alter_catalog_as_read(
        &self,
        current: CatalogRecord,
        alteration: CatalogAlteration,
    ) -> Result<CatalogRecord, ServiceError> {
        let next = alteration.apply(&current.descriptor)?;
        self.catalogs.registry().check_relocation(
            &current.descriptor.options,
            &next.options,
            &alteration.set,
        )?;
        if next.options == current.descriptor.options {
            let record = self.store.update_catalog(&next, current.version).await?;
            self.catalogs.carry_over(&current, &record).await;
            tracing::info!(catalog = %record.descriptor.name, "catalog comment altered");
            return Ok(record);
        }
        let live = self
            .catalogs
            .registry()
            .open(&next.name, &next.options)
            .await?;
        let record = match self.store.update_catalog(&next, current.version).await {
            Ok(record) => record,
            Err(error) => {
                live.close().await;
                return Err(error.into());
            }
        };
        self.catalogs.install(&record, live).await;
        tracing::info!(catalog = %record.descriptor.name, "catalog altered");
        Ok(record)
    }

    /// DROP CATALOG; `false` when there was none.
    pub async fn drop_catalog(&self, name: &CatalogName) -> Result<bool, ServiceError> {
        self.drop_catalog_as_read(name, None).await
    }

    /// DROP CATALOG of the version a client read (refused with
    /// [`ServiceError::CatalogModified`] if it changed since), or of any.
    pub async fn drop_catalog_as_read(
        &self,
        name: &CatalogName,
        version: Option<i64>,
    ) -> Result<bool, ServiceError> {
        if !self.store.delete_catalog(name, version).await? {
            return Ok(false);
        }
        self.catalogs.evict(name.as_str()).await;
        tracing::info!(catalog = %name, "catalog dropped");
        Ok(true)
    }

    async fn live(&self, name: &CatalogName) -> Result<std::sync::Arc<dyn Catalog>, ServiceError> {
        let record = self.catalog(name).await?;
        self.catalogs.get(&record).await.map_err(unavailable)
    }

    /// The databases of a live catalog, and which is its default.
    pub async fn databases(
        &self,
        name: &CatalogName,
    ) -> Result<(Vec<String>, String), ServiceError> {
        let live = self.live(name).await?;
        Ok((
            live.list_databases().await?,
            live.default_database().to_owned(),
        ))
    }

    pub async fn tables(
        &self,
        name: &CatalogName,
        database: &ObjectName,
    ) -> Result<Vec<String>, ServiceError> {
        Ok(self
            .live(name)
            .await?
            .list_tables(database.as_str())
            .await?)
    }

    pub async fn table(
        &self,
        name: &CatalogName,
        database: &ObjectName,
        table: &ObjectName,
    ) -> Result<TableInfo, ServiceError> {
        let live = self.live(name).await?;
        Ok(live.get_table(database.as_str(), table.as_str()).await?)
    }

    /// DROP TABLE: only a table ctasd can prove it published (see
    /// [`crate::catalog::Catalog::drop_table`]), and none an unfinished job
    /// targets. ctasd's own hidden tables are not tables here.
    pub async fn drop_table(
        &self,
        name: &CatalogName,
        database: &ObjectName,
        table: &ObjectName,
    ) -> Result<(), ServiceError> {
        let (database, table) = (database.as_str(), table.as_str());
        if table.starts_with("_ctasd_") || table.starts_with("__ctasd_") {
            return Err(CatalogError::TableNotFound {
                database: database.to_owned(),
                table: table.to_owned(),
            }
            .into());
        }
        let jobs = self
            .store
            .jobs_on_table(name.as_str(), database, table)
            .await?;
        if jobs > 0 {
            return Err(ServiceError::TableInUse(format!(
                "table {database}.{table} of catalog '{name}' is the target of {jobs} unfinished \
                 job(s); drop it when they have ended"
            )));
        }
        let live = self.live(name).await?;
        live.drop_table(database, table).await?;
        tracing::info!(catalog = %name, database, table, "table dropped");
        Ok(())
    }

    /// Opens every registered catalog once, so the first requests after a
    /// start find their connections ready; one unreachable database delays
    /// nothing (this runs beside serving).
    pub async fn warm_up_catalogs(&self) {
        let mut after: Option<CatalogName> = None;
        loop {
            let page = match self.store.list_catalogs(after.as_ref(), 100).await {
                Ok(page) => page,
                Err(error) => {
                    return tracing::warn!(%error, "could not list catalogs to reopen them");
                }
            };
            self.catalogs.warm_up(&page).await;
            match page.last() {
                Some(last) if page.len() == 100 => after = Some(last.descriptor.name.clone()),
                _ => return,
            }
        }
    }
}
