//! The init of a confined program's PID namespace: forked by the helper while the helper
//! builds the view, it then mounts the namespace's `/proc`, pivots into the view, starts the
//! program and waits for it,
//! relaying the helper's signals to the program's group and reaping orphans. When the
//! program exits the init reports its status and exits, and the kernel kills whatever is
//! left in the namespace.

use std::os::fd::OwnedFd;

use rustix::mount::{MountFlags, UnmountFlags};
use rustix::process::{Pid, Signal, WaitOptions};
use seccompiler::BpfProgram;

use super::SetupError;
use super::filter;
use super::view::{STAGE, staged};
use crate::process::supervisor::child;
use crate::process::supervisor::exec::{self, Program};
use crate::process::supervisor::wire::{Confinement, Launch};

/// Mechanisms a failure report names, by tag (0: the program itself).
const MECHANISMS: [&str; 3] = ["PID namespaces", "mount namespaces", "seccomp"];

/// The status tag of "the program runs" (the value is 0).
pub const STARTED: u8 = 0xfe;
/// The status tag of "the program exited" (the value is its exit code): sent before the init
/// itself exits, so that the exit is known without waiting for the namespaces' teardown.
pub const EXITED: u8 = 0xff;

/// A status message: a tag and a native-endian value.
fn message(tag: u8, value: i32) -> [u8; 5] {
    let mut message = [tag, 0, 0, 0, 0];
    message[1..].copy_from_slice(&value.to_ne_bytes());
    message
}

/// The mechanism a status tag names; `None` for the program's own failure.
pub fn mechanism(tag: u8) -> Option<&'static str> {
    MECHANISMS.get(usize::from(tag).checked_sub(1)?).copied()
}

/// Entries of `/proc` that are the host's, made read-only in the view (as container runtimes
/// do).
const PROC_READ_ONLY: [&str; 5] = ["sys", "sysrq-trigger", "irq", "bus", "fs"];

/// Signals the init takes from the helper and passes to the program's group.
const RELAYED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The byte the helper sends the init once the view is built (its root is a directory of
/// the host's) ...
pub const VIEW_BUILT: u8 = b'v';
/// ... or once it is built with an empty tmpfs as its root (remounted read-only after the
/// pivot). End of file instead: the helper failed, and reports why.
pub const VIEW_BUILT_EMPTY_ROOT: u8 = b'e';

/// What the helper prepared for the init.
pub struct Prepared<'a> {
    /// What to run.
    pub launch: &'a Launch,
    /// How.
    pub confinement: &'a Confinement,
    /// The compiled seccomp filters.
    pub filters: &'static [BpfProgram],
    /// The helper's pidfd: readable once the helper is gone.
    pub helper_alive: &'a OwnedFd,
    /// The session's pids cgroup (`cgroup.procs`), for the program to join.
    pub join: Option<std::os::fd::RawFd>,
    /// Where [`VIEW_BUILT`] or [`VIEW_BUILT_EMPTY_ROOT`] comes once the view is built.
    pub view: OwnedFd,
}

/// Runs the init; returns its exit status (the program's exit code). What happens goes to
/// `status`: a failure's tag and errno, or [`STARTED`] then [`EXITED`] and the exit code.
pub fn run(prepared: Prepared<'_>, stdio: [OwnedFd; 3], status: OwnedFd) -> i32 {
    let Prepared {
        launch,
        confinement,
        filters,
        helper_alive,
        join,
        view,
    } = prepared;
    let fail = |status: &OwnedFd, tag: u8, errno: i32| {
        let _ = rustix::io::write(status, &message(tag, errno));
        127
    };
    if let Err(err) = die_with_helper(helper_alive) {
        return fail(&status, 1 + tag_of(err.mechanism), err.errno);
    }
    let executable = match Program::new(launch) {
        Ok(executable) => executable,
        Err(errno) => return fail(&status, 0, errno.raw_os_error()),
    };
    let signals = relayed_set();
    block(&signals);
    let empty_root = match view_built(&view) {
        Some(empty_root) => empty_root,
        // The helper failed to build the view, and says why.
        None => return 127,
    };
    if let Err(err) = enter_view(empty_root) {
        return fail(&status, 1 + tag_of(err.mechanism), err.errno);
    }
    let init = rustix::process::getpid();
    let (tty, limits, probe) = (launch.tty, launch.limits, confinement.probe);
    let seccomp_tag = 1 + tag_of("seccomp");
    let mut failed_tag = 0;
    let spawned = exec::spawn(&executable, &stdio, &mut || {
        child::prepare_program(tty, init, &limits, join)?;
        super::drop_capabilities()?;
        failed_tag = seccomp_tag;
        filter::install(filters)?;
        failed_tag = 0;
        if probe {
            child::exit(0);
        }
        Ok(())
    });
    drop(stdio);
    let program = match spawned {
        Ok(pid) => pid,
        Err(errno) => return fail(&status, failed_tag, errno),
    };
    let _ = rustix::io::write(&status, &message(STARTED, 0));
    let code = wait(program, &signals);
    let _ = rustix::io::write(&status, &message(EXITED, code));
    code
}

