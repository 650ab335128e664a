//! Whose a directory in a warehouse is, read from ctasd's marker files,
//! and removal of only what ctasd made: the data first, its own files
//! last, so a removal cut short still proves whose the directory is.

use super::beneath::{Dir, Kind};
use crate::catalog::StagingKey;
use crate::catalog::installation::Installation;

use super::*;

/// What a name in a database directory is, as far as ctasd can prove.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ownership {
    Missing,
    /// A directory holding ctasd's schema file and a marker naming the
    /// staging that made it: a table ctasd published, or one of its stagings.
    Made(StagingKey),
    /// A directory holding nothing but ctasd's own files (a staging cut short
    /// before its marker was written): removing it loses nothing.
    OnlyOwnFiles,
    /// Anything else: not ctasd's to remove or replace.
    Foreign(String),
    /// Made by another ctasd installation (its marker names it): not
    /// this one's to adopt, publish, replace or remove.
    Theirs(String),
}

/// A name looked at: what it is, and the directory itself, opened, when it
/// is one, so that what was proven is what is acted on.
pub(super) struct Found {
    pub(super) ownership: Ownership,
    pub(super) dir: Option<Dir>,
}

pub(super) fn inspect(db: &Dir, name: &str, installation: &Installation) -> std::io::Result<Found> {
    let foreign = |reason: &str| {
        Ok(Found {
            ownership: Ownership::Foreign(reason.to_owned()),
            dir: None,
        })
    };
    match db.kind(name)? {
        Kind::Missing => {
            return Ok(Found {
                ownership: Ownership::Missing,
                dir: None,
            });
        }
        Kind::Link => return foreign("it is a symbolic link, which ctasd never creates"),
        Kind::File | Kind::Other => return foreign("it is a file, not a table directory"),
        Kind::Directory => {}
    }
    let dir = match db.open_dir(name) {
        Ok(dir) => dir,
        Err(e) if beneath::is_link_refusal(&e) => {
            return foreign("it is a symbolic link, which ctasd never creates");
        }
        Err(e) => return Err(e),
    };
    let ownership = ownership_of(&dir, installation)?;
    Ok(Found {
        ownership,
        dir: Some(dir),
    })
}

pub(super) fn ownership_of(dir: &Dir, installation: &Installation) -> std::io::Result<Ownership> {
    let is_file = |name: &str| dir.kind(name).is_ok_and(|kind| kind == Kind::File);
    if is_file(SCHEMA_FILE)
        && is_file(COMMIT_MARKER)
        && let Ok(marker) = dir.read(COMMIT_MARKER)
    {
        let marker = String::from_utf8_lossy(&marker);
        let key = marker.split(',').next().and_then(StagingKey::parse);
        match (key, installation.check(&marker)) {
            (Some(key), Ok(())) => return Ok(Ownership::Made(key)),
            (Some(_), Err(other)) => {
                return Ok(Ownership::Theirs(format!(
                    "its {COMMIT_MARKER} names another ctasd installation ({other}): two stores \
                     share this warehouse, or a job id was used again"
                )));
            }
            (None, _) => {}
        }
    }
    for (name, kind) in dir.entries()? {
        let name = name.to_string_lossy();
        if !(name.starts_with(OWN_FILE_PREFIX) && kind == Kind::File) {
            return Ok(Ownership::Foreign(format!(
                "it holds '{name}' but no ctasd marker ({COMMIT_MARKER} and {SCHEMA_FILE}): \
                 ctasd did not make it"
            )));
        }
    }
    Ok(Ownership::OnlyOwnFiles)
}

/// Removes the directory `name` of `db`, opened as `dir` when [`inspect`]
/// proved it ctasd's: the data first, ctasd's own files last, then the
/// directory. Cut short, it leaves a directory that still proves whose it is.
pub(super) fn remove_owned(db: &Dir, name: &str, dir: &Dir) -> std::io::Result<()> {
    remove_data(dir)?;
    remove_own_files(db, name, dir)
}

/// Everything in `dir` but ctasd's own files; links are removed, not
/// followed.
pub(super) fn remove_data(dir: &Dir) -> std::io::Result<()> {
    for (name, kind) in dir.entries()? {
        let name = name.to_string_lossy();
        if name.starts_with(OWN_FILE_PREFIX) {
            continue;
        }
        match kind {
            Kind::Directory => dir.remove_tree(&name)?,
            _ => dir.remove_file(&name)?,
        }
    }
    Ok(())
}

/// ctasd's own files in `dir`, then `dir` itself (`name` in `db`), once
/// the data is gone.
pub(super) fn remove_own_files(db: &Dir, name: &str, dir: &Dir) -> std::io::Result<()> {
    for (entry, _) in dir.entries()? {
        dir.remove_file(&entry.to_string_lossy())?;
    }
    db.remove_dir(name)?;
    db.sync()
}

/// Removes the file `name` of `dir` if it is there.
pub(super) fn remove_if_there(dir: &Dir, name: &str) -> std::io::Result<()> {
    match dir.remove_file(name) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
