//! `fetch`: one HTTP request through the plugin that serves `http/request` (the bundled `http`
//! plugin), within the hosts the operator allowed.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::{Answer, Call, Failure, Outcome, definition, hints, object, string, unsigned};

/// The body text returned by default.
const DEFAULT_MAX_LENGTH: u64 = 100_000;

/// The tool's definition.
pub fn tool_definition() -> Value {
    definition(
        "fetch",
        "Fetch a URL",
        "Makes an HTTP request to a host the operator allowed and returns the status, headers \
         and body (as text; at most `max_length` characters, from `start_index`).",
        object(
            json!({
                "url": {"type": "string", "description": "An http:// or https:// URL."},
                "method": {"type": "string", "description": "Default GET."},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {"type": "string"},
                "max_length": {"type": "integer", "minimum": 1, "description": "Default 100000."},
                "start_index": {"type": "integer", "minimum": 0},
                "timeout_ms": {"type": "integer", "minimum": 1},
            }),
            &["url"],
        ),
        Some(json!({
            "type": "object",
            "properties": {
                "status": {"type": "integer"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "body": {"type": "string"},
                "truncated": {"type": "boolean"},
                "length": {"type": "integer"},
            },
            "required": ["status", "headers", "body", "truncated", "length"],
        })),
        hints(false, false, false, true),
    )
}

/// Runs `fetch`.
pub async fn fetch(call: &Call, arguments: &Value) -> Outcome {
    let url = string(arguments, "url").unwrap_or_default();
    let method = string(arguments, "method")
        .unwrap_or("GET")
        .to_ascii_uppercase();
    let headers: Vec<Value> = (arguments.get("headers").and_then(Value::as_object))
        .into_iter()
        .flatten()
        .map(|(name, value)| json!({"name": name, "value": value.as_str().unwrap_or_default()}))
        .collect();
    let mut params = json!({"method": method, "url": url, "headers": headers});
    if let Some(body) = string(arguments, "body") {
        params["bodyBase64"] = json!(BASE64.encode(body));
    }
    if let Some(timeout) = unsigned(arguments, "timeout_ms") {
        params["timeoutMs"] = json!(timeout);
    }
    let response = tokio::select! {
        response = call.door.call("http/request", params) => response,
        () = call.cancelled.cancelled() => return Err("the request was cancelled".into()),
    };
    let response = response.map_err(|error| Failure::of(format!("{method} {url}"), &error))?;
    let body = (response.get("bodyBase64").and_then(Value::as_str))
        .and_then(|body| wexec_base64::decode(body).ok())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body);
    let start =
        usize::try_from(unsigned(arguments, "start_index").unwrap_or(0)).unwrap_or(usize::MAX);
    let max = usize::try_from(unsigned(arguments, "max_length").unwrap_or(DEFAULT_MAX_LENGTH))
        .unwrap_or(usize::MAX);
    let length = text.chars().count();
    let shown: String = text.chars().skip(start).take(max).collect();
    let truncated = start.saturating_add(max) < length;
    let headers: serde_json::Map<String, Value> =
        (response.get("headers").and_then(Value::as_array))
            .into_iter()
            .flatten()
            .filter_map(|header| {
                let name = header.get("name")?.as_str()?.to_ascii_lowercase();
                Some((name, header.get("value")?.clone()))
            })
            .collect();
    Ok(Answer::structured(json!({
        "status": response.get("status").cloned().unwrap_or(Value::Null),
        "headers": headers,
        "body": shown,
        "truncated": truncated,
        "length": length,
    })))
}
