//! The `responder` interface: a plugin answers its call early, or notifies its client,
//! through the call's [`crate::port::CallPort`].

use std::time::Instant;

use wasmtime::component::Resource;

use crate::bindings::wexec::plugin::responder::Host;
use crate::bindings::wexec::plugin::types::RpcError as WitRpcError;
use crate::outcome::CallError;
use crate::resources::Contents;
use crate::state::HostState;
use wexec_protocol::rpc::RpcError;

/// A plugin's error as wexec's: code, message and data unchanged (data parsed as JSON when it
/// is JSON, else kept as a string).
pub(crate) fn from_wit(error: WitRpcError) -> RpcError {
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
        let Some(port) = self.call.as_ref().and_then(|call| call.port.clone()) else {
            return;
        };
        let outcome = match result {
            Ok(json) => crate::json::value(json).map_err(|err| CallError::Failed {
                plugin: self.plugin.name.clone(),
                reason: format!("its result is not JSON: {err}"),
            }),
            Err(error) => Err(CallError::Answered(from_wit(error))),
        };
        port.respond(outcome);
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
        let Some(port) = self.call.as_ref().and_then(|call| call.port.clone()) else {
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
        let (before, after) = (crate::json::fragment(before), crate::json::fragment(after));
        let room = contents.take_room();
        let bytes = contents.bytes();
        let len = before.len() + wexec_base64::encoded_len(bytes.len()) + after.len() + 2;
        let started = Instant::now();
        port.respond_with(
            len,
            &mut |text| {
                text.push_str(&before);
                text.push('"');
                wexec_base64::encode_append(bytes, text);
                text.push('"');
                text.push_str(&after);
            },
            room,
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
        let Some(port) = self.call.as_ref().and_then(|call| call.port.clone()) else {
            return Err("no client is attached to this call".into());
        };
        let params = crate::json::value(params)
            .map_err(|err| format!("notification params are not JSON: {err}"))?;
        let waited = Instant::now();
        let sent = port.notify(&method, &params).await;
        self.clock.add_host_time(waited.elapsed());
        // What the guest read went out with it (a streamed HTTP body): the notification is in
        // the connection's queue, which bounds it from here.
        self.rooms.clear();
        sent
    }
}
