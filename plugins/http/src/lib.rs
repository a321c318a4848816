//! The bundled `http` plugin: `http/request` (PROTOCOL §10), buffered or streamed, through the
//! host's http capability, which admits only the granted hosts (every redirect hop included).

#![allow(
    unsafe_code,
    reason = "wit-bindgen's generated import and export glue is unsafe code"
)]

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};

use exports::wexec::plugin::handler::{Guest, PluginInfo};
use wexec::plugin::http::{self, Header};
use wexec::plugin::responder;
use wexec::plugin::types::{Capability, RpcError};

/// Largest buffered body: 32 MiB, so its base64 fits a 64 MiB message.
const MAX_BUFFERED_BODY: usize = 32 * 1024 * 1024;

/// Largest decoded body delta.
const MAX_DELTA: u32 = 1024 * 1024;

struct Http;

fn error(code: i64, message: impl Into<String>) -> RpcError {
    RpcError {
        code,
        message: message.into(),
        data: None,
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderParam {
    name: String,
    value: String,
    #[serde(default)]
    value_env_var: Option<Value>,
}

#[derive(Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
enum RedirectPolicy {
    #[default]
    Follow,
    Stop,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<HeaderParam>,
    #[serde(default)]
    body_base64: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    redirect_policy: RedirectPolicy,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    stream_response: bool,
}

impl Guest for Http {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "http".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract: "0.1.0".into(),
            methods: vec!["http/request".into()],
            capabilities: vec![Capability::Http],
            env_vars: Vec::new(),
        }
    }

    fn handle(method: String, params: String) -> Result<String, RpcError> {
        if method != "http/request" {
            return Err(error(
                -32601,
                format!("exec-server stub does not implement `{method}` yet"),
            ));
        }
        let params: Params =
            serde_json::from_str(&params).map_err(|err| error(-32602, err.to_string()))?;
        request(params).map(|result| result.to_string())
    }
}

fn request(params: Params) -> Result<Value, RpcError> {
    let body =
        match &params.body_base64 {
            Some(body) => Some(STANDARD.decode(body).map_err(|err| {
                error(-32602, format!("http/request bodyBase64 is invalid: {err}"))
            })?),
            None => None,
        };
    if let Some(header) = params
        .headers
        .iter()
        .find(|header| header.value_env_var.as_ref().is_some_and(|v| !v.is_null()))
    {
        return Err(error(
            -32602,
            format!(
                "http/request header {} uses valueEnvVar, which this executor does not support",
                header.name
            ),
        ));
    }
    let request_id = match (&params.request_id, params.stream_response) {
        (None, true) => {
            return Err(error(
                -32602,
                "http/request streamResponse requires requestId",
            ));
        }
        (id, _) => id.clone(),
    };
    let request = http::Request {
        method: params.method,
        url: params.url,
        headers: params
            .headers
            .into_iter()
            .map(|header| Header {
                name: header.name,
                value: header.value,
            })
            .collect(),
        body,
        timeout_ms: params.timeout_ms,
        follow_redirects: params.redirect_policy == RedirectPolicy::Follow,
    };
    let response = http::send(&request).map_err(|err| match err {
        http::Error::Denied(message) => error(-32600, message),
        http::Error::Invalid(message) => error(-32602, message),
        http::Error::Failed(reason) => error(-32603, format!("http/request failed: {reason}")),
    })?;
    let headers: Vec<Value> = response
        .headers
        .iter()
        .map(|header| json!({"name": header.name, "value": header.value}))
        .collect();
    match request_id.filter(|_| params.stream_response) {
        Some(request_id) => {
            let head = json!({"status": response.status, "headers": headers, "bodyBase64": ""})
                .to_string();
            responder::respond(Ok(&head));
            stream(&request_id, &response.body);
            Ok(Value::Null)
        }
        None => {
            let mut body = Vec::new();
            loop {
                match response.body.read(MAX_DELTA) {
                    Ok(Some(chunk)) => {
                        if body.len() + chunk.len() > MAX_BUFFERED_BODY {
                            return Err(error(
                                -32603,
                                format!(
                                    "failed to read http/request response body: body exceeds {MAX_BUFFERED_BODY} bytes"
                                ),
                            ));
                        }
                        body.extend_from_slice(&chunk);
                    }
                    Ok(None) => break,
                    Err(err) => {
                        let reason = match err {
                            http::Error::Denied(reason)
                            | http::Error::Invalid(reason)
                            | http::Error::Failed(reason) => reason,
                        };
                        return Err(error(
                            -32603,
                            format!("failed to read http/request response body: {reason}"),
                        ));
                    }
                }
            }
            Ok(
                json!({"status": response.status, "headers": headers, "bodyBase64": STANDARD.encode(body)}),
            )
        }
    }
}

/// Sends the body as `http/request/bodyDelta` notifications: seq from 1, at most 1 MiB each,
/// then exactly one `done`. A closed connection stops the stream silently.
fn stream(request_id: &str, body: &http::Body) {
    let delta = |seq: u64, data: &[u8], done: bool, failure: Option<String>| {
        let params = json!({
            "requestId": request_id,
            "seq": seq,
            "deltaBase64": STANDARD.encode(data),
            "done": done,
            "error": failure,
        });
        responder::notify("http/request/bodyDelta", &params.to_string())
    };
    let mut seq = 1;
    loop {
        let (data, done, failure) = match body.read(MAX_DELTA) {
            Ok(Some(data)) => (data, false, None),
            Ok(None) => (Vec::new(), true, None),
            Err(
                http::Error::Denied(reason)
                | http::Error::Invalid(reason)
                | http::Error::Failed(reason),
            ) => (Vec::new(), true, Some(reason)),
        };
        if delta(seq, &data, done, failure).is_err() || done {
            return;
        }
        seq += 1;
    }
}

export!(Http);
