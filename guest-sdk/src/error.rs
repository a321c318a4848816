//! The JSON-RPC error a plugin returns.

use crate::bindings::wexec::plugin::types::RpcError as WitRpcError;

/// A JSON-RPC error: the client receives `code`, `message` and `data` unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// Optional `error.data`.
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    /// An error with `code` and `message`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Adds `error.data`.
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32600 invalid request (also wexec's code for denied paths and bad input).
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(-32600, message)
    }

    /// -32601, with the text wexec uses for unknown methods.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            -32601,
            format!("exec-server stub does not implement `{method}` yet"),
        )
    }

    /// -32602 invalid params.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(-32602, message)
    }

    /// -32603 internal error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(-32603, message)
    }

    /// -32004 not found.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(-32004, message)
    }

    pub(crate) fn into_wit(self) -> WitRpcError {
        WitRpcError {
            code: self.code,
            message: self.message,
            data: self.data.map(|data| data.to_string()),
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}
