//! The MCP face on stdio (docs/mcp.md): wexec's own stdio transport, as the Codex face has it
//! (a thread that reads stdin and writes replies itself, and the spin), under a codec of the
//! face's own in front of the SDK (`rmcp`).
//!
//! Every line is parsed into the SDK's message types. Until the SDK has chosen the session's
//! lifecycle (an `initialize`, or a first request whose `_meta` names a protocol version),
//! every message goes to the SDK's service loop. From then on, the requests agents send all
//! the time ([`is_direct`]) are handed to the very handler the SDK would call, with the context
//! it would build, on the thread that read them: a tool call whose plugin answers at once is
//! read, served and answered without a switch between threads, where the SDK's loop takes
//! several hops per request (each costs more than a small file read on a small machine). The
//! rest (notifications, `initialize`, discovery, subscriptions, anything newer) keeps the SDK's
//! loop, so the protocol's rules stay the SDK's. The SDK's own stdio transport drops a line it
//! cannot read; here such a line gets the JSON-RPC error it calls for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientNotification, ClientRequest, GetExtensions,
    GetMeta, JsonRpcMessage, JsonRpcRequest, PaginatedRequestParams, ReadResourceRequestParams,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext, RoleServer, Service};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::door::Door;
use super::face::Face;
use crate::server::ServerState;
use crate::server::dispatch::{Dispatcher, Runs};
use crate::transport::budget::Held;
use crate::transport::{Closed, Connection, Outbound, Received};

/// Messages read for the SDK's loop before the reader waits for it.
const SDK_QUEUE: usize = 64;

/// JSON-RPC's error codes for what the codec refuses itself.
const PARSE_ERROR: i64 = -32_700;
const INVALID_REQUEST: i64 = -32_600;
const INVALID_PARAMS: i64 = -32_602;
const INTERNAL_ERROR: i64 = -32_603;

/// The requests served on the reading thread once the lifecycle is chosen: what the handler
/// answers from its own state and the door, needing nothing of the SDK's loop.
fn is_direct(request: &ClientRequest) -> bool {
    matches!(
        request,
        ClientRequest::CallToolRequest(_)
            | ClientRequest::ListToolsRequest(_)
            | ClientRequest::PingRequest(_)
            | ClientRequest::ReadResourceRequest(_)
            | ClientRequest::ListResourcesRequest(_)
            | ClientRequest::ListResourceTemplatesRequest(_)
    )
}

