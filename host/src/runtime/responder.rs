//! The `responder` interface, and the reply slot every request has: a reply is sent exactly
//! once, early by a plugin or when the handler returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use wasmtime::component::Resource;

use super::bindings::wexec::plugin::responder::Host;
use super::bindings::wexec::plugin::types::RpcError as WitRpcError;
use super::filesystem::Contents;
use super::state::HostState;
use crate::rpc::{RequestId, RpcError, RpcResult, encode_reply, encode_success_with};
use crate::transport::{Outbound, Reservation, TrySend};

/// The reply to one request.
#[derive(Debug)]
pub struct Reply {
    id: RequestId,
    outbound: Outbound,
    sent: AtomicBool,
    /// An early reply that found no room in the queue: sent before the call's first
    /// notification, or once the call has returned (and its instance is free again).
    deferred: Mutex<Option<(String, Reservation)>>,
}

impl Reply {
    /// The reply slot of request `id` on a connection.
    pub fn new(id: RequestId, outbound: Outbound) -> Self {
        Self {
            id,
            outbound,
            sent: AtomicBool::new(false),
            deferred: Mutex::new(None),
        }
    }

    /// Sends `outcome` unless a reply was already sent (then sends a deferred early reply).
    /// Waits for room in the queue.
    pub async fn send(&self, outcome: &RpcResult) {
        if self.sent.swap(true, Ordering::AcqRel) {
            self.flush().await;
            return;
        }
        // A closed connection has nobody left to answer.
        let _ = self.outbound.send(encode_reply(&self.id, outcome)).await;
    }

    /// Sends an early reply from inside a plugin call, unless a reply was already sent. It is
    /// queued now if there is room, else deferred (see [`Reply::flush`]): a guest never waits
    /// for a slow client while it holds its instance.
    /// `reserved` is the room the reply's file contents hold, kept until it is written.
    fn offer(&self, text: impl FnOnce() -> String, reserved: Reservation) {
        if self.sent.swap(true, Ordering::AcqRel) {
            return;
        }
        match self.outbound.try_send_reserved(text(), reserved) {
            Ok(()) | Err((TrySend::Closed, _)) => {}
            Err((TrySend::Full(text), reserved)) => {
                *self.deferred.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((text, reserved));
            }
        }
    }

    /// Sends a deferred early reply, waiting for room.
    pub async fn flush(&self) {
        let deferred = self
            .deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((text, reserved)) = deferred {
            let _ = self.outbound.send_reserved(text, reserved).await;
        }
    }

    /// The connection's outbound queue.
    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }
}

/// A plugin's error as wexec's: code, message and data unchanged (data parsed as JSON when it
/// is JSON, else kept as a string).
pub fn from_wit(error: WitRpcError) -> RpcError {
    RpcError {
        code: error.code,
        message: error.message,
        data: error
            .data
            .map(|data| serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data))),
    }
}

impl Host for HostState {
    async fn respond(&mut self, result: Result<String, WitRpcError>) {
        let Some(reply) = self.call.as_ref().and_then(|call| call.reply.clone()) else {
            return;
        };
        let outcome = match result {
            Ok(json) => super::json::value(json).map_err(|err| {
                RpcError::internal_error(format!(
                    "plugin {} failed: its result is not JSON: {err}",
                    self.plugin.name
                ))
            }),
            Err(error) => Err(from_wit(error)),
        };
        let id = reply.id.clone();
        reply.offer(|| encode_reply(&id, &outcome), Reservation::default());
    }

    async fn respond_with_base64(
        &mut self,
        before: String,
        data: Resource<Contents>,
        after: String,
    ) -> Result<(), String> {
        let mut contents = self
            .take_contents(data)
            .map_err(|err| format!("no such contents: {err}"))?;
        let Some(reply) = self.call.as_ref().and_then(|call| call.reply.clone()) else {
            return Err("no client is attached to this call".into());
        };
        // Base64 has no character that needs escaping, so the result is JSON whenever the parts
        // are JSON with an empty string in the data's place: the data then sits inside a string.
        // (Were `before` to end inside a string, `""` would close it and open another right
        // after, never JSON; after a `\` the first quote is escaped and the data joins that
        // string, still JSON.)
        let around = [before.as_str(), "\"\"", after.as_str()].concat();
        if let Err(err) = serde_json::from_str::<serde::de::IgnoredAny>(&around) {
            return Err(format!("the result around the data is not JSON: {err}"));
        }
        // Validated as a whole above; each part loses its line breaks as any guest JSON does.
        let (before, after) = (super::json::fragment(before), super::json::fragment(after));
        let reserved = contents.take_reservation();
        let bytes = contents.bytes();
        let len = before.len() + bytes.len().div_ceil(3) * 4 + after.len() + 2;
        let started = Instant::now();
        reply.offer(
            || {
                encode_success_with(&reply.id, len, |text| {
                    text.push_str(&before);
                    text.push('"');
                    base64_simd::STANDARD.encode_append(bytes, text);
                    text.push('"');
                    text.push_str(&after);
                })
            },
            reserved,
        );
        self.clock.add_host_time(started.elapsed());
        Ok(())
    }

    async fn notify(&mut self, method: String, params: String) -> Result<(), String> {
        let namespace = format!("{}/", self.plugin.name);
        if !method.starts_with(&namespace) {
            return Err(format!(
                "notification {method} is outside plugin {}'s namespace {namespace}",
                self.plugin.name
            ));
        }
        let Some(reply) = self.call.as_ref().and_then(|call| call.reply.clone()) else {
            return Err("no client is attached to this call".into());
        };
        let params = super::json::value(params)
            .map_err(|err| format!("notification params are not JSON: {err}"))?;
        let text = crate::rpc::encode_notification(&method, &params).map_err(|err| err.message)?;
        let outbound = reply.outbound().clone();
        let waited = Instant::now();
        // The response first, if it was deferred.
        reply.flush().await;
        let sent = outbound.send(text).await;
        self.clock.add_host_time(waited.elapsed());
        sent.map_err(|_| "the connection is closed".to_owned())
    }
}
