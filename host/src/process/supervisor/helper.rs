//! A process's helper: forked by the zygote for one `process/start`, it starts the program as
//! its child and stays its parent, and a subreaper for everything the program forks. It
//! reports the exit, relays signals, and kills the whole tree when asked or when wexec is gone
//! (its control socket reaches end of file: the kernel closes wexec's end whatever killed it).
//!
//! Runs in a single-threaded process: it may allocate and use std freely.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use super::confine;
use super::wire::{INTERRUPT, KILL, Launch, Report, Rlimits, TERMINATE};

/// How often the helper looks for the end of the last descendant once the program itself has
/// exited (orphans are reaped meanwhile).
const REAP_INTERVAL_MS: i64 = 250;

/// Runs the helper for one process; returns its exit status.
pub fn run(control: OwnedFd, stdio: [OwnedFd; 3]) -> i32 {
    let mut control = UnixStream::from(control);
    // Everything the program forks that loses its parent comes here, so it can be found and
    // killed, never adopted by init.
    if rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_err() {
        return 1;
    }
    let Some(launch) = read_launch(&control) else {
        return 1;
    };
    let confined = launch.confinement.is_some();
    // Opened here, before any namespace: the program writes itself into it between fork and
    // exec, wherever its view of the filesystem is by then.
    let cgroup = match &launch.cgroup {
        Some(procs) => match std::fs::OpenOptions::new().write(true).open(procs) {
            Ok(file) => Some(OwnedFd::from(file)),
            Err(err) => {
                let _ = report(
                    &mut control,
                    &Report::Failed {
                        errno: err.raw_os_error().unwrap_or(libc_eio()),
                        mechanism: Some("the session's pids cgroup".to_owned()),
                    },
                );
                return 0;
            }
        },
        None => None,
    };
    let join = cgroup.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    let child = match start(&launch, stdio, &control, join) {
        Ok(pid) => pid,
        Err(failure) => {
            let _ = report(&mut control, &failure);
            return 0;
        }
    };
    if report(
        &mut control,
        &Report::Spawned {
            pid: child.as_raw_nonzero().get(),
        },
    )
    .is_err()
    {
        kill_all(Some(child), confined);
        return 0;
    }
    supervise(control, child, confined);
    0
}

fn libc_eio() -> i32 {
    rustix::io::Errno::IO.raw_os_error()
}

/// The launch line wexec writes first; `None` if wexec went away or wrote something else.
fn read_launch(control: &UnixStream) -> Option<Launch> {
    let mut line = Vec::new();
    BufReader::new(control.try_clone().ok()?)
        .take(crate::rpc::MAX_MESSAGE_BYTES as u64 * 2)
        .read_until(b'\n', &mut line)
        .ok()?;
    serde_json::from_slice(&line).ok()
}

fn report(control: &mut UnixStream, report: &Report) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(report).map_err(std::io::Error::other)?;
    line.push(b'\n');
    control.write_all(&line)
}

/// Starts the program: it leads a new session and process group, gets the terminal as its
/// controlling terminal, and SIGKILL should this helper die. Confined, it starts under its
/// PID namespace's init instead ([`super::confine`]), which is then the child returned.
fn start(
    launch: &Launch,
    stdio: [OwnedFd; 3],
    control: &UnixStream,
    join: Option<RawFd>,
) -> Result<Pid, Report> {
    if let Some(confinement) = &launch.confinement {
        use std::os::fd::AsRawFd;
        return confine::start(launch, confinement, stdio, control.as_raw_fd(), join).map_err(
            |failure| match failure {
                confine::StartFailure::Setup(err) => Report::Failed {
                    errno: err.errno,
                    mechanism: Some(err.mechanism.to_owned()),
                },
                confine::StartFailure::Program(errno) => Report::Failed {
                    errno,
                    mechanism: None,
                },
            },
        );
    }
    let failed = |err: std::io::Error| Report::Failed {
        errno: err.raw_os_error().unwrap_or(libc_eio()),
        mechanism: None,
    };
    let mut command = command(launch, stdio);
    let helper = rustix::process::getpid();
    let (tty, limits) = (launch.tty, launch.limits);
    #[expect(
        unsafe_code,
        reason = "pre_exec is the only way to run setsid/TIOCSCTTY/PDEATHSIG in the child"
    )]
    // SAFETY: the closure only makes system calls (see `prepare_program`).
    unsafe {
        command.pre_exec(move || prepare_program(tty, helper, &limits, join));
    }
    let child = command.spawn().map_err(failed)?;
    // The stdio copies held by `command` close with it: end of file on the pipes then means
    // the program's side is gone.
    drop(command);
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| failed(std::io::Error::other("spawned child has no pid")))?;
    // Reaped below with waitpid, never through `child`.
    drop(child);
    Ok(pid)
}

