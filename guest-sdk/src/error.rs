//! The JSON-RPC error a plugin returns: the protocol's own [`RpcError`], so a plugin builds
//! errors with the same codes and texts as the host. The host re-validates what it receives.

use crate::bindings::wexec::plugin::types::RpcError as WitRpcError;

pub use wexec_protocol::rpc::RpcError;

/// The error as the WIT contract carries it (`data` as JSON text).
pub(crate) fn to_wit(error: RpcError) -> WitRpcError {
    WitRpcError {
        code: error.code,
        message: error.message,
        data: error.data.map(|data| data.to_string()),
    }
}
