//! Request paths as wexec's protocol defines them (docs/protocol.md §7.2): `file://` URIs without
//! an authority, or plain absolute paths; and the `file://` URIs results carry.

use crate::RpcError;

fn invalid_params(message: String) -> RpcError {
    RpcError::invalid_params(message)
}

/// Decodes a request path to a native absolute path; -32602 naming the problem otherwise.
pub fn decode(value: &str) -> Result<String, RpcError> {
    let Some(rest) = value
        .get(..5)
        .filter(|head| head.eq_ignore_ascii_case("file:"))
        .map(|_| &value[5..])
    else {
        if value.starts_with('/') && !value.contains('\0') {
            return Ok(value.to_owned());
        }
        return Err(invalid_params(format!(
            "expected a file:// URI or an absolute path, got `{value}`"
        )));
    };
    let invalid = |reason: &str| {
        invalid_params(format!(
            "file URI `{value}` is not valid on this exec-server host: {reason}"
        ))
    };
    let path = match rest.strip_prefix("//") {
        Some(after) if after.starts_with('/') => after,
        Some(_) => return Err(invalid("URIs with an authority are not supported")),
        None if rest.starts_with('/') => rest,
        None => return Err(invalid("the path must be absolute")),
    };
    if path.contains(['?', '#']) {
        return Err(invalid("queries and fragments are not supported"));
    }
    let bytes = percent_decode(path).ok_or_else(|| invalid("malformed percent-encoding"))?;
    if bytes.contains(&0) {
        return Err(invalid("the path contains a NUL byte"));
    }
    if matches!(bytes.as_slice(), [b'/', letter, b':' | b'|', ..] if letter.is_ascii_alphabetic())
        && matches!(bytes.get(3), None | Some(b'/'))
    {
        return Err(invalid("drive letters are not supported"));
    }
    String::from_utf8(bytes).map_err(|_| invalid("the path is not valid UTF-8"))
}

fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(byte);
            index += 1;
        }
    }
    Some(out)
}

/// The `file://` URI of a native absolute path.
pub fn encode(path: &str) -> String {
    let mut uri = String::from("file://");
    for &byte in path.as_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
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
            "file://host/x",
            "file:///C:/x",
            "file:///a%2",
            "file:///a%00",
        ] {
            assert_eq!(decode(bad).unwrap_err().code, -32602, "{bad}");
        }
    }

    #[test]
    fn encodes_what_decode_reads_back() {
        let path = "/tmp/a b/ü%#?";
        assert_eq!(decode(&encode(path)).unwrap(), path);
        assert_eq!(encode("/a b"), "file:///a%20b");
    }
}
