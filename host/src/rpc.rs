//! The JSON-RPC envelope on the host's side: the encoding of outbound messages and the decoding
//! of params. Ids, codes and the error object are plain data in `wexec_protocol::rpc`; inbound
//! parsing (with its limits) lives in [`parse`].

pub mod parse;

use serde::Serialize;

pub use wexec_protocol::limits::MAX_MESSAGE_BYTES;
pub use wexec_protocol::rpc::*;

use crate::runtime::{CallError, CallResult};

/// A plugin call's failure in the words of docs/protocol.md §11.3; a plugin's own error as the
/// plugin gave it.
pub fn call_error(error: CallError) -> RpcError {
    match error {
        CallError::Answered(error) => error,
        CallError::NoPlugin { method } => RpcError::method_not_found(&method),
        CallError::Failed { .. } | CallError::TimeLimit { .. } | CallError::MemoryLimit { .. } => {
            RpcError::internal_error(error.to_string())
        }
    }
}

/// A plugin call's outcome as a reply's.
pub fn call_outcome(outcome: CallResult) -> RpcResult {
    outcome.map_err(call_error)
}

/// Encodes a typed result as the `result` member of a reply.
pub fn to_result<T: Serialize>(value: &T) -> RpcResult {
    serde_json::value::to_raw_value(value)
        .map_err(|err| RpcError::internal_error(format!("failed to encode result: {err}")))
}

/// Encodes a reply to `id`. A reply that would exceed [`MAX_MESSAGE_BYTES`] is replaced by a
/// -32603 error, so an oversized result can never break the client's framing.
pub fn encode_reply(id: &RequestId, outcome: &RpcResult) -> String {
    match outcome {
        Ok(result) => {
            let result = result.get();
            encode_success_with(id, result.len(), |text| text.push_str(result))
        }
        Err(error) => {
            let encoded = encode_error(id, error);
            if encoded.len() <= MAX_MESSAGE_BYTES {
                return encoded;
            }
            encode_error(id, &too_large(encoded.len()))
        }
    }
}

/// Encodes a success reply whose result `write` appends (about `len` bytes of JSON the caller
/// vouches for), such as a result assembled from validated parts around host-encoded base64.
/// It is written around the result in one allocation, rather than serialized into a buffer
/// that doubles its way up to a large result (file contents). Over the message limit, the
/// reply is a -32603 error instead.
pub fn encode_success_with(id: &RequestId, len: usize, write: impl FnOnce(&mut String)) -> String {
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
    const RESULT: &str = r#","result":"#;
    let id_text = serde_json::to_string(id).unwrap_or_default();
    // Exactly what the envelope needs: a result of megabytes must not be copied again by a
    // last push that finds the string one byte short.
    let mut text = String::with_capacity(HEAD.len() + id_text.len() + RESULT.len() + len + 1);
    text.push_str(HEAD);
    text.push_str(&id_text);
    text.push_str(RESULT);
    write(&mut text);
    text.push('}');
    if text.len() <= MAX_MESSAGE_BYTES {
        return text;
    }
    encode_error(id, &too_large(text.len()))
}

fn too_large(len: usize) -> RpcError {
    RpcError::internal_error(format!(
        "response of {len} bytes exceeds the message limit of {MAX_MESSAGE_BYTES} bytes"
    ))
}

fn encode_error(id: &RequestId, error: &RpcError) -> String {
    #[derive(Serialize)]
    struct Reply<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        error: &'a RpcError,
    }
    let reply = Reply {
        jsonrpc: "2.0",
        id,
        error,
    };
    // Serializing plain strings, integers and JSON values cannot fail.
    serde_json::to_string(&reply).unwrap_or_default()
}

/// Encodes a notification. Notifications always carry `params` (docs/protocol.md §4.1).
pub fn encode_notification<P: Serialize + ?Sized>(
    method: &str,
    params: &P,
) -> Result<String, RpcError> {
    #[derive(Serialize)]
    struct Notification<'a, P: ?Sized> {
        jsonrpc: &'static str,
        method: &'a str,
        params: &'a P,
    }
    serde_json::to_string(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
    .map_err(|err| {
        RpcError::internal_error(format!("failed to encode {method} notification: {err}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_result_of_known_length_is_written_without_growing_the_reply() {
        let result = format!("\"{}\"", "x".repeat(1 << 20));
        for id in [
            RequestId::Integer(7),
            RequestId::String("a-longer-id".into()),
        ] {
            let text = encode_success_with(&id, result.len(), |text| text.push_str(&result));
            assert_eq!(text.capacity(), text.len(), "allocated once, exactly");
        }
    }

    #[test]
    fn replies_always_carry_jsonrpc_and_echo_ids_verbatim() {
        let ok = to_result(&serde_json::json!({"status": "ready"})).unwrap();
        assert_eq!(
            encode_reply(&RequestId::Integer(-7), &Ok(ok)),
            r#"{"jsonrpc":"2.0","id":-7,"result":{"status":"ready"}}"#
        );
        assert_eq!(
            encode_reply(
                &RequestId::String("a\"b".into()),
                &Err(RpcError::invalid_request("nope"))
            ),
            r#"{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32600,"message":"nope"}}"#
        );
    }

    #[test]
    fn oversized_reply_becomes_an_internal_error() {
        let big = "x".repeat(MAX_MESSAGE_BYTES);
        let result = to_result(&big).unwrap();
        let encoded = encode_reply(&RequestId::Integer(1), &Ok(result));
        let value: serde_json::Value = serde_json::from_str(&encoded).unwrap();
        assert_eq!(value["error"]["code"], INTERNAL_ERROR);
        assert!(encoded.len() < 1024);
    }

    #[test]
    fn notifications_carry_params() {
        assert_eq!(
            encode_notification("x/y", &serde_json::json!({})).unwrap(),
            r#"{"jsonrpc":"2.0","method":"x/y","params":{}}"#
        );
    }
}
