//! Opening files inside a root. Every open is non-blocking and followed by an `fstat` of the
//! opened descriptor: only regular files are read or written, so a FIFO (whose `open` would
//! wait for a peer) or a device inside a root can neither hold a thread nor be written to.
//! Where a type can be known before opening (resolution's own `lstat`), it is checked first
//! too, since opening some devices has effects of its own.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::Path;

use cap_std::fs::{OpenOptions, OpenOptionsExt};
use rustix::fs::{FileType, Mode, OFlags, Stat};

use super::resolve::Resolved;
use super::{Error, OpenRoot, invalid};

/// What a descriptor is opened for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    /// Write, creating the file if missing.
    Write,
}

/// Opens a regular file for reading; returns it with its size. Anything else is refused with
/// Codex's text (docs/protocol.md §9.3).
pub fn read(resolved: &Resolved<'_>) -> Result<(File, u64), Error> {
    let not_a_file = || invalid(format!("path `{}` is not a file", resolved.original));
    let known = match &resolved.last {
        Some(stat) => file_type(stat),
        None => resolved
            .root
            .dir
            .metadata(&resolved.relative)
            .map(|meta| {
                if meta.is_file() {
                    FileType::RegularFile
                } else {
                    FileType::Unknown
                }
            })
            .map_err(|err| resolved.io_error(&err))?,
    };
    if known != FileType::RegularFile {
        return Err(not_a_file());
    }
    let file = open(resolved, Access::Read).map_err(|err| resolved.io_error(&err))?;
    // The path may have been swapped for something else between the check and the open.
    // (`fstat` rather than std's `statx` on an empty path, which costs a lookup of its own.)
    match rustix::fs::fstat(&file) {
        Ok(stat) if file_type(&stat) == FileType::RegularFile => {
            Ok((file, u64::try_from(stat.st_size).unwrap_or(0)))
        }
        _ => Err(not_a_file()),
    }
}

/// Opens a regular file to write, creating it if missing; with `truncate`, empties it once it
/// is known to be a regular file (`O_TRUNC` would act before the check).
pub fn write(resolved: &Resolved<'_>, truncate: bool) -> Result<File, Error> {
    let existing = match &resolved.last {
        Some(stat) => Some(file_type(stat)),
        None => rustix::fs::statat(
            resolved.root.dir.as_fd(),
            &resolved.relative,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .ok()
        .map(|stat| file_type(&stat)),
    };
    // A directory is left to the open, whose EISDIR is the specified answer
    // (docs/protocol.md §9.5).
    if let Some(kind) =
        existing.filter(|kind| !matches!(kind, FileType::RegularFile | FileType::Directory))
    {
        return Err(not_regular(&resolved.original, kind));
    }
    let file = open(resolved, Access::Write).map_err(|err| resolved.io_error(&err))?;
    let stat = rustix::fs::fstat(&file).map_err(|err| resolved.io_error(&err.into()))?;
    let kind = file_type(&stat);
    if kind != FileType::RegularFile {
        return Err(not_regular(&resolved.original, kind));
    }
    if truncate {
        rustix::fs::ftruncate(&file, 0).map_err(|err| resolved.io_error(&err.into()))?;
    }
    Ok(file)
}

/// Opens the resolved path non-blocking, never following a final symlink (resolution has
/// already followed the ones it should). A single component resolution checked opens with
/// plain `openat` in the root: a name without `/` cannot leave the directory but through a
/// symlink, and one swapped in meanwhile fails the open (`openat` costs about 10% less than
/// cap-std's `openat2`). Everything else goes through cap-std's confinement.
fn open(resolved: &Resolved<'_>, access: Access) -> std::io::Result<File> {
    let (root, relative): (&OpenRoot, &Path) = (resolved.root, &resolved.relative);
    let mut components = relative.components();
    let single = matches!(
        (components.next(), components.next()),
        (Some(std::path::Component::Normal(_)), None)
    );
    if single && (resolved.last.is_some() || access == Access::Write) {
        let flags = OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let flags = match access {
            Access::Read => flags | OFlags::RDONLY,
            Access::Write => flags | OFlags::WRONLY | OFlags::CREATE,
        };
        let fd = rustix::fs::openat(&root.dir, relative, flags, Mode::from_raw_mode(0o666))?;
        return Ok(File::from(fd));
    }
    let mut options = OpenOptions::new();
    options
        .read(access == Access::Read)
        .write(access == Access::Write)
        .create(access == Access::Write)
        // Passed through to cap-std's openat2 (RESOLVE_BENEATH) as they are.
        .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW).bits() as i32);
    Ok(root.dir.open_with(relative, &options)?.into_std())
}

fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

/// Names what a path is when it is no regular file.
fn not_regular(path: &str, kind: FileType) -> Error {
    let what = match kind {
        FileType::Fifo => "a FIFO",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Socket => "a socket",
        FileType::Symlink => "a symlink",
        FileType::Directory => "a directory",
        FileType::RegularFile | FileType::Unknown => "of an unknown type",
    };
    invalid(format!(
        "path `{path}` is {what}, not a regular file; only regular files are written"
    ))
}
