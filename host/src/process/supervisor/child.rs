//! What runs in a forked child of the supervisor (the zygote, a helper, a sandbox's init):
//! `fork` and `_exit`, the exit code of a reaped child, and the program's own setup between
//! its fork and its exec. System calls only: no allocation, no locks.

use std::os::fd::RawFd;

use rustix::process::{Pid, Signal};

use super::wire::Rlimits;

/// `fork`: `Some(0)` in the child, `Some(pid)` in the parent, `None` on failure.
pub fn fork() -> Option<i32> {
    #[expect(unsafe_code, reason = "fork is unsafe in libc")]
    // SAFETY: called only in a single-threaded process (the zygote, or wexec before it starts
    // any thread), so the child's copy of every lock and allocator is in a consistent state.
    let pid = unsafe { libc::fork() };
    (pid >= 0).then_some(pid)
}

/// Ends the process at once, without unwinding or running destructors meant for the parent.
pub fn exit(status: i32) -> ! {
    #[expect(unsafe_code, reason = "_exit is unsafe in libc")]
    // SAFETY: `_exit` ends the process; nothing runs after it.
    unsafe {
        libc::_exit(status)
    }
}

/// Sets up the program in its child before the exec ([`exec::spawn`]): default signal
/// dispositions, a new session, the terminal, death with `parent`, the descriptor limit wexec
/// started with and the operator's limits. System calls only (no allocation, no locks).
pub fn prepare_program(
    tty: bool,
    parent: Pid,
    limits: &Rlimits,
    join: Option<RawFd>,
) -> std::io::Result<()> {
    if let Some(procs) = join {
        join_cgroup(procs)?;
    }
    default_signal_dispositions();
    rustix::process::setsid()?;
    if tty {
        // stdin is the terminal's slave: make it the controlling terminal.
        rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
    }
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
    if let Some(limit) = crate::process::descriptors::starting_limit() {
        rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)?;
    }
    set_limits(limits)?;
    // The parent may have died before the death signal was armed.
    if rustix::process::getppid() != Some(parent) {
        return Err(std::io::Error::from(rustix::io::Errno::SRCH));
    }
    Ok(())
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is open as `procs`.
fn join_cgroup(procs: RawFd) -> std::io::Result<()> {
    #[expect(
        unsafe_code,
        reason = "a write on a raw descriptor in the child before its exec"
    )]
    // SAFETY: `procs` is open for the whole spawn (the helper owns it); write is
    // async-signal-safe and reads one byte of a static.
    let written = unsafe { libc::write(procs, b"0".as_ptr().cast(), 1) };
    if written == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The operator's `setrlimit` limits (docs/protocol.md §8.10).
fn set_limits(limits: &Rlimits) -> std::io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let pairs = [
        (Resource::Cpu, limits.cpu_seconds, 5),
        (Resource::As, limits.address_space, 0),
        (Resource::Nofile, limits.open_files, 0),
        (Resource::Fsize, limits.file_size, 0),
    ];
    for (resource, value, slack) in pairs {
        if let Some(value) = value {
            setrlimit(
                resource,
                Rlimit {
                    current: Some(value),
                    maximum: Some(value.saturating_add(slack)),
                },
            )?;
        }
    }
    Ok(())
}

/// Gives every signal its default disposition. A signal wexec was started with ignored (`nohup`
/// ignores SIGHUP, a shell's `&` SIGINT and SIGQUIT) would otherwise stay ignored through
/// `exec`, and a non-interactive shell cannot even `trap` it: `process/signal` would be lost.
/// [`exec::spawn`] empties the signal mask. Runs in the child before its exec.
fn default_signal_dispositions() {
    // Linux numbers signals 1..=64; sigaction refuses the rest, and SIGKILL/SIGSTOP.
    for signal in 1..=64 {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        #[expect(unsafe_code, reason = "sigaction is unsafe in libc")]
        // SAFETY: SIG_DFL is a disposition, not a handler: no code runs on the signal; the
        // zeroed struct is a valid `sigaction` (empty mask, no flags); sigaction is
        // async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The exit code as docs/protocol.md §8.8 gives it: the status, or 128 + the signal.
pub fn exit_code(status: rustix::process::WaitStatus) -> i32 {
    status
        .exit_status()
        .or_else(|| status.terminating_signal().map(|signal| 128 + signal))
        .unwrap_or(-1)
}
