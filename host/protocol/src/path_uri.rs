//! `file:` URIs (docs/protocol.md §7.2): what wexec returns for every path, and what it accepts in
//! requests alongside plain absolute paths.

#[cfg(unix)]
use std::ffi::OsString;
#[cfg(unix)]
use std::os::unix::ffi::{OsStrExt, OsStringExt};
#[cfg(unix)]
use std::path::{Path, PathBuf};

/// Why a request path was refused. The messages are the texts of docs/protocol.md §7.2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathUriError {
    /// Neither a `file:` URI nor an absolute path.
    #[error("expected a file:// URI or an absolute path, got `{0}`")]
    NotAbsolute(String),
    /// A `file:` URI this POSIX host cannot use.
    #[error("file URI `{uri}` is not valid on this exec-server host: {reason}")]
    InvalidUri {
        /// The URI as sent.
        uri: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Encodes an absolute path as a percent-encoded `file:` URI. Bytes outside the unreserved set
/// (and `/` and a few sub-delimiters) are escaped, so any POSIX path, even non-UTF-8, round-trips.
#[cfg(unix)]
pub fn to_uri(path: &Path) -> String {
    encode(path.as_os_str().as_bytes())
}

/// [`to_uri`] for a path as bytes (a guest has no `std::os::unix`).
pub fn encode(path: &[u8]) -> String {
    let mut uri = String::with_capacity(path.len() + 7);
    uri.push_str("file://");
    for &byte in path {
        if byte.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            uri.push('%');
            uri.push(char::from(HEX[usize::from(byte >> 4)]));
            uri.push(char::from(HEX[usize::from(byte & 15)]));
        }
    }
    uri
}

/// Decodes a request path: a `file:` URI without authority, or a plain absolute path (taken
/// literally, without percent-decoding).
#[cfg(unix)]
pub fn parse(value: &str) -> Result<PathBuf, PathUriError> {
    decode(value).map(|bytes| PathBuf::from(OsString::from_vec(bytes)))
}

/// [`parse`] for a UTF-8 path (what a guest's string-typed capabilities take): a path that is
/// not valid UTF-8 is refused.
pub fn parse_utf8(value: &str) -> Result<String, PathUriError> {
    let bytes = decode(value)?;
    String::from_utf8(bytes).map_err(|_| PathUriError::InvalidUri {
        uri: value.to_owned(),
        reason: "the path is not valid UTF-8",
    })
}

/// [`parse`] as bytes.
pub fn decode(value: &str) -> Result<Vec<u8>, PathUriError> {
    let Some(rest) = strip_prefix_ignore_case(value, "file:") else {
        if value.starts_with('/') && !value.contains('\0') {
            return Ok(value.as_bytes().to_vec());
        }
        return Err(PathUriError::NotAbsolute(value.to_owned()));
    };
    let invalid = |reason| PathUriError::InvalidUri {
        uri: value.to_owned(),
        reason,
    };
    let path = match rest.strip_prefix("//") {
        Some(after_authority) => {
            if !after_authority.starts_with('/') {
                return Err(invalid("URIs with an authority are not supported"));
            }
            after_authority
        }
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
    if is_drive_letter(&bytes) {
        return Err(invalid("drive letters are not supported"));
    }
    Ok(bytes)
}

fn strip_prefix_ignore_case<'a>(value: &'a str, prefix: &str) -> Option<&'a str> {
    let head = value.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &value[prefix.len()..])
}

fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%' {
            let hex = bytes.get(index + 1..index + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(byte);
            index += 1;
        }
    }
    Some(out)
}

/// `/C:` or `/c|` at the start of a decoded path: a Windows drive.
fn is_drive_letter(path: &[u8]) -> bool {
    matches!(path, [b'/', letter, b':' | b'|', ..] if letter.is_ascii_alphabetic())
        && matches!(path.get(3), None | Some(b'/'))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn encodes_and_decodes_round_trip() {
        let cases = [
            ("/home/alice/a b.txt", "file:///home/alice/a%20b.txt"),
            ("/x/100%/é", "file:///x/100%25/%C3%A9"),
            ("/q?#", "file:///q%3F%23"),
            ("/", "file:///"),
        ];
        for (path, uri) in cases {
            assert_eq!(to_uri(Path::new(path)), uri);
            assert_eq!(parse(uri), Ok(PathBuf::from(path)));
        }
        let non_utf8 = PathBuf::from(OsString::from_vec(b"/a\xffb".to_vec()));
        assert_eq!(to_uri(&non_utf8), "file:///a%FFb");
        assert_eq!(parse("file:///a%FFb"), Ok(non_utf8));
    }

    #[test]
    fn accepts_plain_absolute_paths_literally() {
        assert_eq!(parse("/a%20b"), Ok(PathBuf::from("/a%20b")));
        assert_eq!(parse("FILE:///x"), Ok(PathBuf::from("/x")));
        assert_eq!(parse("file:/x"), Ok(PathBuf::from("/x")));
    }

    #[test]
    fn refuses_what_a_posix_host_cannot_use() {
        for value in ["relative/path", "", "./x", "C:\\x", "http://h/x"] {
            assert_eq!(
                parse(value),
                Err(PathUriError::NotAbsolute(value.to_owned())),
                "{value}"
            );
        }
        let refused = [
            ("file://host/x", "URIs with an authority are not supported"),
            (
                "file://localhost/x",
                "URIs with an authority are not supported",
            ),
            ("file:///C:/x", "drive letters are not supported"),
            ("file:///c|", "drive letters are not supported"),
            ("file:///a%2", "malformed percent-encoding"),
            ("file:///a%zz", "malformed percent-encoding"),
            ("file:///a%00", "the path contains a NUL byte"),
            ("file:///a?b", "queries and fragments are not supported"),
            ("file:x", "the path must be absolute"),
        ];
        for (uri, reason) in refused {
            assert_eq!(
                parse(uri),
                Err(PathUriError::InvalidUri {
                    uri: uri.to_owned(),
                    reason
                }),
                "{uri}"
            );
        }
        assert_eq!(
            parse_utf8("file:///a%FF"),
            Err(PathUriError::InvalidUri {
                uri: "file:///a%FF".to_owned(),
                reason: "the path is not valid UTF-8"
            })
        );
        assert_eq!(parse_utf8("file:///a%20b"), Ok("/a b".to_owned()));
        // A directory merely named like a drive is fine.
        assert_eq!(parse("file:///C:x"), Ok(PathBuf::from("/C:x")));
    }
}