/// The requests served on the reading thread and not yet answered, by a number of the
/// codec's own: a client may reuse an id, and each such request still gets its answer, is
/// cancelled by a cancellation of its id and at the end of input.
type InFlight = Arc<Mutex<HashMap<u64, (RequestId, CancellationToken)>>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only insert and remove map entries.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves one MCP client on `connection` (stdio's) until its input ends: cancels what it
/// still asked for, waits for those requests, then ends its session (terminating its
/// processes). `handshake_failed` fires if the SDK gives up on the client before a lifecycle
/// was chosen (as its own stdio transport would, wexec then exits).
pub async fn serve(
    connection: Connection,
    server: Arc<ServerState>,
    handshake_failed: oneshot::Sender<()>,
) {
    let Connection {
        peer,
        mut inbound,
        outbound,
        ..
    } = connection;
    let door = match Door::open(Arc::clone(&server), peer) {
        Ok(door) => door,
        Err(error) => {
            tracing::warn!("cannot open the MCP session: {}", error.message);
            return;
        }
    };
    let face = Face::new(Arc::clone(&door));
    let (to_sdk, from_codec) = mpsc::channel(SDK_QUEUE);
    let lifecycle: Arc<OnceLock<Peer<RoleServer>>> = Arc::default();
    let sdk = tokio::spawn(run_sdk(
        face.clone(),
        Forwarded {
            inbound: from_codec,
            outbound: outbound.clone(),
        },
        Arc::clone(&lifecycle),
        server,
        handshake_failed,
    ));
    let mut codec = Codec {
        face,
        outbound,
        lifecycle,
        to_sdk,
        in_flight: InFlight::default(),
        served: 0,
        dispatcher: Dispatcher::new(),
    };
    // Unlike the Codex face, the loop never settles startup early (`crate::startup`): an MCP
    // client's first answer is `initialize`'s, and work started then would compete with its
    // first tool call, whose plugin is still being linked; startup's own timer starts it.
    let one_cpu = crate::fast_path::one_cpu();
    while let Some(message) = inbound.recv().await {
        let inline = one_cpu || inbound.is_empty();
        let work = match message {
            Received::Message(bytes, held) => codec.handle(&bytes, held, inline).await,
            Received::Refused(id, reason) => {
                let id = id.map_or(Value::Null, |id| json!(id));
                codec.write(error_reply(id, INTERNAL_ERROR, &reason)).await;
                false
            }
        };
        if !work {
            inbound.not_work();
        }
        if codec.to_sdk.is_closed() {
            break;
        }
    }
    tracing::info!("end of input");
    let Codec {
        to_sdk,
        in_flight,
        dispatcher,
        ..
    } = codec;
    // Nobody is left to read the answers: cancel, as the SDK does with its own requests.
    for (_, (_, cancelled)) in lock(&in_flight).drain() {
        cancelled.cancel();
    }
    drop(to_sdk);
    dispatcher.drain().await;
    let _ = sdk.await;
    door.close().await;
}

/// The SDK's side of the session: its service loop over the messages the codec forwards.
/// Once the lifecycle is chosen, the codec may serve requests itself with the loop's peer;
/// a reload that changed the plugins tells the client its tool list changed.
async fn run_sdk(
    face: Face,
    transport: Forwarded,
    lifecycle: Arc<OnceLock<Peer<RoleServer>>>,
    server: Arc<ServerState>,
    handshake_failed: oneshot::Sender<()>,
) {
    let running = match face.serve(transport).await {
        Ok(running) => running,
        Err(err) => {
            tracing::warn!("the MCP client did not complete its handshake: {err}");
            let _ = handshake_failed.send(());
            return;
        }
    };
    let peer = running.peer().clone();
    let _ = lifecycle.set(peer.clone());
    let mut changed = server.plugins_changed.subscribe();
    let notifier = tokio::spawn(async move {
        while changed.changed().await.is_ok() {
            if peer.notify_tool_list_changed().await.is_err() {
                break;
            }
        }
    });
    if let Err(err) = running.waiting().await {
        tracing::warn!("the MCP session ended abnormally: {err}");
    }
    notifier.abort();
}

/// The reading side: parses each line and serves it or hands it to the SDK.
struct Codec {
    face: Face,
    outbound: Outbound,
    /// Set once the SDK has chosen the session's lifecycle: its peer.
    lifecycle: Arc<OnceLock<Peer<RoleServer>>>,
    to_sdk: mpsc::Sender<(ClientJsonRpcMessage, Held)>,
    in_flight: InFlight,
    /// Requests served here so far.
    served: u64,
    dispatcher: Dispatcher,
}

impl Codec {
    /// Handles one line; whether it was a request (work, for the spin).
    async fn handle(&mut self, line: &[u8], held: Held, inline: bool) -> bool {
        let message = match parse(line) {
            Ok(message) => message,
            Err(Some(reply)) => {
                self.write(reply).await;
                return false;
            }
            Err(None) => return false,
        };
        match message {
            JsonRpcMessage::Request(request) => {
                match self.lifecycle.get() {
                    Some(peer) if is_direct(&request.request) => {
                        let peer = peer.clone();
                        self.serve_here(peer, request, held, inline).await;
                    }
                    _ => self.forward(JsonRpcMessage::Request(request), held).await,
                }
                true
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    // Every request in flight under that id: the client reused it.
                    lock(&self.in_flight).retain(|_, (request, token)| {
                        let keep = request != id;
                        if !keep {
                            token.cancel();
                        }
                        keep
                    });
                }
                // The SDK's loop cancels what it serves itself.
                self.forward(JsonRpcMessage::Notification(notification), held)
                    .await;
                false
            }
            other => {
                self.forward(other, held).await;
                false
            }
        }
    }

    /// Serves `request` with the handler and context the SDK's loop would give it. A cancelled
    /// request gets no answer (the SDK's loop drops those too).
    async fn serve_here(
        &mut self,
        peer: Peer<RoleServer>,
        request: JsonRpcRequest<ClientRequest>,
        held: Held,
        inline: bool,
    ) {
        let JsonRpcRequest {
            id, mut request, ..
        } = request;
        let cancelled = CancellationToken::new();
        let number = self.served;
        self.served += 1;
        lock(&self.in_flight).insert(number, (id.clone(), cancelled.clone()));
        let mut context = RequestContext::new(id.clone(), peer);
        context.ct = cancelled.clone();
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        let face = self.face.clone();
        let outbound = self.outbound.clone();
        let in_flight = Arc::clone(&self.in_flight);
        let job = async move {
            let _held = held;
            let outcome = face.handle_request(request, context).await;
            lock(&in_flight).remove(&number);
            if cancelled.is_cancelled() {
                return;
            }
            let message = match outcome {
                Ok(result) => ServerJsonRpcMessage::response(result, id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            };
            let _ = send(&outbound, &message).await;
        };
        self.dispatcher
            .dispatch_with(None, false, job, inline, Runs::Native)
            .await;
    }

    /// Hands `message` to the SDK's loop; it holds its share of the inbound budget until the
    /// loop takes it.
    async fn forward(&self, message: ClientJsonRpcMessage, held: Held) {
        if self.to_sdk.send((message, held)).await.is_err() {
            tracing::debug!("the MCP session has ended: a message was dropped");
        }
    }

    async fn write(&self, text: String) {
        if self.outbound.send(text).await.is_err() {
            tracing::debug!("stdout is closed: an error reply was dropped");
        }
    }
}

/// `line` as a client message, or the error reply it calls for (`None`: nothing to answer,
/// as for a notification or a response nobody can read).
fn parse(line: &[u8]) -> Result<ClientJsonRpcMessage, Option<String>> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let unreadable = match serde_json::from_slice(line) {
        Ok(message) => return misnamed(message),
        Err(err) => err,
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => {
            let text = format!("Parse error: {err}");
            return Err(Some(error_reply(Value::Null, PARSE_ERROR, &text)));
        }
    };
    let invalid = |id: Value, why: &dyn std::fmt::Display| {
        let text = format!("Invalid Request: {why}");
        Err(Some(error_reply(id, INVALID_REQUEST, &text)))
    };
    // The envelope alone: when it reads, what the SDK's types refused is in the params.
    let envelope = match serde_json::from_slice::<Envelope>(line) {
        Ok(envelope) => envelope,
        Err(err) => return invalid(Value::Null, &err),
    };
    let id = envelope.id.map(|id| json!(id));
    if value.get("id").is_some() && id.is_none() {
        return invalid(Value::Null, &"the id is null");
    }
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return invalid(id.unwrap_or(Value::Null), &"jsonrpc must be \"2.0\"");
    }
    match (id, envelope.method) {
        (Some(id), Some(method)) => {
            let text = format!("invalid params for {method}: {unreadable}");
            Err(Some(error_reply(id, INVALID_PARAMS, &text)))
        }
        // A notification has nobody to answer, nor has a response.
        (None, Some(_)) => Err(None),
        (_, None) if value.get("result").is_some() || value.get("error").is_some() => Err(None),
        (id, None) => invalid(id.unwrap_or(Value::Null), &unreadable),
    }
}

