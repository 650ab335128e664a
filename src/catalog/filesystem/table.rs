//! One table's directories as a hook's actions move them: the staging
//! made (or adopted) with its markers, published with `renameat2`
//! (`RENAME_NOREPLACE`, or `RENAME_EXCHANGE` for a replacement) and the
//! parent fsynced, or removed.

use rustix::fs::RenameFlags;

use super::beneath::Dir;
use crate::catalog::installation::Installation;
use crate::catalog::{
    BeginOutcome, CatalogError, CommitOutcome, CreateOutcome, Publish, Staging, defined_table,
    staging_missing, table_exists_error, table_not_found,
};
use crate::fault::{self, Point};

use super::*;

/// One hook's names in its database directory.
pub(super) struct Table {
    pub(super) db: Dir,
    pub(super) installation: Installation,
    pub(super) database: String,
    pub(super) staging: String,
    /// Where a replacement (a new attempt's staging, a streaming replace) is
    /// built before `RENAME_EXCHANGE` swaps it in. Only ctasd writes there.
    pub(super) fresh: String,
    pub(super) target: String,
}

impl Table {
    pub(super) fn open(
        warehouse: &Dir,
        installation: Installation,
        staging: &Staging,
    ) -> Result<Table, Failure> {
        Ok(Table {
            db: open_database(warehouse, &staging.database)?,
            installation,
            database: staging.database.clone(),
            staging: format!("{STAGING_PREFIX}{}", staging.key.as_str()),
            fresh: format!("{FRESH_PREFIX}{}", staging.key.as_str()),
            target: staging.table.clone(),
        })
    }

