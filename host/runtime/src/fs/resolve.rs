//! Resolution of a request path inside its root, in time linear in the path's length.
//!
//! The path is first made absolute-normal lexically and assigned to the innermost root that
//! contains it (no I/O). Its components are then walked one at a time from the root, each
//! looked up relative to the directory reached so far (an `O_PATH` descriptor), so a lookup
//! costs the same at any depth. A symlink met on the way is read and its target spliced in:
//! relative targets continue from where the link is, absolute ones must point inside the root,
//! and `..` may not climb above it. What the walk returns has no symlinks left; the operation
//! then goes through the root's cap-std `Dir`, which confines it once more, so a link swapped
//! in meanwhile fails closed.
//!
//! Bounds (docs/plugins.md, "Filesystem"): a request path of at most [`MAX_PATH_BYTES`] bytes,
//! at most [`MAX_PATH_COMPONENTS`] components walked (those symlinks splice in included), at
//! most [`MAX_LINK_HOPS`] symlinks followed.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::{Error, OpenRoot, Roots, invalid, io_error, normalize, outside};

pub use wexec_protocol::limits::{MAX_PATH_BYTES, MAX_PATH_COMPONENTS};

/// Most symlinks followed while resolving one path (Linux's own limit).
pub const MAX_LINK_HOPS: usize = 40;

/// A request path inside a root.
pub struct Resolved<'a> {
    /// The root the path is in.
    pub root: &'a OpenRoot,
    /// Relative to the root, without symlinks, `.` or `..`; `.` for the root itself.
    pub relative: PathBuf,
    /// The final component's `lstat`, when resolution made one and it was no symlink.
    pub last: Option<Stat>,
    /// Whether every component exists (the walk reached the end).
    pub exists: bool,
    /// The path as the request gave it, for messages.
    pub original: String,
}

impl Resolved<'_> {
    /// Whether this is the root itself.
    pub fn is_root(&self) -> bool {
        self.relative == Path::new(".")
    }

    /// The absolute, symlink-free path (the root's canonical path joined with `relative`).
    pub fn absolute(&self) -> PathBuf {
        if self.is_root() {
            self.root.path.clone()
        } else {
            self.root.path.join(&self.relative)
        }
    }
}

impl Roots {
    /// Finds the root containing `path` and resolves the path inside it (`follow_last`: the
    /// final component's symlink too). Nothing is looked up before the path is known to be
    /// inside a root and within the bounds.
    pub(super) fn resolve<'a>(
        &'a self,
        path: &str,
        follow_last: bool,
    ) -> Result<Resolved<'a>, Error> {
        let (root, relative) = self.locate(path)?;
        let mut walk = Walk::new(root, path);
        walk.components(relative.iter(), follow_last)?;
        walk.finish()
    }

    /// Resolves `path` following no symlink at all (`followSymlinks: false`, as Codex's server
    /// does it): one before the last component fails with `ENOTDIR`, as `O_NOFOLLOW |
    /// O_DIRECTORY` fails it; the last one is left to the operation.
    pub(super) fn resolve_without_links<'a>(&'a self, path: &str) -> Result<Resolved<'a>, Error> {
        let (root, relative) = self.locate(path)?;
        let mut walk = Walk::new(root, path);
        walk.refuse_links = true;
        walk.components(relative.iter(), false)?;
        walk.finish()
    }

    /// Resolves `path` following every symlink inside the root (`follow`), or none.
    pub(super) fn resolve_following<'a>(
        &'a self,
        path: &str,
        follow: bool,
    ) -> Result<Resolved<'a>, Error> {
        if follow {
            self.resolve(path, true)
        } else {
            self.resolve_without_links(path)
        }
    }

    /// The innermost root holding `path`, and the path relative to it. Purely lexical.
    fn locate(&self, path: &str) -> Result<(&OpenRoot, PathBuf), Error> {
        if path.len() > MAX_PATH_BYTES {
            let shown: String = path.chars().take(64).collect();
            return Err(invalid(format!(
                "path `{shown}…` is {} bytes long; the limit is {MAX_PATH_BYTES} bytes",
                path.len()
            )));
        }
        let normal = if is_normal(path) {
            PathBuf::from(path)
        } else {
            normalize(Path::new(path))
                .ok_or_else(|| invalid(format!("path `{path}` is not absolute")))?
        };
        self.0
            .iter()
            .filter_map(|root| Some((root, beneath(&normal, &root.path)?)))
            // The innermost root wins when roots nest.
            .max_by_key(|(root, _)| root.depth)
            .map(|(root, relative)| (root, relative.to_path_buf()))
            .ok_or_else(|| outside(path))
    }

    /// Resolves the entry `name` of the directory `directory` resolved to, following it if it
    /// is a symlink, without walking the directory's path again. Adds the components it
    /// walked to `steps`, so a listing can bound the work of all its entries together.
    pub(super) fn resolve_entry<'a>(
        &'a self,
        directory: &Walk<'a, '_>,
        name: &OsStr,
        steps: &mut usize,
    ) -> Result<Resolved<'a>, Error> {
        let mut walk = directory.clone();
        let walked = walk.components(std::iter::once(name), true);
        *steps += walk.steps - directory.steps;
        walked?;
        walk.finish()
    }

    /// Resolves `path`, a directory, keeping the walk so that its entries can be resolved from
    /// it ([`Roots::resolve_entry`]).
    pub(super) fn resolve_directory<'a, 'p>(
        &'a self,
        path: &'p str,
    ) -> Result<(Resolved<'a>, Walk<'a, 'p>), Error> {
        let (root, relative) = self.locate(path)?;
        let mut walk = Walk::new(root, path);
        walk.components(relative.iter(), true)?;
        let mut entries = walk.clone();
        entries.enter()?;
        Ok((walk.finish()?, entries))
    }
}

