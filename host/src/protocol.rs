//! Method names and the params, results and notifications of the wire protocol: plain data.
//! The specification is `shared/PROTOCOL.md`; `docs/protocol.md` documents what wexec does.

use serde::{Deserialize, Serialize};

/// `initialize` request: opens or resumes a session.
pub const INITIALIZE: &str = "initialize";
/// `initialized` notification: completes the handshake.
pub const INITIALIZED: &str = "initialized";
/// `environment/info` request.
pub const ENVIRONMENT_INFO: &str = "environment/info";
/// `environment/status` request.
pub const ENVIRONMENT_STATUS: &str = "environment/status";

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The session's id, a UUIDv4.
    pub session_id: String,
    /// The same object `environment/info` returns.
    pub environment_info: EnvironmentInfo,
}

/// Result of `environment/info` (PROTOCOL §7.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentInfo {
    /// The user's shell.
    pub shell: ShellInfo,
    /// wexec's version.
    pub executor_version: String,
    /// PathUri of wexec's working directory; `null` if unknown (never omitted).
    pub cwd: Option<String>,
    /// PathUri of `HOME`; omitted if unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_home_dir: Option<String>,
    /// `linux` or `macos`.
    pub platform_os: String,
    /// `[TMPDIR]` as PathUris; omitted if `TMPDIR` is unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporary_directories: Option<Vec<String>>,
    /// PathUri of `TMPDIR`, else of `/tmp`.
    pub temp_dir: String,
    /// Optional features; Codex clients gate newer request fields on them.
    pub capabilities: EnvironmentCapabilities,
    /// wexec's own description: version and loaded plugins. Codex clients ignore it.
    pub wexec: WexecInfo,
}

/// The `shell` member of [`EnvironmentInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShellInfo {
    /// File name of the shell, e.g. `bash`.
    pub name: String,
    /// Native absolute path of the shell.
    pub path: String,
}

/// The `capabilities` member of [`EnvironmentInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentCapabilities {
    /// `fs/open` + `fs/readBlock` inside the roots.
    pub sandboxed_file_streaming: bool,
    /// `fs/open` with `mode: "replace"` + `fs/writeBlock`.
    pub file_write_streaming: bool,
    /// Launching a network proxy with a process: unsupported.
    pub network_proxy_launch: bool,
    /// Sandboxed capability discovery: unsupported.
    pub capability_discover_sandbox: bool,
    /// `environmentConfig/read`: unsupported.
    pub environment_config_read: bool,
    /// `valueEnvVar` HTTP headers: unsupported.
    pub http_header_env_vars: bool,
    /// Shell snapshots: unsupported.
    pub shell_snapshot_v2: bool,
    /// Windows sandbox features: unsupported.
    pub windows_mxc: bool,
}

impl EnvironmentCapabilities {
    /// What this wexec supports.
    pub const WEXEC: Self = Self {
        sandboxed_file_streaming: true,
        file_write_streaming: true,
        network_proxy_launch: false,
        capability_discover_sandbox: false,
        environment_config_read: false,
        http_header_env_vars: false,
        shell_snapshot_v2: false,
        windows_mxc: false,
    };
}

/// The `wexec` member of [`EnvironmentInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WexecInfo {
    /// wexec's version.
    pub version: String,
    /// The loaded plugins.
    pub plugins: Vec<PluginSummary>,
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
