//! What to load, and why a plugin could not be loaded.

use crate::grants::Grants;
use crate::limits::Limits;

/// The contract version this host implements (`wit/plugin.wit`): 0.2.0 is 0.1.0's interfaces
/// unchanged, plus the MCP tools a plugin may declare (`tools.rs`).
pub const CONTRACT_VERSION: &str = "0.2.0";

/// The WIT package a plugin's imports and exports name: unchanged since contract 0.1.0.
pub const WIT_PACKAGE: &str = "wexec:plugin@0.1.0";

/// The contract versions a plugin may have been built against: 0.1.0 plugins load unchanged
/// (they declare no tools).
pub const SUPPORTED_CONTRACTS: [&str; 2] = ["0.1.0", CONTRACT_VERSION];

/// What to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSpec {
    /// Where the component came from, for error messages (a path, or `built-in fs`).
    pub origin: String,
    /// The component. The bundled ones are the binary's own bytes, not a copy: copying them
    /// cost every start its page faults.
    pub bytes: bytes::Bytes,
    /// What the operator granted.
    pub grants: Grants,
    /// Its limits.
    pub limits: Limits,
    /// Whether the plugin may use names reserved for wexec's own families (the bundled plugins).
    pub builtin: bool,
    /// The component's SHA-256 (hex) when it is known ahead: the bundled plugins are digested
    /// when wexec is built, so a start does not hash 1.7 MB before it answers. `None`: digested
    /// when its cache key is needed.
    pub sha256: Option<&'static str>,
}

/// A plugin that could not be loaded. Messages name the file and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The engine could not be built.
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    /// Compilation or linking failed.
    #[error("plugin {origin}: {reason}")]
    Invalid {
        /// The file.
        origin: String,
        /// Why.
        reason: String,
    },
    /// Two plugins claim one method.
    #[error("method {method} is claimed by both plugin {first} and plugin {second}")]
    Clash {
        /// The method.
        method: String,
        /// The plugin loaded first.
        first: String,
        /// The other.
        second: String,
    },
}

/// `reason` as the load error of `spec`, on one line: some causes (wasmparser's) span lines, and
/// a startup error reads best on one.
pub(crate) fn invalid(spec: &PluginSpec, reason: String) -> LoadError {
    LoadError::Invalid {
        origin: spec.origin.clone(),
        reason: reason.split_whitespace().collect::<Vec<_>>().join(" "),
    }
}

/// A plugin file read from disk.
pub fn read_plugin_file(path: &std::path::Path) -> Result<bytes::Bytes, LoadError> {
    std::fs::read(path)
        .map(bytes::Bytes::from)
        .map_err(|err| LoadError::Invalid {
            origin: path.display().to_string(),
            reason: format!("cannot be read: {err}"),
        })
}
