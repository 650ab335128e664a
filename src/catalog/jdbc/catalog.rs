//! The `jdbc` catalog as the hooks use it: browsing, dry runs, staging
//! with its marker, removal only of what the marker proves ctasd's, and
//! the [`Catalog`] trait over them.
//!
//! Longer than most files: the [`Catalog`] implementation is one block of
//! its thirteen operations, and what they share sits above it; publication
//! is apart, in `publish.rs`.

use std::collections::HashSet;
use std::path::PathBuf;

use async_trait::async_trait;

use crate::catalog::protected::STORE_MARKER_TABLE;
use crate::catalog::{
    BeginOutcome, Catalog, CatalogError, ColumnInfo, CommitOutcome, CreateOutcome, Publish,
    Staging, TableInfo,
};
use crate::domain::flink::table::TableDefinition;

use super::*;
use crate::domain::audit::{Audit, Observed};

pub(super) fn staging_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}stg_{}", staging.key.as_str())
}

/// A staging's own primary key name, where the system needs one.
pub(super) fn staging_key_name(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}pk_{}", staging.key.as_str())
}

impl JdbcCatalog {
    /// The attempt a staging's note names, when it is this installation's
    /// marker; any other table at the staging's name is not ctasd's.
    pub(super) fn marked_attempt(
        &self,
        staging: &Staging,
        note: &str,
    ) -> Result<i64, CatalogError> {
        let attempt =
            dialect::parse_attempt_marker(note).ok_or_else(|| unmarked_staging(staging))?;
        self.installation
            .check(note)
            .map_err(|other| CatalogError::NotOwned {
                database: staging.database.clone(),
                table: staging_table(staging),
                reason: format!(
                    "its marker names another ctasd installation ({other}): two stores share \
                     this database, or a job id was used again; it is that installation's"
                ),
            })?;
        Ok(attempt)
    }

    /// Whether the target of `staging`, found with no staging beside it,
    /// is the table this staging became: it carries the staging's marker
    /// (PostgreSQL on the table's row type, SQLite in its DDL, MySQL until
    /// the declared comment is set) naming this staging and installation.
    /// Anything else at the target is someone else's table, and a commit
    /// never reports it as its own.
    pub(super) async fn prove_published(
        &self,
        staging: &Staging,
        log: &str,
    ) -> Result<String, CatalogError> {
        let database = &staging.database;
        let ours = |mark: &str| {
            dialect::marked_key(mark) == Some(staging.key.as_str())
                && self.installation.check(mark).is_ok()
        };
        let mark = self
            .server
            .lasting_mark(database, &staging.table)
            .await
            .map_err(|e| self.failed(database, e))?;
        if let Some(mark) = mark.filter(|m| ours(m)) {
            return Ok(mark);
        }
        if self.dialect().logs_publications() {
            let logged = self
                .server
                .logged_publication(database, log, &staging.table)
                .await
                .map_err(|e| self.failed(database, e))?;
            if let Some(mark) = logged.filter(|m| ours(m)) {
                return Ok(mark);
            }
        }
        Err(CatalogError::NotOwned {
            database: database.clone(),
            table: staging.table.clone(),
            reason: "the staging is gone and the table there carries no marker of this job's \
                     staging: ctasd cannot prove it published it, and does not report it as \
                     committed"
                .into(),
        })
    }
}

impl JdbcCatalog {
    /// Drops `table` when it carries ctasd's marker naming this
    /// installation on the table itself (PostgreSQL's row type, SQLite's
    /// DDL). A MySQL table keeps no mark of its own, and the publication
    /// log cannot tell a table ctasd published from one made at the same
    /// name after it was dropped elsewhere: ctasd drops none there. A table
    /// ctasd created for a streaming job carries no mark either.
    pub(super) async fn drop_marked(
        &self,
        database: &str,
        table: &str,
    ) -> Result<(), CatalogError> {
        self.ensure_database(database).await?;
        let mark = self
            .server
            .lasting_mark(database, table)
            .await
            .map_err(|e| self.failed(database, e))?;
        let Some(mark) = mark else {
            return Err(CatalogError::TableNotFound {
                database: database.to_owned(),
                table: table.to_owned(),
            });
        };
        let ours = !self.dialect().logs_publications()
            && dialect::marked_key(&mark).is_some()
            && self.installation.check(&mark).is_ok();
        if !ours {
            return Err(CatalogError::NotOwned {
                database: database.to_owned(),
                table: table.to_owned(),
                reason: "it carries no marker of a ctasd staging of this installation (MySQL \
                         tables keep none, nor do tables created for streaming jobs): ctasd drops \
                         only what it can prove it published"
                    .into(),
            });
        }
        let drop = format!("DROP TABLE {}", self.name_of(database, table)?);
        self.run(database, &[drop]).await
    }

