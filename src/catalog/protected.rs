//! The places no catalog may point at: the operating system's own trees,
//! directories that many owners share, and ctasd's own data directory and
//! files (its store, its keys, its tokens).
//!
//! A warehouse directory is where a `replace` or an `abort` removes
//! directories, and a `jdbc:sqlite:` directory is where tables are dropped;
//! either one placed over these paths could reach data that is not the
//! catalog's to touch. The rules here look only at canonical paths (symlinks
//! and `..` resolved), so no spelling of a path gets around them.

use std::path::{Path, PathBuf};

/// Every ctasd store holds a table of this name (see the migrations): a
/// database that has one is a store, whatever host, port, socket or file
/// name it is reached by, and no catalog may create or drop tables in it.
pub const STORE_MARKER_TABLE: &str = "ctasd_store";

/// Trees that hold the operating system, its devices and kernel interfaces,
/// installed software, and other services' state and logs
/// (`/var/lib/postgresql`, `/var/lib/mysql`, ...): refused, and everything
/// beneath them.
pub const SYSTEM_TREES: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/snap",
    "/sys",
    "/usr",
    "/var/backups",
    "/var/cache",
    "/var/lib",
    "/var/log",
    "/var/mail",
    "/var/spool",
];

/// Directories whose entries belong to many owners (users, services,
/// mounts): refused themselves, while a directory of one's own beneath them
/// (`/srv/warehouse`, `/home/etl/tables`) is fine.
pub const SHARED_ROOTS: &[&str] = &[
    "/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var",
];

/// ctasd's own paths, canonical.
#[derive(Debug, Clone, Default)]
pub struct ProtectedPaths {
    /// The data directory: nothing at, above or below it.
    directories: Vec<PathBuf>,
    /// The store, key and tokens files, wherever they live: nothing at or above them.
    files: Vec<PathBuf>,
    /// The same files as (device, inode), so that a hard link or a
    /// symbolic link to one of them is recognised under any name.
    identities: Vec<(u64, u64)>,
}

impl ProtectedPaths {
    /// ctasd's data directory and the files it keeps (which must exist, so
    /// that they can be resolved).
    pub fn of_ctasd(data_dir: &Path, files: &[PathBuf]) -> std::io::Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let identities = files
            .iter()
            .map(|f| std::fs::metadata(f).map(|m| (m.dev(), m.ino())))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            directories: vec![data_dir.canonicalize()?],
            files: files
                .iter()
                .map(|f| f.canonicalize())
                .collect::<Result<_, _>>()?,
            identities,
        })
    }

    /// Why the SQLite database file at `path` may not be opened, if it may
    /// not: one of ctasd's own files under another name, or a file that
    /// resolves (through symbolic links) into a directory a database
    /// directory may not be.
    pub fn refuse_database_file(&self, path: &Path) -> Option<String> {
        if let Some(reason) = self.refuse_file(path) {
            return Some(reason);
        }
        let resolved = path.canonicalize().ok()?;
        let directory = resolved.parent()?;
        self.refuse_database_directory(directory).map(|reason| {
            format!(
                "'{}' resolves to '{}': {reason}",
                path.display(),
                resolved.display()
            )
        })
    }

    /// Why the file at `path` may not be opened as a catalog's database, if
    /// it is one of ctasd's own files under another name.
    pub fn refuse_file(&self, path: &Path) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        self.identities
            .contains(&(meta.dev(), meta.ino()))
            .then(|| {
                format!(
                    "'{}' is ctasd's own file under another name",
                    path.display()
                )
            })
    }

    /// Why `path` (canonical) may not be a warehouse, if it may not.
    pub fn refuse_warehouse(&self, path: &Path) -> Option<String> {
        if let Some(reason) = refuse_system_path(path) {
            return Some(reason);
        }
        for own in &self.directories {
            if path == own || own.starts_with(path) || path.starts_with(own) {
                return Some(format!(
                    "'{}' overlaps ctasd's data directory '{}'; a warehouse must lie outside it, \
                     neither above nor below it",
                    path.display(),
                    own.display()
                ));
            }
        }
        self.refuse_above_own_files(path)
    }

    /// Why `path` (canonical) may not hold a catalog's SQLite database
    /// files, if it may not: the same system trees and shared roots as a
    /// warehouse, and ctasd's data directory and anything below it.
    pub fn refuse_database_directory(&self, path: &Path) -> Option<String> {
        if let Some(reason) = refuse_system_path(path) {
            return Some(reason);
        }
        if let Some(own) = self.directories.iter().find(|own| path.starts_with(own)) {
            return Some(format!(
                "'{}' is inside ctasd's data directory '{}', which holds ctasd's own store",
                path.display(),
                own.display()
            ));
        }
        // Its databases are the `*.db` files directly in it.
        self.files
            .iter()
            .find(|f| f.parent() == Some(path))
            .map(|f| own_file_inside(path, f))
    }

    fn refuse_above_own_files(&self, path: &Path) -> Option<String> {
        self.files
            .iter()
            .find(|f| f.starts_with(path))
            .map(|f| own_file_inside(path, f))
    }
}

