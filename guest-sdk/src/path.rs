//! Request paths as wexec's protocol defines them (docs/protocol.md §7.2): `file://` URIs without
//! an authority, or plain absolute paths; and the `file://` URIs results carry. The rules are
//! `wexec_protocol::path_uri`, the host's own; this adapts them to the SDK's string paths.

use wexec_protocol::path_uri;

use crate::RpcError;

/// Decodes a request path to a native absolute path; otherwise -32602 naming the problem, or
/// -32600 for a path of another machine or platform (`file://host/x`), as Codex answers.
pub fn decode(value: &str) -> Result<String, RpcError> {
    path_uri::parse_utf8(value).map_err(|err| {
        if err.is_foreign() {
            RpcError::invalid_request(err.to_string())
        } else {
            RpcError::invalid_params(err.to_string())
        }
    })
}

/// The `file://` URI of a native absolute path.
pub fn encode(path: &str) -> String {
    path_uri::encode(path.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_uris_and_absolute_paths() {
        assert_eq!(decode("file:///tmp/a%20b").unwrap(), "/tmp/a b");
        assert_eq!(decode("/tmp/a b").unwrap(), "/tmp/a b");
        assert_eq!(decode("file:/x").unwrap(), "/x");
        for bad in [
            "relative",
            "http://x/y",
            "file:///a?q",
            "file:///a%00",
            "file:///a%FF",
        ] {
            assert_eq!(decode(bad).unwrap_err().code, -32602, "{bad}");
        }
        for foreign in ["file://host/x", "file:///C:/x"] {
            assert_eq!(decode(foreign).unwrap_err().code, -32600, "{foreign}");
        }
    }

    #[test]
    fn encodes_what_decode_reads_back() {
        let path = "/tmp/a b/ü%#?";
        assert_eq!(decode(&encode(path)).unwrap(), path);
        assert_eq!(encode("/a b"), "file:///a%20b");
    }
}
