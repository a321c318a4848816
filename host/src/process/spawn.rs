//! Spawning children: the only place wexec creates processes. Every child leads a new session
//! and process group, and on Linux gets SIGKILL if wexec dies (a backstop for a crashed host).

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use rustix::process::{Pid, Signal};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::pty::{self, PtyMaster};

/// `PATH` used to find `argv[0]` when the child's environment has none.
const DEFAULT_PATH: &str = "/usr/bin:/bin";

/// What to run.
#[derive(Debug, Clone)]
pub struct SpawnSpec<'a> {
    /// Program and arguments; non-empty.
    pub argv: &'a [String],
    /// The `argv[0]` the child sees, if not `argv[0]`.
    pub arg0: Option<&'a str>,
    /// Working directory.
    pub cwd: &'a Path,
    /// The complete environment.
    pub env: &'a BTreeMap<String, String>,
    /// Run on a pseudo-terminal.
    pub tty: bool,
    /// Non-tty: give the child a stdin pipe (else `/dev/null`).
    pub pipe_stdin: bool,
}

/// A running child and its streams.
pub struct Spawned {
    /// The child, for reaping.
    pub child: Child,
    /// Its process group (= its pid: it leads the group).
    pub pgid: Pid,
    /// Its streams.
    pub io: ChildIo,
}

/// The parent's ends of a child's streams.
pub enum ChildIo {
    /// Separate pipes.
    Pipes {
        /// stdin, if piped.
        stdin: Option<ChildStdin>,
        /// stdout.
        stdout: ChildStdout,
        /// stderr.
        stderr: ChildStderr,
    },
    /// One terminal for all three.
    Pty(Arc<PtyMaster>),
}

/// Starts `spec`. Errors are the OS's (e.g. `No such file or directory (os error 2)`).
pub fn spawn(spec: &SpawnSpec<'_>) -> io::Result<Spawned> {
    let Some(program) = spec.argv.first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "argv must not be empty",
        ));
    };
    let resolved = resolve_program(program, spec.env.get("PATH").map(String::as_str), spec.cwd)?;
    let mut command = Command::new(resolved);
    command
        .arg0(spec.arg0.unwrap_or(program))
        .args(&spec.argv[1..])
        .env_clear()
        .envs(spec.env)
        .current_dir(spec.cwd)
        // A backstop: if the pump's owner is dropped without reaping, kill the leader.
        .kill_on_drop(true);
    let master = if spec.tty {
        let pair = pty::open()?;
        command
            .stdin(Stdio::from(pair.slave.try_clone()?))
            .stdout(Stdio::from(pair.slave.try_clone()?))
            .stderr(Stdio::from(pair.slave));
        Some(pair.master)
    } else {
        command
            .stdin(if spec.pipe_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        None
    };
    let parent = rustix::process::getpid();
    let tty = spec.tty;
    #[expect(
        unsafe_code,
        reason = "pre_exec is the only way to run setsid/TIOCSCTTY/PDEATHSIG in the child"
    )]
    // SAFETY: the closure runs between fork and exec and only makes raw system calls through
    // rustix (setsid, ioctl, prctl, getppid): async-signal-safe, no allocation, no locks.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            if tty {
                // stdin is already the slave: make it the controlling terminal.
                rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            }
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // wexec may have died before the death signal was armed.
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from(rustix::io::Errno::SRCH));
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    // The slave copies held by `command` close with it, so EOF on the master means the child
    // side is gone.
    drop(command);
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let Some(pgid) = pid else {
        return Err(io::Error::other("spawned child has no pid"));
    };
    let io = match master {
        Some(master) => ChildIo::Pty(Arc::new(PtyMaster::new(master)?)),
        None => {
            let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
                return Err(io::Error::other("spawned child lacks its output pipes"));
            };
            ChildIo::Pipes {
                stdin: child.stdin.take(),
                stdout,
                stderr,
            }
        }
    };
    Ok(Spawned { child, pgid, io })
}

/// `program` itself if it contains `/`, else the first executable file named so in `path`
/// (default `/usr/bin:/bin`); relative `PATH` entries count from the child's `cwd`.
fn resolve_program(program: &str, path: Option<&str>, cwd: &Path) -> io::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let not_found = || io::Error::from(rustix::io::Errno::NOENT);
    if program.is_empty() {
        return Err(not_found());
    }
    path.unwrap_or(DEFAULT_PATH)
        .split(':')
        .map(|dir| {
            if dir.is_empty() {
                Path::new(".")
            } else {
                Path::new(dir)
            }
        })
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(not_found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_through_the_childs_path() {
        let cwd = Path::new("/");
        assert_eq!(
            resolve_program("sh", None, cwd).unwrap(),
            PathBuf::from("/usr/bin/sh")
        );
        assert_eq!(
            resolve_program("sh", Some("/nonexistent:/bin"), cwd).unwrap(),
            PathBuf::from("/bin/sh")
        );
        assert_eq!(
            resolve_program("./x", Some("/bin"), cwd).unwrap(),
            PathBuf::from("./x")
        );
        let err = resolve_program("no-such-program-wexec", None, cwd).unwrap_err();
        assert_eq!(err.to_string(), "No such file or directory (os error 2)");
        assert!(
            resolve_program("passwd", Some("/etc"), cwd).is_err(),
            "not executable"
        );
    }
}
