//! The `filesystem` interface, confined to the plugin's granted roots.
//!
//! A request path is made absolute-normal lexically (`.`/`..` resolved without touching the
//! disk) and assigned to the innermost root that contains it; every operation then goes
//! through that root's cap-std `Dir` with the path relative to it. cap-std resolves symlinks
//! beneath the `Dir` (openat2 `RESOLVE_BENEATH` on Linux), so `..`, absolute symlinks and
//! symlinks leading out are refused before anything is created, changed, removed or revealed.

mod contents;
mod handles;
mod ops;

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

pub use self::contents::Contents;
pub use self::handles::{ConnectionHandles, FileHandles};
use super::bindings::wexec::plugin::filesystem::{Error, ErrorKind};
use crate::grants::FsRoot;

/// Largest whole-file read: 32 MiB, so its base64 fits a 64 MiB message.
pub const MAX_READ_FILE_BYTES: u64 = 32 * 1024 * 1024;

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
}

/// A plugin's opened roots.
#[derive(Debug, Default)]
pub struct Roots(Vec<OpenRoot>);

impl Roots {
    /// Whether no root was granted: every filesystem import is then denied.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Opens every granted root.
    pub fn open(roots: &[FsRoot]) -> io::Result<Self> {
        roots
            .iter()
            .map(|root| {
                Ok(OpenRoot {
                    path: root.path.clone(),
                    depth: root.path.components().count(),
                    writable: root.writable,
                    dir: Dir::open_ambient_dir(&root.path, ambient_authority())?,
                })
            })
            .collect::<io::Result<Vec<_>>>()
            .map(Self)
    }

    /// Finds the root containing `path` and the path relative to it (`.` for the root itself).
    /// Purely lexical: no I/O happens before the path is known to be inside a root.
    /// Symlinks on the way are then resolved under the root (`follow_last`: the final
    /// component too), so cap-std receives a path without them.
    fn resolve(&self, path: &str, follow_last: bool) -> Result<Resolved<'_>, Error> {
        let normal = if is_normal(path) {
            PathBuf::from(path)
        } else {
            normalize(Path::new(path))
                .ok_or_else(|| invalid(format!("path `{path}` is not absolute")))?
        };
        let (root, relative) = self
            .0
            .iter()
            .filter_map(|root| Some((root, beneath(&normal, &root.path)?)))
            // The innermost root wins when roots nest.
            .max_by_key(|(root, _)| root.depth)
            .ok_or_else(|| outside(path))?;
        let (relative, last) = resolve_links(root, relative, follow_last, path)?;
        Ok(Resolved {
            root,
            relative,
            last,
            original: path.to_owned(),
        })
    }
}

/// Most symlinks followed while resolving one path (Linux's own limit).
const MAX_LINK_HOPS: usize = 40;

/// Resolves the symlinks of `relative` (already lexically normal) under `root`, one component
/// at a time: relative targets are spliced in, absolute ones are accepted only when they point
/// inside the root (cap-std's beneath-resolution refuses every absolute link, even one that
/// stays inside), and `..` may not climb above the root. What cap-std then receives has no
/// symlinks left, yet cap-std still confines it: a link swapped in meanwhile fails closed.
/// Also returns what the final component's `lstat` said when it was checked and was no link,
/// which saves the read path a second lookup.
fn resolve_links(
    root: &OpenRoot,
    relative: &Path,
    follow_last: bool,
    original: &str,
) -> Result<(PathBuf, Option<cap_std::fs::Metadata>), Error> {
    // Most paths have no symlink: they are checked in place, one component at a time, and only
    // a symlink's splicing needs the queue below.
    let mut resolved = PathBuf::with_capacity(relative.as_os_str().len());
    let mut names = relative.iter().peekable();
    let mut last = None;
    while let Some(name) = names.next() {
        resolved.push(name);
        let follow = follow_last || names.peek().is_some();
        let meta = if follow {
            root.dir.symlink_metadata(&resolved).ok()
        } else {
            None
        };
        if meta.as_ref().is_some_and(cap_std::fs::Metadata::is_symlink) {
            resolved.pop();
            let pending = std::iter::once(name)
                .chain(names)
                .map(std::ffi::OsStr::to_os_string);
            return resolve_spliced(root, resolved, pending.collect(), follow_last, original);
        }
        last = meta.filter(|_| names.peek().is_none());
    }
    if resolved.as_os_str().is_empty() {
        return Ok((PathBuf::from("."), None));
    }
    Ok((resolved, last))
}

