//! The confined program's view of the filesystem, built in a new mount namespace (owned by a
//! new user namespace) from a [`Confinement`]'s layers, as bubblewrap builds its own: the root
//! (a read-only or writable clone of the host's `/`, or an empty tmpfs), each layer mounted
//! over the last (clones keep the host's submounts, `nosuid` and `nodev`), a private `/dev`,
//! and later the PID namespace's `/proc` ([`super::init`]). Everything is staged on
//! [`STAGE`] and becomes `/` by `pivot_root` in the namespace's init.
//!
//! Runs in the helper, a single-threaded process: allocation is fine.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, FileType, Mode};
use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};

use super::SetupError;
use crate::process::supervisor::wire::{Confinement, LayerAccess};

/// Where the view is assembled. Any directory works: it is mounted over in this namespace
/// only, after every host path the view needs was cloned.
pub const STAGE: &str = "/tmp";

/// Top-level links a merged-`/usr` system needs in an empty root (`/bin -> usr/bin`).
const ROOT_LINKS: [&str; 6] = ["bin", "sbin", "lib", "lib64", "lib32", "libx32"];

const MOUNT: &str = "mount namespaces";

/// One layer, cloned from the host before anything is mounted over it.
struct Prepared {
    path: PathBuf,
    access: LayerAccess,
    kind: Kind,
    /// The detached clone to attach (`Read`, `Write`).
    tree: Option<OwnedFd>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Directory,
    File,
    Link,
}