    /// Writes the schema and the marker into the directory `name`, and the
    /// attempt marker when it is a staging. `new`: the directory must be
    /// made now (ctasd's scratch path); else an existing real directory
    /// (one the engine wrote first) is filled as it is.
    pub(super) fn fill(
        &self,
        name: &str,
        staging: &Staging,
        attempt: Option<i64>,
        new: bool,
    ) -> Result<(), Failure> {
        match self.db.create_dir(name) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && !new => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(self.not_owned_at(staging, name));
            }
            other => other?,
        }
        let dir = self.db.open_dir(name)?;
        let table = defined_table(staging);
        let schema = SchemaFile {
            columns: table
                .columns
                .into_iter()
                .map(|c| SchemaColumn {
                    name: c.name,
                    data_type: c.data_type,
                    nullable: c.nullable,
                })
                .collect(),
            // Secrets stay in ctasd's store, sealed, not beside the data.
            properties: staging
                .definition
                .to_properties()
                .into_iter()
                .filter(|(key, _)| !crate::domain::options::is_sensitive(key))
                .collect(),
        };
        let json = serde_json::to_vec_pretty(&schema).map_err(std::io::Error::other)?;
        dir.write_file(SCHEMA_FILE, &json)?;
        let marker = self.installation.mark(staging.key.as_str());
        dir.write_file(COMMIT_MARKER, marker.as_bytes())?;
        match attempt {
            Some(attempt) => dir.write_file(ATTEMPT_MARKER, attempt.to_string().as_bytes())?,
            // A published table is no attempt's staging any more.
            None => remove_if_there(&dir, ATTEMPT_MARKER)?,
        }
        dir.sync()?;
        Ok(())
    }

    /// The attempt a staging directory was begun for, if it says.
    pub(super) fn attempt_of(dir: &Dir) -> Option<i64> {
        String::from_utf8(dir.read(ATTEMPT_MARKER).ok()?)
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Removes what a swap cut short by a crash left at the fresh path: a
    /// replacement ctasd built, or the table it replaced. Only ctasd writes
    /// there; anything else found there (a link, a foreign directory) is
    /// refused, never written into or removed.
    pub(super) fn clear_fresh(&self, staging: &Staging) -> Result<(), Failure> {
        let found = inspect(&self.db, &self.fresh, &self.installation)?;
        match (found.ownership, found.dir) {
            (Ownership::Missing, _) => Ok(()),
            (Ownership::Made(_) | Ownership::OnlyOwnFiles, Some(dir)) => {
                Ok(remove_owned(&self.db, &self.fresh, &dir)?)
            }
            _ => Err(self.not_owned_at(staging, &self.fresh)),
        }
    }

    /// Puts a directory built at the fresh path in place of `name` with one
    /// `RENAME_EXCHANGE`, then removes what it replaced.
    pub(super) fn swap_in(&self, name: &str) -> Result<(), Failure> {
        self.db.rename(&self.fresh, name, RenameFlags::EXCHANGE)?;
        self.db.sync()?;
        // The fresh path now holds what was replaced, proven ctasd's.
        self.remove_replaced(&self.fresh)
    }

    pub(super) fn made_by(&self, name: &str, staging: &Staging) -> std::io::Result<bool> {
        Ok(inspect(&self.db, name, &self.installation)?.ownership
            == Ownership::Made(staging.key.clone()))
    }

    /// The staging path is this hook's to fill: absent, its own, or only
    /// ctasd's files; anything else someone else put there.
    pub(super) fn check_staging_free(&self, staging: &Staging) -> Result<(), Failure> {
        match inspect(&self.db, &self.staging, &self.installation)?.ownership {
            Ownership::Missing | Ownership::OnlyOwnFiles => Ok(()),
            Ownership::Made(key) if key == staging.key => Ok(()),
            Ownership::Made(_) | Ownership::Foreign(_) | Ownership::Theirs(_) => {
                Err(self.not_owned_at(staging, &self.staging))
            }
        }
    }

    pub(super) fn not_owned_at(&self, staging: &Staging, name: &str) -> Failure {
        let reason = match inspect(&self.db, name, &self.installation).map(|found| found.ownership)
        {
            Ok(Ownership::Foreign(reason) | Ownership::Theirs(reason)) => reason,
            Ok(Ownership::Made(key)) if key != staging.key => {
                "it was made by another job's staging".into()
            }
            _ => "it holds what ctasd did not make there".into(),
        };
        CatalogError::NotOwned {
            database: self.database.clone(),
            table: name.to_owned(),
            reason,
        }
        .into()
    }

    pub(super) fn create(
        &self,
        staging: &Staging,
        replace: bool,
    ) -> Result<CreateOutcome, Failure> {
        match inspect(&self.db, &self.target, &self.installation)?.ownership {
            Ownership::Missing => {}
            _ if !replace => return Ok(CreateOutcome::AlreadyExisted),
            Ownership::Foreign(_) | Ownership::Theirs(_) => {
                return Err(self.not_owned_at(staging, &self.target));
            }
            Ownership::Made(_) | Ownership::OnlyOwnFiles => {
                self.clear_fresh(staging)?;
                self.fill(&self.fresh, staging, None, true)?;
                self.swap_in(&self.target)?;
                return Ok(CreateOutcome::Replaced);
            }
        }
        self.check_staging_free(staging)?;
        self.fill(&self.staging, staging, None, false)?;
        match self
            .db
            .rename(&self.staging, &self.target, RenameFlags::NOREPLACE)
        {
            Ok(()) => {
                self.db.sync()?;
                Ok(CreateOutcome::Created)
            }
            Err(e) if is_already_there(&e) => {
                self.remove_replaced(&self.staging)?;
                Ok(CreateOutcome::AlreadyExisted)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The staging for `attempt`. The staging path is ctasd's by its name
    /// (the job id and hook index under ctasd's hidden prefix, which no
    /// table may take), so a real directory there without a marker is one
    /// the engine wrote first, and is adopted with its files; ctasd's own
    /// files are then written beside them without following any link.
    pub(super) fn begin(&self, staging: &Staging, attempt: i64) -> Result<BeginOutcome, Failure> {
        self.clear_fresh(staging)?;
        let found = inspect(&self.db, &self.staging, &self.installation)?;
        let outcome = match found.ownership {
            Ownership::Missing | Ownership::OnlyOwnFiles => BeginOutcome::Staged,
            Ownership::Made(key) if key != staging.key => {
                return Err(self.not_owned_at(staging, &self.staging));
            }
            Ownership::Made(_) => match found.dir.as_ref().and_then(Self::attempt_of) {
                Some(begun) if begun >= attempt => return Ok(BeginOutcome::AlreadyStaged),
                Some(_) => {
                    self.fill(&self.fresh, staging, Some(attempt), true)?;
                    self.swap_in(&self.staging)?;
                    return Ok(BeginOutcome::Restaged);
                }
                None => BeginOutcome::Adopted,
            },
            Ownership::Foreign(_) if found.dir.is_some() => BeginOutcome::Adopted,
            Ownership::Foreign(_) | Ownership::Theirs(_) => {
                return Err(self.not_owned_at(staging, &self.staging));
            }
        };
        self.fill(&self.staging, staging, Some(attempt), false)?;
        self.db.sync()?;
        Ok(outcome)
    }

    pub(super) fn commit(
        &self,
        staging: &Staging,
        publish: Publish,
    ) -> Result<CommitOutcome, Failure> {
        let found = inspect(&self.db, &self.staging, &self.installation)?;
        let (Ownership::Made(key), Some(dir)) = (&found.ownership, &found.dir) else {
            return self.committed_before(staging);
        };
        if *key != staging.key {
            return self.committed_before(staging);
        }
        // Published, it is no attempt's staging any more.
        remove_if_there(dir, ATTEMPT_MARKER)?;
        match publish {
            Publish::Create => {
                match self
                    .db
                    .rename(&self.staging, &self.target, RenameFlags::NOREPLACE)
                {
                    Err(e) if is_already_there(&e) => {
                        return Err(table_exists_error(staging).into());
                    }
                    other => other?,
                }
            }
            Publish::Replace => {
                match inspect(&self.db, &self.target, &self.installation)?.ownership {
                    Ownership::Missing => return Err(table_not_found(staging).into()),
                    Ownership::Foreign(_) | Ownership::Theirs(_) => {
                        return Err(self.not_owned_at(staging, &self.target));
                    }
                    Ownership::Made(_) | Ownership::OnlyOwnFiles => {}
                }
                self.db
                    .rename(&self.staging, &self.target, RenameFlags::EXCHANGE)?;
                self.db.sync()?;
                fault::reached(Point::CommitMidway);
                // The staging path now holds the replaced table.
                self.remove_replaced(&self.staging)?;
            }
        }
        self.db.sync()?;
        Ok(CommitOutcome::Committed)
    }

    /// No staging of this hook to publish: already published (after a
    /// swap, the staging path may still hold the replaced table, which was
    /// proven ctasd's before the swap and is removed now), or gone.
    pub(super) fn committed_before(&self, staging: &Staging) -> Result<CommitOutcome, Failure> {
        if self.made_by(&self.target, staging)? {
            self.remove_replaced(&self.staging)?;
            return Ok(CommitOutcome::AlreadyCommitted);
        }
        Err(staging_missing(staging).into())
    }

    /// Removes what a swap left at `name`, if ctasd can prove it made it;
    /// anything else is left where it is, and said so in the log.
    pub(super) fn remove_replaced(&self, name: &str) -> Result<(), Failure> {
        let found = inspect(&self.db, name, &self.installation)?;
        match (found.ownership, found.dir) {
            (Ownership::Missing, _) => Ok(()),
            (Ownership::Made(_) | Ownership::OnlyOwnFiles, Some(dir)) => {
                Ok(remove_owned(&self.db, name, &dir)?)
            }
            (ownership, _) => {
                tracing::warn!(
                    database = %self.database,
                    directory = %name,
                    ?ownership,
                    "left a directory in place after a replace: ctasd cannot prove it made it"
                );
                Ok(())
            }
        }
    }

    /// Removes the staging directory, data first and ctasd's files last, so
    /// an abort cut short (where the crash suite stops it) leaves a
    /// directory that the retry still finds. The staging path is ctasd's
    /// by its name, marked or not (the engine may have made it); a link
    /// there is refused and left.
    pub(super) fn abort(&self, staging: &Staging) -> Result<(), Failure> {
        self.clear_fresh(staging)?;
        let found = inspect(&self.db, &self.staging, &self.installation)?;
        let dir = match (found.ownership, found.dir) {
            (Ownership::Missing, _) => return Ok(()),
            (Ownership::Made(key), _) if key != staging.key => {
                return Err(self.not_owned_at(staging, &self.staging));
            }
            (Ownership::Theirs(_), _) => return Err(self.not_owned_at(staging, &self.staging)),
            (_, Some(dir)) => dir,
            (_, None) => return Err(self.not_owned_at(staging, &self.staging)),
        };
        remove_data(&dir)?;
        fault::reached(Point::AbortMidway);
        Ok(remove_own_files(&self.db, &self.staging, &dir)?)
    }
}