/// A walk in progress. Cloning it is cheap (the open directories are shared), so a directory's
/// entries can each be resolved from it.
#[derive(Clone)]
pub struct Walk<'a, 'p> {
    root: &'a OpenRoot,
    /// The directories entered below the root, innermost last: the first `dirs.len()`
    /// components of `relative`.
    dirs: Vec<Rc<OwnedFd>>,
    relative: PathBuf,
    /// How many of `relative`'s last components have no descriptor in `dirs` (the final
    /// component, or those taken as written once stopped).
    tail: usize,
    last: Option<Stat>,
    /// A component did not exist or was no directory: the rest is taken as written (nothing
    /// below it can be a symlink, and `..` applies lexically), and the operation reports the
    /// error.
    stopped: bool,
    hops: usize,
    steps: usize,
    /// A symlink before the last component is an error instead of being followed.
    refuse_links: bool,
    original: &'p str,
}

impl<'a, 'p> Walk<'a, 'p> {
    fn new(root: &'a OpenRoot, original: &'p str) -> Self {
        Self {
            root,
            dirs: Vec::new(),
            relative: PathBuf::new(),
            tail: 0,
            last: None,
            stopped: false,
            hops: 0,
            steps: 0,
            refuse_links: false,
            original,
        }
    }

    /// The directory reached so far.
    fn current(&self) -> BorrowedFd<'_> {
        match self.dirs.last() {
            Some(dir) => dir.as_fd(),
            None => self.root.dir.as_fd(),
        }
    }

    /// Walks `names`. Most paths have no symlink: their components are checked in place, and
    /// only a symlink's splicing needs a queue.
    fn components<'n>(
        &mut self,
        names: impl Iterator<Item = &'n OsStr>,
        follow_last: bool,
    ) -> Result<(), Error> {
        let mut names = names.peekable();
        while let Some(name) = names.next() {
            let is_last = names.peek().is_none();
            if let Some(target) = self.step(name, is_last, follow_last)? {
                let mut pending: VecDeque<OsString> = names.map(OsStr::to_os_string).collect();
                self.splice(target, &mut pending)?;
                return self.queued(pending, follow_last);
            }
        }
        Ok(())
    }

    /// Walks the queue a symlink's splicing made.
    fn queued(&mut self, mut pending: VecDeque<OsString>, follow_last: bool) -> Result<(), Error> {
        while let Some(name) = pending.pop_front() {
            if name == ".." {
                self.parent()?;
                continue;
            }
            if name == "." || name.is_empty() {
                continue;
            }
            if let Some(target) = self.step(&name, pending.is_empty(), follow_last)? {
                self.splice(target, &mut pending)?;
            }
        }
        Ok(())
    }

    /// Takes one normal component. Returns a symlink's target when the component is a symlink
    /// to follow; it is then not added.
    fn step(
        &mut self,
        name: &OsStr,
        is_last: bool,
        follow_last: bool,
    ) -> Result<Option<PathBuf>, Error> {
        self.steps += 1;
        if self.steps > MAX_PATH_COMPONENTS {
            return Err(invalid(format!(
                "path `{}` has more than {MAX_PATH_COMPONENTS} components to resolve",
                self.original
            )));
        }
        self.last = None;
        if self.stopped || (is_last && !follow_last) {
            self.push_as_written(name);
            return Ok(None);
        }
        if is_last {
            match rustix::fs::statat(self.current(), name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) if is_symlink(&stat) => return self.read_link(name).map(Some),
                Ok(stat) => self.last = Some(stat),
                Err(_) => self.stopped = true,
            }
            self.push_as_written(name);
            return Ok(None);
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(self.current(), name, flags, Mode::empty()) {
            Ok(dir) => {
                self.dirs.push(Rc::new(dir));
                self.relative.push(name);
                return Ok(None);
            }
            // A symlink, or no directory at all: which one, an lstat tells.
            Err(Errno::NOTDIR | Errno::LOOP) => {
                let stat = rustix::fs::statat(self.current(), name, AtFlags::SYMLINK_NOFOLLOW);
                if stat.is_ok_and(|stat| is_symlink(&stat)) {
                    return self.read_link(name).map(Some);
                }
                self.stopped = true;
            }
            Err(_) => self.stopped = true,
        }
        self.push_as_written(name);
        Ok(None)
    }

    /// Adds a component without entering it.
    fn push_as_written(&mut self, name: &OsStr) {
        self.relative.push(name);
        self.tail += 1;
    }

    fn read_link(&mut self, name: &OsStr) -> Result<PathBuf, Error> {
        if self.refuse_links {
            return Err(io_error(self.original, &Errno::NOTDIR.into()));
        }
        self.hops += 1;
        if self.hops > MAX_LINK_HOPS {
            return Err(invalid(format!(
                "path `{}` has too many levels of symbolic links",
                self.original
            )));
        }
        let target = rustix::fs::readlinkat(self.current(), name, Vec::new())
            .map_err(|err| io_error(self.original, &err.into()))?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    /// Puts a symlink's target in front of `pending`: an absolute target restarts from the root
    /// (it must point inside it), a relative one continues from the link's directory.
    fn splice(&mut self, target: PathBuf, pending: &mut VecDeque<OsString>) -> Result<(), Error> {
        let parts: Vec<OsString> = if target.is_absolute() {
            let normal = normalize(&target).ok_or_else(|| outside(self.original))?;
            let inside = beneath(&normal, &self.root.path).ok_or_else(|| outside(self.original))?;
            self.dirs.clear();
            self.relative = PathBuf::new();
            self.tail = 0;
            self.stopped = false;
            inside.iter().map(OsStr::to_os_string).collect()
        } else {
            target
                .components()
                .map(|component| component.as_os_str().to_os_string())
                .collect()
        };
        if parts.len() + pending.len() + self.steps > MAX_PATH_COMPONENTS {
            return Err(invalid(format!(
                "path `{}` has more than {MAX_PATH_COMPONENTS} components to resolve",
                self.original
            )));
        }
        for part in parts.into_iter().rev() {
            pending.push_front(part);
        }
        Ok(())
    }

    /// `..` spliced in by a symlink: back to the parent, never above the root. A step like any
    /// other (the splice already counted it).
    fn parent(&mut self) -> Result<(), Error> {
        self.steps += 1;
        if !self.relative.pop() {
            return Err(outside(self.original));
        }
        if self.tail > 0 {
            self.tail -= 1;
        } else {
            self.dirs.pop();
        }
        // Back where every component has a descriptor: lookups resume.
        if self.tail == 0 {
            self.stopped = false;
        }
        self.last = None;
        Ok(())
    }

    /// Opens the final component as a directory, so entries can be resolved from it.
    fn enter(&mut self) -> Result<(), Error> {
        if self.stopped || self.tail != 1 {
            return Ok(());
        }
        let Some(name) = self.relative.file_name().map(OsStr::to_os_string) else {
            return Ok(());
        };
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = rustix::fs::openat(self.current(), &name, flags, Mode::empty())
            .map_err(|err| io_error(self.original, &err.into()))?;
        self.dirs.push(Rc::new(dir));
        self.tail = 0;
        Ok(())
    }

    fn finish(self) -> Result<Resolved<'a>, Error> {
        let relative = if self.relative.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            self.relative
        };
        if self.root.hides(&relative) {
            return Err(outside(self.original));
        }
        Ok(Resolved {
            root: self.root,
            exists: !self.stopped,
            last: self.last,
            relative,
            original: self.original.to_owned(),
        })
    }
}

