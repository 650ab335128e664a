//! File operations beneath an opened directory, never through a link.
//!
//! The warehouse is opened once as a directory handle. A path under it is
//! resolved by `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: a
//! symbolic link at any component, or a `..`, fails the call instead of
//! leading out, so no window remains between looking at a path and using
//! it. A final name that is created, removed or renamed is handled by the
//! `*at` calls on its opened parent, which never follow a link there
//! (`unlinkat` removes the link, `renameat` moves it, `mkdirat` fails on
//! it). ctasd's own files are written under a new name created exclusively
//! with `O_NOFOLLOW` and renamed over their final name: a link planted
//! under that name is replaced, never written through.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

/// Every scratch file ctasd writes starts with this (a crash may leave one;
/// it counts as one of ctasd's own files).
const SCRATCH_PREFIX: &str = "_ctasd_tmp_";

/// What a name in a directory is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    Directory,
    File,
    Link,
    Other,
}

impl Kind {
    fn of(file_type: FileType) -> Self {
        match file_type {
            FileType::Directory => Kind::Directory,
            FileType::RegularFile => Kind::File,
            FileType::Symlink => Kind::Link,
            _ => Kind::Other,
        }
    }
}

/// An opened directory; every path handed to it is relative to it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

/// Whether an error says a link (or a `..`) was met where ctasd refuses
/// to follow one.
pub fn is_link_refusal(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code)
        if code == Errno::LOOP.raw_os_error() || code == Errno::XDEV.raw_os_error())
}

fn io(errno: Errno) -> std::io::Error {
    std::io::Error::from(errno)
}

impl Dir {
    /// The directory at the absolute `path` (the warehouse itself, already
    /// canonical); its last component may not be a link.
    pub fn open(path: &Path) -> std::io::Result<Dir> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(io)?;
        Ok(Dir { fd })
    }

    fn resolve(&self, relative: &str, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        rustix::fs::openat2(
            &self.fd,
            relative,
            // RESOLVE_NO_SYMLINKS refuses a link at the last component
            // too (ELOOP), as O_NOFOLLOW would.
            flags | OFlags::CLOEXEC,
            mode,
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(io)
    }

    /// The directory at `relative` beneath this one: every component a
    /// real directory, never a link.
    pub fn open_dir(&self, relative: &str) -> std::io::Result<Dir> {
        let fd = self.resolve(relative, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        Ok(Dir { fd })
    }

    /// What `name` is, the link itself when it is one.
    pub fn kind(&self, name: &str) -> std::io::Result<Kind> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Kind::of(FileType::from_raw_mode(stat.st_mode))),
            Err(Errno::NOENT) => Ok(Kind::Missing),
            Err(e) => Err(io(e)),
        }
    }

    /// The bytes of the regular file `name`; a link or anything else there
    /// is an error.
    pub fn read(&self, name: &str) -> std::io::Result<Vec<u8>> {
        let fd = self.resolve(name, OFlags::RDONLY, Mode::empty())?;
        let stat = rustix::fs::fstat(&fd).map_err(io)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(std::io::Error::other(format!(
                "'{name}' is not a regular file"
            )));
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes)?;
        Ok(bytes)
    }

    /// Puts `bytes` durably at `name`: written to a scratch file created
    /// here exclusively, then renamed over `name`, so whatever was at
    /// `name` (a link included) is replaced, not written through.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let scratch = format!("{SCRATCH_PREFIX}{}", uuid::Uuid::new_v4().simple());
        let fd = self.resolve(
            &scratch,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o644),
        )?;
        let mut file = std::fs::File::from(fd);
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        if let Err(e) = written.and_then(|()| self.rename(&scratch, name, RenameFlags::empty())) {
            let _ = self.remove_file(&scratch);
            return Err(e);
        }
        Ok(())
    }

    /// Creates the directory `name`; an existing name, a link included, is
    /// an `AlreadyExists` error.
    pub fn create_dir(&self, name: &str) -> std::io::Result<()> {
        rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755)).map_err(io)
    }

    /// Removes the name `name` (a file, or a link itself).
    pub fn remove_file(&self, name: &str) -> std::io::Result<()> {
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()).map_err(io)
    }

    /// Removes the empty directory `name`.
    pub fn remove_dir(&self, name: &str) -> std::io::Result<()> {
        rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR).map_err(io)
    }

    /// Removes `name` and everything beneath it; a link met on the way is
    /// removed, never followed.
    pub fn remove_tree(&self, name: &str) -> std::io::Result<()> {
        let dir = self.open_dir(name)?;
        for (entry, kind) in dir.entries()? {
            let entry = entry.to_string_lossy();
            match kind {
                Kind::Directory => dir.remove_tree(&entry)?,
                _ => dir.remove_file(&entry)?,
            }
        }
        self.remove_dir(name)
    }

    /// Every name in this directory with what it is, `.` and `..` left out.
    pub fn entries(&self) -> std::io::Result<Vec<(OsString, Kind)>> {
        let mut entries = Vec::new();
        for entry in rustix::fs::Dir::read_from(&self.fd).map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsString::from_vec(name.to_vec());
            let kind = match entry.file_type() {
                FileType::Unknown => self.kind(&name.to_string_lossy())?,
                known => Kind::of(known),
            };
            entries.push((name, kind));
        }
        Ok(entries)
    }

    /// Renames `from` to `to`, both names in this directory.
    pub fn rename(&self, from: &str, to: &str, flags: RenameFlags) -> std::io::Result<()> {
        rustix::fs::renameat_with(&self.fd, from, &self.fd, to, flags).map_err(io)
    }

    /// Makes the names created, removed or renamed here survive a power cut.
    pub fn sync(&self) -> std::io::Result<()> {
        rustix::fs::fsync(&self.fd).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_at_any_component_is_refused_and_written_files_replace_links() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::fs::create_dir(root.path().join("db")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("out")).unwrap();
        std::os::unix::fs::symlink(&victim, root.path().join("db").join("schema")).unwrap();
        let dir = Dir::open(root.path()).unwrap();

        let refused = dir.open_dir("out").unwrap_err();
        assert!(is_link_refusal(&refused), "{refused}");
        assert!(is_link_refusal(&dir.open_dir("db/../..").unwrap_err()));
        let db = dir.open_dir("db").unwrap();
        assert!(db.read("schema").is_err());
        assert_eq!(db.kind("schema").unwrap(), Kind::Link);

        db.write_file("schema", b"ours").unwrap();

        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(db.read("schema").unwrap(), b"ours");
        assert_eq!(db.kind("schema").unwrap(), Kind::File);
    }

    #[test]
    fn removing_a_tree_removes_links_in_it_and_nothing_they_point_at() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"precious").unwrap();
        let table = root.path().join("t");
        std::fs::create_dir_all(table.join("sub")).unwrap();
        std::fs::write(table.join("sub").join("part-1"), b"row").unwrap();
        std::os::unix::fs::symlink(outside.path(), table.join("sub").join("out")).unwrap();

        Dir::open(root.path()).unwrap().remove_tree("t").unwrap();

        assert!(!table.exists());
        assert_eq!(
            std::fs::read(outside.path().join("keep")).unwrap(),
            b"precious"
        );
    }
}
