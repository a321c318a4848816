//! The bundled `http` plugin: `http/request` (docs/protocol.md §10), buffered or streamed, through
//! the host's http capability, which admits only the granted hosts (every redirect hop included).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use wexec_guest::http::{self, Error as HttpError};
use wexec_guest::protocol::limits::{MAX_HTTP_BODY_BYTES, MAX_HTTP_DELTA_BYTES};
use wexec_guest::protocol::{
    HTTP_BODY_DELTA, HTTP_REQUEST, HttpBodyDelta, HttpHeader, HttpRequestParams, HttpResponse,
    RedirectPolicy,
};
use wexec_guest::{Call, Capability, Info, Plugin, Response, RpcError, respond};

/// The body is read from the host in pieces of one delta's size.
const CHUNK_BYTES: u32 = MAX_HTTP_DELTA_BYTES as u32;

struct Http;

impl Plugin for Http {
    fn info() -> Info {
        Info::new("http", env!("CARGO_PKG_VERSION"))
            .method(HTTP_REQUEST)
            .capability(Capability::Http)
            // `valueEnvVar` reads whichever variables the operator grants
            // (`--allow-header-env`); no others.
            .capability(Capability::EnvironmentVars)
            .env_var(wexec_guest::ANY_GRANTED_VAR)
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        if call.method() != HTTP_REQUEST {
            return Err(RpcError::method_not_found(call.method()));
        }
        request(call.params()?)
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
fn with_env_value(header: HttpHeader) -> Result<(String, String, bool), RpcError> {
    let Some(var) = header.value_env_var else {
        return Ok((header.name, header.value, false));
    };
    match wexec_guest::env::var(&var) {
        Ok(Some(value)) if !value.is_empty() => {
            let mut full = header.value;
            full.push_str(&value);
            Ok((header.name, full, true))
        }
        Ok(Some(_)) => Err(RpcError::invalid_params(format!(
            "http/request header {} requires a non-empty executor environment variable {var}",
            header.name
        ))),
        Ok(None) | Err(_) => Err(RpcError::invalid_params(format!(
            "http/request header {} requires executor environment variable {var}",
            header.name
        ))),
    }
}

fn request(params: HttpRequestParams) -> Result<Response, RpcError> {
    let body = match &params.body_base64 {
        Some(body) => Some(STANDARD.decode(body).map_err(|err| {
            RpcError::invalid_params(format!("http/request bodyBase64 is invalid: {err}"))
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
            return Err(RpcError::invalid_params(
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
        HttpError::Failed(reason) => {
            RpcError::internal_error(format!("http/request failed: {reason}"))
        }
        other => RpcError::from(other),
    })?;
    let head = |body_base64: String| HttpResponse {
        status: response.status,
        headers: response
            .headers
            .iter()
            .map(|header| HttpHeader::new(&header.name, &header.value))
            .collect(),
        body_base64,
    };
    match request_id.filter(|_| params.stream_response) {
        Some(request_id) => {
            respond::early(Response::json(&head(String::new())));
            stream(&request_id, &response);
            Ok(Response::sent())
        }
        None => {
            let body = read_body(&response)?;
            Response::json(&head(STANDARD.encode(body)))
        }
    }
}

/// Why reading the body failed, whatever the kind of failure.
fn reason(err: HttpError) -> String {
    match err {
        HttpError::Denied(reason) | HttpError::Invalid(reason) | HttpError::Failed(reason) => {
            reason
        }
    }
}

/// The whole body, at most [`MAX_HTTP_BODY_BYTES`].
fn read_body(response: &http::Response) -> Result<Vec<u8>, RpcError> {
    let failed = |reason: &str| {
        RpcError::internal_error(format!(
            "failed to read http/request response body: {reason}"
        ))
    };
    let mut body = Vec::new();
    loop {
        match response.read_chunk(CHUNK_BYTES) {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_HTTP_BODY_BYTES {
                    return Err(failed(&format!("body exceeds {MAX_HTTP_BODY_BYTES} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(err) => return Err(failed(&reason(err))),
        }
    }
}

/// Sends the body as `http/request/bodyDelta` notifications: seq from 1, at most 1 MiB each,
/// then exactly one `done`. A closed connection stops the stream silently.
fn stream(request_id: &str, body: &http::Response) {
    let delta = |seq: u64, data: &[u8], done: bool, error: Option<String>| {
        let params = HttpBodyDelta {
            request_id: request_id.to_owned(),
            seq,
            delta_base64: STANDARD.encode(data),
            done,
            error,
        };
        respond::notify(HTTP_BODY_DELTA, &params)
    };
    let mut seq = 1;
    loop {
        let (data, done, failure) = match body.read_chunk(CHUNK_BYTES) {
            Ok(Some(data)) => (data, false, None),
            Ok(None) => (Vec::new(), true, None),
            Err(err) => (Vec::new(), true, Some(reason(err))),
        };
        if delta(seq, &data, done, failure).is_err() || done {
            return;
        }
        seq += 1;
    }
}

wexec_guest::export_plugin!(Http);
