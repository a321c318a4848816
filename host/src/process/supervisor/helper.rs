//! A process's helper: forked by the zygote for one `process/start`, it starts the program as
//! its child and stays its parent, and a subreaper for everything the program forks. It
//! reports the exit, relays signals, and kills the whole tree when asked or when wexec is gone
//! (its control socket reaches end of file: the kernel closes wexec's end whatever killed it).
//!
//! Runs in a single-threaded process: it may allocate and use std freely.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use super::wire::{INTERRUPT, KILL, Launch, Report, TERMINATE};

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
    let [stdin, stdout, stderr] = stdio;
    let child = match start(&launch, stdin, stdout, stderr) {
        Ok(pid) => pid,
        Err(err) => {
            let errno = err.raw_os_error().unwrap_or(libc_eio());
            let _ = report(&mut control, &Report::Failed { errno });
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
        kill_all(Some(child));
        return 0;
    }
    supervise(control, child);
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
/// controlling terminal, and SIGKILL should this helper die.
fn start(
    launch: &Launch,
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
) -> std::io::Result<Pid> {
    let Some((arg0, args)) = launch.argv.split_first() else {
        return Err(rustix::io::Errno::INVAL.into());
    };
    let mut command = Command::new(&launch.program);
    command
        .arg0(arg0)
        .args(args)
        .env_clear()
        .envs(launch.env.iter().map(|(name, value)| (name, value)))
        .current_dir(&launch.cwd)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    let helper = rustix::process::getpid();
    let tty = launch.tty;
    let descriptors = crate::startup::starting_descriptor_limit();
    #[expect(
        unsafe_code,
        reason = "pre_exec is the only way to run setsid/TIOCSCTTY/PDEATHSIG in the child"
    )]
    // SAFETY: the closure runs between fork and exec and only makes raw system calls (setsid,
    // ioctl, prctl, setrlimit, getppid through rustix; sigaction): async-signal-safe, no
    // allocation (the limit is a plain value), no locks.
    unsafe {
        command.pre_exec(move || {
            default_signal_dispositions();
            rustix::process::setsid()?;
            if tty {
                // stdin is the terminal's slave: make it the controlling terminal.
                rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            }
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            if let Some(limit) = descriptors {
                rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)?;
            }
            // The helper may have died before the death signal was armed.
            if rustix::process::getppid() != Some(helper) {
                return Err(std::io::Error::from(rustix::io::Errno::SRCH));
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    // The stdio copies held by `command` close with it: end of file on the pipes then means
    // the program's side is gone.
    drop(command);
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::other("spawned child has no pid"))?;
    // Reaped below with waitpid, never through `child`.
    drop(child);
    Ok(pid)
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
fn supervise(mut control: UnixStream, child: Pid) {
    let pidfd = rustix::process::pidfd_open(child, rustix::process::PidfdFlags::empty()).ok();
    let mut alive = true;
    loop {
        match reap(child) {
            Reaped::Child(code) => {
                alive = false;
                if report(&mut control, &Report::Exited { code }).is_err() {
                    kill_all(None);
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
            kill_all(alive.then_some(child));
            return;
        }
        for &command in &buffer[..read] {
            let group = match command {
                INTERRUPT => Signal::INT,
                TERMINATE => Signal::TERM,
                KILL => {
                    // The program's own exit still counts: reported, it is the program's
                    // status (137) rather than a helper that vanished.
                    if let Some(code) = kill_all(alive.then_some(child)) {
                        let _ = report(&mut control, &Report::Exited { code });
                    }
                    return;
                }
                _ => continue,
            };
            let _ = rustix::process::kill_process_group(child, group);
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
fn exit_code(status: rustix::process::WaitStatus) -> i32 {
    status
        .exit_status()
        .or_else(|| status.terminating_signal().map(|signal| 128 + signal))
        .unwrap_or(-1)
}

/// SIGKILLs the program's group and every descendant, until none is left. Descendants whose
/// parent dies come to this helper (it is their subreaper), so once it has no child left,
/// nothing the program forked survives. Returns the program's exit code if it was reaped here.
fn kill_all(child: Option<Pid>) -> Option<i32> {
    if let Some(child) = child {
        let _ = rustix::process::kill_process_group(child, Signal::KILL);
    }
    let me = rustix::process::getpid();
    let mut code = None;
    loop {
        for pid in descendants(me) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
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