fn own_file_inside(path: &Path, file: &Path) -> String {
    format!(
        "'{}' holds ctasd's own file '{}'",
        path.display(),
        file.display()
    )
}

/// Why `path` (canonical) is a system path, if it is.
fn refuse_system_path(path: &Path) -> Option<String> {
    if let Some(tree) = SYSTEM_TREES.iter().find(|t| path.starts_with(t)) {
        return Some(format!(
            "'{}' is in '{tree}', which belongs to the operating system or another service",
            path.display()
        ));
    }
    SHARED_ROOTS
        .iter()
        .find(|root| path == Path::new(root))
        .map(|root| {
            format!(
                "'{root}' is shared by many owners; give a directory of the warehouse's own beneath it"
            )
        })
}

/// `given` resolved, or why it cannot be used: it must exist, be absolute and
/// already be canonical, so that what the catalog shows is where it works.
pub fn canonical_directory(given: &str) -> Result<PathBuf, String> {
    let path = Path::new(given);
    if !path.is_absolute() {
        return Err(format!("'{given}' is not an absolute path"));
    }
    let canonical = path
        .canonicalize()
        .map_err(|e| format!("'{given}' cannot be resolved: {e}"))?;
    if canonical != path {
        return Err(format!(
            "'{given}' is not canonical (it goes through a symbolic link or '..'); give '{}'",
            canonical.display()
        ));
    }
    if !canonical.is_dir() {
        return Err(format!("'{given}' is not a directory"));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> (tempfile::TempDir, ProtectedPaths) {
        let temp = tempfile::tempdir().unwrap();
        let data = temp.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let key = temp.path().join("keys").join("secret.key");
        std::fs::create_dir(key.parent().unwrap()).unwrap();
        std::fs::write(&key, "k").unwrap();
        let protected = ProtectedPaths::of_ctasd(&data, &[key]).unwrap();
        (temp, protected)
    }

    #[test]
    fn the_root_system_trees_and_shared_roots_are_refused_as_warehouses() {
        let protected = ProtectedPaths::default();
        for refused in [
            "/",
            "/etc",
            "/etc/ssl",
            "/usr/local/data",
            "/var/lib",
            "/var/lib/postgresql",
            "/proc/self",
            "/home",
            "/tmp",
        ] {
            assert!(
                protected.refuse_warehouse(Path::new(refused)).is_some(),
                "{refused}"
            );
        }
        for allowed in ["/srv/warehouse", "/home/etl/tables", "/tmp/wh", "/data"] {
            assert_eq!(
                protected.refuse_warehouse(Path::new(allowed)),
                None,
                "{allowed}"
            );
        }
    }

    #[test]
    fn the_data_directory_its_ancestors_and_descendants_are_refused() {
        let (temp, protected) = own();
        let root = temp.path().canonicalize().unwrap();
        for refused in [
            root.clone(),
            root.join("data"),
            root.join("data").join("wh"),
            root.join("keys"),
        ] {
            let reason = protected.refuse_warehouse(&refused);
            assert!(reason.is_some(), "{}", refused.display());
        }
        assert_eq!(protected.refuse_warehouse(&root.join("elsewhere")), None);
    }

    #[test]
    fn sqlite_directories_inside_the_data_directory_or_beside_own_files_are_refused() {
        let (temp, protected) = own();
        let root = temp.path().canonicalize().unwrap();
        assert!(
            protected
                .refuse_database_directory(&root.join("data"))
                .is_some()
        );
        assert!(
            protected
                .refuse_database_directory(&root.join("keys"))
                .is_some()
        );
        assert_eq!(protected.refuse_database_directory(&root), None);
    }

    #[test]
    fn own_files_are_recognised_through_hard_and_symbolic_links() {
        let (temp, protected) = own();
        let key = temp.path().join("keys").join("secret.key");
        std::fs::hard_link(&key, temp.path().join("hard")).unwrap();
        std::os::unix::fs::symlink(&key, temp.path().join("soft")).unwrap();
        std::fs::write(temp.path().join("mine"), "m").unwrap();

        assert!(protected.refuse_file(&temp.path().join("hard")).is_some());
        assert!(protected.refuse_file(&temp.path().join("soft")).is_some());
        assert_eq!(protected.refuse_file(&temp.path().join("mine")), None);
    }

    #[test]
    fn only_existing_canonical_absolute_directories_are_accepted() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().canonicalize().unwrap();
        std::fs::create_dir(dir.join("real")).unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        std::fs::write(dir.join("file"), "").unwrap();
        let text = |p: PathBuf| p.display().to_string();

        assert_eq!(
            canonical_directory(&text(dir.join("real"))),
            Ok(dir.join("real"))
        );
        assert!(
            canonical_directory("relative/dir")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(
            canonical_directory(&text(dir.join("link")))
                .unwrap_err()
                .contains("not canonical")
        );
        assert!(
            canonical_directory(&text(dir.join("real/../real")))
                .unwrap_err()
                .contains("not canonical")
        );
        assert!(
            canonical_directory(&text(dir.join("file")))
                .unwrap_err()
                .contains("not a directory")
        );
        assert!(
            canonical_directory(&text(dir.join("missing")))
                .unwrap_err()
                .contains("cannot be resolved")
        );
    }
}
