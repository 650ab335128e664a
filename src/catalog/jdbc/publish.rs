//! Publication: the stagings of one job on one database become its
//! tables in one step (a transaction, or one multi-table `RENAME TABLE`),
//! a replaced table parked and dropped, and every swap undone when a step
//! after it fails.

use crate::catalog::{
    CatalogError, CommitOutcome, Publish, Staging, staging_missing, table_exists_error,
    table_not_found,
};

use super::*;

/// Where MySQL parks a table its swap replaced (or an attempt's staging a
/// restart replaced) until it is dropped.
pub(super) fn parked_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}old_{}", staging.key.as_str())
}

/// Where MySQL builds a replacement before swapping it in.
pub(super) fn fresh_table(staging: &Staging) -> String {
    format!("{HIDDEN_PREFIX}new_{}", staging.key.as_str())
}

impl JdbcCatalog {
    /// Publishes a batch of stagings of one database, all or nothing where
    /// the system allows.
    pub(super) async fn publish(
        &self,
        database: &str,
        batch: &[(Staging, Publish)],
    ) -> Result<Vec<CommitOutcome>, CatalogError> {
        self.ensure_database(database).await?;
        let log = self.name_of(database, PUBLICATION_LOG)?;
        if self.dialect().logs_publications() {
            self.ensure_publication_log(database, &log).await?;
        }
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut names = Vec::new();
        for (staging, publish) in batch {
            let staged = staging_table(staging);
            let notes = self
                .server
                .table_notes(database, &[&staged, &staging.table])
                .await
                .map_err(|e| self.failed(database, e))?;
            if let Some(note) = notes[0].as_deref() {
                self.marked_attempt(staging, note)?;
            }
            let [staged_exists, target_exists] = [0, 1].map(|i| notes[i].is_some());
            match (staged_exists, target_exists, publish) {
                (false, true, _) => {
                    // Published already, perhaps by a run that crashed
                    // before it could record so: only if the table still
                    // carries this staging's marker, else it is another's.
                    let marker = self.prove_published(staging, &log).await?;
                    self.finish_published(staging, &log, &marker).await?;
                    outcomes.push(CommitOutcome::AlreadyCommitted);
                    continue;
                }
                (false, false, _) => return Err(staging_missing(staging)),
                (true, true, Publish::Create) => return Err(table_exists_error(staging)),
                (true, false, Publish::Replace) => return Err(table_not_found(staging)),
                (true, true, Publish::Replace) => {
                    self.refuse_blocked_replace(database, &staging.table)
                        .await?
                }
                (true, _, _) => {}
            }
            names.push(PublishNames {
                staging,
                staged: self.name_of(database, &staging_table(staging))?,
                target: self.name_of(database, &staging.table)?,
                parked: self.name_of(database, &parked_table(staging))?,
                key: staging_key_name(staging),
                replace: *publish == Publish::Replace,
                marker: notes[0].clone().unwrap_or_default(),
            });
            outcomes.push(CommitOutcome::Committed);
        }
        let items: Vec<Publication> = names
            .iter()
            .map(
                |PublishNames {
                     staging,
                     staged,
                     target,
                     parked,
                     key,
                     replace,
                     marker,
                 }| Publication {
                    staging: staged,
                    target,
                    replace: *replace,
                    parked,
                    staging_key_name: self.dialect().stages_key_name().then_some(key.as_str()),
                    definition: &staging.definition,
                    table: &staging.table,
                    marker,
                    log: &log,
                },
            )
            .collect();
        if !items.is_empty() {
            let statements = self.dialect().publish(&items).map_err(Self::unsupported)?;
            match self.server.run(database, &statements).await {
                Ok(()) => {}
                Err(e) if is_already_exists(&e) => {
                    return Err(table_exists_error(names[0].staging));
                }
                Err(e) => {
                    self.undo_swaps(database, &names).await;
                    return Err(self.failed(database, e));
                }
            }
        }
        Ok(outcomes)
    }

    /// After a publication that failed part way where DDL is not
    /// transactional: a replace whose rename went through (the old table is
    /// parked, the staging gone) is renamed back, so a commit reported
    /// failed never leaves the new table published. Best effort: what
    /// cannot be undone is left for the retry, which finds it.
    pub(super) async fn undo_swaps(&self, database: &str, names: &[PublishNames<'_>]) {
        if self.dialect().transactional_ddl() {
            return;
        }
        let mut renames = Vec::new();
        for PublishNames {
            staging,
            staged,
            target,
            parked,
            replace,
            ..
        } in names
        {
            if !replace {
                continue;
            }
            let notes = self
                .server
                .table_notes(database, &[&staging_table(staging), &parked_table(staging)])
                .await;
            if let Ok([None, Some(_)]) = notes.as_deref() {
                renames.push(format!("{target} TO {staged}, {parked} TO {target}"));
            }
        }
        if renames.is_empty() {
            return;
        }
        let undo = format!("RENAME TABLE {}", renames.join(", "));
        if let Err(error) = self.server.run(database, &[undo]).await {
            tracing::warn!(%database, error = %self.failed(database, error), "a failed publication could not be renamed back");
        }
    }

    /// Refuses to replace `table` when the replace would change objects
    /// outside it (see [`Server::replace_blockers`]): nothing is renamed or
    /// dropped, and the table stays exactly where it is.
    pub(super) async fn refuse_blocked_replace(
        &self,
        database: &str,
        table: &str,
    ) -> Result<(), CatalogError> {
        let blockers = self
            .server
            .replace_blockers(database, table)
            .await
            .map_err(|e| self.failed(database, e))?;
        if blockers.is_empty() {
            return Ok(());
        }
        Err(CatalogError::NotOwned {
            database: database.to_owned(),
            table: table.to_owned(),
            reason: format!(
                "{} {} it, and {} replaces a table by renaming it away and dropping it, which \
                 would change {}; drop or move {} first",
                blockers.join(", "),
                if blockers.len() == 1 {
                    "depends on"
                } else {
                    "depend on"
                },
                self.dialect().name(),
                if blockers.len() == 1 { "it" } else { "them" },
                if blockers.len() == 1 { "it" } else { "them" },
            ),
        })
    }

    /// What a publication cut short by a crash may have left: a parked
    /// table (MySQL drops it after the rename) and the declared comment.
    pub(super) async fn finish_published(
        &self,
        staging: &Staging,
        log: &str,
        marker: &str,
    ) -> Result<(), CatalogError> {
        if self.dialect().transactional_ddl() {
            return Ok(());
        }
        let database = &staging.database;
        let mut statements = vec![format!(
            "DROP TABLE IF EXISTS {}",
            self.name_of(database, &parked_table(staging))?
        )];
        statements.extend(
            self.dialect()
                .log_publication(log, &staging.table, marker)
                .map_err(Self::unsupported)?,
        );
        statements.extend(
            self.dialect()
                .set_comment(
                    &self.name_of(database, &staging.table)?,
                    staging.definition.comment.as_deref(),
                )
                .map_err(Self::unsupported)?,
        );
        self.run(database, &statements).await
    }
}
