//! A pids cgroup per session (docs/sandbox.md, "Limits"): with `--session-processes` set, the
//! session's programs and everything they fork or spawn (threads count, as the kernel counts
//! tasks) live in one cgroup whose `pids.max` is that number, so a fork bomb gets `EAGAIN`
//! instead of the host's process table. wexec makes `wexec-<pid>/` below its own pids cgroup
//! (cgroup v1's `pids` hierarchy; it needs to be allowed to write there: root, or a delegated
//! tree) and a `session-<n>/` in it per session; each program joins its session's group
//! between fork and exec, through a descriptor its helper opened before any namespace.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// wexec's own group, once made.
static BASE: OnceLock<PathBuf> = OnceLock::new();

/// Makes wexec's group; the error says what is missing.
pub fn prepare() -> Result<(), String> {
    let hierarchy = find_hierarchy()?;
    sweep_dead(&hierarchy);
    let base = hierarchy.join(format!("wexec-{}", std::process::id()));
    match std::fs::create_dir(&base) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(format!("cannot create {}: {err}", base.display())),
    }
    let _ = BASE.set(base);
    Ok(())
}

/// Removes the groups of wexecs that died without [`release`] (SIGKILL), once empty.
fn sweep_dead(hierarchy: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(hierarchy) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|name| name.strip_prefix("wexec-")) else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new("/proc").join(pid).exists() {
            // Only removed once empty: a wexec in another PID namespace looks dead from here,
            // and its sessions' tasks must not be killed.
            remove_groups(&entry.path(), false);
        }
    }
}

/// Removes wexec's groups (empty by then: every process is gone) at exit.
pub fn release() {
    if let Some(base) = BASE.get() {
        remove_groups(base, true);
    }
}

/// Removes `base`'s session groups, then `base`; with `kill`, what is left in them is killed
/// first (they are this wexec's own).
fn remove_groups(base: &std::path::Path, kill: bool) {
    if let Ok(entries) = std::fs::read_dir(base) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with("session-") {
                if kill {
                    kill_members(&entry.path());
                }
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(base);
}

/// Rounds of [`kill_members`] at most: each kills every task listed, and a task forked meanwhile
/// (the group's `pids.max` bounds them) is listed in the next.
const KILL_ROUNDS: usize = 200;

/// SIGKILLs every task left in the group `dir` until none is. Descendants of an unconfined
/// process that killed its own helper left the helper's tree (docs/sandbox.md, "What is not
/// protected") but not their session's group, which only root can leave: they end with the
/// session all the same. Each task is signalled through a pidfd opened while it is listed in
/// the group, so a pid reused meanwhile is never signalled.
fn kill_members(dir: &std::path::Path) {
    let procs = dir.join("cgroup.procs");
    let listed = || -> Vec<i32> {
        std::fs::read_to_string(&procs)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    };
    for _ in 0..KILL_ROUNDS {
        let pids = listed();
        if pids.is_empty() {
            return;
        }
        let opened: Vec<_> = pids
            .iter()
            .filter_map(|&pid| rustix::process::Pid::from_raw(pid))
            .filter_map(|pid| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty())
                    .ok()
                    .map(|fd| (pid, fd))
            })
            .collect();
        // Still listed after the pidfd was opened: the pidfd is that task's (a task that died
        // before leaves the list; its pidfd then signals nothing).
        let still = listed();
        for (pid, fd) in opened {
            if still.contains(&pid.as_raw_nonzero().get()) {
                let _ = rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The directory of wexec's pids cgroup: the v1 `pids` hierarchy's mount joined with the path
/// `/proc/self/cgroup` gives.
pub(crate) fn find_hierarchy() -> Result<PathBuf, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").map_err(|err| err.to_string())?;
    let own = cgroups
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            controllers
                .split(',')
                .any(|name| name == "pids")
                .then_some(path)
        })
        .next()
        .ok_or("no cgroup v1 pids controller (cgroup v2 is not supported yet)")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|err| err.to_string())?;
    let mount = mounts
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split_whitespace();
            let (kind, _source, options) = (right.next()?, right.next()?, right.next()?);
            (kind == "cgroup" && options.split(',').any(|option| option == "pids"))
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })
        .ok_or("the pids cgroup hierarchy is not mounted")?;
    Ok(mount.join(own.trim_start_matches('/')))
}

/// One session's group.
#[derive(Debug)]
pub struct SessionCgroup {
    dir: PathBuf,
}

impl SessionCgroup {
    /// A new group holding at most `tasks` tasks.
    pub fn new(tasks: usize) -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let base = BASE
            .get()
            .ok_or_else(|| std::io::Error::other("the pids cgroup was not prepared"))?;
        let dir = base.join(format!("session-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir(&dir)?;
        let group = Self { dir };
        std::fs::write(group.dir.join("pids.max"), tasks.to_string())?;
        Ok(group)
    }

    /// The file a program writes `0` to, to join.
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        // Empty once every process of the session is gone (the session waits for that), unless
        // an unconfined process's descendants left their helper: killed, off the caller's
        // thread (they take a moment to go).
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        let dir = self.dir.clone();
        let spawned = std::thread::Builder::new()
            .name("wexec-cgroup".into())
            .spawn(move || {
                kill_members(&dir);
                let _ = std::fs::remove_dir(&dir);
            });
        if let Err(err) = spawned {
            tracing::warn!("cannot clean up {}: {err}", self.dir.display());
        }
    }
}
