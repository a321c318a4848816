//! Answering before the call returns, and notifications to the calling connection.

use serde::Serialize;

use crate::bindings::wexec::plugin::responder;
use crate::fs::Contents;
use crate::{Response, RpcError};

/// Sends the call's outcome now; the call may keep running (e.g. to stream a body as
/// notifications) and whatever it returns later is discarded.
pub fn early(outcome: Result<Response, RpcError>) {
    let outcome = outcome
        .map(Response::into_json)
        .map_err(crate::error::to_wit);
    responder::respond(match &outcome {
        Ok(json) => Ok(json.as_str()),
        Err(error) => Err(error),
    });
}

/// Sends the call's result now: `before`, the standard base64 of `data` as a JSON string, then
/// `after`; `before` + `""` + `after` must be JSON, for example `{"dataBase64":` and `}`. The
/// host encodes the bytes straight into the reply. Return [`Response::sent`] from the handler
/// afterwards. Fails if the parts are not JSON or no client is attached to the call.
pub fn early_base64(before: &str, data: Contents, after: &str) -> Result<(), RpcError> {
    responder::respond_with_base64(before, data, after).map_err(RpcError::internal_error)
}

/// Sends a notification to the calling connection. `method` must be in the plugin's own
/// namespace (bundled plugins may use wexec's). Waits while the connection's queue is full.
pub fn notify<T: Serialize + ?Sized>(method: &str, params: &T) -> Result<(), RpcError> {
    let params = serde_json::to_string(params)
        .map_err(|err| RpcError::internal_error(format!("cannot encode {method} params: {err}")))?;
    responder::notify(method, &params).map_err(RpcError::internal_error)
}
