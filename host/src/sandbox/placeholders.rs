//! Empty directories wexec creates where a read-only path is missing inside a writable one
//! (an absent `.git`), so that the sandbox can mount over them (docs/sandbox.md,
//! "Placeholders"). A mount needs a directory on the host: the kernel offers no way to make a
//! name unwritable inside a writable tree that other processes do not see. So each lives
//! exactly as long as a process needs it, and is removed the moment the last one is gone,
//! before its `process/closed` is sent: host tools must not find an empty `.git` and take the
//! directory for a repository.
//!
//! Several wexec processes may share one (`/tmp/.git` under two servers' workspace-write): a
//! placeholder removed while another server's sandbox is being built would vanish from its
//! view, and inside a writable directory the name would become creatable. So every holder
//! keeps a shared `flock` on the directory, and it is removed only if a wexec made it (it carries
//! an extended attribute saying so, which outlives a SIGKILLed creator), only under an exclusive
//! lock nobody else holds; a holder that finds the inode gone after locking retries.
//!
//! What a wexec made is logged in its state directory ([`crate::state`]), in a file it keeps
//! an exclusive lock on: a wexec that starts finds the logs whose lock is free (their wexec
//! died without cleaning up, SIGKILL) and removes what they list, if still an unused, empty,
//! marked placeholder.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{FlockOperation, Mode, OFlags};

/// A placeholder this wexec holds.
struct Entry {
    /// Processes holding it.
    count: usize,
    /// The open directory carrying this wexec's shared lock.
    _lock: OwnedFd,
    /// The directory it is in, as it was opened to make it: it is removed from there.
    parent: Arc<OwnedFd>,
    /// A wexec made it (it carries [`MARK`]), so it is removed once nobody holds it.
    created: bool,
}

/// The extended attribute that marks a directory as a wexec placeholder.
const MARK: &str = "user.wexec.placeholder";

/// The placeholders held, and the log of those this wexec made.
#[derive(Default)]
struct Table {
    entries: HashMap<PathBuf, Entry>,
    log: Option<Log>,
}

static HELD: Mutex<Option<Table>> = Mutex::new(None);

/// A process's hold on its placeholders; released when dropped.
#[derive(Debug, Default)]
pub struct Held {
    paths: Vec<PathBuf>,
}

impl Held {
    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }
}

/// Whether `path` is a placeholder this wexec holds.
pub fn is_held(path: &Path) -> bool {
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|table| table.entries.contains_key(path))
}

/// Logs the placeholders this wexec makes in `logs` (the state directory's `placeholders/`).
/// Called once, at startup; without it, a SIGKILLed wexec's placeholders stay until some
/// wexec next uses them.
pub fn start_log(logs: OwnedFd) {
    match Log::create(logs) {
        Ok(log) => {
            let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
            held.get_or_insert_with(Table::default).log = Some(log);
        }
        Err(err) => tracing::warn!(
            "cannot log placeholders in wexec's state directory: {err}; a SIGKILLed wexec's would stay"
        ),
    }
}