fn is_symlink(stat: &Stat) -> bool {
    FileType::from_raw_mode(stat.st_mode) == FileType::Symlink
}

/// Whether `path` is already absolute-normal, as most request paths are: absolute, without an
/// empty, `.` or `..` component, without a trailing `/` (save `/` itself). [`normalize`] would
/// return it unchanged, so this check spares it the work.
pub(super) fn is_normal(path: &str) -> bool {
    path == "/"
        || path.strip_prefix('/').is_some_and(|rest| {
            rest.split('/')
                .all(|part| !part.is_empty() && part != "." && part != "..")
        })
}

/// `path` relative to `root` (empty for the root itself) if it is `root` or beneath it; both
/// are absolute-normal, so comparing bytes is comparing components.
pub(super) fn beneath<'a>(path: &'a Path, root: &Path) -> Option<&'a Path> {
    let (path, root) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    let rest = path.strip_prefix(root)?;
    // Beneath `/`, or the root itself: nothing separates the rest.
    let relative = if root == b"/" || rest.is_empty() {
        rest
    } else {
        rest.strip_prefix(b"/")?
    };
    Some(Path::new(OsStr::from_bytes(relative)))
}

/// What a watch finds at a path (docs/protocol.md §9.6), looked up without following any
/// symlink. Descriptors are `O_PATH`, for inotify to watch through `/proc/self/fd`.
#[derive(Debug)]
pub enum Probe {
    /// Outside every root, or in a hidden directory: never looked at.
    Outside,
    /// The path exists (as anything, a symlink included).
    Exists {
        /// The path itself (a symlink is not followed).
        at: OwnedFd,
        /// Its directory; `None` for a root.
        parent: Option<(OwnedFd, OsString)>,
        symlink: bool,
    },
    /// The path is missing: `name` does not exist in `ancestor`, its nearest existing
    /// ancestor, a directory.
    Missing { ancestor: OwnedFd, name: OsString },
    /// An existing ancestor is a symlink, not a directory, or cannot be looked up.
    Unwatchable,
}

