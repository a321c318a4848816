//! Starting the program from its helper (or its PID namespace's init) the way glibc's
//! `posix_spawn` does: `clone(CLONE_VM | CLONE_VFORK)`, so the child runs on a small stack of
//! its own in the parent's memory until it calls `execve`, and nothing of the parent's
//! address space is copied. A `fork` here copies the page tables and then takes a copy-on-write
//! fault for every page either side touches, which made the spawn measurably slower
//! (`sandbox_start`; docs/sandbox.md, "Cost"). `std::process::Command` forks whenever a
//! `pre_exec` step is set, and every start needs some (a new session, the death signal,
//! limits, confinement).
//!
//! The child shares the parent's memory, so what it runs is restricted further than between
//! `fork` and `exec`: system calls only, no allocation, no locks, no unwinding, and every value
//! it touches prepared beforehand ([`Program`]). The parent is suspended until the child
//! execs or exits, with every signal blocked, so nothing else runs in that memory meanwhile.

use std::ffi::{CString, c_char, c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use rustix::process::Pid;

use super::wire::Launch;

/// The child's stack: its setup is a few frames of system-call wrappers.
const STACK_BYTES: usize = 256 * 1024;

/// Everything `execve` takes, as C strings, built before the clone.
pub struct Program {
    path: CString,
    cwd: CString,
    /// Keep the strings `argv` and `envp` point into alive.
    _strings: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

impl Program {
    /// The program `launch` names; `EINVAL` if a string holds a NUL byte (`execve` could not
    /// pass it).
    pub fn new(launch: &Launch) -> Result<Self, rustix::io::Errno> {
        let c_string = |text: &[u8]| CString::new(text).map_err(|_| rustix::io::Errno::INVAL);
        let path = c_string(launch.program.as_bytes())?;
        let cwd = c_string(launch.cwd.as_bytes())?;
        let mut strings = Vec::with_capacity(launch.argv.len() + launch.env.len());
        for arg in &launch.argv {
            strings.push(c_string(arg.as_bytes())?);
        }
        for (name, value) in &launch.env {
            let mut entry = Vec::with_capacity(name.len() + 1 + value.len());
            entry.extend_from_slice(name.as_bytes());
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            strings.push(c_string(&entry)?);
        }
        let pointers = |range: &[CString]| {
            range
                .iter()
                .map(|string| string.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let (argv, envp) = strings.split_at(launch.argv.len());
        let (argv, envp) = (pointers(argv), pointers(envp));
        Ok(Self {
            path,
            cwd,
            _strings: strings,
            argv,
            envp,
        })
    }
}

/// The raw descriptors of `stdio`, each above 2: one already at 0, 1 or 2 could be
/// overwritten by another's `dup2` before it is itself moved, so it is copied higher (the
/// copies are returned, to be kept open until the `dup2`s are done).
fn above_stdio(stdio: &[OwnedFd; 3]) -> Result<([RawFd; 3], Vec<OwnedFd>), i32> {
    let mut lifted = Vec::new();
    let mut fds = [0; 3];
    for (slot, fd) in fds.iter_mut().zip(stdio) {
        *slot = if fd.as_raw_fd() > 2 {
            fd.as_raw_fd()
        } else {
            let copy = rustix::io::fcntl_dupfd_cloexec(fd, 3).map_err(|err| err.raw_os_error())?;
            let raw = copy.as_raw_fd();
            lifted.push(copy);
            raw
        };
    }
    Ok((fds, lifted))
}

/// What the child reads, and where it writes its `errno` should it fail before `execve`.
struct Shared<'a> {
    program: &'a Program,
    stdio: [RawFd; 3],
    setup: &'a mut dyn FnMut() -> std::io::Result<()>,
    errno: AtomicI32,
}

/// Starts `program` with `stdio` as its descriptors 0, 1 and 2, in its cwd, after `setup`
/// ran in the child. `setup` runs in the parent's memory (see the module's comment): system
/// calls only. Returns the child's pid once it has exec'd; the `errno` of the first failed
/// step otherwise (the child is then reaped).
pub fn spawn(
    program: &Program,
    stdio: &[OwnedFd; 3],
    setup: &mut dyn FnMut() -> std::io::Result<()>,
) -> Result<Pid, i32> {
    let (fds, lifted) = above_stdio(stdio)?;
    let mut stack = vec![0u8; STACK_BYTES];
    let mut shared = Shared {
        program,
        stdio: fds,
        setup,
        errno: AtomicI32::new(0),
    };
    let all = signal_set(true);
    let mut previous = signal_set(false);
    #[expect(
        unsafe_code,
        reason = "a vfork-style clone has no safe wrapper; see the module's comment"
    )]
    // SAFETY: every signal is blocked around the clone, so no handler runs in the child while
    // it shares our memory; the child runs `child` on `stack` (its top, 16-byte aligned, as
    // the ABI wants) and touches only `shared`, which outlives it: CLONE_VFORK suspends this
    // thread until the child has exec'd or exited.
    let pid = unsafe {
        libc::sigprocmask(libc::SIG_SETMASK, &raw const all, &raw mut previous);
        let top = stack.as_mut_ptr().add(STACK_BYTES);
        let top = top.sub(top as usize % 16);
        let pid = libc::clone(
            child,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut shared).cast::<c_void>(),
        );
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        libc::sigprocmask(libc::SIG_SETMASK, &raw const previous, std::ptr::null_mut());
        if pid < 0 {
            return Err(errno);
        }
        pid
    };
    drop(lifted);
    let pid = Pid::from_raw(pid).ok_or(libc::ECHILD)?;
    match shared.errno.load(Ordering::Acquire) {
        0 => Ok(pid),
        errno => {
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
            Err(errno)
        }
    }
}

