//! The filesystem a plugin is granted: its roots, opened, and every operation confined to
//! them and to the call's sandbox. Plain Rust values in and out (`fs/types.rs`); the WIT
//! `filesystem` interface (`host/filesystem.rs`) is the edge that serves it to guests.
//!
//! A request path is made absolute-normal lexically (`.`/`..` resolved without touching the
//! disk), assigned to the innermost root that contains it, and resolved inside that root in
//! time linear in its length (`fs/resolve.rs`); every operation then goes through that root's
//! cap-std `Dir` with the symlink-free path relative to it. cap-std confines the operation
//! beneath the `Dir` (openat2 `RESOLVE_BENEATH` on Linux), so `..`, absolute symlinks and
//! symlinks leading out are refused before anything is created, changed, removed or revealed.
//! Files are only ever opened non-blocking and checked to be regular files on the opened
//! descriptor, so no FIFO or device inside a root can hold a thread (`fs/open.rs`).

mod handles;
mod inotify;
mod open;
mod ops;
mod policy;
mod resolve;
mod tree;
mod types;
mod watch;

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

pub use self::handles::{ConnectionHandles, FileHandles, PerPlugin};
pub use self::policy::{FsPolicy, Refusal};
pub use self::types::{DirEntry, Error, ErrorKind, FileKind, Metadata, OpenMode};
pub use self::watch::{WatchSlot, Watching, watch};
use crate::grants::FsRoot;

pub use wexec_protocol::limits::MAX_READ_FILE_BYTES;

/// Most directory entries returned by one listing.
pub const MAX_DIRECTORY_ENTRIES: usize = 50_000;

/// One granted root, opened.
#[derive(Debug)]
pub struct OpenRoot {
    /// Canonical, so absolute-normal.
    path: PathBuf,
    /// Its number of components: among nested roots, the deepest holds a path.
    depth: usize,
    writable: bool,
    dir: Dir,
    /// Paths inside the root that are never exposed (wexec's own compile cache, config and
    /// plugin files), relative to it: a path resolving into one is outside the roots, and
    /// listings omit it.
    hidden: Vec<PathBuf>,
    /// Read-only roots nested inside this one, relative to it: a path of this root that
    /// resolves into one (through a symlink) is read-only there too.
    read_only_inside: Vec<PathBuf>,
}

impl OpenRoot {
    /// Whether `relative` (symlink-free, normal) is or lies inside a hidden directory.
    fn hides(&self, relative: &Path) -> bool {
        self.hidden
            .iter()
            .any(|hidden| relative.starts_with(hidden))
    }

    /// Whether `relative` (symlink-free, normal, not the root) leads to a hidden directory:
    /// removed or replaced (say by a symlink), it would move what the hidden path names.
    fn leads_to_hidden(&self, relative: &Path) -> bool {
        !relative.as_os_str().is_empty()
            && relative != Path::new(".")
            && self
                .hidden
                .iter()
                .any(|hidden| hidden.starts_with(relative))
    }
}

/// A plugin's opened roots.
#[derive(Debug, Default)]
pub struct Roots(Vec<OpenRoot>);

impl Roots {
    /// Whether no root was granted: every filesystem import is then denied.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Opens every granted root; `hidden` (absolute, canonical) directories inside them are
    /// never exposed.
    pub fn open(roots: &[FsRoot], hidden: &[PathBuf]) -> io::Result<Self> {
        let inside = |root: &FsRoot, paths: &mut dyn Iterator<Item = &PathBuf>| -> Vec<PathBuf> {
            paths
                .filter_map(|path| path.strip_prefix(&root.path).ok())
                .filter(|relative| !relative.as_os_str().is_empty())
                .map(Path::to_path_buf)
                .collect()
        };
        roots
            .iter()
            .map(|root| {
                Ok(OpenRoot {
                    path: root.path.clone(),
                    depth: root.path.components().count(),
                    writable: root.writable,
                    dir: Dir::open_ambient_dir(&root.path, ambient_authority())?,
                    hidden: inside(root, &mut hidden.iter()),
                    read_only_inside: inside(
                        root,
                        &mut roots
                            .iter()
                            .filter(|other| !other.writable)
                            .map(|other| &other.path),
                    ),
                })
            })
            .collect::<io::Result<Vec<_>>>()
            .map(Self)
    }
}

