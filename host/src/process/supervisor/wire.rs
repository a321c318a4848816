//! What wexec and a process's helper say to each other on the process's control socket: plain
//! data, one JSON line per message, plus one-byte commands from wexec.

use serde::{Deserialize, Serialize};

/// What to run: the first line wexec writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The program, resolved.
    pub program: String,
    /// The arguments, `argv[0]` being what the child sees as its name.
    pub argv: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: String,
    /// stdin is a terminal's slave, to become the child's controlling terminal.
    pub tty: bool,
    /// Run confined so (namespaces, mounts, seccomp); `None`: with wexec's own rights.
    pub confinement: Option<Confinement>,
    /// Kernel limits for the program and everything it forks.
    pub limits: Rlimits,
    /// The session's pids cgroup (its `cgroup.procs`), which the program joins before exec.
    #[serde(default)]
    pub cgroup: Option<String>,
}

pub use crate::sandbox::confinement::{Confinement, GrantAccess, Landlock, Layer, LayerAccess};

/// Per-process kernel limits (`setrlimit`), `None` for unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimits {
    /// `RLIMIT_CPU`, seconds (the hard limit is 5 s more, so SIGXCPU comes first).
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS`, bytes.
    pub address_space: Option<u64>,
    /// `RLIMIT_NOFILE`.
    pub open_files: Option<u64>,
    /// `RLIMIT_FSIZE`, bytes.
    pub file_size: Option<u64>,
}

/// What the helper reports, in this order: `Spawned` or `Failed` once, then `Exited` once,
/// then, confined, `Emptied`.
/// The helper's end of the socket closes when the process and everything it forked are gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Report {
    /// The program runs, as `pid`.
    Spawned {
        /// Its process id.
        pid: i32,
    },
    /// It could not be started: the OS error number.
    Failed {
        /// `errno`, as the failed `fork`, `chdir` or `execve` set it.
        errno: i32,
        /// The confinement step that failed, naming the kernel mechanism; `None` when the
        /// program itself could not be started.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mechanism: Option<String>,
    },
    /// It exited with this code (128 + N when killed by signal N).
    Exited {
        /// The exit code.
        code: i32,
    },
    /// Confined, after `Exited`: its PID namespace's init was reaped, so everything the program
    /// started is gone. The helper ends next, once its mount namespace is torn down, which
    /// takes longer: what waits only for the processes need not wait for that.
    Emptied,
}

/// SIGINT to the process group.
pub const INTERRUPT: u8 = b'i';
/// SIGTERM to the process group.
pub const TERMINATE: u8 = b't';
/// SIGKILL to the process and everything it forked, then the helper exits.
pub const KILL: u8 = b'k';