/// The program's command: its arguments, exactly its environment, its directory and stdio.
pub(super) fn command(launch: &Launch, stdio: [OwnedFd; 3]) -> Command {
    let [stdin, stdout, stderr] = stdio;
    let mut command = Command::new(&launch.program);
    if let Some((arg0, args)) = launch.argv.split_first() {
        command.arg0(arg0).args(args);
    }
    command
        .env_clear()
        .envs(launch.env.iter().map(|(name, value)| (name, value)))
        .current_dir(&launch.cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    command
}

/// Sets up the program between fork and exec: default signal dispositions, a new session,
/// the terminal, death with `parent`, the descriptor limit wexec started with and the
/// operator's limits. System calls only (async-signal-safe, no allocation, no locks).
pub(super) fn prepare_program(
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
    if let Some(limit) = crate::startup::starting_descriptor_limit() {
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
        reason = "a write on a raw descriptor between fork and exec"
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

/// The operator's `setrlimit` limits (docs/protocol.md, "Resource limits").
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
/// std already empties the signal mask and restores SIGPIPE. Runs between fork and exec.
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

/// Reports the exit and relays commands until everything is gone or wexec says (or is) done.
/// A confined `child` is its PID namespace's init, which relays signals to the program.
fn supervise(mut control: UnixStream, child: Pid, confined: bool) {
    let pidfd = rustix::process::pidfd_open(child, rustix::process::PidfdFlags::empty()).ok();
    let mut alive = true;
    loop {
        match reap(child) {
            Reaped::Child(code) => {
                alive = false;
                if report(&mut control, &Report::Exited { code }).is_err() {
                    kill_all(None, confined);
                    return;
                }
                continue;
            }
            // The program and everything it forked are gone.
            Reaped::NoChildren if !alive => return,
            Reaped::Nothing | Reaped::NoChildren => {}
        }
        let mut fds = vec![PollFd::new(&control, PollFlags::IN)];
        if let (true, Some(pidfd)) = (alive, &pidfd) {
            fds.push(PollFd::new(pidfd, PollFlags::IN));
        }
        // Until the program exits its pidfd wakes us; after, orphans are looked for now and
        // then.
        let timeout = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: REAP_INTERVAL_MS * 1_000_000,
        };
        let waited = if alive && pidfd.is_some() {
            rustix::event::poll(&mut fds, None)
        } else {
            rustix::event::poll(&mut fds, Some(&timeout))
        };
        if waited.is_err() {
            continue;
        }
        let commands = fds[0].revents();
        if commands.is_empty() {
            continue;
        }
        let mut buffer = [0u8; 64];
        let read = match control.read(&mut buffer) {
            Ok(read) => read,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        if read == 0 {
            // wexec is gone, or dropped the process: nothing it started may outlive it.
            kill_all(alive.then_some(child), confined);
            return;
        }
        for &command in &buffer[..read] {
            let group = match command {
                INTERRUPT => Signal::INT,
                TERMINATE => Signal::TERM,
                KILL => {
                    // The program's own exit still counts: reported, it is the program's
                    // status (137) rather than a helper that vanished.
                    if let Some(code) = kill_all(alive.then_some(child), confined) {
                        let _ = report(&mut control, &Report::Exited { code });
                    }
                    return;
                }
                _ => continue,
            };
            let _ = if confined {
                rustix::process::kill_process(child, group)
            } else {
                rustix::process::kill_process_group(child, group)
            };
        }
    }
}

enum Reaped {
    /// The program exited with this code.
    Child(i32),
    /// Children remain, none has exited.
    Nothing,
    /// No child is left.
    NoChildren,
}

/// Reaps every exited child (orphans included) without waiting; reports the program's exit.
fn reap(child: Pid) -> Reaped {
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) if pid == child => return Reaped::Child(exit_code(status)),
            Ok(Some(_orphan)) => {}
            Ok(None) => return Reaped::Nothing,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return Reaped::NoChildren,
        }
    }
}

/// The exit code as PROTOCOL §8.8 gives it: the status, or 128 + the signal.
pub(super) fn exit_code(status: rustix::process::WaitStatus) -> i32 {
    status
        .exit_status()
        .or_else(|| status.terminating_signal().map(|signal| 128 + signal))
        .unwrap_or(-1)
}

/// SIGKILLs the program's group and every descendant, until none is left. Descendants whose
/// parent dies come to this helper (it is their subreaper), so once it has no child left,
/// nothing the program forked survives. Confined, killing the init kills its whole PID
/// namespace, and `/proc` here is the namespace's (its pids mean other processes here), so it
/// is not read. Returns the program's exit code if it was reaped here.
fn kill_all(child: Option<Pid>, confined: bool) -> Option<i32> {
    if let Some(child) = child {
        let _ = if confined {
            rustix::process::kill_process(child, Signal::KILL)
        } else {
            rustix::process::kill_process_group(child, Signal::KILL)
        };
    }
    let me = rustix::process::getpid();
    let mut code = None;
    loop {
        if !confined {
            for pid in descendants(me) {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
        }
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if Some(pid) == child => code = Some(exit_code(status)),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return code,
        }
    }
}

/// Every living descendant of `ancestor`, from `/proc`'s parent links.
fn descendants(ancestor: Pid) -> Vec<Pid> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        else {
            continue;
        };
        if let Some(parent) = parent_of(pid) {
            children.entry(parent).or_default().push(pid);
        }
    }
    let mut found = Vec::new();
    let mut pending = vec![ancestor.as_raw_nonzero().get()];
    while let Some(pid) = pending.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            found.extend(Pid::from_raw(child));
            pending.push(child);
        }
    }
    found
}

/// The parent of `pid` (field 4 of `/proc/<pid>/stat`, after the parenthesized name).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_come_from_proc() {
        let me = std::process::id() as i32;
        assert_eq!(
            parent_of(me),
            Some(rustix::process::getppid().map_or(0, |pid| pid.as_raw_nonzero().get()))
        );
        assert_eq!(parent_of(i32::MAX), None);
    }
}
