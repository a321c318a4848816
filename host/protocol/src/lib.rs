//! Method names and the params, results and notifications of the wire protocol: plain data.
//! What they mean, and where wexec differs from Codex, is docs/protocol.md (cited by section).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `initialize` request: opens or resumes a session.
pub const INITIALIZE: &str = "initialize";
/// `initialized` notification: completes the handshake.
pub const INITIALIZED: &str = "initialized";
/// `environment/info` request.
pub const ENVIRONMENT_INFO: &str = "environment/info";
/// `environment/status` request.
pub const ENVIRONMENT_STATUS: &str = "environment/status";

/// Every request method of the protocol, `initialize` first. The server
/// serves each and nothing else of the protocol's (its own method table and the bundled plugins'
/// claims are checked against this list), and the client has a typed call for each
/// (tests/tests/client.rs sends every one).
pub const METHODS: [&str; 27] = [
    INITIALIZE,
    ENVIRONMENT_INFO,
    ENVIRONMENT_STATUS,
    ENVIRONMENT_CONFIG_READ,
    CAPABILITY_ROOTS_DISCOVER_V1,
    CAPABILITIES_DISCOVER_V2,
    PLUGIN_LIST,
    PROCESS_START,
    PROCESS_READ,
    PROCESS_WRITE,
    PROCESS_SIGNAL,
    PROCESS_TERMINATE,
    FS_READ_FILE,
    FS_WRITE_FILE,
    FS_CREATE_DIRECTORY,
    FS_GET_METADATA,
    FS_CANONICALIZE,
    FS_READ_DIRECTORY,
    FS_WALK,
    FS_REMOVE,
    FS_COPY,
    FS_OPEN,
    FS_READ_BLOCK,
    FS_WRITE_BLOCK,
    FS_CLOSE,
    FS_WATCH_MISSING,
    HTTP_REQUEST,
];

/// Params of `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The client's name; informational only.
    pub client_name: String,
    /// A session to resume; absent or `null` opens a new session.
    #[serde(default)]
    pub resume_session_id: Option<String>,
}

/// Result of `initialize`. A resume returns the session's first result unchanged.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The session's id, a UUIDv4.
    pub session_id: String,
    /// The same object `environment/info` returns.
    pub environment_info: Box<serde_json::value::RawValue>,
}

/// One loaded plugin, as listed in `environmentInfo.wexec.plugins`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginSummary {
    /// The plugin's name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// The methods it serves.
    pub methods: Vec<String>,
}

/// Result of `environment/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentStatus {
    /// Always `ready` while wexec serves requests.
    pub status: String,
}

mod config;
mod discovery;
mod fs;
mod http;
pub mod limits;
pub mod path_uri;
mod plugin;
mod process;
pub mod rpc;
pub mod sandbox;

pub use config::*;
pub use discovery::*;
pub use fs::*;
pub use http::*;
pub use plugin::*;
pub use process::*;

/// Result of `environment/info`, also embedded in `initialize` (docs/protocol.md §7.4). Produced by
/// the `env` plugin; clients decode it with this type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentInfo {
    /// The default shell.
    pub shell: ShellInfo,
    /// The server's version.
    pub executor_version: String,
    /// Opaque, stable per build: `sha256:` and the hex SHA-256 of `wexec <version> <arch>-<os>`
    /// (Codex's server sends its own; clients key caches on it).
    #[serde(default)]
    pub provider_id: String,
    /// PathUri of the server's working directory, if known.
    pub cwd: Option<String>,
    /// The user's home directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_home_dir: Option<String>,
    /// `linux` or `macos`.
    pub platform_os: String,
    /// Directories the server prepends to an inherited `PATH` (docs/protocol.md §8.7); wexec
    /// has none.
    #[serde(default)]
    pub prepend_path_dirs: Vec<String>,
    /// `[TMPDIR]` when set, else empty.
    #[serde(default)]
    pub temporary_directories: Vec<String>,
    /// `TMPDIR`, else `/tmp`.
    pub temp_dir: String,
    /// Capability flags by name.
    pub capabilities: BTreeMap<String, bool>,
    /// wexec's own member: version and loaded plugins (absent from other servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wexec: Option<WexecInfo>,
}

/// `environmentInfo.capabilities` as wexec serves it: every flag it reports, `true` only for
/// what wexec really does (docs/protocol.md §7.4). The `env` plugin reports it; tests hold the
/// server to it.
pub const CAPABILITIES: [(&str, bool); 15] = [
    ("capabilityDiscoverySandbox", true),
    ("capabilityDiscoveryV2", true),
    ("credentialMasking", false),
    ("credentialMaskingCustomProviders", false),
    ("environmentConfigRead", true),
    ("fileWriteStreaming", true),
    ("fsWatchMissing", true),
    ("httpHeaderEnvVars", true),
    // A writable `/` keeps the sandbox's private `/dev` (docs/sandbox.md).
    ("linuxRootWritePreservesDevices", true),
    // Read-only carve-outs (`.git`, ...) stay on top of every writable root (docs/sandbox.md).
    ("linuxApprovedRootWritePreservesRestrictions", true),
    ("networkProxyLaunch", false),
    ("networkProxyReviewDomains", false),
    ("sandboxedFileStreaming", true),
    ("shellSnapshotV2", false),
    ("windowsMxc", false),
];

/// `environmentInfo.shell`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellInfo {
    /// File name of the shell.
    pub name: String,
    /// Native path of the shell.
    pub path: String,
}

/// `environmentInfo.wexec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WexecInfo {
    /// wexec's version.
    pub version: String,
    /// The loaded plugins.
    pub plugins: Vec<PluginSummary>,
    /// How processes are confined; absent when wexec runs none or cannot say yet (the copy
    /// `initialize` embeds may be taken before the sandbox probe answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
}

/// `environmentInfo.wexec.sandbox` (docs/sandbox.md, "Tiers").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxInfo {
    /// The tier in force: `namespaces`, `landlock` or `none`.
    pub tier: String,
    /// Why the namespace tier is not in force, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces_missing: Option<String>,
    /// Weaker guarantees the operator accepted (`carve-outs`, `signals`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted: Vec<String>,
}

/// The params of a method that takes none: absent, `null` or `{}`; anything else is refused
/// as Codex refuses it (`invalid type: map, expected unit`, docs/protocol.md §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoParams;

impl NoParams {
    /// Checks params that must be absent, `null` or `{}`; the error is serde's text.
    pub fn check(params: &serde_json::Value) -> Result<Self, String> {
        use serde::de::{Error, Unexpected};
        use serde_json::Value;
        let unexpected = match params {
            Value::Null => return Ok(Self),
            Value::Object(members) if members.is_empty() => return Ok(Self),
            Value::Object(_) => Unexpected::Map,
            Value::Array(_) => Unexpected::Seq,
            Value::String(text) => Unexpected::Str(text),
            Value::Bool(value) => Unexpected::Bool(*value),
            Value::Number(number) => match (number.as_u64(), number.as_i64()) {
                (Some(value), _) => Unexpected::Unsigned(value),
                (None, Some(value)) => Unexpected::Signed(value),
                (None, None) => Unexpected::Float(number.as_f64().unwrap_or_default()),
            },
        };
        Err(serde_json::Error::invalid_type(unexpected, &"unit").to_string())
    }
}

impl<'de> serde::Deserialize<'de> for NoParams {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let params = serde_json::Value::deserialize(deserializer)?;
        Self::check(&params).map_err(serde::de::Error::custom)
    }
}
