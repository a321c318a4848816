//! Starting a program confined (docs/sandbox.md). The helper, single-threaded, enters new
//! user, mount, PID and (without network) network namespaces, builds the program's view
//! ([`view`]) and forks the namespace's init ([`init`]), which mounts `/proc`, pivots into the
//! view and starts the program with no capabilities, `no_new_privs` and the seccomp filters
//! ([`filter`]). The init exits with the program's status; the kernel then kills everything
//! left in the PID namespace, and SIGKILL of the init (the helper's kill) does the same, so no
//! descendant, `setsid` or double-forked, outlives its process.

pub mod filter;
mod init;
mod view;

use std::io::Read;
use std::os::fd::OwnedFd;

use rustix::process::Pid;
use rustix::thread::UnshareFlags;

use super::wire::{Confinement, Launch};

/// A failed confinement step: the OS error and the mechanism it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetupError {
    /// `errno`.
    pub errno: i32,
    /// What the kernel lacks or refused, for the startup error.
    pub mechanism: &'static str,
}

impl SetupError {
    fn new(errno: rustix::io::Errno, mechanism: &'static str) -> Self {
        Self {
            errno: errno.raw_os_error(),
            mechanism,
        }
    }

    fn from_io(err: &std::io::Error, mechanism: &'static str) -> Self {
        Self {
            errno: err
                .raw_os_error()
                .unwrap_or(rustix::io::Errno::INVAL.raw_os_error()),
            mechanism,
        }
    }
}

/// Why a confined start failed.
pub enum StartFailure {
    /// A confinement step.
    Setup(SetupError),
    /// The program itself (`chdir`, `execve`): this `errno`.
    Program(i32),
}

/// Starts `launch` confined: returns the init's pid (this helper's only child).
pub fn start(
    launch: &Launch,
    confinement: &Confinement,
    stdio: [OwnedFd; 3],
    control: std::os::fd::RawFd,
    join: Option<std::os::fd::RawFd>,
) -> Result<Pid, StartFailure> {
    let filters = filter::filters(confinement.network).map_err(StartFailure::Setup)?;
    enter_namespaces(confinement.network).map_err(StartFailure::Setup)?;
    let empty_root = view::build(confinement).map_err(StartFailure::Setup)?;
    // The init reports a failure as 5 bytes (mechanism tag, errno) on this pipe, or closes it
    // once the program runs.
    let (status_read, status_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|err| StartFailure::Setup(SetupError::new(err, "pipes")))?;
    let pipe_err = |err| StartFailure::Setup(SetupError::new(err, "pipes"));
    let helper_alive = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(pipe_err)?;
    let init = match super::zygote::fork() {
        Some(0) => {
            drop(status_read);
            #[expect(
                unsafe_code,
                reason = "closing a descriptor owned by the parent's copy"
            )]
            // SAFETY: in this forked child the helper's control socket is never used, and the
            // value owning it is never dropped (the child ends with `_exit`), so closing this
            // copy cannot double-close: wexec must see end of file once the helper is gone.
            unsafe {
                libc::close(control);
            }
            let prepared = init::Prepared {
                launch,
                confinement,
                filters,
                empty_root,
                helper_alive: &helper_alive,
                join,
            };
            super::zygote::exit(init::run(&prepared, stdio, status_write))
        }
        Some(pid) => pid,
        None => {
            return Err(StartFailure::Setup(SetupError::from_io(
                &std::io::Error::last_os_error(),
                "PID namespaces",
            )));
        }
    };
    drop(status_write);
    drop(stdio);
    let init = Pid::from_raw(init).ok_or(StartFailure::Program(libc::ECHILD))?;
    let mut status = [0u8; 5];
    let mut status_file = std::fs::File::from(status_read);
    let mut read = 0;
    while read < status.len() {
        match status_file.read(&mut status[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if read == 0 {
        return Ok(init);
    }
    let _ = rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty());
    let errno = i32::from_ne_bytes([status[1], status[2], status[3], status[4]]);
    Err(match init::mechanism(status[0]) {
        Some(mechanism) => StartFailure::Setup(SetupError { errno, mechanism }),
        None => StartFailure::Program(errno),
    })
}

/// New user, mount, PID (for the next child), UTS and IPC namespaces, and without network a
/// network namespace of its own (a shared one would let confined processes meet through
/// abstract unix sockets, which `sendmsg` can reach); the user mapped to itself (as
/// `unshare -r` maps root), groups dropped as the kernel requires.
fn enter_namespaces(network: bool) -> Result<(), SetupError> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let mut flags = UnshareFlags::NEWUSER
        | UnshareFlags::NEWNS
        | UnshareFlags::NEWPID
        | UnshareFlags::NEWUTS
        | UnshareFlags::NEWIPC;
    if !network {
        flags |= UnshareFlags::NEWNET;
    }
    #[expect(
        unsafe_code,
        reason = "unshare is unsafe in rustix (for CLONE_FILES only)"
    )]
    // SAFETY: the helper is single-threaded and the flags do not include `FILES`.
    unsafe { rustix::thread::unshare_unsafe(flags) }
        .map_err(|err| SetupError::new(err, "user namespaces"))?;
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|err| SetupError::from_io(&err, "user namespaces"))
    };
    write("/proc/self/setgroups", "deny".to_owned())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}
