//! `file:` URIs (docs/protocol.md §7.2): what wexec returns for every path, and what it accepts in
//! requests alongside plain absolute paths.

#[cfg(unix)]
use std::ffi::OsString;
#[cfg(unix)]
use std::os::unix::ffi::{OsStrExt, OsStringExt};
#[cfg(unix)]
use std::path::{Path, PathBuf};

/// Why a request path was refused. The messages are the texts of docs/protocol.md §7.2, Codex's
/// where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathUriError {
    /// Neither a URI nor an absolute path.
    #[error("expected a file:// URI or an absolute path, got `{0}`")]
    NotAbsolute(String),
    /// A URI of another scheme (lowercased).
    #[error("unsupported path URI scheme `{0}`")]
    UnsupportedScheme(String),
    /// A `file:` URI naming another machine (an authority other than `localhost`) or a
    /// Windows drive: a request this POSIX host cannot serve (-32600 on `fs/*`, as Codex).
    #[error("'{0}' is invalid on 'linux'")]
    ForeignPath(String),
    /// A `file:` URI whose path holds a NUL byte.
    #[error("'{0}' is invalid on 'linux'")]
    NulByte(String),
    /// A `file:` URI with a query.
    #[error("query parameters are not allowed in path URIs")]
    Query,
    /// A `file:` URI with a fragment.
    #[error("fragments are not allowed in path URIs")]
    Fragment,
    /// A path that is not UTF-8 where only UTF-8 is taken (a guest's string paths).
    #[error("path URI `{0}` is not valid UTF-8")]
    NotUtf8(String),
}

impl PathUriError {
    /// Whether the request names a path of another machine or platform: an invalid request
    /// (-32600) where a path is the subject (`fs/*`), not merely bad params.
    pub fn is_foreign(&self) -> bool {
        matches!(self, Self::ForeignPath(_))
    }
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
    String::from_utf8(bytes).map_err(|_| PathUriError::NotUtf8(value.to_owned()))
}

/// [`parse`] as bytes. `file:` URIs are read as Codex's server reads them (a WHATWG URL):
/// the scheme in any case, an empty or `localhost` authority, `file:x` as `/x`, percent
/// escapes decoded where well-formed and kept as written where not.
pub fn decode(value: &str) -> Result<Vec<u8>, PathUriError> {
    let Some(rest) = strip_prefix_ignore_case(value, "file:") else {
        if value.starts_with('/') && !value.contains('\0') {
            return Ok(value.as_bytes().to_vec());
        }
        return Err(match scheme(value) {
            Some(scheme) => PathUriError::UnsupportedScheme(scheme.to_ascii_lowercase()),
            None => PathUriError::NotAbsolute(value.to_owned()),
        });
    };
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            if !authority.is_empty() && !authority.eq_ignore_ascii_case("localhost") {
                return Err(PathUriError::ForeignPath(value.to_owned()));
            }
            path
        }
        None => rest,
    };
    match path.find(['?', '#']).map(|at| path.as_bytes()[at]) {
        Some(b'?') => return Err(PathUriError::Query),
        Some(_) => return Err(PathUriError::Fragment),
        None => {}
    }
    let mut bytes = Vec::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        bytes.push(b'/');
    }
    percent_decode(path, &mut bytes);
    if bytes.contains(&0) {
        return Err(PathUriError::NulByte(value.to_owned()));
    }
    if is_drive_letter(&bytes) {
        return Err(PathUriError::ForeignPath(value.to_owned()));
    }
    Ok(bytes)
}

/// The scheme of a URI (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`), if `value` starts
/// with one.
fn scheme(value: &str) -> Option<&str> {
    let (scheme, _) = value.split_once(':')?;
    let mut bytes = scheme.bytes();
    let first = bytes.next()?;
    (first.is_ascii_alphabetic()
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
    .then_some(scheme)
}

fn strip_prefix_ignore_case<'a>(value: &'a str, prefix: &str) -> Option<&'a str> {
    let head = value.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &value[prefix.len()..])
}

/// Appends `text` with its `%XX` escapes decoded; a malformed escape stays as written.
fn percent_decode(text: &str, out: &mut Vec<u8>) {
    let bytes = text.as_bytes();
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        let escaped = (byte == b'%')
            .then(|| bytes.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(decoded) => {
                out.push(decoded);
                index += 3;
            }
            None => {
                out.push(byte);
                index += 1;
            }
        }
    }
}

/// `/C:` at the start of a decoded path: a Windows drive.
fn is_drive_letter(path: &[u8]) -> bool {
    matches!(path, [b'/', letter, b':', ..] if letter.is_ascii_alphabetic())
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
    fn accepts_plain_absolute_paths_literally_and_uris_as_codex_does() {
        for (value, path) in [
            ("/a%20b", "/a%20b"),
            ("FILE:///x", "/x"),
            ("file:/x", "/x"),
            ("file:x/y", "/x/y"),
            ("file://localhost/x", "/x"),
            ("file://LOCALHOST/x", "/x"),
            ("file://localhost", "/"),
            ("file:///a%2", "/a%2"),
            ("file:///a%zz", "/a%zz"),
            ("file:///%2e%2e/x", "/../x"),
            ("file:///c|/x", "/c|/x"),
            // A directory merely named like a drive is fine.
            ("file:///C:x", "/C:x"),
        ] {
            assert_eq!(parse(value), Ok(PathBuf::from(path)), "{value}");
        }
    }

    #[test]
    fn refuses_what_a_posix_host_cannot_use() {
        use PathUriError::*;
        let refused = [
            ("relative/path", NotAbsolute("relative/path".into())),
            ("", NotAbsolute(String::new())),
            ("./x", NotAbsolute("./x".into())),
            ("C:\\x", UnsupportedScheme("c".into())),
            ("HTTP://h/x", UnsupportedScheme("http".into())),
            ("file://host/x", ForeignPath("file://host/x".into())),
            (
                "file://127.0.0.1/x",
                ForeignPath("file://127.0.0.1/x".into()),
            ),
            ("file:///C:/x", ForeignPath("file:///C:/x".into())),
            ("file:///a%00", NulByte("file:///a%00".into())),
            ("file:///a?b", Query),
            ("file:///a?b#c", Query),
            ("file:///a#b?c", Fragment),
        ];
        for (value, error) in refused {
            assert_eq!(parse(value), Err(error), "{value}");
        }
        assert!(ForeignPath(String::new()).is_foreign());
        assert!(!NulByte(String::new()).is_foreign());
        assert_eq!(
            ForeignPath("file://h/x".into()).to_string(),
            "'file://h/x' is invalid on 'linux'"
        );
        assert_eq!(
            parse_utf8("file:///a%FF"),
            Err(NotUtf8("file:///a%FF".to_owned()))
        );
        assert_eq!(parse_utf8("file:///a%20b"), Ok("/a b".to_owned()));
    }
}