/// Builds the view on [`STAGE`]; the namespace's init then mounts `/proc` and pivots.
/// Returns whether the root is an empty tmpfs (remounted read-only after the pivot).
pub fn build(confinement: &Confinement) -> Result<bool, SetupError> {
    let mount_err = |err: rustix::io::Errno| SetupError::new(err, MOUNT);
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(mount_err)?;
    let Some((root, layers)) = confinement.layers.split_first() else {
        return Err(SetupError::new(rustix::io::Errno::INVAL, MOUNT));
    };
    // Clone first: once the stage is mounted over, host paths below it are out of reach.
    let base = match root.access {
        LayerAccess::Read | LayerAccess::Write => Some(clone_tree(Path::new("/"), root.access)?),
        LayerAccess::Absent | LayerAccess::Hidden => None,
    };
    let mut prepared: Vec<Prepared> = Vec::with_capacity(layers.len());
    for layer in with_pins(root.access, layers) {
        // Opened without following any symlink: a component replaced by a link since wexec
        // canonicalized the path must not carry a layer elsewhere.
        let opened = rustix::fs::openat2(
            CWD,
            &layer.path,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
        );
        let fd = match opened {
            Ok(fd) => fd,
            // Missing: nothing to show or to hide (wexec made placeholders).
            Err(rustix::io::Errno::NOENT) => continue,
            // A link on the way: dropping a writable layer only narrows; anything else would
            // lift a restriction.
            Err(_) if layer.access == LayerAccess::Write => continue,
            Err(err) => return Err(mount_err(err)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(mount_err)?;
        let kind = match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => Kind::Directory,
            FileType::Symlink => Kind::Link,
            _ => Kind::File,
        };
        let tree = match layer.access {
            LayerAccess::Read | LayerAccess::Write if kind != Kind::Link => {
                Some(clone_tree_at(&fd, layer.access)?)
            }
            _ => None,
        };
        prepared.push(Prepared {
            path: layer.path,
            access: layer.access,
            kind,
            tree,
        });
    }
    let empty_root = base.is_none();
    match base {
        Some(tree) => attach(&tree, Path::new(STAGE))?,
        None => {
            rustix::mount::mount(
                "tmpfs",
                STAGE,
                "tmpfs",
                MountFlags::NOSUID | MountFlags::NODEV,
                Some(c"mode=0755"),
            )
            .map_err(mount_err)?;
            for name in ROOT_LINKS {
                let host = Path::new("/").join(name);
                if let Ok(target) = std::fs::read_link(&host) {
                    let _ = std::os::unix::fs::symlink(target, staged(&host));
                }
            }
        }
    }
    let mut hidden = None;
    for layer in &prepared {
        let target = staged(&layer.path);
        if empty_root {
            make_mount_point(&target, layer.kind)?;
        }
        match (layer.access, &layer.tree) {
            (_, Some(tree)) => attach(tree, &target)?,
            (LayerAccess::Read | LayerAccess::Write, None) => {
                // A link: shown as the host has it (its target is governed by its own layer).
                if empty_root && let Ok(link) = std::fs::read_link(&layer.path) {
                    let _ = std::fs::remove_file(&target);
                    let _ = std::os::unix::fs::symlink(link, &target);
                }
            }
            (LayerAccess::Hidden | LayerAccess::Absent, _) => {
                if hidden.is_none() {
                    hidden = Some(hidden_tree()?);
                }
                if let Some(scratch) = &hidden {
                    let name = if layer.kind == Kind::Directory {
                        "d"
                    } else {
                        "f"
                    };
                    let tree = rustix::mount::open_tree(
                        scratch,
                        name,
                        OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
                    )
                    .map_err(mount_err)?;
                    // A link cannot be mounted over: hide what it points to instead, unless
                    // that is already out of sight.
                    if layer.kind != Kind::Link {
                        attach(&tree, &target)?;
                    }
                }
            }
        }
    }
    if root.access != LayerAccess::Write {
        private_dev(empty_root)?;
    }
    if empty_root {
        let _ = std::fs::create_dir(staged(Path::new("/proc")));
    }
    Ok(empty_root)
}

/// A layer to mount.
struct Wanted {
    path: PathBuf,
    access: LayerAccess,
}

/// The layers, parents first, plus *pins*: every directory between a layer and the writable
/// layer it lies in, mounted on itself with the same access, so that no directory on the way
/// to a writable root or a carve-out can be renamed (a mount point cannot be: `EBUSY`), and a
/// look-alike tree put in its place.
fn with_pins(root: LayerAccess, layers: &[crate::process::supervisor::wire::Layer]) -> Vec<Wanted> {
    let mut wanted: Vec<Wanted> = Vec::new();
    let mut placed: Vec<(PathBuf, LayerAccess)> = vec![(PathBuf::from("/"), root)];
    for layer in layers {
        let path = PathBuf::from(&layer.path);
        let (outer, access) = placed
            .iter()
            .filter(|(outer, _)| path.starts_with(outer) && *outer != path)
            .max_by_key(|(outer, _)| outer.components().count())
            .cloned()
            .unwrap_or((PathBuf::from("/"), root));
        if access == LayerAccess::Write {
            let mut between: Vec<PathBuf> = path
                .ancestors()
                .skip(1)
                .take_while(|ancestor| *ancestor != outer)
                .map(Path::to_path_buf)
                .collect();
            between.reverse();
            for pin in between {
                if !placed.iter().any(|(placed, _)| *placed == pin) {
                    placed.push((pin.clone(), access));
                    wanted.push(Wanted { path: pin, access });
                }
            }
        }
        placed.push((path.clone(), layer.access));
        wanted.push(Wanted {
            path,
            access: layer.access,
        });
    }
    wanted
}

/// `path` as it will be once the stage is the root.
pub fn staged(path: &Path) -> PathBuf {
    let relative = path.strip_prefix("/").unwrap_or(path);
    Path::new(STAGE).join(relative)
}

/// A detached recursive clone of the host's `path`, read-only for `Read`; `nosuid`, `nodev`.
fn clone_tree(path: &Path, access: LayerAccess) -> Result<OwnedFd, SetupError> {
    let tree = rustix::mount::open_tree(
        CWD,
        path,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )
    .map_err(|err| SetupError::new(err, MOUNT))?;
    finish_clone(tree, access)
}

/// As [`clone_tree`], of what `fd` (an `O_PATH` descriptor) names.
fn clone_tree_at(fd: &OwnedFd, access: LayerAccess) -> Result<OwnedFd, SetupError> {
    let tree = rustix::mount::open_tree(
        fd,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH,
    )
    .map_err(|err| SetupError::new(err, MOUNT))?;
    finish_clone(tree, access)
}

/// Makes a clone `nosuid`, `nodev`, and read-only unless it is writable.
fn finish_clone(tree: OwnedFd, access: LayerAccess) -> Result<OwnedFd, SetupError> {
    let mut attributes = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    if access != LayerAccess::Write {
        attributes |= MOUNT_ATTR_RDONLY;
    }
    set_attributes(&tree, attributes, true)?;
    Ok(tree)
}

fn attach(tree: &OwnedFd, target: &Path) -> Result<(), SetupError> {
    rustix::mount::move_mount(
        tree.as_fd(),
        "",
        CWD,
        target,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
    .map_err(|err| SetupError::new(err, MOUNT))
}

/// A read-only tmpfs holding an inaccessible directory `d` and file `f`, cloned over hidden
/// paths.
fn hidden_tree() -> Result<OwnedFd, SetupError> {
    let err = |err: rustix::io::Errno| SetupError::new(err, MOUNT);
    let fs =
        rustix::mount::fsopen("tmpfs", rustix::mount::FsOpenFlags::FSOPEN_CLOEXEC).map_err(err)?;
    rustix::mount::fsconfig_set_string(&fs, "size", "4k").map_err(err)?;
    rustix::mount::fsconfig_create(&fs).map_err(err)?;
    let tree = rustix::mount::fsmount(
        &fs,
        rustix::mount::FsMountFlags::FSMOUNT_CLOEXEC,
        rustix::mount::MountAttrFlags::MOUNT_ATTR_NOSUID
            | rustix::mount::MountAttrFlags::MOUNT_ATTR_NODEV,
    )
    .map_err(err)?;
    rustix::fs::mkdirat(&tree, "d", Mode::empty()).map_err(err)?;
    drop(
        rustix::fs::openat(
            &tree,
            "f",
            rustix::fs::OFlags::CREATE | rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(err)?,
    );
    rustix::fs::chmodat(
        &tree,
        ".",
        Mode::from_raw_mode(0o555),
        rustix::fs::AtFlags::empty(),
    )
    .map_err(err)?;
    set_attributes(&tree, MOUNT_ATTR_RDONLY, false)?;
    Ok(tree)
}

/// Creates what a layer is mounted on in the empty root: its parents, then a directory or an
/// empty file.
fn make_mount_point(target: &Path, kind: Kind) -> Result<(), SetupError> {
    let err = |err: std::io::Error| SetupError::from_io(&err, MOUNT);
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    match kind {
        Kind::Directory => match std::fs::create_dir(target) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(err(e)),
            _ => Ok(()),
        },
        Kind::File => std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(target)
            .map(drop)
            .map_err(err),
        Kind::Link => Ok(()),
    }
}

/// A private `/dev` as bubblewrap's `--dev` makes it: a tmpfs with the usual devices bound from
/// the host, a new `devpts` instance, `shm`, and the standard links.
fn private_dev(empty_root: bool) -> Result<(), SetupError> {
    let err = |err: rustix::io::Errno| SetupError::new(err, MOUNT);
    let io_err = |err: std::io::Error| SetupError::from_io(&err, MOUNT);
    let dev = staged(Path::new("/dev"));
    if empty_root {
        let _ = std::fs::create_dir(&dev);
    }
    rustix::mount::mount(
        "tmpfs",
        &dev,
        "tmpfs",
        MountFlags::NOSUID,
        Some(c"mode=0755"),
    )
    .map_err(err)?;
    for device in crate::sandbox::rules::DEVICES {
        let target = dev.join(device);
        std::fs::File::create(&target).map_err(io_err)?;
        rustix::mount::mount_bind(Path::new("/dev").join(device), &target).map_err(err)?;
    }
    let pts = dev.join("pts");
    std::fs::create_dir(&pts).map_err(io_err)?;
    rustix::mount::mount(
        "devpts",
        &pts,
        "devpts",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        Some(c"newinstance,ptmxmode=0666,mode=620"),
    )
    .map_err(err)?;
    let shm = dev.join("shm");
    std::fs::create_dir(&shm).map_err(io_err)?;
    rustix::fs::chmod(&shm, Mode::from_raw_mode(0o1777)).map_err(err)?;
    for (link, target) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link)).map_err(io_err)?;
    }
    Ok(())
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Adds `attributes` to the mount `tree` (and its submounts if `recursive`). rustix has no
/// `mount_setattr`; it only ever adds flags here, which a user namespace may do to mounts it
/// did not create.
fn set_attributes(tree: &OwnedFd, attributes: u64, recursive: bool) -> Result<(), SetupError> {
    use std::os::fd::AsRawFd;
    let attr = MountAttr {
        attr_set: attributes,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let mut flags = libc::AT_EMPTY_PATH;
    if recursive {
        flags |= libc::AT_RECURSIVE;
    }
    let empty = CString::default();
    #[expect(unsafe_code, reason = "mount_setattr has no safe wrapper")]
    // SAFETY: the descriptor is open, the path a valid C string, `attr` a live `mount_attr`
    // whose size is passed; the kernel only reads them.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            flags,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(SetupError::from_io(&std::io::Error::last_os_error(), MOUNT))
    }
}