/// What every JSON-RPC message has: any other member is the params' (or a result's).
#[derive(serde::Deserialize)]
struct Envelope {
    jsonrpc: Option<String>,
    id: Option<RequestId>,
    method: Option<String>,
}

/// The SDK reads a request for one of its own methods whose params do not decode as a custom
/// request, which its loop answers "method not found": for the methods served here, the
/// client gets -32602 with what is wrong instead.
fn misnamed(message: ClientJsonRpcMessage) -> Result<ClientJsonRpcMessage, Option<String>> {
    let JsonRpcMessage::Request(request) = &message else {
        return Ok(message);
    };
    let ClientRequest::CustomRequest(custom) = &request.request else {
        return Ok(message);
    };
    let params = custom.params.clone().unwrap_or(Value::Null);
    let decoded = match custom.method.as_str() {
        "tools/call" => serde_json::from_value::<CallToolRequestParams>(params).map(drop),
        "resources/read" => serde_json::from_value::<ReadResourceRequestParams>(params).map(drop),
        "tools/list" | "resources/list" | "resources/templates/list" => {
            serde_json::from_value::<Option<PaginatedRequestParams>>(params).map(drop)
        }
        _ => return Ok(message),
    };
    match decoded {
        Ok(()) => Ok(message),
        Err(err) => {
            let text = format!("invalid params for {}: {err}", custom.method);
            Err(Some(error_reply(json!(request.id), INVALID_PARAMS, &text)))
        }
    }
}

