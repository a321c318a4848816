//! The HTTP side of the WebSocket listener (docs/protocol.md §3.3): which request upgrades and
//! which gets a plain status. A pure function of the request head, so every rule is table-tested.

use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use super::credential::Credential;

/// Largest request head accepted before the upgrade.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Most headers accepted in a request head.
pub const MAX_HEADERS: usize = 64;

/// The parts of an HTTP request head the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The method, e.g. `GET`.
    pub method: String,
    /// The request target without its query string.
    pub path: String,
    /// Header names (any case) and raw values, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// What to do with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Switch protocols, answering with this `Sec-WebSocket-Accept`.
    Upgrade {
        /// The accept key derived from the client's `Sec-WebSocket-Key`.
        accept_key: String,
    },
    /// Answer with a status and close.
    Respond(Status),
}

/// The plain answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `/readyz`.
    Ok,
    /// Not a valid WebSocket upgrade.
    BadRequest,
    /// Missing or wrong bearer token.
    Unauthorized,
    /// The request came from a browser (it has `Origin`).
    Forbidden,
    /// Unknown path.
    NotFound,
    /// `/readyz` with a method other than GET or HEAD.
    MethodNotAllowed,
    /// The head is too large.
    HeadersTooLarge,
    /// An upgrade while wexec serves `--max-connections` connections already.
    Unavailable,
}

impl Status {
    /// The full response: status line, headers and an empty body.
    pub fn response(self) -> String {
        let (code, reason) = match self {
            Self::Ok => (200, "OK"),
            Self::BadRequest => (400, "Bad Request"),
            Self::Unauthorized => (401, "Unauthorized"),
            Self::Forbidden => (403, "Forbidden"),
            Self::NotFound => (404, "Not Found"),
            Self::MethodNotAllowed => (405, "Method Not Allowed"),
            Self::HeadersTooLarge => (431, "Request Header Fields Too Large"),
            Self::Unavailable => (503, "Service Unavailable"),
        };
        let extra = match self {
            Self::Unauthorized => "WWW-Authenticate: Bearer\r\n",
            Self::MethodNotAllowed => "Allow: GET, HEAD\r\n",
            Self::Unavailable => "Retry-After: 1\r\n",
            _ => "",
        };
        format!("HTTP/1.1 {code} {reason}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n")
    }
}

impl RequestHead {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_slice())
    }

    fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(key, _)| key.eq_ignore_ascii_case(name))
            .flat_map(|(_, value)| value.split(|&b| b == b','))
            .any(|part| part.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    }
}

/// Decides a request. Order matters: `Origin` is refused before anything else (so browsers can
/// never probe, `/readyz` included), and `/readyz` needs no token.
pub fn decide(head: &RequestHead, credential: Option<&Credential>) -> Decision {
    if head.header("origin").is_some() {
        return Decision::Respond(Status::Forbidden);
    }
    match head.path.as_str() {
        "/readyz" if head.method == "GET" || head.method == "HEAD" => Decision::Respond(Status::Ok),
        "/readyz" => Decision::Respond(Status::MethodNotAllowed),
        "/" => {
            if let Some(credential) = credential
                && !bearer_matches(head.header("authorization"), credential)
            {
                return Decision::Respond(Status::Unauthorized);
            }
            upgrade(head)
        }
        _ => Decision::Respond(Status::NotFound),
    }
}

fn upgrade(head: &RequestHead) -> Decision {
    let is_upgrade = head.header_has_token("upgrade", "websocket")
        && head.header_has_token("connection", "upgrade")
        && head.header("sec-websocket-version") == Some(b"13".as_slice());
    match head.header("sec-websocket-key") {
        Some(key) if is_upgrade && !key.is_empty() => Decision::Upgrade {
            accept_key: derive_accept_key(key.trim_ascii()),
        },
        _ => Decision::Respond(Status::BadRequest),
    }
}

/// `Authorization: Bearer <token>`, scheme case-insensitive, the token compared in constant
/// time.
pub fn bearer_matches(header: Option<&[u8]>, credential: &Credential) -> bool {
    let Some(value) = header else {
        return false;
    };
    let value = value.trim_ascii();
    let Some((scheme, presented)) = value.split_at_checked(6) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case(b"bearer") || presented.first() != Some(&b' ') {
        return false;
    }
    credential.accepts(presented.trim_ascii())
}

