//! Answering before the call returns, and notifications to the calling connection.

use serde::Serialize;

use crate::bindings::wexec::plugin::responder;
use crate::{Response, RpcError};

/// Sends the call's outcome now; the call may keep running (e.g. to stream a body as
/// notifications) and whatever it returns later is discarded.
pub fn early(outcome: Result<Response, RpcError>) {
    let outcome = outcome.map(Response::into_json).map_err(RpcError::into_wit);
    responder::respond(match &outcome {
        Ok(json) => Ok(json.as_str()),
        Err(error) => Err(error),
    });
}

/// Sends a notification to the calling connection. `method` must be in the plugin's own
/// namespace (bundled plugins may use wexec's). Waits while the connection's queue is full.
pub fn notify<T: Serialize + ?Sized>(method: &str, params: &T) -> Result<(), RpcError> {
    let params = serde_json::to_string(params)
        .map_err(|err| RpcError::internal(format!("cannot encode {method} params: {err}")))?;
    responder::notify(method, &params).map_err(RpcError::internal)
}
