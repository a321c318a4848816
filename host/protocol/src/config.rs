//! `environmentConfig/read` (docs/protocol.md §7.5), served by the `config` plugin: the executor's
//! Codex config layers, filtered to the key paths the client asks for.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where Codex keeps its config: `CODEX_HOME` (the variable's value) unless empty, else
/// `<home>/.codex`. The host grants it to the `config` plugin, which reads it: one rule for both.
pub fn codex_home(codex_home_var: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    match codex_home_var {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => home.map(|home| PathBuf::from(home).join(".codex")),
    }
}

/// `environmentConfig/read`.
pub const ENVIRONMENT_CONFIG_READ: &str = "environmentConfig/read";

/// Params of `environmentConfig/read`; all members required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentConfigReadParams {
    /// The directory whose project layers count.
    pub cwd: String,
    /// TOML key paths to return from the config layers, e.g. `[["mcp_servers"]]`.
    pub config_paths: Vec<Vec<String>>,
    /// TOML key paths to return from the requirements layers.
    pub requirements_paths: Vec<Vec<String>>,
}

/// Result of `environmentConfig/read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentConfigReadResponse {
    /// The user's home directory (PathUri), if known.
    pub user_home_dir: Option<String>,
    /// `$CODEX_HOME`, else `$HOME/.codex` (PathUri).
    pub codex_home_dir: Option<String>,
    /// The host's name.
    pub hostname: String,
    /// Config layers, lowest precedence first.
    pub config: ConfigLayers,
    /// Requirements layers.
    pub requirements: ConfigLayers,
}

/// Layers of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigLayers {
    /// The layers that hold a requested key, lowest precedence first.
    pub layers: Vec<ConfigLayer>,
    /// Where the client inserts its cloud layer: after the system layers.
    pub cloud_insertion_index: usize,
}

/// One config file, filtered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigLayer {
    /// What the layer is, e.g. `user (/home/alice/.codex/config.toml)`.
    pub source: String,
    /// The directory relative paths in it are relative to (PathUri).
    pub base_dir: String,
    /// The requested keys, re-serialized as TOML.
    pub toml: String,
}
