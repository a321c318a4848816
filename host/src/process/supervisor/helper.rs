//! A process's helper: forked by the zygote for one `process/start`, it starts the program as
//! its child and stays its parent, and a subreaper for everything the program forks. It
//! reports the exit, relays signals, and kills the whole tree when asked or when wexec is gone
//! (its control socket reaches end of file: the kernel closes wexec's end whatever killed it).
//!
//! Runs in a single-threaded process: it may allocate and use std freely.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, Signal, WaitOptions};

use super::child::{exit_code, prepare_program};
use super::confine;
use super::exec::{self, Program};
use super::wire::{INTERRUPT, KILL, Launch, Report, Rlimits, TERMINATE};

/// How often the helper looks for the end of the last descendant once the program itself has
/// exited (orphans are reaped meanwhile).
const REAP_INTERVAL_MS: i64 = 250;

/// What a spare helper has prepared, and so which starts it can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Nothing: unconfined starts.
    Plain,
    /// Confined starts without network: the user, PID, IPC and network namespaces entered.
    Confined,
    /// Confined starts with network: the same but the network namespace.
    ConfinedNetwork,
}

impl Kind {
    /// Every kind, in socket order.
    pub const ALL: [Self; 3] = [Self::Plain, Self::Confined, Self::ConfinedNetwork];

    /// The kind of helper `launch` needs. The Landlock tier needs a helper outside any
    /// namespace: without network a plain one; with network one of the zygote that keeps
    /// processes off wexec's ports, whose attempt at namespaces failed (the tier is in force
    /// because they do).
    pub fn of(launch: &Launch) -> Self {
        match &launch.confinement {
            None => Self::Plain,
            Some(confinement) if confinement.network => Self::ConfinedNetwork,
            Some(confinement) if confinement.landlock.is_some() => Self::Plain,
            Some(_) => Self::Confined,
        }
    }

    /// Its socket's index in [`Self::ALL`], and the byte that asks for its replacement.
    pub fn byte(self) -> u8 {
        self as u8
    }

    /// Its socket's index in [`Self::ALL`].
    pub fn index(self) -> usize {
        usize::from(self.byte())
    }
}

/// What the spare helper that took a request had prepared.
pub struct Spare {
    /// Its kind: the starts it can take.
    pub kind: Kind,
    /// Whether its zygote's restriction worked (the ports guard of spares with network).
    pub guarded: Result<(), confine::SetupError>,
    /// Whether entering its kind's namespaces worked (after the restriction).
    pub entered: Result<(), confine::SetupError>,
}

/// Runs the helper for one process; returns its exit status.
pub fn run(spare: &Spare, control: OwnedFd, stdio: [OwnedFd; 3]) -> i32 {
    let mut control = UnixStream::from(control);
    // Everything the program forks that loses its parent comes here, so it can be found and
    // killed, never adopted by init.
    if rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_err() {
        return 1;
    }
    // Orphans are reaped as they end, not when the program does: a long-running program whose
    // descendants keep exiting must not fill the process table with zombies.
    let Some(exits) = ChildExits::new() else {
        return 1;
    };
    let Some(launch) = read_launch(&control) else {
        return 1;
    };
    let tree = Tree::of(&launch);
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
    let (child, init_status) = match start(spare, &launch, stdio, &control, join) {
        Ok(started) => started,
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
        kill_all(Some(child), tree);
        return 0;
    }
    supervise(control, child, tree, init_status, &exits);
    0
}

/// How the program's processes are found and ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tree {
    /// The program leads its own session and process group; its descendants are found
    /// through `/proc` (this helper is their subreaper) and outlive it until its session
    /// ends.
    Plain,
    /// The program runs under its PID namespace's init, this helper's child: killing the init
    /// ends them all, and they end when the program does.
    Namespace,
    /// As `Plain`, but what the program forked is killed when it exits, as the namespace
    /// tier's end of a PID namespace would.
    Landlock,
}

impl Tree {
    fn of(launch: &Launch) -> Self {
        match &launch.confinement {
            None => Self::Plain,
            Some(confinement) if confinement.landlock.is_some() => Self::Landlock,
            Some(_) => Self::Namespace,
        }
    }
}

fn libc_eio() -> i32 {
    rustix::io::Errno::IO.raw_os_error()
}

