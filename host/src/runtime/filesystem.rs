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
    /// Symlinks on the way are then resolved under the root (`follow_last`: the final
    /// component too), so cap-std receives a path without them.
    fn resolve(&self, path: &str, follow_last: bool) -> Result<Resolved<'_>, Error> {
        let normal = normalize(Path::new(path))
            .ok_or_else(|| invalid(format!("path `{path}` is not absolute")))?;
        let (root, relative) = self
            .0
            .iter()
            .filter_map(|root| Some((root, normal.strip_prefix(&root.path).ok()?)))
            // The innermost root wins when roots nest.
            .max_by_key(|(root, _)| root.path.components().count())
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
    let mut pending: std::collections::VecDeque<std::ffi::OsString> =
        relative.iter().map(std::ffi::OsStr::to_os_string).collect();
    let mut resolved = PathBuf::new();
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
