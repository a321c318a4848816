//! The bundled `http` plugin: `http/request` (docs/protocol.md §10), buffered or streamed, through
//! the host's http capability, which admits only the granted hosts (every redirect hop included).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use serde_json::{Value, json};

use wexec_guest::http::{self, Error as HttpError};
use wexec_guest::{Call, Capability, Info, Plugin, Response, RpcError, respond};

/// Largest buffered body: 32 MiB, so its base64 fits a 64 MiB message.
const MAX_BUFFERED_BODY: usize = 32 * 1024 * 1024;

/// Largest decoded body delta.
const MAX_DELTA: u32 = 1024 * 1024;

struct Http;

fn error(code: i64, message: impl Into<String>) -> RpcError {
    RpcError::new(code, message)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderParam {
    name: String,
    value: String,
    #[serde(default)]
    value_env_var: Option<String>,
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

impl Plugin for Http {
    fn info() -> Info {
        Info::new("http", env!("CARGO_PKG_VERSION"))
            .method("http/request")
            .capability(Capability::Http)
            // `valueEnvVar` reads whichever variables the operator grants
            // (`--allow-header-env`); no others.
            .capability(Capability::EnvironmentVars)
            .env_var(wexec_guest::ANY_GRANTED_VAR)
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        if call.method() != "http/request" {
            return Err(RpcError::method_not_found(call.method()));
        }
        let params: Params = call.params()?;
        request(params).and_then(|result| Response::json(&result))
    }
}

/// An HTTP token (RFC 9110 `tchar`s), as a method must be.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header as sent: `value`, followed by the executor variable `valueEnvVar` names. Only
/// variables the operator granted can be read; any other reads as unset. The value is never
/// logged. The third member says whether it carries the variable's value (a credential).
fn with_env_value(header: HeaderParam) -> Result<(String, String, bool), RpcError> {
    let Some(var) = header.value_env_var else {
        return Ok((header.name, header.value, false));
    };
    match wexec_guest::env::var(&var) {
        Ok(Some(value)) if !value.is_empty() => {
            let mut full = header.value;
            full.push_str(&value);
            Ok((header.name, full, true))
        }
        Ok(Some(_)) => Err(error(
            -32602,
            format!(
                "http/request header {} requires a non-empty executor environment variable {var}",
                header.name
            ),
        )),
        Ok(None) | Err(_) => Err(error(
            -32602,
            format!(
                "http/request header {} requires executor environment variable {var}",
                header.name
            ),
        )),
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
    // A method that is no token is the host's error to report, before any variable is read
    // (Codex's check order).
    let headers = if is_token(&params.method) {
        params
            .headers
            .into_iter()
            .map(with_env_value)
            .collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let request_id = match (&params.request_id, params.stream_response) {
        (None, true) => {
            return Err(error(
                -32602,
                "http/request streamResponse requires requestId",
            ));
        }
        (id, _) => id.clone(),
    };
    let mut request = http::Request::new(params.method, params.url);
    for (name, value, credential) in headers {
        // What an executor variable supplied stays with the origin it was sent to.
        request = if credential {
            request.credential(name, value)
        } else {
            request.header(name, value)
        };
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    if let Some(timeout_ms) = params.timeout_ms {
        request = request.timeout_ms(timeout_ms);
    }
    if params.redirect_policy == RedirectPolicy::Stop {
        request = request.no_redirects();
    }
    let response = request.send().map_err(|err| match err {
        HttpError::Denied(message) => error(-32600, message),
        HttpError::Invalid(message) => error(-32602, message),
        HttpError::Failed(reason) => error(-32603, format!("http/request failed: {reason}")),
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
            respond::early(Ok(Response::raw(head)));
            stream(&request_id, &response);
            Ok(Value::Null)
        }
        None => {
            let mut body = Vec::new();
            loop {
                match response.read_chunk(MAX_DELTA) {
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
                            HttpError::Denied(reason)
                            | HttpError::Invalid(reason)
                            | HttpError::Failed(reason) => reason,
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
fn stream(request_id: &str, body: &http::Response) {
    let delta = |seq: u64, data: &[u8], done: bool, failure: Option<String>| {
        let params = json!({
            "requestId": request_id,
            "seq": seq,
            "deltaBase64": STANDARD.encode(data),
            "done": done,
            "error": failure,
        });
        respond::notify("http/request/bodyDelta", &params)
    };
    let mut seq = 1;
    loop {
        let (data, done, failure) = match body.read_chunk(MAX_DELTA) {
            Ok(Some(data)) => (data, false, None),
            Ok(None) => (Vec::new(), true, None),
            Err(
                HttpError::Denied(reason) | HttpError::Invalid(reason) | HttpError::Failed(reason),
            ) => (Vec::new(), true, Some(reason)),
        };
        if delta(seq, &data, done, failure).is_err() || done {
            return;
        }
        seq += 1;
    }
}

wexec_guest::export_plugin!(Http);