/// Creates (or shares) each placeholder, or locks the directory already there.
pub fn hold(paths: &[PathBuf]) -> std::io::Result<Held> {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    let table = held.get_or_insert_with(Table::default);
    let mut taken = Held::default();
    let new: Vec<&PathBuf> = paths
        .iter()
        .filter(|path| !table.entries.contains_key(*path))
        .collect();
    // Logged before any is made, in one write: a wexec killed right after a creation still
    // has it listed (one that was there already is left alone by the sweep: it has no mark).
    if let Some(log) = table.log.as_mut() {
        log.record(&new);
    }
    // Placeholders come in fours beside each other (`.git`, `.agents`...): each parent is
    // opened once.
    let mut parents: Vec<(&Path, Arc<OwnedFd>)> = Vec::new();
    for path in paths {
        if let Some(entry) = table.entries.get_mut(path) {
            entry.count += 1;
            taken.paths.push(path.clone());
            continue;
        }
        let (Some(parent_path), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        let parent = match parents.iter().find(|(known, _)| *known == parent_path) {
            Some((_, parent)) => Arc::clone(parent),
            None => {
                // A link on the way: nothing is made (the sandbox refuses or drops a layer
                // reached through one).
                let Some(parent) = open_parent(parent_path) else {
                    continue;
                };
                let parent = Arc::new(parent);
                parents.push((parent_path, Arc::clone(&parent)));
                parent
            }
        };
        // `None`: something else than a directory is there now, mounted over as it is.
        if let Some(entry) = lock(path, parent, name)? {
            table.entries.insert(path.clone(), entry);
            taken.paths.push(path.clone());
        }
    }
    Ok(taken)
}

/// The directory `parent`, opened without following any symbolic link on the way: a link put
/// on the way since the path was canonicalized would make (or remove) a placeholder somewhere
/// else. `None` when there is such a link.
fn open_parent(parent: &Path) -> Option<OwnedFd> {
    rustix::fs::openat2(
        rustix::fs::CWD,
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )
    .ok()
}

/// `name` in `parent`, opened as a directory, never through a link.
fn open_in(parent: &OwnedFd, name: &std::ffi::OsStr) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Makes `name` in `parent` (the placeholder at `path`) exist as a directory carrying a shared
/// lock; `None` if it is no directory.
fn lock(
    path: &Path,
    parent: Arc<OwnedFd>,
    name: &std::ffi::OsStr,
) -> std::io::Result<Option<Entry>> {
    let there =
        |parent: &OwnedFd| rustix::fs::statat(parent, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
    for _ in 0..8 {
        let created = match rustix::fs::mkdirat(&*parent, name, Mode::from_raw_mode(0o777)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(err) => return Err(err.into()),
        };
        let fd = match open_in(&parent, name) {
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
        let same = match (rustix::fs::fstat(&fd), there(&parent)) {
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
                _lock: fd,
                parent,
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
        for path in self.paths.drain(..) {
            let Some(entry) = table.entries.get_mut(&path) else {
                continue;
            };
            entry.count -= 1;
            if entry.count > 0 {
                continue;
            }
            if let Some(entry) = table.entries.remove(&path) {
                release(entry, &path);
            }
        }
        if let Some(log) = &mut table.log {
            log.compact(&table.entries);
        }
    }
}

/// Removes this wexec's log once it holds nothing (wexec is ending; a placeholder goes the
/// moment its last holder lets go, so nothing is left to remove).
pub fn release_all() {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(table) = held.as_mut()
        && table.entries.is_empty()
        && let Some(log) = table.log.take()
    {
        log.remove();
    }
}

/// Lets go of `entry`, the placeholder at `path`; removes it if a wexec made it.
fn release(entry: Entry, path: &Path) {
    let Entry {
        _lock,
        parent,
        created,
        ..
    } = entry;
    // Our shared lock goes first, or the exclusive one below could not be taken.
    drop(_lock);
    if let (true, Some(name)) = (created, path.file_name()) {
        remove_if_unused(&parent, name);
    }
}

/// Removes the placeholder `name` in `parent` if nobody holds it (an exclusive lock is then
/// free) and nobody filled it.
fn remove_if_unused(parent: &OwnedFd, name: &std::ffi::OsStr) {
    let Ok(fd) = open_in(parent, name) else {
        return;
    };
    if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok() {
        // Fails, and keeps it, if something was put inside meanwhile.
        let _ = rustix::fs::unlinkat(parent, name, rustix::fs::AtFlags::REMOVEDIR);
    }
}

/// Removes what a dead wexec's log lists, if it is still a placeholder nobody uses: an empty
/// directory carrying [`MARK`] (something another program made there since is left alone),
/// reached without any symbolic link.
fn remove_leftover(path: &Path) {
    let (Some(parent), Some(name)) = (path.parent().and_then(open_parent), path.file_name()) else {
        return;
    };
    let Ok(fd) = open_in(&parent, name) else {
        return;
    };
    if rustix::fs::fgetxattr_query(&fd, MARK).is_err() {
        return;
    }
    drop(fd);
    remove_if_unused(&parent, name);
}

/// A wexec's log of the placeholders it made: paths, each ended by a NUL byte (a path may hold
/// any other byte), in a file it holds an exclusive `flock` on until it exits.
struct Log {
    dir: OwnedFd,
    name: String,
    file: std::fs::File,
    /// Paths written since the file was last rewritten.
    records: usize,
}

/// A log is rewritten with only the placeholders that exist once it holds this many more
/// records than twice those.
const LOG_SLACK: usize = 64;

impl Log {
    fn create(dir: OwnedFd) -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let name = format!("{}-{nanos}", std::process::id());
        let file = Self::locked(&dir, &name, b"")?;
        Ok(Self {
            dir,
            name,
            file,
            records: 0,
        })
    }

    /// A new file holding `text`, locked, then renamed to `name`: made under a hidden name
    /// (which sweeps pass over), so that no sweep ever finds it unlocked.
    fn locked(dir: &OwnedFd, name: &str, text: &[u8]) -> std::io::Result<std::fs::File> {
        let hidden = format!(".{name}");
        let file = rustix::fs::openat(
            dir,
            &hidden,
            OFlags::RDWR
                | OFlags::CREATE
                | OFlags::TRUNC
                | OFlags::APPEND
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive)?;
        let mut file = std::fs::File::from(file);
        file.write_all(text)?;
        rustix::fs::renameat(dir, &hidden, dir, name)?;
        Ok(file)
    }

    /// Adds `paths`, in one write (best effort: a failed write only loses the clean-up after a
    /// SIGKILL).
    fn record(&mut self, paths: &[&PathBuf]) {
        if paths.is_empty() {
            return;
        }
        let mut text = Vec::new();
        for path in paths {
            text.extend_from_slice(path.as_os_str().as_bytes());
            text.push(0);
        }
        if self.file.write_all(&text).is_ok() {
            self.records += paths.len();
        }
    }

    /// Replaces the log with one of only the placeholders this wexec made that still exist,
    /// once it has grown well past them: its size stays proportional to them, not to the
    /// starts. The new log is whole and locked before it takes the name.
    fn compact(&mut self, entries: &HashMap<PathBuf, Entry>) {
        let live = entries.values().filter(|entry| entry.created).count();
        if self.records <= 2 * live + LOG_SLACK {
            return;
        }
        let mut text = Vec::new();
        for (path, _) in entries.iter().filter(|(_, entry)| entry.created) {
            text.extend_from_slice(path.as_os_str().as_bytes());
            text.push(0);
        }
        if let Ok(file) = Self::locked(&self.dir, &self.name, &text) {
            self.file = file;
            self.records = live;
        }
    }

    /// Removes the log (wexec is ending and holds nothing).
    fn remove(self) {
        let _ = rustix::fs::unlinkat(&self.dir, &self.name, rustix::fs::AtFlags::empty());
    }
}

/// Largest log read back: a log is compacted long before (a path of up to 4 KiB per record).
const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// Cleans up after every wexec whose log in `logs` is not locked any more (it died without
/// cleaning up).
pub fn sweep_dead_logs(logs: &OwnedFd) {
    let Ok(dir) = rustix::fs::Dir::read_from(logs) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_bytes();
        if name.starts_with(b".") {
            continue;
        }
        let Ok(file) = rustix::fs::openat(
            logs,
            entry.file_name(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        // Its wexec still runs.
        if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            continue;
        }
        let mut text = Vec::new();
        let file = std::fs::File::from(file);
        if file.take(MAX_LOG_BYTES).read_to_end(&mut text).is_err() {
            continue;
        }
        for record in text
            .split(|&byte| byte == 0)
            .filter(|path| !path.is_empty())
        {
            let path = PathBuf::from(std::ffi::OsString::from_vec(record.to_vec()));
            if path.is_absolute() {
                remove_leftover(&path);
            }
        }
        let _ = rustix::fs::unlinkat(
            logs.as_fd(),
            entry.file_name(),
            rustix::fs::AtFlags::empty(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wexec-ph-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::canonicalize(dir).unwrap()
    }

    #[test]
    fn a_dead_wexecs_leftovers_are_removed_and_nothing_else() {
        let base = scratch("sweep");
        let logs = base.join("logs");
        std::fs::create_dir(&logs).unwrap();
        let open = |path: &Path| {
            rustix::fs::open(
                path,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .unwrap()
        };
        // A dead wexec's log: a marked empty placeholder, a marked one filled since, an empty
        // directory nobody marked, and one that is gone.
        let leftover = base.join("a/.git");
        let filled = base.join("b/.git");
        let unmarked = base.join("c/.git");
        for dir in [&leftover, &filled, &unmarked] {
            std::fs::create_dir_all(dir).unwrap();
        }
        for dir in [&leftover, &filled] {
            rustix::fs::fsetxattr(open(dir), MARK, b"", rustix::fs::XattrFlags::CREATE).unwrap();
        }
        std::fs::write(filled.join("HEAD"), "ref").unwrap();
        let mut text = Vec::new();
        for path in [&leftover, &filled, &unmarked, &base.join("d/.git")] {
            text.extend_from_slice(path.as_os_str().as_bytes());
            text.push(0);
        }
        std::fs::write(logs.join("1-1"), &text).unwrap();
        // A live wexec's log (locked) lists a placeholder that must stay.
        let kept = base.join("e/.git");
        std::fs::create_dir_all(&kept).unwrap();
        rustix::fs::fsetxattr(open(&kept), MARK, b"", rustix::fs::XattrFlags::CREATE).unwrap();
        let mut live = kept.as_os_str().as_bytes().to_vec();
        live.push(0);
        std::fs::write(logs.join("2-2"), &live).unwrap();
        let live_log = std::fs::File::open(logs.join("2-2")).unwrap();
        rustix::fs::flock(&live_log, FlockOperation::NonBlockingLockExclusive).unwrap();

        sweep_dead_logs(&open(&logs));
        assert!(!leftover.exists());
        assert!(filled.join("HEAD").exists());
        assert!(unmarked.exists());
        assert!(kept.exists());
        assert!(!logs.join("1-1").exists());
        assert!(logs.join("2-2").exists());
        drop(live_log);
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_log_stays_as_small_as_what_exists() {
        let base = scratch("compact");
        let logs = base.join("logs");
        std::fs::create_dir(&logs).unwrap();
        let dir = rustix::fs::open(
            &logs,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        let mut log = Log::create(dir).unwrap();
        for n in 0..1000 {
            log.record(&[&base.join(format!("gone-{n}"))]);
            log.compact(&HashMap::new());
        }
        let size = std::fs::metadata(logs.join(&log.name)).unwrap().len();
        assert!(size < 100 * 64, "{size}");
        log.remove();
        assert_eq!(std::fs::read_dir(&logs).unwrap().count(), 0);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