    /// Creates the database's publication log where the dialect keeps one,
    /// and proves a table at its name is ctasd's log before anything is
    /// written to it.
    pub(super) async fn ensure_publication_log(
        &self,
        database: &str,
        log: &str,
    ) -> Result<(), CatalogError> {
        let note = self
            .server
            .table_note(database, PUBLICATION_LOG)
            .await
            .map_err(|e| self.failed(database, e))?;
        match note.as_deref() {
            Some(LOG_NOTE) => Ok(()),
            Some(_) => Err(CatalogError::NotOwned {
                database: database.to_owned(),
                table: PUBLICATION_LOG.to_owned(),
                reason: "it stands at the name of ctasd's publication log without the log's \
                         comment: ctasd did not create it, and writes nothing to it"
                    .into(),
            }),
            None => {
                let create = self
                    .dialect()
                    .publication_log_ddl(log, LOG_NOTE)
                    .map_err(Self::unsupported)?;
                self.run(database, &Vec::from_iter(create)).await
            }
        }
    }
}

/// The staging key a dry run's probe table is marked with.
pub(super) fn probe_staging_key() -> crate::domain::StagingKey {
    crate::domain::StagingKey::new(&"0".repeat(32), 0).expect("32 hex digits")
}

/// A table at a staging's name without ctasd's marker, which ctasd writes
/// in the statement or transaction that creates a staging: someone else
/// made it, and it is neither adopted, published nor dropped.
pub(super) fn unmarked_staging(staging: &Staging) -> CatalogError {
    CatalogError::NotOwned {
        database: staging.database.clone(),
        table: staging_table(staging),
        reason: "it stands at ctasd's staging name without ctasd's marker, which ctasd writes \
                 when it creates a staging: ctasd did not create it, and neither adopts, \
                 publishes nor drops it"
            .into(),
    }
}

pub(super) fn is_already_exists(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.message().contains("already exists"))
}

