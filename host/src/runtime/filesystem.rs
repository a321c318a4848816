//! The `filesystem` interface, confined to the plugin's granted roots.
//!
//! A request path is made absolute-normal lexically (`.`/`..` resolved without touching the
//! disk) and assigned to the innermost root that contains it; every operation then goes
//! through that root's cap-std `Dir` with the path relative to it. cap-std resolves symlinks
//! beneath the `Dir` (openat2 `RESOLVE_BENEATH` on Linux), so `..`, absolute symlinks and
//! symlinks leading out are refused before anything is created, changed, removed or revealed.

mod handles;
mod ops;

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

pub use self::handles::FileHandles;
use super::bindings::wexec::plugin::filesystem::{Error, ErrorKind};
use crate::grants::FsRoot;

/// Largest whole-file read: 32 MiB, so its base64 fits a 64 MiB message.
pub const MAX_READ_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Most directory entries returned by one listing.
pub const MAX_DIRECTORY_ENTRIES: usize = 50_000;

/// One granted root, opened.
#[derive(Debug)]
pub struct OpenRoot {
    path: PathBuf,
    writable: bool,
    dir: Dir,
}

/// A plugin's opened roots.
#[derive(Debug, Default)]
pub struct Roots(Vec<OpenRoot>);

impl Roots {
    /// Opens every granted root.
    pub fn open(roots: &[FsRoot]) -> io::Result<Self> {
        roots
            .iter()
            .map(|root| {
                Ok(OpenRoot {
                    path: root.path.clone(),
                    writable: root.writable,
                    dir: Dir::open_ambient_dir(&root.path, ambient_authority())?,
                })
            })
            .collect::<io::Result<Vec<_>>>()
            .map(Self)
    }

    /// Finds the root containing `path` and the path relative to it (`.` for the root itself).
    /// Purely lexical: no I/O happens before the path is known to be inside a root.
    fn resolve(&self, path: &str) -> Result<Resolved<'_>, Error> {
        let normal = normalize(Path::new(path))
            .ok_or_else(|| invalid(format!("path `{path}` is not absolute")))?;
        self.0
            .iter()
            .filter_map(|root| Some((root, normal.strip_prefix(&root.path).ok()?)))
            // The innermost root wins when roots nest.
            .max_by_key(|(root, _)| root.path.components().count())
            .map(|(root, relative)| Resolved {
                root,
                relative: if relative.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    relative.to_path_buf()
                },
                original: path.to_owned(),
            })
            .ok_or_else(|| outside(path))
    }
}

/// A request path inside a root.
struct Resolved<'a> {
    root: &'a OpenRoot,
    relative: PathBuf,
    /// The path as the request gave it, for messages.
    original: String,
}

impl Resolved<'_> {
    fn is_root(&self) -> bool {
        self.relative == Path::new(".")
    }

    /// Refuses writes under a read-only root.
    fn writable(&self) -> Result<(), Error> {
        if self.root.writable {
            Ok(())
        } else {
            Err(Error {
                kind: ErrorKind::Denied,
                message: format!("path `{}` is in a read-only root", self.original),
            })
        }
    }

    /// Maps an I/O error on this path (PROTOCOL §9.2), naming escapes as outside the roots.
    fn io_error(&self, err: &io::Error) -> Error {
        io_error(&self.original, err)
    }
}

/// Makes `path` absolute-normal: `.` dropped, `..` applied lexically. `None` if relative.
fn normalize(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    let mut normal = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::Normal(part) => normal.push(part),
            Component::ParentDir => {
                normal.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(normal)
}

fn outside(path: &str) -> Error {
    Error {
        kind: ErrorKind::OutsideRoots,
        message: format!("path `{path}` is outside the allowed roots"),
    }
}

fn invalid(message: String) -> Error {
    Error {
        kind: ErrorKind::Invalid,
        message,
    }
}

fn is_escape(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied
        && err.to_string() == "a path led outside of the filesystem"
}

fn io_error(path: &str, err: &io::Error) -> Error {
    if is_escape(err) {
        return outside(path);
    }
    let kind = match err.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        io::ErrorKind::InvalidInput
        | io::ErrorKind::AlreadyExists
        | io::ErrorKind::NotADirectory
        | io::ErrorKind::IsADirectory
        | io::ErrorKind::DirectoryNotEmpty => ErrorKind::Invalid,
        _ => ErrorKind::Other,
    };
    Error {
        kind,
        message: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_lexical() {
        for (input, expected) in [
            ("/a/b/../c/./d", Some("/a/c/d")),
            ("/../../etc", Some("/etc")),
            ("/", Some("/")),
            ("a/b", None),
        ] {
            assert_eq!(
                normalize(Path::new(input)),
                expected.map(PathBuf::from),
                "{input}"
            );
        }
    }

    fn roots(dir: &Path) -> Roots {
        Roots::open(&[FsRoot {
            path: dir.to_path_buf(),
            writable: true,
        }])
        .unwrap()
    }

    #[test]
    fn rejects_escape_attempts() {
        let base = std::env::temp_dir().join(format!("wexec-fs-unit-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(base.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("abs-link")).unwrap();
        std::os::unix::fs::symlink("../secret", root.join("rel-link")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("dir-link")).unwrap();
        let roots = roots(&root);
        let root_str = root.display().to_string();
        let cases = [
            format!("{root_str}/../secret"),
            format!("{root_str}/sub/../../secret"),
            base.join("secret").display().to_string(),
            "/etc/passwd".to_owned(),
            format!("{root_str}/abs-link"),
            format!("{root_str}/rel-link"),
            format!("{root_str}/dir-link/secret"),
            "/proc/self/root/etc/passwd".to_owned(),
        ];
        for path in cases {
            let err = roots.read_file(&path, true).unwrap_err();
            assert_eq!(err.kind, ErrorKind::OutsideRoots, "{path}: {}", err.message);
            assert_eq!(
                err.message,
                format!("path `{path}` is outside the allowed roots")
            );
        }
        // Writing through a symlinked directory leading out creates nothing.
        let err = roots
            .write_file(&format!("{root_str}/dir-link/created"), b"x", true)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::OutsideRoots);
        assert!(!base.join("created").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
