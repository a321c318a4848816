//! JSON-RPC errors and their mapping from filesystem failures (PROTOCOL §9.2).

use crate::wexec::plugin::filesystem::{Error, ErrorKind};
use crate::wexec::plugin::types::RpcError;

/// -32600.
pub fn invalid_request(message: impl Into<String>) -> RpcError {
    RpcError {
        code: -32600,
        message: message.into(),
        data: None,
    }
}

/// -32602.
pub fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError {
        code: -32602,
        message: message.into(),
        data: None,
    }
}

/// Not found → -32004; outside the roots, denied, invalid, too large → -32600; other → -32603.
pub fn from_fs(error: Error) -> RpcError {
    let code = match error.kind {
        ErrorKind::NotFound => -32004,
        ErrorKind::OutsideRoots
        | ErrorKind::Denied
        | ErrorKind::PermissionDenied
        | ErrorKind::Invalid
        | ErrorKind::TooLarge => -32600,
        ErrorKind::Other => -32603,
    };
    RpcError {
        code,
        message: error.message,
        data: None,
    }
}