impl JdbcCatalog {
    pub(super) fn dialect(&self) -> &'static dyn Dialect {
        self.server.dialect()
    }

    /// A driver error as a catalog error: a refusal by the system is final
    /// (`Refused`), unless it is one worth retrying; anything else (no
    /// connection, a time-out) is `Unavailable` and retried.
    pub(super) fn failed(&self, database: &str, error: sqlx::Error) -> CatalogError {
        match &error {
            sqlx::Error::Database(db) if self.server.is_missing_database(db.as_ref()) => {
                self.found_databases().remove(database);
                CatalogError::DatabaseNotFound(database.to_owned())
            }
            sqlx::Error::Database(db) if !self.server.is_transient(db.as_ref()) => {
                CatalogError::Refused(self.options.redact(&format!(
                    "{} refused: {}",
                    self.dialect().name(),
                    self.server.explain(db.as_ref())
                )))
            }
            sqlx::Error::InvalidArgument(refusal) => CatalogError::Refused(refusal.clone()),
            sqlx::Error::Database(db) => CatalogError::Unavailable(self.options.redact(&format!(
                "{}: {}",
                self.server.describe(database),
                self.server.explain(db.as_ref())
            ))),
            other => CatalogError::Unavailable(
                self.options
                    .redact(&format!("{}: {other}", self.server.describe(database))),
            ),
        }
    }

    pub(super) fn unsupported(error: DialectError) -> CatalogError {
        CatalogError::Unsupported(error.to_string())
    }

    /// Registration reports the driver's own reason (refused, unknown
    /// database, bad password) rather than a pool time-out.
    pub(super) async fn check_connection(&self) -> Result<(), String> {
        let database = &self.default_database;
        let attempt = self.server.check_connection(database);
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                let reason = match &e {
                    sqlx::Error::Database(db) => db.message().to_owned(),
                    other => other.to_string(),
                };
                Err(self.options.redact(&format!(
                    "connecting to {} failed: {reason}",
                    self.server.describe(database)
                )))
            }
            Err(_) => Err(format!(
                "connecting to {} timed out after {} s",
                self.server.describe(database),
                CONNECT_TIMEOUT.as_secs()
            )),
        }
    }

    /// The database exists and is not a ctasd store: every operation on a
    /// database starts here. Where the server reports missing databases,
    /// one found before is taken as there, and an operation that finds it
    /// gone fails as [`CatalogError::DatabaseNotFound`] all the same.
    pub(super) async fn ensure_database(&self, database: &str) -> Result<(), CatalogError> {
        if self.server.reports_missing_databases() && self.found_databases().contains(database) {
            return Ok(());
        }
        if !self.list_databases().await?.iter().any(|d| d == database) {
            return Err(CatalogError::DatabaseNotFound(database.to_owned()));
        }
        self.refuse_store(database).await?;
        self.found_databases().insert(database.to_owned());
        Ok(())
    }

    pub(super) fn accepted_lately(&self, definition: &(String, String)) -> bool {
        let accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        accepted
            .get(definition)
            .is_some_and(|at| at.elapsed() < ACCEPTED_FOR)
    }

    pub(super) fn remember_accepted(&self, definition: (String, String)) {
        let mut accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
        if accepted.len() >= MOST_ACCEPTED {
            accepted.retain(|_, at| at.elapsed() < ACCEPTED_FOR);
        }
        if accepted.len() < MOST_ACCEPTED {
            accepted.insert(definition, std::time::Instant::now());
        }
    }

    pub(super) fn found_databases(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.found_databases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Refuses a database that holds a ctasd store (this process's own or
    /// another's), recognised by its marker table whatever the host name,
    /// port, socket or file path it is reached by; and, before it is even
    /// opened, a SQLite file that is one of ctasd's own under another name
    /// (two names for one file give SQLite two write-ahead logs).
    pub(super) async fn refuse_store(&self, database: &str) -> Result<(), CatalogError> {
        if self.not_stores.lock().await.contains(database) {
            return Ok(());
        }
        if let Some(reason) = self.own_file(database) {
            return Err(CatalogError::Protected(reason));
        }
        let holds_store = self
            .server
            .holds_store(database, STORE_MARKER_TABLE)
            .await
            .map_err(|e| self.failed(database, e))?;
        if holds_store {
            return Err(CatalogError::Protected(format!(
                "database '{database}' of {} holds a ctasd store (table '{STORE_MARKER_TABLE}'): \
                 ctasd never creates, replaces or drops tables in a store",
                self.server.describe(database)
            )));
        }
        self.not_stores.lock().await.insert(database.to_owned());
        Ok(())
    }

    pub(super) fn own_file(&self, database: &str) -> Option<String> {
        let file: PathBuf = match self.options.get("base-url").map(JdbcUrl::parse) {
            Some(Ok(JdbcUrl::Sqlite { directory })) => directory.join(format!("{database}.db")),
            _ => return None,
        };
        self.protected.refuse_database_file(&file)
    }

    pub(super) async fn exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        self.server
            .table_note(database, table)
            .await
            .map(|note| note.is_some())
            .map_err(|e| self.failed(database, e))
    }

    pub(super) fn name_of(&self, database: &str, table: &str) -> Result<String, CatalogError> {
        self.dialect()
            .table_name(database, table)
            .map_err(Self::unsupported)
    }

    pub(super) async fn run(
        &self,
        database: &str,
        statements: &[String],
    ) -> Result<(), CatalogError> {
        self.server
            .run(database, statements)
            .await
            .map_err(|e| self.failed(database, e))
    }

    /// The statements that make `name` a fresh staging of this attempt.
    pub(super) fn staging_ddl(
        &self,
        staging: &Staging,
        name: &str,
        attempt: i64,
    ) -> Result<Vec<String>, CatalogError> {
        let key_name = staging_key_name(staging);
        let marker = dialect::staging_marker(attempt, &staging.key, &self.installation);
        let shape = Shape {
            key_name: self
                .dialect()
                .stages_key_name()
                .then_some(key_name.as_str()),
            marker: Some(&marker),
        };
        self.dialect()
            .create_table(name, &staging.definition, shape)
            .map_err(Self::unsupported)
    }

    /// Statements that put a new table in place of the existing `target`,
    /// built by `create(name)`: inside one transaction where DDL is
    /// transactional, else built under another name and swapped in with one
    /// `RENAME TABLE`.
    pub(super) fn replace_ddl(
        &self,
        staging: &Staging,
        target: &str,
        create: impl Fn(&str) -> Result<Vec<String>, CatalogError>,
    ) -> Result<Vec<String>, CatalogError> {
        if self.dialect().transactional_ddl() {
            let mut statements = vec![format!("DROP TABLE {target}")];
            statements.extend(create(target)?);
            return Ok(statements);
        }
        let database = &staging.database;
        let fresh = self.name_of(database, &fresh_table(staging))?;
        let parked = self.name_of(database, &parked_table(staging))?;
        let mut statements = vec![format!("DROP TABLE IF EXISTS {fresh}")];
        statements.extend(create(&fresh)?);
        statements.push(format!(
            "RENAME TABLE {target} TO {parked}, {fresh} TO {target}"
        ));
        statements.push(format!("DROP TABLE {parked}"));
        Ok(statements)
    }
}