/// Runs, once, the code a spare helper runs when it takes a start (decoding a launch, encoding
/// reports, preparing the program's strings) on a made-up launch of `kind`. A spare is a fresh
/// fork: every page of code it runs the first time, and every page of heap it writes, costs a
/// page fault, ~30 of them on the way from the request to the exec; taken while the spare
/// waits, they are not taken during a start.
pub fn warm_up(kind: Kind) {
    let confinement = (kind != Kind::Plain).then(|| super::wire::Confinement {
        layers: vec![super::wire::Layer {
            path: "/".to_owned(),
            access: super::wire::LayerAccess::Read,
        }],
        network: kind == Kind::ConfinedNetwork,
        probe: false,
        landlock: None,
    });
    let sample = Launch {
        program: "/bin/true".to_owned(),
        argv: vec!["true".to_owned()],
        env: vec![("PATH".to_owned(), "/usr/bin:/bin".to_owned())],
        cwd: "/".to_owned(),
        tty: false,
        confinement,
        limits: Rlimits::default(),
        cgroup: None,
    };
    let Ok(line) = serde_json::to_vec(&sample) else {
        return;
    };
    let decoded: Option<Launch> = serde_json::from_slice(&line).ok();
    let _ = decoded.as_ref().map(Program::new);
    for report in [Report::Spawned { pid: 1 }, Report::Exited { code: 0 }] {
        let _ = serde_json::to_vec(&report);
    }
    drop(std::hint::black_box(vec![0u8; 8192]));
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
/// PID namespace's init instead ([`super::confine`]), which is then the child returned, with
/// its status pipe.
fn start(
    spare: &Spare,
    launch: &Launch,
    stdio: [OwnedFd; 3],
    control: &UnixStream,
    join: Option<RawFd>,
) -> Result<(Pid, Option<File>), Report> {
    if Kind::of(launch) != spare.kind {
        return Err(Report::Failed {
            errno: rustix::io::Errno::INVAL.raw_os_error(),
            mechanism: Some("the process supervisor (a helper of the wrong kind)".to_owned()),
        });
    }
    if let Some(confinement) = &launch.confinement
        && let Some(plan) = &confinement.landlock
    {
        return start_landlock(spare, launch, confinement.network, plan, stdio, join)
            .map(|child| (child, None));
    }
    if let Some(confinement) = &launch.confinement {
        use std::os::fd::AsRawFd;
        let started = spare
            .entered
            .map_err(confine::StartFailure::Setup)
            .and_then(|()| confine::start(launch, confinement, stdio, control.as_raw_fd(), join));
        return started
            .map(|confined| (confined.init, Some(confined.status)))
            .map_err(|failure| match failure {
                confine::StartFailure::Setup(err) => Report::Failed {
                    errno: err.errno,
                    mechanism: Some(err.mechanism.to_owned()),
                },
                confine::StartFailure::Program(errno) => Report::Failed {
                    errno,
                    mechanism: None,
                },
            });
    }
    let failed = |errno: i32| Report::Failed {
        errno,
        mechanism: None,
    };
    let program = Program::new(launch).map_err(|errno| failed(errno.raw_os_error()))?;
    let helper = rustix::process::getpid();
    let (tty, limits) = (launch.tty, launch.limits);
    let child = exec::spawn(&program, &stdio, &mut || {
        prepare_program(tty, helper, &limits, join)
    })
    .map_err(failed)?;
    // Our copies close here: end of file on the pipes then means the program's side is gone.
    drop(stdio);
    Ok((child, None))
}

/// Starts the program under the Landlock tier ([`confine::landlock`]): as an unconfined one,
/// then, before its exec, without capabilities, restricted to its ruleset and filtered. A
/// spare that entered namespaces for the namespace tier cannot take it (its next child would
/// be a PID namespace's init).
fn start_landlock(
    spare: &Spare,
    launch: &Launch,
    network: bool,
    plan: &super::wire::Landlock,
    stdio: [OwnedFd; 3],
    join: Option<RawFd>,
) -> Result<Pid, Report> {
    let setup = |err: confine::SetupError| Report::Failed {
        errno: err.errno,
        mechanism: Some(err.mechanism.to_owned()),
    };
    spare.guarded.map_err(setup)?;
    if spare.kind != Kind::Plain && spare.entered.is_ok() {
        return Err(setup(confine::SetupError {
            errno: rustix::io::Errno::INVAL.raw_os_error(),
            mechanism: "the Landlock tier (a helper inside namespaces)",
        }));
    }
    let ruleset = confine::landlock::prepare(plan).map_err(setup)?;
    let filters = confine::filter::filters(network).map_err(setup)?;
    let tier_filters = confine::filter::landlock_tier(plan.metadata).map_err(setup)?;
    let program = Program::new(launch).map_err(|errno| Report::Failed {
        errno: errno.raw_os_error(),
        mechanism: None,
    })?;
    let helper = rustix::process::getpid();
    let (tty, limits) = (launch.tty, launch.limits);
    let probe = launch.confinement.as_ref().is_some_and(|c| c.probe);
    // Written by the child, which shares this memory until it execs: the step that failed.
    let mut step: Option<&'static str> = None;
    let spawned = exec::spawn(&program, &stdio, &mut || {
        prepare_program(tty, helper, &limits, join)?;
        step = Some("capabilities");
        confine::drop_capabilities()?;
        step = Some("Landlock");
        confine::landlock::restrict(&ruleset)?;
        step = Some("seccomp");
        confine::filter::install(filters)?;
        confine::filter::install(tier_filters)?;
        step = None;
        if probe {
            super::child::exit(0);
        }
        Ok(())
    });
    drop(stdio);
    spawned.map_err(|errno| Report::Failed {
        errno,
        mechanism: step.map(str::to_owned),
    })
}

/// Reports the exit and relays commands until everything is gone or wexec says (or is) done.
/// A confined `child` is its PID namespace's init, which relays signals to the program and
/// reports the program's exit on `init_status` before it exits itself.
fn supervise(
    mut control: UnixStream,
    child: Pid,
    tree: Tree,
    mut init_status: Option<File>,
    exits: &ChildExits,
) {
    let pidfd = rustix::process::pidfd_open(child, rustix::process::PidfdFlags::empty()).ok();
    let mut alive = true;
    let mut reported = false;
    loop {
        match reap(child) {
            Reaped::Child(code) => {
                alive = false;
                if !reported && report(&mut control, &Report::Exited { code }).is_err() {
                    kill_all(None, tree);
                    return;
                }
                reported = true;
                match tree {
                    // The init reaped: its PID namespace, and every process in it, is gone.
                    Tree::Namespace => {
                        let _ = report(&mut control, &Report::Emptied);
                    }
                    Tree::Landlock => {
                        kill_all(None, tree);
                        let _ = report(&mut control, &Report::Emptied);
                        return;
                    }
                    Tree::Plain => {}
                }
                continue;
            }
            // The program and everything it forked are gone.
            Reaped::NoChildren if !alive => return,
            Reaped::Nothing | Reaped::NoChildren => {}
        }
        let mut fds = vec![
            PollFd::new(&control, PollFlags::IN),
            PollFd::new(&exits.fd, PollFlags::IN),
        ];
        if let (true, Some(pidfd)) = (alive, &pidfd) {
            fds.push(PollFd::new(pidfd, PollFlags::IN));
        }
        let status_index = fds.len();
        if let Some(status) = &init_status {
            fds.push(PollFd::new(status, PollFlags::IN));
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
        if !fds[1].revents().is_empty() {
            // Reaped at the top of the loop.
            exits.drain();
        }
        let status_ready = fds
            .get(status_index)
            .is_some_and(|fd| !fd.revents().is_empty());
        drop(fds);
        if status_ready && let Some(status) = &mut init_status {
            if let Some((confine::init::EXITED, code)) = confine::read_status(status) {
                if report(&mut control, &Report::Exited { code }).is_err() {
                    kill_all(alive.then_some(child), tree);
                    return;
                }
                reported = true;
            }
            // Nothing more comes on it.
            init_status = None;
        }
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
            kill_all(alive.then_some(child), tree);
            return;
        }
        for &command in &buffer[..read] {
            let group = match command {
                INTERRUPT => Signal::INT,
                TERMINATE => Signal::TERM,
                KILL => {
                    // The program's own exit still counts: reported, it is the program's
                    // status (137) rather than a helper that vanished.
                    if let Some(code) = kill_all(alive.then_some(child), tree)
                        && !reported
                    {
                        let _ = report(&mut control, &Report::Exited { code });
                    }
                    return;
                }
                _ => continue,
            };
            let _ = if tree == Tree::Namespace {
                rustix::process::kill_process(child, group)
            } else {
                rustix::process::kill_process_group(child, group)
            };
        }
    }
}

/// `SIGCHLD`, blocked and read from a signalfd: the helper's poll wakes whenever a child
/// (the program or an orphan it adopted) ends. The program starts with an empty signal mask
/// ([`exec::spawn`]).
struct ChildExits {
    fd: OwnedFd,
}

impl ChildExits {
    fn new() -> Option<Self> {
        #[expect(unsafe_code, reason = "sigprocmask and signalfd are unsafe in libc")]
        // SAFETY: the set is initialized by sigemptyset before use; signalfd returns a new
        // descriptor (or -1) that is owned here and nowhere else.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            libc::sigaddset(&raw mut set, libc::SIGCHLD);
            libc::sigprocmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
            let fd = libc::signalfd(-1, &raw const set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            (fd >= 0).then(|| Self {
                fd: std::os::fd::FromRawFd::from_raw_fd(fd),
            })
        }
    }

    /// Empties the descriptor (the exits themselves are reaped with `wait`).
    fn drain(&self) {
        let mut buffer = [0u8; 128 * 8];
        while rustix::io::read(&self.fd, &mut buffer).is_ok_and(|read| read > 0) {}
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

/// SIGKILLs the program's group and every descendant, until none is left. Descendants whose
/// parent dies come to this helper (it is their subreaper), so once it has no child left,
/// nothing the program forked survives. Under a PID namespace, killing the init kills the
/// whole namespace, and `/proc` here is the namespace's (its pids mean other processes here),
/// so it is not read. Returns the program's exit code if it was reaped here.
///
/// Otherwise the tree is walked through `/proc/<pid>/task/<tid>/children`, from this helper
/// down, each process killed before its children are read: a descendant that keeps forking and
/// exiting (a new pid each time, in a session of its own) is caught within a walk of the tree
/// alone, where a scan of all of `/proc` (thousands of entries) lost that race again and again.
fn kill_all(child: Option<Pid>, tree: Tree) -> Option<i32> {
    if let Some(child) = child {
        let _ = if tree == Tree::Namespace {
            rustix::process::kill_process(child, Signal::KILL)
        } else {
            rustix::process::kill_process_group(child, Signal::KILL)
        };
    }
    let me = rustix::process::getpid();
    let mut code = None;
    loop {
        if tree != Tree::Namespace {
            kill_descendants(me);
        }
        // Everything found is dying: wait for one, then reap whatever else has ended before
        // walking again (a zombie costs a walk nothing, but holds its pid).
        let mut options = WaitOptions::empty();
        loop {
            match rustix::process::wait(options) {
                Ok(Some((pid, status))) => {
                    if Some(pid) == child {
                        code = Some(exit_code(status));
                    }
                    options = WaitOptions::NOHANG;
                }
                Ok(None) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return code,
            }
        }
    }
}

/// SIGKILLs every living descendant of `ancestor`, parents before their children.
fn kill_descendants(ancestor: Pid) {
    let ancestor = ancestor.as_raw_nonzero().get();
    // A kernel without `children` files (`CONFIG_PROC_CHILDREN`): one scan of all of `/proc`.
    if std::fs::metadata(format!("/proc/{ancestor}/task/{ancestor}/children")).is_err() {
        for pid in descendants(ancestor) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
        return;
    }
    let mut pending: Vec<(i32, i32)> = children_of(ancestor)
        .into_iter()
        .map(|child| (ancestor, child))
        .collect();
    while let Some((parent, pid)) = pending.pop() {
        if kill_child(parent, pid) {
            pending.extend(children_of(pid).into_iter().map(|child| (pid, child)));
        }
    }
}

/// SIGKILLs `pid` if it is still the child of `parent`; whether it was. A pid read from
/// `/proc` may have ended and been reused by an unrelated process of the same user since: the
/// pidfd pins the process, which is killed only if its parent is the one it was found under
/// (a reused pid is not: the tree's processes only ever get the helper as a new parent).
fn kill_child(parent: i32, pid: i32) -> bool {
    let Some(process) = Pid::from_raw(pid) else {
        return false;
    };
    let pidfd = match rustix::process::pidfd_open(process, rustix::process::PidfdFlags::empty()) {
        Ok(pidfd) => Some(pidfd),
        Err(rustix::io::Errno::SRCH) => return false,
        // No descriptor to be had (a kernel without pidfds, no descriptor left): killed by
        // pid, which is still better than leaving it.
        Err(_) => None,
    };
    if parent_of(pid) != Some(parent) {
        return false;
    }
    match pidfd {
        Some(pidfd) => rustix::process::pidfd_send_signal(&pidfd, Signal::KILL).is_ok(),
        None => rustix::process::kill_process(process, Signal::KILL).is_ok(),
    }
}

/// The children of `pid`, from the `children` file of each of its threads (none once it is
/// gone).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut children = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(
                list.split_ascii_whitespace()
                    .filter_map(|pid| pid.parse::<i32>().ok()),
            );
        }
    }
    children
}

/// Every living descendant of `ancestor`, from `/proc`'s parent links.
fn descendants(ancestor: i32) -> Vec<Pid> {
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
    let mut pending = vec![ancestor];
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