impl Roots {
    /// Looks `path` (absolute-normal) up for a watch, following no symlink.
    pub(super) fn probe(&self, path: &str) -> Probe {
        let Ok((root, relative)) = self.locate(path) else {
            return Probe::Outside;
        };
        if root.hides(&relative) {
            return Probe::Outside;
        }
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let here = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let Ok(mut current) = rustix::fs::openat(&root.dir, ".", here, Mode::empty()) else {
            return Probe::Unwatchable;
        };
        let names: Vec<&OsStr> = relative.iter().collect();
        if names.len() > MAX_PATH_COMPONENTS {
            return Probe::Unwatchable;
        }
        let Some((last, above)) = names.split_last() else {
            return Probe::Exists {
                at: current,
                parent: None,
                symlink: false,
            };
        };
        for name in above {
            match rustix::fs::openat(&current, *name, flags, Mode::empty()) {
                Ok(dir) => current = dir,
                Err(Errno::NOENT) => {
                    return Probe::Missing {
                        ancestor: current,
                        name: name.to_os_string(),
                    };
                }
                Err(_) => return Probe::Unwatchable,
            }
        }
        match rustix::fs::statat(&current, *last, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => {
                let at = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                match rustix::fs::openat(&current, *last, at, Mode::empty()) {
                    Ok(at) => Probe::Exists {
                        at,
                        parent: Some((current, last.to_os_string())),
                        symlink: is_symlink(&stat),
                    },
                    Err(_) => Probe::Unwatchable,
                }
            }
            Err(Errno::NOENT) => Probe::Missing {
                ancestor: current,
                name: last.to_os_string(),
            },
            Err(_) => Probe::Unwatchable,
        }
    }
}
