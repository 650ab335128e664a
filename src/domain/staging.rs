//! A hook's staging, named so that it is found again after a crash and can
//! never clash with a user's table: the job id and the hook's index.

use super::job_record::{JobRecord, NewHook};
use std::collections::BTreeMap;

use super::flink::table::TableDefinition;

/// Names a hook's staging: the job id (32 hex digits) and the hook's index.
/// Staging tables and directories are named after it, so they are found
/// again after a crash and can never clash with a user's table (`_` prefix,
/// hidden from browsing).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StagingKey(String);

impl StagingKey {
    pub fn new(job_id: &str, hook_index: u32) -> Option<Self> {
        let hex = job_id.len() == 32 && job_id.bytes().all(|b| b.is_ascii_hexdigit());
        hex.then(|| Self(format!("{}_{hook_index}", job_id.to_ascii_lowercase())))
    }

    /// A key as written in a marker file, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        let (job, index) = text.split_once('_')?;
        let index: u32 = index.parse().ok()?;
        Self::new(job, index).filter(|key| key.0 == text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A hook's target and its staging.
#[derive(Debug, Clone)]
pub struct Staging {
    pub key: StagingKey,
    pub database: String,
    pub table: String,
    pub definition: TableDefinition,
}

impl Staging {
    /// The staging of hook `index` of `job`.
    pub fn of(job: &JobRecord, index: u32, hook: &NewHook) -> Result<Self, String> {
        let key = StagingKey::new(job.id.as_str(), index)
            .ok_or_else(|| format!("job id {} is not 32 hex digits", job.id))?;
        let definition =
            TableDefinition::from_properties(&hook.table_properties).map_err(|e| e.to_string())?;
        Ok(Self {
            key,
            database: hook.database.clone(),
            table: hook.table.clone(),
            definition,
        })
    }
}

/// What an engine writes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteLocationKind {
    /// A database table (`jdbc`): `url` says where.
    Table,
    /// A directory of a warehouse (`filesystem`): `path` says where.
    Directory,
    /// A table of ctasd's own memory (`generic_in_memory`): no engine can
    /// reach it.
    Memory,
}

/// Where the engine writes a hook's rows.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[schema(example = json!({
    "kind": "directory",
    "name": "_ctasd_stg_1b49f930063d45d6be461c4744606de0_0",
    "url": "file:///srv/warehouse/analytics/_ctasd_stg_1b49f930063d45d6be461c4744606de0_0",
    "path": "/srv/warehouse/analytics/_ctasd_stg_1b49f930063d45d6be461c4744606de0_0",
    "sink_options": {"connector": "filesystem", "format": "csv",
                     "path": "file:///srv/warehouse/analytics/_ctasd_stg_1b49f930063d45d6be461c4744606de0_0"},
    "sink_statement": "CREATE TEMPORARY TABLE `daily_sink` (`day` DATE NOT NULL) WITH ('connector' = 'filesystem', ...)",
    "withheld_options": []
}))]
pub struct WriteLocation {
    pub kind: WriteLocationKind,
    /// The table (or directory) the engine writes into: the hidden staging
    /// for a batch job, the target itself for a streaming one.
    pub name: String,
    /// The database's JDBC URL, for a `table`.
    #[schema(required = true)]
    pub url: Option<String>,
    /// The directory, as a path on the machine that holds the warehouse.
    #[schema(required = true)]
    pub path: Option<String>,
    /// Flink connector options that write there.
    #[schema(value_type = crate::domain::options::StringMap)]
    pub sink_options: BTreeMap<String, String>,
    /// The Flink SQL statement that declares the sink: run it, then
    /// `INSERT INTO` the table it names. Secrets are left out (add the
    /// `password` of a `jdbc` sink yourself). `null` for `memory`.
    #[schema(required = true)]
    pub sink_statement: Option<String>,
    /// Options left out of `sink_options` and `sink_statement` because
    /// they are secrets (the table's own and the catalog's, such as a
    /// `jdbc` sink's `password`): the engine adds them from its own
    /// configuration.
    pub withheld_options: Vec<String>,
}