#[async_trait]
impl Catalog for JdbcCatalog {
    fn check_audits(&self, audits: &[Audit]) -> Result<(), String> {
        self.check_audit_queries(audits)
    }

    async fn audit(
        &self,
        staging: &Staging,
        audits: &[Audit],
    ) -> Result<Vec<Observed>, CatalogError> {
        self.ensure_database(&staging.database).await?;
        self.run_audits(staging, audits).await
    }

    fn default_database(&self) -> &str {
        &self.default_database
    }

    async fn list_databases(&self) -> Result<Vec<String>, CatalogError> {
        self.server
            .list_databases(&self.default_database)
            .await
            .map_err(|e| self.failed(&self.default_database, e))
    }

    async fn list_tables(&self, database: &str) -> Result<Vec<String>, CatalogError> {
        self.ensure_database(database).await?;
        let tables = self
            .server
            .list_tables(database)
            .await
            .map_err(|e| self.failed(database, e))?;
        Ok(tables
            .into_iter()
            .filter(|t| !t.starts_with(HIDDEN_PREFIX))
            .collect())
    }

    async fn get_table(&self, database: &str, table: &str) -> Result<TableInfo, CatalogError> {
        if !self.list_tables(database).await?.iter().any(|t| t == table) {
            return Err(CatalogError::TableNotFound {
                database: database.into(),
                table: table.into(),
            });
        }
        let columns = self
            .server
            .columns(database, table)
            .await
            .map_err(|e| self.failed(database, e))?
            .into_iter()
            .map(|(name, data_type, nullable)| ColumnInfo {
                name,
                data_type,
                nullable,
            })
            .collect();
        Ok(TableInfo {
            database: database.into(),
            name: table.into(),
            columns,
            options: connector_options(&self.options, database, table),
        })
    }

    async fn table_exists(&self, database: &str, table: &str) -> Result<bool, CatalogError> {
        self.ensure_database(database).await?;
        self.exists(database, table).await
    }

    async fn create_table(
        &self,
        staging: &Staging,
        replace: bool,
    ) -> Result<CreateOutcome, CatalogError> {
        let database = &staging.database;
        self.ensure_database(database).await?;
        let exists = self.exists(database, &staging.table).await?;
        if exists && !replace {
            return Ok(CreateOutcome::AlreadyExisted);
        }
        let target = self.name_of(database, &staging.table)?;
        let create = |name: &str| {
            self.dialect()
                .create_table(name, &staging.definition, Shape::published())
                .map_err(Self::unsupported)
        };
        if exists {
            self.refuse_blocked_replace(database, &staging.table)
                .await?;
            let statements = self.replace_ddl(staging, &target, create)?;
            self.run(database, &statements).await?;
            return Ok(CreateOutcome::Replaced);
        }
        match self.server.run(database, &create(&target)?).await {
            Ok(()) => Ok(CreateOutcome::Created),
            Err(e) if is_already_exists(&e) => Ok(CreateOutcome::AlreadyExisted),
            Err(e) => Err(self.failed(database, e)),
        }
    }

    async fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, CatalogError> {
        let database = &staging.database;
        self.ensure_database(database).await?;
        let name = self.name_of(database, &staging_table(staging))?;
        let note = self
            .server
            .table_note(database, &staging_table(staging))
            .await
            .map_err(|e| self.failed(database, e))?;
        let Some(note) = note else {
            let statements = self.staging_ddl(staging, &name, attempt)?;
            return match self.server.run(database, &statements).await {
                Ok(()) => Ok(BeginOutcome::Staged),
                // Another runner made it meanwhile; the retry reads its marker.
                Err(e) if is_already_exists(&e) => Err(CatalogError::Unavailable(
                    "the staging was created meanwhile by another runner; trying again".into(),
                )),
                Err(e) => Err(self.failed(database, e)),
            };
        };
        if self.marked_attempt(staging, &note)? >= attempt {
            return Ok(BeginOutcome::AlreadyStaged);
        }
        let statements =
            self.replace_ddl(staging, &name, |n| self.staging_ddl(staging, n, attempt))?;
        self.run(database, &statements).await?;
        Ok(BeginOutcome::Restaged)
    }

