//! What a plugin call comes to: a result, or a [`CallError`] saying why there is none. The
//! runtime writes no JSON-RPC error text of its own: the server words each failure for its
//! clients (docs/protocol.md §11.3); a plugin's own error passes through as it is.

use serde_json::value::RawValue;
use wexec_protocol::rpc::RpcError;

/// What a plugin call comes to.
pub type CallResult = Result<Box<RawValue>, CallError>;

/// Why a plugin call has no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The plugin answered with an error of its own.
    #[error("{0}")]
    Answered(RpcError),
    /// No loaded plugin serves the method.
    #[error("no plugin serves {method}")]
    NoPlugin {
        /// The method.
        method: String,
    },
    /// The plugin could not serve the call: it trapped, broke the contract, or could not be
    /// started.
    #[error("plugin {plugin} failed: {reason}")]
    Failed {
        /// The plugin's name.
        plugin: String,
        /// What went wrong.
        reason: String,
    },
    /// The call ran past the plugin's time limit.
    #[error("plugin {plugin} exceeded its time limit of {limit_ms} ms")]
    TimeLimit {
        /// The plugin's name.
        plugin: String,
        /// The limit.
        limit_ms: u128,
    },
    /// The call grew the plugin's memory past its limit.
    #[error("plugin {plugin} exceeded its memory limit")]
    MemoryLimit {
        /// The plugin's name.
        plugin: String,
    },
}
