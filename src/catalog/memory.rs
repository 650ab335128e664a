//! `generic_in_memory`: tables that live in this process, lost on restart, as
//! in Flink's `GenericInMemoryCatalog`. Staged tables are kept apart from the
//! visible ones and moved over on commit under one lock.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;

use super::registry::{CatalogFactory, FactoryError};
use super::{
    BeginOutcome, Catalog, CatalogError, CommitOutcome, CreateOutcome, Publish, Staging, TableInfo,
    defined_table, staging_missing, table_exists_error, table_not_found,
};
use crate::domain::CatalogOptions;
use crate::domain::options::OptionSpec;

const DEFAULT_DATABASE: &str = "default";

static OPTIONS: &[OptionSpec] = &[OptionSpec::optional(
    "default-database",
    Some(DEFAULT_DATABASE),
    "The database created with the catalog and used when a target names none.",
)];

pub struct MemoryCatalogFactory;

#[async_trait]
impl CatalogFactory for MemoryCatalogFactory {
    fn identifier(&self) -> &'static str {
        "generic_in_memory"
    }

    fn description(&self) -> &'static str {
        "Tables kept in this process's memory; they are lost when ctasd restarts."
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    async fn open(&self, options: &CatalogOptions) -> Result<Arc<dyn Catalog>, FactoryError> {
        let default_database = options
            .get("default-database")
            .unwrap_or(DEFAULT_DATABASE)
            .to_owned();
        let databases = BTreeMap::from([(default_database.clone(), BTreeMap::new())]);
        Ok(Arc::new(MemoryCatalog {
            default_database,
            state: RwLock::new(State {
                databases,
                staged: BTreeMap::new(),
                published_from: BTreeMap::new(),
            }),
        }))
    }
}

pub struct MemoryCatalog {
    default_database: String,
    state: RwLock<State>,
}

/// Visible tables by database, staged (invisible) tables by staging key
/// with the attempt that staged them, and the staging key each published
/// table came from (its mark, as a real system's table carries it).
struct State {
    databases: BTreeMap<String, BTreeMap<String, TableInfo>>,
    staged: BTreeMap<String, (TableInfo, i64)>,
    published_from: BTreeMap<(String, String), String>,
}

impl State {
    fn tables(&self, database: &str) -> Result<&BTreeMap<String, TableInfo>, CatalogError> {
        self.databases
            .get(database)
            .ok_or_else(|| CatalogError::DatabaseNotFound(database.to_owned()))
    }

    fn tables_mut(
        &mut self,
        database: &str,
    ) -> Result<&mut BTreeMap<String, TableInfo>, CatalogError> {
        self.databases
            .get_mut(database)
            .ok_or_else(|| CatalogError::DatabaseNotFound(database.to_owned()))
    }
}

impl MemoryCatalog {
    // Every change is made under one write guard with no fallible step after
    // the first mutation, so a lock poisoned by a panic is still consistent.
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl Catalog for MemoryCatalog {
    fn default_database(&self) -> &str {
        &self.default_database
    }

    async fn list_databases(&self) -> Result<Vec<String>, CatalogError> {
        Ok(self.read().databases.keys().cloned().collect())
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError> {
        Ok(self.read().tables(database)?.keys().cloned().collect())
    }

    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError> {
        self.read()
            .tables(database)?
            .get(table)
            .cloned()
            .ok_or_else(|| CatalogError::TableNotFound {
                database: database.to_owned(),
                table: table.to_owned(),
            })
    }

    async fn table_exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        Ok(self.read().tables(database)?.contains_key(table))
    }

    async fn create_table(
        &self,
        staging: &Staging,
        replace: bool,
    ) -> Result<CreateOutcome, CatalogError> {
        let mut state = self.write();
        let tables = state.tables_mut(&staging.database)?;
        let outcome = match (tables.contains_key(&staging.table), replace) {
            (true, false) => return Ok(CreateOutcome::AlreadyExisted),
            (true, true) => CreateOutcome::Replaced,
            (false, _) => CreateOutcome::Created,
        };
        tables.insert(staging.table.clone(), defined_table(staging));
        state
            .published_from
            .remove(&(staging.database.clone(), staging.table.clone()));
        Ok(outcome)
    }

    async fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, CatalogError> {
        let mut state = self.write();
        state.tables(&staging.database)?;
        let key = staging.key.as_str().to_owned();
        let outcome = match state.staged.get(&key) {
            Some((_, staged)) if *staged >= attempt => return Ok(BeginOutcome::AlreadyStaged),
            Some(_) => BeginOutcome::Restaged,
            None => BeginOutcome::Staged,
        };
        state.staged.insert(key, (defined_table(staging), attempt));
        Ok(outcome)
    }

    /// The whole batch under one lock: all published, or none.
    async fn commit(
        &self,
        batch: &[(Staging, Publish)],
    ) -> Vec<Result<CommitOutcome, CatalogError>> {
        let mut state = self.write();
        let mut outcomes = Vec::with_capacity(batch.len());
        for (staging, publish) in batch {
            let exists = match state.tables(&staging.database) {
                Ok(tables) => tables.contains_key(&staging.table),
                Err(e) => return batch.iter().map(|_| Err(e.clone())).collect(),
            };
            let outcome = match (
                state.staged.contains_key(staging.key.as_str()),
                exists,
                publish,
            ) {
                (false, true, _) => {
                    let place = (staging.database.clone(), staging.table.clone());
                    if state.published_from.get(&place).map(String::as_str)
                        == Some(staging.key.as_str())
                    {
                        Ok(CommitOutcome::AlreadyCommitted)
                    } else {
                        Err(table_exists_error(staging))
                    }
                }
                (false, false, _) => Err(staging_missing(staging)),
                (true, true, Publish::Create) => Err(table_exists_error(staging)),
                (true, false, Publish::Replace) => Err(table_not_found(staging)),
                (true, _, _) => Ok(CommitOutcome::Committed),
            };
            if let Err(error) = outcome {
                return batch.iter().map(|_| Err(error.clone())).collect();
            }
            outcomes.push(outcome);
        }
        for (staging, _) in batch {
            if let Some((table, _)) = state.staged.remove(staging.key.as_str())
                && let Ok(tables) = state.tables_mut(&staging.database)
            {
                tables.insert(staging.table.clone(), table);
                let place = (staging.database.clone(), staging.table.clone());
                state
                    .published_from
                    .insert(place, staging.key.as_str().to_owned());
            }
        }
        outcomes
    }

    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError> {
        self.write().staged.remove(staging.key.as_str());
        Ok(())
    }

    async fn drop_table(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        let mut state = self.write();
        if state.tables_mut(database)?.remove(table).is_none() {
            return Err(CatalogError::TableNotFound {
                database: database.to_owned(),
                table: table.to_owned(),
            });
        }
        state
            .published_from
            .remove(&(database.to_owned(), table.to_owned()));
        Ok(())
    }

    async fn close(&self) {}
}