    async fn commit(
        &self,
        batch: &[(Staging, Publish)],
    ) -> Vec<Result<CommitOutcome, CatalogError>> {
        let Some((first, _)) = batch.first() else {
            return Vec::new();
        };
        match self.publish(&first.database, batch).await {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(error) => batch.iter().map(|_| Err(error.clone())).collect(),
        }
    }

    async fn abort(&self, staging: &Staging) -> Result<(), CatalogError> {
        let database = &staging.database;
        self.ensure_database(database).await?;
        let note = self
            .server
            .table_note(database, &staging_table(staging))
            .await
            .map_err(|e| self.failed(database, e))?;
        if let Some(note) = note {
            self.marked_attempt(staging, &note)?;
        }
        let mut leftovers = vec![staging_table(staging)];
        if !self.dialect().transactional_ddl() {
            leftovers.extend([fresh_table(staging), parked_table(staging)]);
        }
        let statements = leftovers
            .iter()
            .map(|t| {
                Ok(format!(
                    "DROP TABLE IF EXISTS {}",
                    self.name_of(database, t)?
                ))
            })
            .collect::<Result<Vec<_>, CatalogError>>()?;
        self.run(database, &statements).await
    }

    async fn check_replaceable(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        self.ensure_database(database).await?;
        self.refuse_blocked_replace(database, table).await
    }

    async fn check_target(
        &self,
        database: &str,
        table: &str,
        definition: &TableDefinition,
        existing: bool,
    ) -> Result<(), CatalogError> {
        if table.starts_with(HIDDEN_PREFIX) {
            return Err(CatalogError::Unsupported(format!(
                "table names starting with '{HIDDEN_PREFIX}' are reserved for ctasd's staging"
            )));
        }
        check_url_safe(database).map_err(CatalogError::Unsupported)?;
        let dialect = self.dialect();
        dialect
            .check_identifier(NameKind::Database, database)
            .map_err(Self::unsupported)?;
        dialect
            .check_table(table, definition)
            .map_err(Self::unsupported)?;
        self.ensure_database(database).await?;
        if let Some(pk) = &definition.primary_key {
            let owner = if existing { table } else { "" };
            let taken = self
                .server
                .name_taken_elsewhere(database, &pk.name, owner)
                .await
                .map_err(|e| self.failed(database, e))?;
            if taken {
                return Err(CatalogError::Unsupported(format!(
                    "primary key name '{}' is taken: {} names a primary key's index with it, and \
                     another table or index of the schema has that name",
                    pk.name,
                    dialect.name()
                )));
            }
        }
        // Whatever the system refuses that this code does not know (row
        // size, a privilege, a limit) is refused now, in its own words: a
        // table of this definition is created under a unique name and
        // taken back, unless the same definition passed a moment ago.
        let probe_ddl = |probe: &str, probe_key: &str| {
            let marker = dialect::staging_marker(0, &probe_staging_key(), &self.installation);
            let shape = Shape {
                key_name: dialect.stages_key_name().then_some(probe_key),
                marker: Some(&marker),
            };
            dialect
                .create_table(&self.name_of(database, probe)?, definition, shape)
                .map_err(Self::unsupported)
        };
        let seen = (
            database.to_owned(),
            probe_ddl("probe", "probekey")?.join(";\n"),
        );
        if self.accepted_lately(&seen) {
            return Ok(());
        }
        let probe = format!("{HIDDEN_PREFIX}probe_{}", uuid::Uuid::new_v4().simple());
        let probe_key = format!("{HIDDEN_PREFIX}probekey_{}", uuid::Uuid::new_v4().simple());
        match self
            .server
            .dry_run(database, &probe_ddl(&probe, &probe_key)?)
            .await
        {
            Ok(()) => {
                self.remember_accepted(seen);
                Ok(())
            }
            Err(e) => match self.failed(database, e) {
                CatalogError::Refused(reason) => Err(CatalogError::Unsupported(reason)),
                other => Err(other),
            },
        }
    }

    async fn drop_table(&self, database: &str, table: &str) -> Result<(), CatalogError> {
        self.drop_marked(database, table).await
    }

    async fn close(&self) {
        self.server.close().await;
    }
}