/// The helper's word that the view is built: whether its root is empty; `None` if it failed.
fn view_built(view: &OwnedFd) -> Option<bool> {
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::read(view, &mut byte) {
            Ok(1) => break,
            Err(rustix::io::Errno::INTR) => {}
            Ok(_) | Err(_) => return None,
        }
    }
    match byte[0] {
        VIEW_BUILT => Some(false),
        VIEW_BUILT_EMPTY_ROOT => Some(true),
        _ => None,
    }
}

fn tag_of(mechanism: &str) -> u8 {
    MECHANISMS
        .iter()
        .position(|known| *known == mechanism)
        .and_then(|index| u8::try_from(index).ok())
        .unwrap_or(1)
}

/// Dies with the helper, which may have died before the death signal was armed.
fn die_with_helper(helper_alive: &OwnedFd) -> Result<(), SetupError> {
    let pid_err = |err: rustix::io::Errno| SetupError::new(err, "PID namespaces");
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(pid_err)?;
    let mut fds = [rustix::event::PollFd::new(
        helper_alive,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if rustix::event::poll(&mut fds, Some(&zero)).unwrap_or(1) != 0 {
        return Err(SetupError::new(rustix::io::Errno::SRCH, "PID namespaces"));
    }
    Ok(())
}

/// Mounts `/proc`, pivots into the view. The pivot moves every process of the namespace
/// whose root is the host's into the view, the waiting program's included.
fn enter_view(empty_root: bool) -> Result<(), SetupError> {
    let mount_err = |err: rustix::io::Errno| SetupError::new(err, "mount namespaces");
    rustix::mount::mount(
        "proc",
        staged(std::path::Path::new("/proc")),
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .map_err(mount_err)?;
    // What of /proc changes the host, not the namespace: a process mapped to root would
    // otherwise write host sysctls (core_pattern runs a program as root outside).
    for entry in PROC_READ_ONLY {
        let path = staged(std::path::Path::new("/proc")).join(entry);
        if rustix::fs::lstat(&path).is_err() {
            continue;
        }
        rustix::mount::mount_bind(&path, &path).map_err(mount_err)?;
        rustix::mount::mount_remount(
            &path,
            MountFlags::BIND
                | MountFlags::RDONLY
                | MountFlags::NOSUID
                | MountFlags::NODEV
                | MountFlags::NOEXEC,
            "",
        )
        .map_err(mount_err)?;
    }
    rustix::process::chdir(STAGE).map_err(mount_err)?;
    rustix::process::pivot_root(".", ".").map_err(mount_err)?;
    rustix::mount::unmount(".", UnmountFlags::DETACH).map_err(mount_err)?;
    rustix::process::chdir("/").map_err(mount_err)?;
    if empty_root {
        rustix::mount::mount_remount(
            "/",
            MountFlags::BIND | MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
            "",
        )
        .map_err(mount_err)?;
    }
    Ok(())
}

/// Waits for the program, relaying signals and reaping orphans; returns its exit code.
fn wait(program: Pid, signals: &libc::sigset_t) -> i32 {
    loop {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) if pid == program => return child::exit_code(status),
                Ok(Some(_orphan)) => {}
                Ok(None) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return 127,
            }
        }
        #[expect(unsafe_code, reason = "sigwaitinfo has no safe wrapper")]
        // SAFETY: `signals` is an initialized set; a null info pointer is allowed.
        let signal = unsafe { libc::sigwaitinfo(signals, std::ptr::null_mut()) };
        if RELAYED.contains(&signal)
            && let Some(signal) = Signal::from_named_raw(signal)
        {
            let _ = rustix::process::kill_process_group(program, signal);
        }
    }
}

fn relayed_set() -> libc::sigset_t {
    #[expect(unsafe_code, reason = "sigset manipulation is unsafe in libc")]
    // SAFETY: the set is initialized by sigemptyset before use; the signals are valid.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, libc::SIGCHLD);
        for signal in RELAYED {
            libc::sigaddset(&raw mut set, signal);
        }
        set
    }
}

/// Blocks `set`, so its signals wait for `sigwaitinfo` (the program starts with none blocked).
fn block(set: &libc::sigset_t) {
    #[expect(unsafe_code, reason = "sigprocmask is unsafe in libc")]
    // SAFETY: `set` is initialized; the old mask is not wanted.
    unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, set, std::ptr::null_mut());
    }
}
