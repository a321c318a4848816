//! Spawning children: the only place wexec creates processes. Every child runs under its own
//! helper ([`super::supervisor`]): it leads a new session and process group, and it and
//! everything it forks are killed when its session lets go of it or wexec dies.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::unix::pipe;

use super::pty::{self, PtyMaster};
use super::supervisor::wire::{Confinement, Launch, Rlimits};
use super::supervisor::{self, Supervised};

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
    /// Run confined so; `None`: with wexec's rights.
    pub confinement: Option<Confinement>,
    /// Kernel limits.
    pub limits: Rlimits,
    /// The session's pids cgroup (`cgroup.procs`), if the operator limits its tasks.
    pub cgroup: Option<PathBuf>,
}

/// A running child and its streams.
pub struct Spawned {
    /// The child under its helper.
    pub supervised: Supervised,
    /// Its streams.
    pub io: ChildIo,
}

/// The parent's ends of a child's streams.
pub enum ChildIo {
    /// Separate pipes.
    Pipes {
        /// stdin, if piped.
        stdin: Option<pipe::Sender>,
        /// stdout.
        stdout: pipe::Receiver,
        /// stderr.
        stderr: pipe::Receiver,
    },
    /// One terminal for all three.
    Pty(Arc<PtyMaster>),
}

/// Starts `spec`. Errors are the OS's (e.g. `No such file or directory (os error 2)`).
pub async fn spawn(spec: &SpawnSpec<'_>) -> io::Result<Spawned> {
    let Some(program) = spec.argv.first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "argv must not be empty",
        ));
    };
    let resolved = resolve_program(program, spec.env.get("PATH").map(String::as_str), spec.cwd)?;
    let mut argv = spec.argv.to_vec();
    if let (Some(first), Some(arg0)) = (argv.first_mut(), spec.arg0) {
        arg0.clone_into(first);
    }
    let launch = Launch {
        program: resolved.to_string_lossy().into_owned(),
        argv,
        env: spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        cwd: spec.cwd.to_string_lossy().into_owned(),
        tty: spec.tty,
        confinement: spec.confinement.clone(),
        limits: spec.limits,
        cgroup: spec
            .cgroup
            .as_ref()
            .map(|path| path.to_string_lossy().into_owned()),
    };
    let (stdio, io) = if spec.tty {
        let pair = pty::open()?;
        let slave = pair.slave;
        let stdio = [slave.try_clone()?, slave.try_clone()?, slave];
        (stdio, ChildIo::Pty(Arc::new(PtyMaster::new(pair.master)?)))
    } else {
        let (stdin_child, stdin) = if spec.pipe_stdin {
            let (read, write) = pipe_pair()?;
            (read, Some(pipe::Sender::from_owned_fd(write)?))
        } else {
            (dev_null()?, None)
        };
        let (stdout, stdout_child) = pipe_pair()?;
        let (stderr, stderr_child) = pipe_pair()?;
        let io = ChildIo::Pipes {
            stdin,
            stdout: pipe::Receiver::from_owned_fd(stdout)?,
            stderr: pipe::Receiver::from_owned_fd(stderr)?,
        };
        ([stdin_child, stdout_child, stderr_child], io)
    };
    // The child's ends go to the helper and close here once sent: end of file on ours then
    // means the child's side is gone.
    let supervised = supervisor::launch(&launch, stdio).await?;
    Ok(Spawned { supervised, io })
}

/// Runs the sandbox setup of `tier` once, confined as strictly as any start could be (no
/// network, the root read-only; namespaces: a private `/dev` and `/proc`; Landlock: scoped
/// unless `scoped` is false), with seccomp, without a program.
pub async fn probe(
    tier: crate::sandbox::kernel::Tier,
    scoped: bool,
) -> Result<(), crate::sandbox::kernel::Unavailable> {
    use crate::sandbox::confinement::{Grant, GrantAccess, Landlock};
    use crate::sandbox::kernel::{Tier, Unavailable};
    use supervisor::wire::{Layer, LayerAccess, Report};
    let unavailable = |mechanism: &str, detail: String| Unavailable {
        mechanism: mechanism.to_owned(),
        detail,
    };
    let launch = Launch {
        program: String::new(),
        argv: Vec::new(),
        env: Vec::new(),
        cwd: "/".to_owned(),
        tty: false,
        confinement: Some(match tier {
            Tier::Namespaces => Confinement {
                // A hidden directory too: covering one takes the new mount API's tmpfs
                // (`fsopen`), which a container's seccomp profile may refuse.
                layers: vec![
                    Layer {
                        path: "/".to_owned(),
                        access: LayerAccess::Read,
                    },
                    Layer {
                        path: "/sys".to_owned(),
                        access: LayerAccess::Hidden,
                    },
                ],
                network: false,
                probe: true,
                landlock: None,
            },
            Tier::Landlock => Confinement {
                layers: Vec::new(),
                network: false,
                probe: true,
                landlock: Some(Landlock {
                    grants: vec![Grant {
                        path: "/".to_owned(),
                        access: GrantAccess::Read,
                    }],
                    scoped,
                    metadata: false,
                }),
            },
        }),
        limits: Rlimits::default(),
        cgroup: None,
    };
    let stdio = [dev_null(), dev_null(), dev_null()];
    let [Ok(a), Ok(b), Ok(c)] = stdio else {
        return Err(unavailable("/dev/null", "cannot be opened".to_owned()));
    };
    match supervisor::launch(&launch, [a, b, c]).await {
        Ok(mut supervised) => match supervised.reports.next().await {
            Some(Report::Exited { code: 0 }) => Ok(()),
            other => Err(unavailable(
                "the sandbox",
                format!("its probe ended with {other:?}"),
            )),
        },
        Err(err) => match setup_failure(&err) {
            Some(setup) => Err(unavailable(&setup.mechanism, setup.source.to_string())),
            None => Err(unavailable("the process supervisor", err.to_string())),
        },
    }
}

/// The confinement step that failed, when `err` is a start that failed so.
pub fn setup_failure(err: &io::Error) -> Option<&supervisor::SandboxSetupError> {
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<supervisor::SandboxSetupError>())
}

/// A pipe (read end, write end), both close-on-exec.
fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

fn dev_null() -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?)
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