/// [`resolve_links`] from its first symlink on: `resolved` so far, then the `pending` names.
fn resolve_spliced(
    root: &OpenRoot,
    mut resolved: PathBuf,
    mut pending: std::collections::VecDeque<std::ffi::OsString>,
    follow_last: bool,
    original: &str,
) -> Result<(PathBuf, Option<cap_std::fs::Metadata>), Error> {
    let mut last = None;
    let mut hops = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            if !resolved.pop() {
                return Err(outside(original));
            }
            continue;
        }
        if name == "." || name.is_empty() {
            continue;
        }
        let candidate = resolved.join(&name);
        let follow = follow_last || !pending.is_empty();
        let meta = if follow {
            root.dir.symlink_metadata(&candidate).ok()
        } else {
            None
        };
        if !meta.as_ref().is_some_and(cap_std::fs::Metadata::is_symlink) {
            last = meta.filter(|_| pending.is_empty());
            resolved = candidate;
            continue;
        }
        hops += 1;
        if hops > MAX_LINK_HOPS {
            return Err(invalid(format!(
                "path `{original}` has too many levels of symbolic links"
            )));
        }
        let target = root
            .dir
            .read_link_contents(&candidate)
            .map_err(|err| io_error(original, &err))?;
        let spliced: Vec<std::ffi::OsString> = if target.is_absolute() {
            let normal = normalize(&target).ok_or_else(|| outside(original))?;
            let inside = normal
                .strip_prefix(&root.path)
                .map_err(|_| outside(original))?;
            resolved = PathBuf::new();
            inside.iter().map(std::ffi::OsStr::to_os_string).collect()
        } else {
            target
                .components()
                .map(|component| component.as_os_str().to_os_string())
                .collect()
        };
        for part in spliced.into_iter().rev() {
            pending.push_front(part);
        }
    }
    if resolved.as_os_str().is_empty() {
        return Ok((PathBuf::from("."), None));
    }
    Ok((resolved, last))
}

/// A request path inside a root.
struct Resolved<'a> {
    root: &'a OpenRoot,
    relative: PathBuf,
    /// The final component's `lstat`, when resolution made one and it was no symlink.
    last: Option<cap_std::fs::Metadata>,
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

/// Whether `path` is already absolute-normal, as most request paths are: absolute, without an
/// empty, `.` or `..` component, without a trailing `/` (save `/` itself). [`normalize`] would
/// return it unchanged, so this check spares it the work.
fn is_normal(path: &str) -> bool {
    path == "/"
        || path.strip_prefix('/').is_some_and(|rest| {
            rest.split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..")
        })
}

/// `path` relative to `root` (empty for the root itself) if it is `root` or beneath it; both
/// are absolute-normal, so comparing bytes is comparing components.
fn beneath<'a>(path: &'a Path, root: &Path) -> Option<&'a Path> {
    use std::os::unix::ffi::OsStrExt;
    let (path, root) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    let rest = path.strip_prefix(root)?;
    // Beneath `/`, or the root itself: nothing separates the rest.
    let relative = if root == b"/" || rest.is_empty() {
        rest
    } else {
        rest.strip_prefix(b"/")?
    };
    Some(Path::new(std::ffi::OsStr::from_bytes(relative)))
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
        // An absolute link that stays inside the root is followed.
        std::fs::write(root.join("sub/inner.txt"), "in").unwrap();
        std::os::unix::fs::symlink(root.join("sub/inner.txt"), root.join("abs-inside")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("abs-dir")).unwrap();
        assert_eq!(
            roots
                .read_file(&format!("{root_str}/abs-inside"), true)
                .unwrap(),
            b"in"
        );
        assert_eq!(
            roots
                .read_file(&format!("{root_str}/abs-dir/inner.txt"), true)
                .unwrap(),
            b"in"
        );
        // Writing through a symlinked directory leading out creates nothing.
        let err = roots
            .write_file(&format!("{root_str}/dir-link/created"), b"x", true)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::OutsideRoots);
        assert!(!base.join("created").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
