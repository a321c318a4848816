//! Process methods and notifications (docs/protocol.md §8).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::sandbox;

/// `process/start` request.
pub const PROCESS_START: &str = "process/start";
/// `process/read` request.
pub const PROCESS_READ: &str = "process/read";
/// `process/write` request.
pub const PROCESS_WRITE: &str = "process/write";
/// `process/signal` request.
pub const PROCESS_SIGNAL: &str = "process/signal";
/// `process/terminate` request.
pub const PROCESS_TERMINATE: &str = "process/terminate";
/// `process/output` notification.
pub const PROCESS_OUTPUT: &str = "process/output";
/// `process/exited` notification.
pub const PROCESS_EXITED: &str = "process/exited";
/// `process/closed` notification.
pub const PROCESS_CLOSED: &str = "process/closed";

/// Params of `process/start` (docs/protocol.md §8.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessStartParams {
    /// Client-chosen id, unique in the session among live and retained processes.
    pub process_id: String,
    /// Program and arguments; `argv[0]` without `/` is looked up in the child's `PATH`.
    pub argv: Vec<String>,
    /// Working directory: a PathUri or an absolute path.
    pub cwd: String,
    /// The child's environment (exactly this without `envPolicy`; overlaid last with it).
    pub env: BTreeMap<String, String>,
    /// Run on a pseudo-terminal (24×80).
    pub tty: bool,
    /// Replaces the `argv[0]` the child sees; `null`/absent keeps `argv[0]`.
    #[serde(default)]
    pub arg0: Option<String>,
    /// Non-tty: stdin is a pipe for `process/write` (else `/dev/null`).
    #[serde(default)]
    pub pipe_stdin: bool,
    /// How to build the environment from wexec's own (docs/protocol.md §8.7).
    #[serde(default)]
    pub env_policy: Option<EnvPolicy>,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default)]
    pub sandbox: Option<sandbox::SandboxContext>,
    /// `true`: the network is restricted (there is no managed proxy: it fails closed).
    #[serde(default)]
    pub enforce_managed_network: bool,
    /// Non-null is refused.
    #[serde(default)]
    pub network_proxy: Option<serde_json::Value>,
    /// Non-null is refused.
    #[serde(default)]
    pub shell_snapshot: Option<serde_json::Value>,
    /// Terminate the process this many milliseconds after the start (an extension,
    /// docs/protocol.md §8.10).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// `envPolicy` of `process/start` (docs/protocol.md §8.7): all five members required, as Codex
/// requires them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvPolicy {
    /// Which of wexec's variables to start from.
    pub inherit: EnvInherit,
    /// Keep names matching `*KEY*`, `*SECRET*`, `*TOKEN*`.
    pub ignore_default_excludes: bool,
    /// Globs of names to drop.
    pub exclude: Vec<String>,
    /// Variables to insert.
    pub set: BTreeMap<String, String>,
    /// If non-empty, globs of the only names to keep.
    pub include_only: Vec<String>,
}

/// `envPolicy.inherit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EnvInherit {
    /// Every variable.
    All,
    /// `HOME`, `LANG`, `LC_ALL`, `LC_CTYPE`, `LOGNAME`, `PATH`, `SHELL`, `TEMP`, `TMP`, `TMPDIR`,
    /// `USER`.
    Core,
    /// Nothing.
    None,
}

/// Result of `process/start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessStartResponse {
    /// The id from the request.
    pub process_id: String,
    /// `linuxSeccomp` when the process is confined or a `sandbox` was sent, else `none`.
    pub sandbox_type: String,
    /// wexec's detail beside Codex's `sandboxType`: the tier confining the process,
    /// `namespaces` or `landlock`; absent when it runs unconfined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_tier: Option<String>,
    /// Weaker guarantees the operator accepted that this process relies on (`carve-outs`,
    /// `signals`; docs/sandbox.md, "Tiers"); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandbox_accepted: Vec<String>,
}

/// Params of `process/read` (docs/protocol.md §8.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessReadParams {
    /// The process.
    pub process_id: String,
    /// Return chunks with a greater seq; absent = 0.
    #[serde(default)]
    pub after_seq: Option<u64>,
    /// Budget of decoded bytes; the first chunk always fits.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Long-poll for up to this many milliseconds; absent = 0.
    #[serde(default)]
    pub wait_ms: Option<u64>,
}

