//! Copying a directory tree. Both trees are walked through directory descriptors, one name at
//! a time, never following a symlink: an entry is what `lstat` says it is in the directory
//! actually opened, and a symlink met anywhere below the two tops (planted in the destination,
//! or swapped into the source meanwhile) is never gone through. So a copy cannot write into
//! (or read out of) a directory it was not given, the compile cache included, and cannot loop
//! into its own output. Links are copied as links; FIFOs, sockets and devices are skipped.
//! The walk keeps a queue, not a recursion: no depth puts a stack at risk.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use cap_std::fs::OpenOptionsExt;
use rustix::fs::{FileType, Mode, OFlags};

use super::resolve::Resolved;
use super::{OpenRoot, child_of};

/// One directory of each tree, opened, and where it is relative to its root.
struct Level {
    from: OwnedFd,
    from_relative: PathBuf,
    to: OwnedFd,
    to_relative: PathBuf,
}

/// Copies the directory `from` (resolved, a directory) to `to` (resolved, created if missing).
pub fn copy_tree(from: &Resolved<'_>, to: &Resolved<'_>) -> io::Result<()> {
    to.root.dir.create_dir_all(&to.relative)?;
    // The tops through cap-std (confined beneath the root), then one name at a time.
    let top = |root: &OpenRoot, relative: &std::path::Path| -> io::Result<OwnedFd> {
        let mut options = cap_std::fs::OpenOptions::new();
        options
            .read(true)
            .custom_flags((OFlags::DIRECTORY | OFlags::NOFOLLOW).bits() as i32);
        Ok(root.dir.open_with(relative, &options)?.into_std().into())
    };
    let mut pending = vec![Level {
        from: top(from.root, &from.relative)?,
        from_relative: from.relative.clone(),
        to: top(to.root, &to.relative)?,
        to_relative: to.relative.clone(),
    }];
    while let Some(level) = pending.pop() {
        copy_level(level, from.root, to.root, &mut pending)?;
    }
    Ok(())
}

fn copy_level(
    level: Level,
    from_root: &OpenRoot,
    to_root: &OpenRoot,
    pending: &mut Vec<Level>,
) -> io::Result<()> {
    let dir = rustix::fs::Dir::read_from(&level.from)?;
    for entry in dir {
        let entry = entry?;
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let name = std::ffi::OsStr::from_bytes(name.to_bytes());
        let (from_relative, to_relative) = (
            child_of(&level.from_relative, name),
            child_of(&level.to_relative, name),
        );
        if from_root.hides(&from_relative) || to_root.hides(&to_relative) {
            continue;
        }
        let Ok(stat) = rustix::fs::statat(&level.from, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        else {
            continue;
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                match rustix::fs::mkdirat(&level.to, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(err) => return Err(err.into()),
                }
                // Either side no (longer a) real directory: not entered.
                let (Ok(from), Ok(to)) = (open_dir(&level.from, name), open_dir(&level.to, name))
                else {
                    continue;
                };
                pending.push(Level {
                    from,
                    from_relative,
                    to,
                    to_relative,
                });
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(&level.from, name, Vec::new())?;
                match rustix::fs::symlinkat(target.as_c_str(), &level.to, name) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(err) => return Err(err.into()),
                }
            }
            FileType::RegularFile => copy_file(&level.from, &level.to, name)?,
            // FIFOs, sockets and devices are not copied.
            _ => {}
        }
    }
    Ok(())
}

/// Copies the regular file `name`; anything that is not one on either side by the time it is
/// opened (swapped meanwhile, or a symlink, FIFO or device in the destination) is skipped.
fn copy_file(from: &OwnedFd, to: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<()> {
    let flags = OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(source) = rustix::fs::openat(from, name, flags | OFlags::RDONLY, Mode::empty()) else {
        return Ok(());
    };
    if !is_regular(&source) {
        return Ok(());
    }
    let target = match rustix::fs::openat(
        to,
        name,
        flags | OFlags::WRONLY | OFlags::CREATE,
        Mode::from_raw_mode(0o666),
    ) {
        Ok(target) => target,
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NXIO | rustix::io::Errno::ISDIR) => {
            return Ok(());
        }
        Err(err) => return Err(err.into()),
    };
    if !is_regular(&target) {
        return Ok(());
    }
    // Truncated only once known to be a regular file.
    rustix::fs::ftruncate(&target, 0)?;
    let (mut source, mut target) = (File::from(source), File::from(target));
    io::copy(&mut source, &mut target).map(drop)
}

fn is_regular(fd: &OwnedFd) -> bool {
    rustix::fs::fstat(fd)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile)
}

/// Opens the directory `name` (one component) in `dir`, never through a symlink.
fn open_dir(dir: impl AsFd, name: &std::ffi::OsStr) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}
