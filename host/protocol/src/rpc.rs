//! The JSON-RPC envelope's plain data: request ids, error codes and the error object, with the
//! texts wexec uses for each condition (docs/protocol.md §1, §4).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// -32600: the request (or a malformed message, answered with id -1) is invalid.
pub const INVALID_REQUEST: i64 = -32600;
/// -32601: no handler serves the method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// -32602: the params do not decode or fail validation.
pub const INVALID_PARAMS: i64 = -32602;
/// -32603: the host failed while serving a valid request.
pub const INTERNAL_ERROR: i64 = -32603;
/// -32004: what the request names does not exist (a plugin's code; docs/protocol.md §1).
pub const NOT_FOUND: i64 = -32004;
/// -32010: `initialize` tried to resume a session another connection still holds.
pub const SESSION_ALREADY_ATTACHED: i64 = -32010;

/// A request id: an integer (i64) or a string, echoed verbatim in the reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id.
    Integer(i64),
    /// A string id.
    String(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Integer(id) => write!(f, "{id}"),
            Self::String(id) => write!(f, "{id:?}"),
        }
    }
}

/// The `error` member of an error reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    /// One of the code constants of this module, or a plugin's own code.
    pub code: i64,
    /// Human-readable text; stable for a given condition (docs/protocol.md §1).
    pub message: String,
    /// Extra data; only plugins supply it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The outcome of a request: a result already encoded as JSON text, or an error.
pub type RpcResult = Result<Box<serde_json::value::RawValue>, RpcError>;

impl RpcError {
    /// An error with `code` and `message` and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Adds `error.data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32600 with `message`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }

    /// -32601 with Codex's text for a method nobody serves.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            METHOD_NOT_FOUND,
            format!("exec-server stub does not implement `{method}` yet"),
        )
    }

    /// -32602 with `message`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603 with `message`.
    pub fn internal_error(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// -32004 with `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(NOT_FOUND, message)
    }

    /// -32010 for a resume of a session that is still attached elsewhere.
    pub fn session_already_attached(session_id: &str) -> Self {
        Self::new(
            SESSION_ALREADY_ATTACHED,
            format!("session {session_id} is already attached to another connection"),
        )
    }
}