/// Parses a request head; `Ok(None)` means more bytes are needed. On success also returns the
/// head's length, so bytes after it (an early WebSocket frame) are kept.
pub fn parse_head(buffer: &[u8]) -> Result<Option<(RequestHead, usize)>, httparse::Error> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(length) = request.parse(buffer)? else {
        return Ok(None);
    };
    let target = request.path.unwrap_or("/");
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let head = RequestHead {
        method: request.method.unwrap_or("GET").to_owned(),
        path: path.to_owned(),
        headers: request
            .headers
            .iter()
            .map(|header| (header.name.to_owned(), header.value.to_vec()))
            .collect(),
    };
    Ok(Some((head, length)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn head(method: &str, path: &str, headers: &[(&str, &str)]) -> RequestHead {
        RequestHead {
            method: method.into(),
            path: path.into(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.as_bytes().to_vec()))
                .collect(),
        }
    }

    const UPGRADE: [(&str, &str); 4] = [
        ("Upgrade", "websocket"),
        ("Connection", "keep-alive, Upgrade"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ];

    fn with_upgrade(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        UPGRADE
            .iter()
            .copied()
            .chain(extra.iter().copied())
            .collect()
    }

    #[test]
    fn routing_table() {
        let accept = Decision::Upgrade {
            // RFC 6455 §1.3's example.
            accept_key: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".into(),
        };
        let respond = Decision::Respond;
        let cases = [
            (head("GET", "/", &UPGRADE), None, accept.clone()),
            (head("POST", "/", &UPGRADE), None, accept.clone()),
            (head("GET", "/readyz", &[]), None, respond(Status::Ok)),
            (head("GET", "/readyz", &[]), Some("t"), respond(Status::Ok)),
            (head("HEAD", "/readyz", &[]), None, respond(Status::Ok)),
            (
                head("PUT", "/readyz", &[]),
                None,
                respond(Status::MethodNotAllowed),
            ),
            (
                head("GET", "/readyz", &[("Origin", "https://evil.example")]),
                None,
                respond(Status::Forbidden),
            ),
            (
                head("GET", "/", &with_upgrade(&[("origin", "null")])),
                None,
                respond(Status::Forbidden),
            ),
            (
                head("GET", "/", &with_upgrade(&[("origin", "x")])),
                Some("t"),
                respond(Status::Forbidden),
            ),
            (
                head("GET", "/other", &UPGRADE),
                None,
                respond(Status::NotFound),
            ),
            (head("GET", "/", &[]), None, respond(Status::BadRequest)),
            (
                head("GET", "/", &UPGRADE[..3]),
                None,
                respond(Status::BadRequest),
            ),
            (
                head("GET", "/", &UPGRADE),
                Some("t"),
                respond(Status::Unauthorized),
            ),
            (
                head("GET", "/", &with_upgrade(&[("Authorization", "Bearer t")])),
                Some("t"),
                accept.clone(),
            ),
            (
                head(
                    "GET",
                    "/",
                    &with_upgrade(&[("authorization", "bearer  t ")]),
                ),
                Some("t"),
                accept.clone(),
            ),
            (
                head("GET", "/", &with_upgrade(&[("Authorization", "Bearer u")])),
                Some("t"),
                respond(Status::Unauthorized),
            ),
            (
                head("GET", "/", &with_upgrade(&[("Authorization", "Bearer tt")])),
                Some("t"),
                respond(Status::Unauthorized),
            ),
            (
                head("GET", "/", &with_upgrade(&[("Authorization", "Basic t")])),
                Some("t"),
                respond(Status::Unauthorized),
            ),
            (
                head("GET", "/", &with_upgrade(&[("Authorization", "Bearert")])),
                Some("t"),
                respond(Status::Unauthorized),
            ),
            (
                head("GET", "/", &[]),
                Some("t"),
                respond(Status::Unauthorized),
            ),
        ];
        for (request, token, expected) in cases {
            let credential = token.map(|token| Credential::Token(token.to_owned()));
            assert_eq!(
                decide(&request, credential.as_ref()),
                expected,
                "{request:?} token={token:?}"
            );
        }
    }

    #[test]
    fn parses_heads_and_keeps_what_follows() {
        let raw = b"GET /readyz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n\x81\x00";
        let (head, length) = parse_head(raw).unwrap().unwrap();
        assert_eq!(head.path, "/readyz");
        assert_eq!(head.method, "GET");
        assert_eq!(&raw[length..], b"\x81\x00");
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHost"), Ok(None));
        assert!(parse_head(b"\x00\x01 nonsense\r\n\r\n").is_err());
    }

    #[test]
    fn unauthorized_carries_the_challenge() {
        assert!(
            Status::Unauthorized
                .response()
                .contains("WWW-Authenticate: Bearer\r\n")
        );
        assert!(Status::Ok.response().starts_with("HTTP/1.1 200 OK\r\n"));
    }
}
