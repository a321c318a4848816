//! The init of a confined program's PID namespace: forked by the helper after the view was
//! built, it mounts the namespace's `/proc`, pivots into the view, starts the program and
//! waits for it, relaying the helper's signals to the program's group and reaping orphans.
//! When the program exits the init exits with its status, and the kernel kills whatever is
//! left in the namespace.

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;

use rustix::mount::{MountFlags, UnmountFlags};
use rustix::process::{Pid, Signal, WaitOptions};
use seccompiler::BpfProgram;

use super::view::{STAGE, staged};
use super::{SetupError, filter};
use crate::process::supervisor::helper;
use crate::process::supervisor::wire::{Confinement, Launch};

/// Mechanisms a failure report names, by tag (0: the program itself).
const MECHANISMS: [&str; 3] = ["PID namespaces", "mount namespaces", "seccomp"];

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

/// What the helper prepared for the init.
pub struct Prepared<'a> {
    /// What to run.
    pub launch: &'a Launch,
    /// How.
    pub confinement: &'a Confinement,
    /// The compiled seccomp filters.
    pub filters: &'static [BpfProgram],
    /// The view's root is an empty tmpfs (remounted read-only after the pivot).
    pub empty_root: bool,
    /// The helper's pidfd: readable once the helper is gone.
    pub helper_alive: &'a OwnedFd,
    /// The session's pids cgroup (`cgroup.procs`), for the program to join.
    pub join: Option<std::os::fd::RawFd>,
}

/// Runs the init; returns its exit status (the program's exit code). Failures go to `status`.
pub fn run(prepared: &Prepared<'_>, stdio: [OwnedFd; 3], status: OwnedFd) -> i32 {
    let Prepared {
        launch,
        confinement,
        filters,
        empty_root,
        helper_alive,
        join,
    } = *prepared;
    let fail = |status: &OwnedFd, tag: u8, errno: i32| {
        let mut message = [tag, 0, 0, 0, 0];
        message[1..].copy_from_slice(&errno.to_ne_bytes());
        let _ = rustix::io::write(status, &message);
        127
    };
    if let Err(err) = enter_view(empty_root, helper_alive) {
        return fail(&status, 1 + tag_of(err.mechanism), err.errno);
    }
    if confinement.probe {
        return match filter::install(filters) {
            Ok(()) => 0,
            Err(err) => fail(&status, 3, err.raw_os_error().unwrap_or(libc::EINVAL)),
        };
    }
    let signals = relayed_set();
    block(&signals);
    let mut command = helper::command(launch, stdio);
    let init = rustix::process::getpid();
    let (tty, limits) = (launch.tty, launch.limits);
    #[expect(
        unsafe_code,
        reason = "pre_exec is the only way to set up the program between fork and exec"
    )]
    // SAFETY: the closure makes system calls only (see `helper::prepare_program` and
    // `filter::install`): no allocation, no locks.
    unsafe {
        command.pre_exec(move || {
            helper::prepare_program(tty, init, &limits, join)?;
            drop_capabilities()?;
            filter::install(filters)
        });
    }
    let program = match command.spawn() {
        Ok(child) => child,
        Err(err) => return fail(&status, 0, err.raw_os_error().unwrap_or(libc::EIO)),
    };
    drop(command);
    drop(status);
    let Some(program) = i32::try_from(program.id()).ok().and_then(Pid::from_raw) else {
        return 127;
    };
    wait(program, &signals)
}

fn tag_of(mechanism: &str) -> u8 {
    MECHANISMS
        .iter()
        .position(|known| *known == mechanism)
        .and_then(|index| u8::try_from(index).ok())
        .unwrap_or(1)
}

/// Dies with the helper, mounts `/proc`, pivots into the view.
fn enter_view(empty_root: bool, helper_alive: &OwnedFd) -> Result<(), SetupError> {
    let pid_err = |err: rustix::io::Errno| SetupError::new(err, "PID namespaces");
    let mount_err = |err: rustix::io::Errno| SetupError::new(err, "mount namespaces");
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL)).map_err(pid_err)?;
    // The helper may have died before the death signal was armed: its pidfd says so.
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
                Ok(Some((pid, status))) if pid == program => return helper::exit_code(status),
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

/// Blocks `set`, so its signals wait for `sigwaitinfo` (std unblocks them in the program).
fn block(set: &libc::sigset_t) {
    #[expect(unsafe_code, reason = "sigprocmask is unsafe in libc")]
    // SAFETY: `set` is initialized; the old mask is not wanted.
    unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, set, std::ptr::null_mut());
    }
}

/// Empties every capability set of the program: the bounding set (so `execve` as root grants
/// none), the ambient set, then effective, permitted and inheritable. Runs between fork and
/// exec: system calls only.
fn drop_capabilities() -> std::io::Result<()> {
    for capability in 0..64 {
        #[expect(unsafe_code, reason = "prctl is unsafe in libc")]
        // SAFETY: PR_CAPBSET_DROP takes a capability number; unknown ones fail with EINVAL.
        unsafe {
            libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0);
        }
    }
    #[expect(unsafe_code, reason = "prctl and capset are unsafe in libc")]
    // SAFETY: plain values and a pointer to live, correctly sized capset structures.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &raw const header, data.as_ptr()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