impl resolve::Resolved<'_> {
    /// Refuses writes under a read-only root (also one this path reached through a symlink
    /// from a writable root it is nested in), and to a directory leading to a hidden path.
    fn writable(&self) -> Result<(), Error> {
        // Inside a nested read-only root, or leading to one (a recursive remove would empty it).
        let read_only = !self.root.writable
            || (!self.is_root()
                && self.root.read_only_inside.iter().any(|nested| {
                    self.relative.starts_with(nested) || nested.starts_with(&self.relative)
                }));
        if read_only {
            return Err(Error {
                kind: ErrorKind::Denied,
                message: format!("path `{}` is in a read-only root", self.original),
            });
        }
        if self.root.leads_to_hidden(&self.relative) {
            return Err(Error {
                kind: ErrorKind::Denied,
                message: format!(
                    "path `{}` holds wexec's own files (its compile cache, config or plugins) and cannot be changed",
                    self.original
                ),
            });
        }
        Ok(())
    }

    /// Maps an I/O error on this path (docs/protocol.md §9.2), naming escapes as outside the roots.
    fn io_error(&self, err: &io::Error) -> Error {
        io_error(&self.original, err)
    }
}

/// The entry `name` of `directory`, a path relative to a root (`.` for the root itself).
fn child_of(directory: &Path, name: &std::ffi::OsStr) -> PathBuf {
    if directory == Path::new(".") {
        PathBuf::from(name)
    } else {
        directory.join(name)
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

pub(crate) fn invalid(message: String) -> Error {
    Error {
        kind: ErrorKind::Invalid,
        message,
    }
}

/// Whether cap-std refused `err` because the path led out of its `Dir`. It makes that error
/// itself (from the kernel's EXDEV under `RESOLVE_BENEATH`, or its own checks) with no OS error
/// code, while a denial by the kernel (EACCES, EPERM) always carries one: the code tells them
/// apart, not the message.
fn is_escape(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none()
}

fn io_error(path: &str, err: &io::Error) -> Error {
    if is_escape(err) {
        return outside(path);
    }
    let kind = match err.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        io::ErrorKind::InvalidInput => ErrorKind::Invalid,
        // `EEXIST`, `ENOTDIR`, `EISDIR`, `ENOTEMPTY`, `EROFS`, `ELOOP`, `EBADF`... are internal
        // errors, as Codex's server answers them (docs/protocol.md §9.2).
        _ => ErrorKind::Other,
    };
    Error {
        kind,
        message: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::resolve::{beneath, is_normal};
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

    #[test]
    fn the_normal_fast_path_agrees_with_normalize() {
        for input in [
            "/",
            "/a",
            "/a/b",
            "/a/b/",
            "//a",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/.",
            "/..",
            "/a/.",
            "/a/..",
            "/.a/..b/...",
            "a/b",
            "",
            "/a b/ü",
        ] {
            // Compared as text: `Path` equality ignores a trailing `/`.
            let normal = normalize(Path::new(input)).map(PathBuf::into_os_string);
            assert_eq!(
                normal.as_deref() == Some(std::ffi::OsStr::new(input)),
                is_normal(input),
                "{input}"
            );
        }
    }

    #[test]
    fn beneath_compares_whole_components() {
        let cases = [
            ("/tmp/root/f", "/tmp/root", Some("f")),
            ("/tmp/root/a/b", "/tmp/root", Some("a/b")),
            ("/tmp/root", "/tmp/root", Some("")),
            ("/tmp/rootless/f", "/tmp/root", None),
            ("/tmp/roo", "/tmp/root", None),
            ("/etc", "/tmp/root", None),
            ("/etc/passwd", "/", Some("etc/passwd")),
            ("/", "/", Some("")),
        ];
        for (path, root, expected) in cases {
            let got = beneath(Path::new(path), Path::new(root));
            assert_eq!(got, expected.map(Path::new), "{path} under {root}");
            assert_eq!(
                got,
                Path::new(path).strip_prefix(root).ok(),
                "{path} under {root}: as std says"
            );
        }
    }

    fn roots(dir: &Path) -> Roots {
        Roots::open(
            &[FsRoot {
                path: dir.to_path_buf(),
                writable: true,
            }],
            &[],
        )
        .unwrap()
    }

    #[test]
    fn only_cap_std_refusals_count_as_escapes() {
        let kernel = io::Error::from(rustix::io::Errno::ACCESS);
        assert_eq!(kernel.kind(), io::ErrorKind::PermissionDenied);
        assert!(!is_escape(&kernel));
        assert_eq!(io_error("/r/x", &kernel).kind, ErrorKind::PermissionDenied);
        // What cap-std makes of a path leading out (its own wording, no OS code).
        let escape = io::Error::new(io::ErrorKind::PermissionDenied, "any text at all");
        assert!(is_escape(&escape));
        assert_eq!(io_error("/r/x", &escape).kind, ErrorKind::OutsideRoots);
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
            let err = roots.read_file(&path, true, None).unwrap_err();
            assert_eq!(err.kind, ErrorKind::OutsideRoots, "{path}: {}", err.message);
            assert_eq!(
                err.message,
                format!("path `{path}` is outside the allowed roots")
            );
        }
        // An absolute link that stays inside the root is followed.
        std::fs::write(root.join("sub/inner.txt"), "in").unwrap();
        std::os::unix::fs::symlink(root.join("sub/inner.txt"), root.join("abs-inside")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("abs-dir")).unwrap();
        assert_eq!(
            roots
                .read_file(&format!("{root_str}/abs-inside"), true, None)
                .unwrap(),
            b"in"
        );
        assert_eq!(
            roots
                .read_file(&format!("{root_str}/abs-dir/inner.txt"), true, None)
                .unwrap(),
            b"in"
        );
        // Writing through a symlinked directory leading out creates nothing.
        let err = roots
            .write_file(&format!("{root_str}/dir-link/created"), b"x", true, None)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::OutsideRoots);
        assert!(!base.join("created").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_read_only_root_nested_in_a_writable_one_stays_read_only_through_links() {
        let base = std::env::temp_dir().join(format!("wexec-fs-nested-{}", std::process::id()));
        let (outer, inner) = (base.join("a"), base.join("a/b/ro"));
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(inner.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink("b/ro", outer.join("dirlink")).unwrap();
        std::os::unix::fs::symlink("b/ro/secret", outer.join("filelink")).unwrap();
        let roots = Roots::open(
            &[
                FsRoot {
                    path: outer.clone(),
                    writable: true,
                },
                FsRoot {
                    path: inner.clone(),
                    writable: false,
                },
            ],
            &[],
        )
        .unwrap();
        let outer = outer.display().to_string();
        let refused = |result: Result<(), Error>, what: &str| {
            let err = result.unwrap_err();
            assert_eq!(err.kind, ErrorKind::Denied, "{what}: {}", err.message);
            assert!(
                err.message.contains("read-only root"),
                "{what}: {}",
                err.message
            );
        };
        let write = |path: &str| roots.write_file(path, b"x", true, None);
        refused(
            write(&format!("{outer}/dirlink/secret")),
            "through a directory link",
        );
        refused(
            write(&format!("{outer}/dirlink/new")),
            "a new file through a link",
        );
        refused(write(&format!("{outer}/filelink")), "through a file link");
        refused(
            roots.remove(&format!("{outer}/dirlink/secret"), false, false, None),
            "a remove through a link",
        );
        refused(
            roots.remove(&format!("{outer}/b"), true, false, None),
            "a recursive remove of the nested root's parent",
        );
        assert_eq!(std::fs::read(inner.join("secret")).unwrap(), b"s");
        assert!(!inner.join("new").exists());
        // The writable root itself is still writable around it.
        write(&format!("{outer}/b/other")).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }
}