fn error_reply(id: Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// Writes an SDK message to the client.
async fn send(outbound: &Outbound, message: &ServerJsonRpcMessage) -> Result<(), Closed> {
    match serde_json::to_string(message) {
        Ok(text) => outbound.send(text).await,
        Err(err) => {
            tracing::error!("an MCP message could not be encoded: {err}");
            Ok(())
        }
    }
}

/// The SDK's transport: what the codec forwards in, the client's stdout out.
struct Forwarded {
    inbound: mpsc::Receiver<(ClientJsonRpcMessage, Held)>,
    outbound: Outbound,
}

impl Transport<RoleServer> for Forwarded {
    type Error = Closed;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Closed>> + Send + 'static {
        let outbound = self.outbound.clone();
        async move { send(&outbound, &item).await }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.inbound.recv().await.map(|(message, _held)| message)
    }

    async fn close(&mut self) -> Result<(), Closed> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(line: &str) -> Option<Value> {
        match parse(line.as_bytes()) {
            Ok(_) => panic!("{line} was read"),
            Err(reply) => reply.map(|text| serde_json::from_str(&text).unwrap()),
        }
    }

    #[test]
    fn lines_that_are_no_message_get_the_error_they_call_for() {
        let reply = refusal("{not json").unwrap();
        assert_eq!(reply["error"]["code"], PARSE_ERROR);
        assert_eq!(reply["id"], Value::Null);

        let reply =
            refusal(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":5}"#).unwrap();
        assert_eq!(reply["error"]["code"], INVALID_PARAMS);
        assert_eq!(reply["id"], 7);
        let message = reply["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("invalid params for tools/call: "),
            "{message}"
        );

        let reply = refusal(r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#).unwrap();
        assert_eq!(reply["error"]["code"], INVALID_REQUEST);
        assert_eq!(reply["id"], "a");

        let reply = refusal("[1,2]").unwrap();
        assert_eq!(reply["error"]["code"], INVALID_REQUEST);

        for id in ["null", "1.5", "{}", "true", "18446744073709551615"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let reply = refusal(&line).unwrap();
            assert_eq!(reply["error"]["code"], INVALID_REQUEST, "{line}");
            assert_eq!(reply["id"], Value::Null, "{line}");
        }
        let reply = refusal(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#).unwrap();
        assert_eq!(reply["error"]["code"], INVALID_REQUEST);

        for params in [r#"{}"#, r#"{"name":5}"#, r#"{"name":"x","arguments":"y"}"#] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{params}}}"#);
            let reply = refusal(&line).unwrap();
            assert_eq!(reply["error"]["code"], INVALID_PARAMS, "{line}");
            assert_eq!(reply["id"], 3, "{line}");
        }
        let reply =
            refusal(r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":5}}"#)
                .unwrap();
        assert_eq!(reply["error"]["code"], INVALID_PARAMS);
    }

    #[test]
    fn notifications_and_responses_nobody_can_read_get_no_answer() {
        assert!(
            refusal(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#).is_none()
        );
        assert!(refusal(r#"{"jsonrpc":"2.0","id":1,"error":5}"#).is_none());
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let message =
            parse(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}").unwrap();
        assert!(matches!(message, JsonRpcMessage::Request(_)));
    }
}
