//! Starting a program confined (docs/sandbox.md). The helper, single-threaded, entered new
//! user, PID, IPC and (without network) network namespaces while it waited as a spare
//! ([`enter_namespaces`]). At the start it enters new mount and UTS namespaces (copies of the
//! host's as they are now), forks the namespace's init ([`init`]) and builds the program's
//! view ([`view`]) meanwhile. The init then mounts `/proc`, pivots into the view and starts
//! the program with no capabilities, `no_new_privs` and the seccomp filters ([`filter`]). When
//! the program exits the init reports it and exits; the kernel then kills everything left in the PID namespace, and SIGKILL of
//! the init (the helper's kill) does the same, so no descendant, `setsid` or double-forked,
//! outlives its process.

pub mod filter;
pub mod init;
pub mod landlock;
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

/// Starts `launch` confined, under its PID namespace's init.
pub fn start(
    launch: &Launch,
    confinement: &Confinement,
    stdio: [OwnedFd; 3],
    control: std::os::fd::RawFd,
    join: Option<std::os::fd::RawFd>,
) -> Result<Confined, StartFailure> {
    let filters = filter::filters(confinement.network).map_err(StartFailure::Setup)?;
    enter_mount_namespace().map_err(StartFailure::Setup)?;
    let pipe_err = |err| StartFailure::Setup(SetupError::new(err, "pipes"));
    // The init reports on this pipe, 5 bytes a message: a failure (mechanism tag, errno), or
    // that the program runs and later its exit code (`init::STARTED`, `init::EXITED`).
    let (status_read, status_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(pipe_err)?;
    // And it learns on this one that the view is built (`init::VIEW_BUILT`...).
    let (view_read, view_write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(pipe_err)?;
    let helper_alive = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(pipe_err)?;
    // Forked before the view is built, in the same mount namespace: its fork and its own
    // preparations run meanwhile.
    let init = match super::child::fork() {
        Some(0) => {
            drop(status_read);
            drop(view_write);
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
                helper_alive: &helper_alive,
                join,
                view: view_read,
            };
            super::child::exit(init::run(prepared, stdio, status_write))
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
    drop(view_read);
    drop(stdio);
    let init = Pid::from_raw(init).ok_or(StartFailure::Program(libc::ECHILD))?;
    match view::build(confinement) {
        Ok(empty_root) => {
            let built = if empty_root {
                init::VIEW_BUILT_EMPTY_ROOT
            } else {
                init::VIEW_BUILT
            };
            let _ = rustix::io::write(&view_write, &[built]);
            drop(view_write);
        }
        Err(err) => {
            // End of file on its pipe: the init exits, and the namespace with it.
            drop(view_write);
            let _ = rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty());
            return Err(StartFailure::Setup(err));
        }
    }
    let mut status_file = std::fs::File::from(status_read);
    let status = read_status(&mut status_file);
    match status {
        Some((init::STARTED, _)) => {
            return Ok(Confined {
                init,
                status: status_file,
            });
        }
        _ => {
            let _ = rustix::process::waitpid(Some(init), rustix::process::WaitOptions::empty());
        }
    }
    Err(match status {
        Some((tag, errno)) => match init::mechanism(tag) {
            Some(mechanism) => StartFailure::Setup(SetupError { errno, mechanism }),
            None => StartFailure::Program(errno),
        },
        // The init died before it could say anything.
        None => StartFailure::Setup(SetupError::new(rustix::io::Errno::SRCH, "PID namespaces")),
    })
}

/// The init's next status message; `None` once it is gone.
pub fn read_status(pipe: &mut std::fs::File) -> Option<(u8, i32)> {
    let mut status = [0u8; 5];
    pipe.read_exact(&mut status).ok()?;
    let [tag, value @ ..] = status;
    Some((tag, i32::from_ne_bytes(value)))
}

/// A confined program's init, running it.
pub struct Confined {
    /// The init's pid (this helper's only child).
    pub init: Pid,
    /// The init's status pipe, on which the program's exit comes next ([`init::EXITED`]).
    pub status: std::fs::File,
}

/// New user, PID (for the next child) and IPC namespaces, and without network a network
/// namespace of its own (a shared one would let confined processes meet through abstract unix
/// sockets, which `sendmsg` can reach); the user mapped to itself (as `unshare -r` maps root),
/// groups dropped as the kernel requires. None of them copies anything of the host that could
/// change before the start (the network namespace is empty, the IPC one too), so a spare
/// helper enters them ahead of its request: they are most of the sandbox's setup time.
pub fn enter_namespaces(network: bool) -> Result<(), SetupError> {
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let mut flags = UnshareFlags::NEWUSER | UnshareFlags::NEWPID | UnshareFlags::NEWIPC;
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
    // A non-dumpable process's `/proc` files belong to root, so a helper running as another
    // user could not open its own maps: it is dumpable while it writes them (bubblewrap does
    // the same), and only then.
    let unprivileged = !rustix::process::geteuid().is_root();
    let dumpable = |behavior| {
        if unprivileged {
            rustix::process::set_dumpable_behavior(behavior)
                .map_err(|err| SetupError::new(err, "user namespaces"))
        } else {
            Ok(())
        }
    };
    dumpable(rustix::process::DumpableBehavior::Dumpable)?;
    let written = write("/proc/self/setgroups", "deny".to_owned())
        .and_then(|()| write("/proc/self/uid_map", format!("{uid} {uid} 1")))
        .and_then(|()| write("/proc/self/gid_map", format!("{gid} {gid} 1")));
    dumpable(rustix::process::DumpableBehavior::NotDumpable)?;
    written
}

/// New mount and UTS namespaces, owned by the user namespace entered before: copies of the
/// host's mount table and host name as they are at the start.
fn enter_mount_namespace() -> Result<(), SetupError> {
    #[expect(
        unsafe_code,
        reason = "unshare is unsafe in rustix (for CLONE_FILES only)"
    )]
    // SAFETY: the helper is single-threaded and the flags do not include `FILES`.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS | UnshareFlags::NEWUTS) }
        .map_err(|err| SetupError::new(err, "mount namespaces"))
}

/// Empties every capability set of the program: the bounding set (so `execve` as root grants
/// none), the ambient set, then effective, permitted and inheritable. Runs in the program's
/// child before its exec: system calls only.
pub fn drop_capabilities() -> std::io::Result<()> {
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