/// One retained output chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessChunk {
    /// Its seq.
    pub seq: u64,
    /// Which stream produced it.
    pub stream: OutputStream,
    /// The bytes, base64.
    pub chunk: String,
}

/// Result of `process/read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessReadResponse {
    /// Retained chunks after `afterSeq`, in order.
    pub chunks: Vec<ProcessChunk>,
    /// Where the next read should start (docs/protocol.md §8.2).
    pub next_seq: u64,
    /// Whether the exit was recorded.
    pub exited: bool,
    /// The exit code, once exited.
    pub exit_code: Option<i32>,
    /// Whether the close was recorded.
    pub closed: bool,
    /// Why wexec ended the process (`timeoutMs`, a CPU limit), else `null`.
    pub failure: Option<String>,
    /// A sandboxed process failed and its output shows a sandbox denial (docs/protocol.md §7.3).
    pub sandbox_denied: bool,
}

/// Params of `process/write` (docs/protocol.md §8.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessWriteParams {
    /// The process.
    pub process_id: String,
    /// Bytes to write, base64.
    pub chunk: String,
    /// De-duplication key; absent = always written.
    #[serde(default)]
    pub write_id: Option<String>,
    /// wexec's extension: close stdin once the chunk is written (end of input for the child;
    /// on a pty, the terminal's end-of-file character). Absent = `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub close_stdin: bool,
}

/// Result of `process/write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessWriteResponse {
    /// What happened to the bytes.
    pub status: WriteStatus,
}

/// `process/write` outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WriteStatus {
    /// Written (or a repeated `writeId`, not written again).
    Accepted,
    /// No such process.
    UnknownProcess,
    /// No stdin: not piped, or the process exited.
    StdinClosed,
    /// The start is still in progress.
    Starting,
}

/// Params of `process/signal`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessSignalParams {
    /// The process.
    pub process_id: String,
    /// The signal.
    pub signal: ProcessSignal,
}

/// Signals a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ProcessSignal {
    /// SIGINT to the process group.
    Interrupt,
}

/// Params of `process/terminate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessTerminateParams {
    /// The process.
    pub process_id: String,
}

/// Result of `process/terminate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessTerminateResponse {
    /// Whether the process was running (and termination started).
    pub running: bool,
}

/// Output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OutputStream {
    /// The child's stdout pipe.
    Stdout,
    /// The child's stderr pipe.
    Stderr,
    /// The pseudo-terminal.
    Pty,
}

/// `process/exited` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessExitedNotification<'a> {
    /// The process.
    #[serde(borrow)]
    pub process_id: Cow<'a, str>,
    /// Its seq.
    pub seq: u64,
    /// Exit status, or 128 + N for death by signal N.
    pub exit_code: i32,
    /// A sandboxed process failed and its output shows a sandbox denial (docs/protocol.md §7.3).
    pub sandbox_denied: bool,
    /// Why wexec ended the process (extension, docs/protocol.md §8.10), else `null`.
    #[serde(default)]
    pub failure: Option<String>,
}

/// `process/closed` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessClosedNotification<'a> {
    /// The process.
    #[serde(borrow)]
    pub process_id: Cow<'a, str>,
    /// Its seq: always the last.
    pub seq: u64,
}

/// `process/output` params. The host writes these lines by hand (the hot path, see
/// `process/pump.rs`); clients decode them with this type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessOutputNotification {
    /// The process.
    pub process_id: String,
    /// Its seq.
    pub seq: u64,
    /// Which stream produced it.
    pub stream: OutputStream,
    /// The bytes, base64.
    pub chunk: String,
}

impl ProcessStartParams {
    /// A non-tty start of `argv` in `cwd` with an empty environment and stdin from `/dev/null`;
    /// set the other fields as needed.
    pub fn new(process_id: impl Into<String>, argv: Vec<String>, cwd: impl Into<String>) -> Self {
        Self {
            process_id: process_id.into(),
            argv,
            cwd: cwd.into(),
            env: BTreeMap::new(),
            tty: false,
            arg0: None,
            pipe_stdin: false,
            env_policy: None,
            sandbox: None,
            enforce_managed_network: false,
            network_proxy: None,
            shell_snapshot: None,
            timeout_ms: None,
        }
    }
}