/// The child: stdio, cwd, `setup`, an empty signal mask, `execve`. It only returns (through
/// `_exit`) on failure, with its `errno` in [`Shared::errno`].
extern "C" fn child(shared: *mut c_void) -> c_int {
    #[expect(unsafe_code, reason = "the clone's argument is our `Shared`")]
    // SAFETY: `spawn` passes a pointer to a live `Shared` and is suspended until we exec or
    // exit, so this is the only reference in use.
    let shared = unsafe { &mut *shared.cast::<Shared<'_>>() };
    let errno = prepare_and_exec(shared)
        .err()
        .and_then(|err| err.raw_os_error())
        .unwrap_or(libc::EINVAL);
    shared.errno.store(errno.max(1), Ordering::Release);
    super::child::exit(127)
}

fn prepare_and_exec(shared: &mut Shared<'_>) -> std::io::Result<()> {
    install_stdio(shared.stdio)?;
    chdir(shared.program)?;
    (shared.setup)()?;
    Err(exec(shared.program))
}

/// Makes `stdio` the calling process's descriptors 0, 1 and 2 (none of them may be 0, 1 or 2
/// already). System calls only.
fn install_stdio(stdio: [RawFd; 3]) -> std::io::Result<()> {
    for (target, fd) in (0..).zip(stdio) {
        #[expect(unsafe_code, reason = "dup2 on raw descriptors")]
        // SAFETY: `fd` is open (its owner outlives the call); `dup2` is a system call.
        if unsafe { libc::dup2(fd, target) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Changes to the program's working directory. System calls only.
fn chdir(program: &Program) -> std::io::Result<()> {
    #[expect(unsafe_code, reason = "chdir on a prepared C string")]
    // SAFETY: `cwd` is a NUL-terminated string owned by `program`.
    if unsafe { libc::chdir(program.cwd.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Empties the signal mask and executes the program; returns only on failure, with its error.
/// System calls only.
fn exec(program: &Program) -> std::io::Error {
    let empty = signal_set(false);
    #[expect(unsafe_code, reason = "sigprocmask and execve on prepared values")]
    // SAFETY: `empty` is an initialized set; the pointers are the NUL-terminated strings and
    // null-terminated arrays `Program` built, alive for the call.
    unsafe {
        libc::sigprocmask(libc::SIG_SETMASK, &raw const empty, std::ptr::null_mut());
        libc::execve(
            program.path.as_ptr(),
            program.argv.as_ptr(),
            program.envp.as_ptr(),
        );
    }
    std::io::Error::last_os_error()
}

/// Every signal (`full`), or none.
fn signal_set(full: bool) -> libc::sigset_t {
    #[expect(unsafe_code, reason = "sigset manipulation is unsafe in libc")]
    // SAFETY: the set is initialized by sigfillset/sigemptyset before it is returned.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        if full {
            libc::sigfillset(&raw mut set);
        } else {
            libc::sigemptyset(&raw mut set);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(program: &str, argv: &[&str], cwd: &str) -> Launch {
        Launch {
            program: program.to_owned(),
            argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
            env: vec![("WEXEC_EXEC_TEST".to_owned(), "yes".to_owned())],
            cwd: cwd.to_owned(),
            tty: false,
            confinement: None,
            limits: super::super::wire::Rlimits::default(),
            cgroup: None,
        }
    }

    fn stdio(out: &OwnedFd) -> [OwnedFd; 3] {
        let null = || {
            rustix::fs::open(
                "/dev/null",
                rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .unwrap()
        };
        [null(), out.try_clone().unwrap(), null()]
    }

    #[test]
    fn runs_the_program_with_its_arguments_environment_and_directory() {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
        let program = Program::new(&launch(
            "/bin/sh",
            &[
                "sh",
                "-c",
                "echo $0 $1 $WEXEC_EXEC_TEST $(pwd)",
                "zero",
                "one",
            ],
            "/tmp",
        ))
        .unwrap();
        let mut ran_setup = false;
        let pid = spawn(&program, &stdio(&write), &mut || {
            ran_setup = true;
            Ok(())
        })
        .unwrap();
        drop(write);
        let status = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty())
            .unwrap()
            .unwrap();
        assert_eq!(status.1.exit_status(), Some(0));
        let mut output = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(read), &mut output).unwrap();
        assert_eq!(output, "zero one yes /tmp\n");
        assert!(ran_setup, "the setup ran in the child, in our memory");
    }

    #[test]
    fn failures_before_exec_come_back_as_errno() {
        let (_read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
        let missing = Program::new(&launch("/nonexistent/program", &["x"], "/")).unwrap();
        assert_eq!(
            spawn(&missing, &stdio(&write), &mut || Ok(())),
            Err(libc::ENOENT)
        );
        let bad_cwd = Program::new(&launch("/bin/true", &["true"], "/nonexistent")).unwrap();
        assert_eq!(
            spawn(&bad_cwd, &stdio(&write), &mut || Ok(())),
            Err(libc::ENOENT)
        );
        let program = Program::new(&launch("/bin/true", &["true"], "/")).unwrap();
        assert_eq!(
            spawn(&program, &stdio(&write), &mut || Err(
                std::io::Error::from_raw_os_error(libc::EPERM)
            )),
            Err(libc::EPERM)
        );
        assert!(Program::new(&launch("/bin/true", &["tr\0ue"], "/")).is_err());
    }
}
