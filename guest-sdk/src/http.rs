//! The HTTP capability: requests to the hosts granted to this plugin, redirects checked hop by
//! hop against the same grants.

use crate::RpcError;
use crate::bindings::wexec::plugin::http as wit;
pub use crate::bindings::wexec::plugin::http::{Error, Header};

impl From<Error> for RpcError {
    /// Denied → -32600; invalid → -32602; failed → -32603.
    fn from(error: Error) -> Self {
        match error {
            Error::Denied(message) => RpcError::invalid_request(message),
            Error::Invalid(message) => RpcError::invalid_params(message),
            Error::Failed(message) => RpcError::internal_error(message),
        }
    }
}

/// A request; [`Request::send`] performs it.
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<Header>,
    body: Option<Vec<u8>>,
    timeout_ms: Option<u64>,
    follow_redirects: bool,
    /// Names of the headers that carry credentials.
    credentials: Vec<String>,
}

impl Request {
    /// `method` to `url`, following redirects, without a timeout.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout_ms: None,
            follow_redirects: true,
            credentials: Vec::new(),
        }
    }

    /// `GET url`.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// Adds a header (order and repeats are kept).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push(Header {
            name: name.into(),
            value: value.into(),
        });
        self
    }

    /// Adds a header that carries a credential (a token, a key): as with `Authorization`, the
    /// host drops it when a redirect leaves the request's origin.
    pub fn credential(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.credentials.push(name.clone());
        self.headers.push(Header {
            name,
            value: value.into(),
        });
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// A deadline for the whole exchange, body included.
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// Returns 3xx responses instead of following them.
    pub fn no_redirects(mut self) -> Self {
        self.follow_redirects = false;
        self
    }

    /// Sends the request; the response's body is read separately.
    pub fn send(self) -> Result<Response, Error> {
        let request = wit::Request {
            method: self.method,
            url: self.url,
            headers: self.headers,
            body: self.body,
            timeout_ms: self.timeout_ms,
            follow_redirects: self.follow_redirects,
        };
        // Without credentials, the call every host version has.
        let response = if self.credentials.is_empty() {
            wit::send(&request)?
        } else {
            wit::send_with_credentials(&request, &self.credentials)?
        };
        Ok(Response {
            status: response.status,
            headers: response.headers,
            body: response.body,
        })
    }
}

/// A response whose body has not been read yet.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers in the server's order.
    pub headers: Vec<Header>,
    body: wit::Body,
}

impl Response {
    /// The first header named `name` (case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| header.value.as_str())
    }

    /// The next piece of the body, at most `max` bytes; `None` at the end.
    pub fn read_chunk(&self, max: u32) -> Result<Option<Vec<u8>>, Error> {
        self.body.read(max)
    }

    /// Reads the rest of the body, failing once it exceeds `limit` bytes.
    pub fn read_to_end(&self, limit: usize) -> Result<Vec<u8>, Error> {
        let mut body = Vec::new();
        while let Some(chunk) = self.body.read(1024 * 1024)? {
            if body.len() + chunk.len() > limit {
                return Err(Error::Failed(format!(
                    "the response body exceeds {limit} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}
