//! `http/request` and its body stream (docs/protocol.md §10), served by the `http` plugin.

use serde::{Deserialize, Serialize};

/// `http/request` request.
pub const HTTP_REQUEST: &str = "http/request";
/// `http/request/bodyDelta` notification.
pub const HTTP_BODY_DELTA: &str = "http/request/bodyDelta";

/// Params of `http/request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRequestParams {
    /// HTTP method token.
    pub method: String,
    /// Absolute `http` or `https` URL.
    pub url: String,
    /// Request headers, order and repeats kept.
    #[serde(default)]
    pub headers: Vec<HttpHeader>,
    /// Request body, base64.
    #[serde(default)]
    pub body_base64: Option<String>,
    /// Deadline for the whole exchange; `None` = no timeout.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Follow redirects (default) or return the 3xx. Absent means `follow`; `null` is refused.
    #[serde(default, skip_serializing_if = "RedirectPolicy::is_follow")]
    pub redirect_policy: RedirectPolicy,
    /// Body stream name; required when streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Stream the body as `http/request/bodyDelta` notifications.
    #[serde(default)]
    pub stream_response: bool,
}

impl HttpRequestParams {
    /// A buffered request without headers, body or timeout.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body_base64: None,
            timeout_ms: None,
            redirect_policy: RedirectPolicy::Follow,
            request_id: None,
            stream_response: false,
        }
    }
}

/// One header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpHeader {
    /// Header name.
    pub name: String,
    /// Header value; with `value_env_var`, the prefix of the value sent.
    pub value: String,
    /// A request header's executor environment variable, appended to `value` (docs/protocol.md
    /// §10.1): only variables the operator granted are read, and what one supplies is a
    /// credential that stays with the origin it was sent to. Never in a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_env_var: Option<String>,
}

impl HttpHeader {
    /// A header with a literal value.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
            value_env_var: None,
        }
    }
}

/// `redirectPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RedirectPolicy {
    /// Follow up to 10 hops, each checked against the grants.
    #[default]
    Follow,
    /// Return the 3xx response as is.
    Stop,
}

impl RedirectPolicy {
    /// Whether this is the default, which a request need not send.
    pub fn is_follow(&self) -> bool {
        *self == Self::Follow
    }
}

/// Result of `http/request`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<HttpHeader>,
    /// The body, base64; `""` when streamed.
    pub body_base64: String,
}

/// `http/request/bodyDelta` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpBodyDelta {
    /// The stream.
    pub request_id: String,
    /// From 1, contiguous.
    pub seq: u64,
    /// At most 1 MiB decoded.
    pub delta_base64: String,
    /// The final delta.
    pub done: bool,
    /// Why the stream failed, on the final delta.
    #[serde(default)]
    pub error: Option<String>,
}
