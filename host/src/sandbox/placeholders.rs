//! Empty directories wexec creates where a read-only path is missing inside a writable one
//! (an absent `.git`), so that the sandbox can mount over them, removed when no process needs
//! them any more, so nothing is left on disk.
//!
//! Several wexec processes may share one (`/tmp/.git` under two servers' workspace-write): a
//! placeholder removed while another server's sandbox is being built would vanish from its
//! view, and inside a writable directory the name would become creatable. So every holder
//! keeps a shared `flock` on the directory, and it is removed only if a wexec made it (it carries
//! an extended attribute saying so, which outlives a SIGKILLed creator), only under an exclusive
//! lock nobody else holds; a holder that finds the inode gone after locking retries.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rustix::fs::{FlockOperation, Mode, OFlags};

/// How long an unused placeholder stays, so that back-to-back starts reuse it instead of
/// making and removing it each time.
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// A placeholder this wexec holds.
struct Entry {
    /// Processes holding it.
    count: usize,
    /// When the last of them let go (it is removed [`LINGER`] later).
    idle_since: Option<std::time::Instant>,
    /// The open directory carrying this wexec's shared lock.
    _lock: OwnedFd,
    /// A wexec made it (it carries [`MARK`]), so it is removed once nobody holds it.
    created: bool,
}

/// The extended attribute that marks a directory as a wexec placeholder.
const MARK: &str = "user.wexec.placeholder";

static HELD: Mutex<Option<HashMap<PathBuf, Entry>>> = Mutex::new(None);

/// A process's hold on its placeholders; released when dropped.
#[derive(Debug, Default)]
pub struct Held {
    paths: Vec<PathBuf>,
}

/// Whether `path` is a placeholder this wexec holds.
pub fn is_held(path: &Path) -> bool {
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|table| table.contains_key(path))
}

/// Creates (or shares) each placeholder, or locks the directory already there.
pub fn hold(paths: &[PathBuf]) -> std::io::Result<Held> {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    let table = held.get_or_insert_with(HashMap::new);
    let mut taken = Held::default();
    for path in paths {
        if let Some(entry) = table.get_mut(path) {
            entry.count += 1;
            entry.idle_since = None;
            taken.paths.push(path.clone());
            continue;
        }
        // `None`: something else than a directory is there now, mounted over as it is.
        if let Some(entry) = lock(path)? {
            table.insert(path.clone(), entry);
            taken.paths.push(path.clone());
        }
    }
    Ok(taken)
}

/// Makes `path` exist as a directory carrying a shared lock; `None` if it is no directory.
fn lock(path: &Path) -> std::io::Result<Option<Entry>> {
    // Never through a link: one put on the way since the path was canonicalized would make
    // the placeholder somewhere else (the sandbox drops a layer reached through a link).
    let parent = path.parent().unwrap_or(Path::new("/"));
    if std::fs::canonicalize(parent).ok().as_deref() != Some(parent) {
        return Ok(None);
    }
    for _ in 0..8 {
        let created = match std::fs::create_dir(path) {
            Ok(()) => true,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(err) => return Err(err),
        };
        let fd = match rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockShared) {
            Ok(()) => {}
            // Its creator is removing it: try again.
            Err(rustix::io::Errno::WOULDBLOCK) => {
                std::thread::yield_now();
                continue;
            }
            Err(err) => return Err(err.into()),
        }
        let same = match (rustix::fs::fstat(&fd), rustix::fs::lstat(path)) {
            (Ok(locked), Ok(now)) => locked.st_ino == now.st_ino && locked.st_dev == now.st_dev,
            _ => false,
        };
        if same {
            // Marked as a placeholder, so whichever holder lets go last removes it, even when
            // its creator died without cleaning up (SIGKILL).
            let created = if created {
                let _ = rustix::fs::fsetxattr(&fd, MARK, b"", rustix::fs::XattrFlags::CREATE);
                true
            } else {
                rustix::fs::fgetxattr_query(&fd, MARK).is_ok()
            };
            return Ok(Some(Entry {
                count: 1,
                idle_since: None,
                _lock: fd,
                created,
            }));
        }
    }
    Err(std::io::Error::other(format!(
        "cannot hold a placeholder at {}: it keeps changing",
        path.display()
    )))
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.paths.is_empty() {
            return;
        }
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(table) = held.as_mut() else {
            return;
        };
        let now = std::time::Instant::now();
        for path in self.paths.drain(..) {
            if let Some(entry) = table.get_mut(&path) {
                entry.count -= 1;
                if entry.count == 0 {
                    entry.idle_since = Some(now);
                }
            }
        }
        sweep(table, |idle_since| now.duration_since(idle_since) >= LINGER);
        drop(held);
        schedule_sweep();
    }
}

/// Removes the unused placeholders `expired` says are due.
fn sweep(table: &mut HashMap<PathBuf, Entry>, expired: impl Fn(std::time::Instant) -> bool) {
    let due: Vec<PathBuf> = table
        .iter()
        .filter(|(_, entry)| entry.count == 0 && entry.idle_since.is_some_and(&expired))
        .map(|(path, _)| path.clone())
        .collect();
    for path in due {
        if let Some(entry) = table.remove(&path) {
            let created = entry.created;
            drop(entry);
            if created {
                remove_if_unused(&path);
            }
        }
    }
}

/// Sweeps again once the latest release has lingered (one timer thread at a time).
fn schedule_sweep() {
    static SCHEDULED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SCHEDULED.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("wexec-placeholders".into())
        .spawn(|| {
            loop {
                std::thread::sleep(LINGER);
                let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
                let now = std::time::Instant::now();
                let Some(table) = held.as_mut() else { break };
                sweep(table, |idle_since| now.duration_since(idle_since) >= LINGER);
                if table.values().all(|entry| entry.count > 0) {
                    SCHEDULED.store(false, std::sync::atomic::Ordering::Release);
                    break;
                }
            }
        });
    if spawned.is_err() {
        SCHEDULED.store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Removes every unused placeholder now (wexec is ending).
pub fn release_all() {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(table) = held.as_mut() {
        sweep(table, |_| true);
    }
}

/// Removes a placeholder nobody holds (an exclusive lock is then free) and nobody filled.
fn remove_if_unused(path: &Path) {
    let Ok(fd) = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok() {
        // Fails, and keeps it, if something was put inside meanwhile.
        let _ = std::fs::remove_dir(path);
    }
}
