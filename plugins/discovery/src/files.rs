//! Reading the files a capability root offers: regular UTF-8 files of at most 1 MiB each and
//! 16 MiB per root, as Codex bounds them, and, unlike Codex, a bound on the whole reply so that
//! it always fits in one message; a file that cannot be used becomes a warning
//! (docs/protocol.md §7.6).

use wexec_guest::fs::{self, ErrorKind};
use wexec_guest::path as uri;
use wexec_guest::protocol::CapabilityTextFile;
use wexec_guest::protocol::limits::MAX_MESSAGE_BYTES;

const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A plugin manifest (`plugin.json`) is a few KiB of JSON; one root's may be sent twice (as
/// its plugin's and as a namespace manifest), so a larger one is refused rather than let one
/// hostile file take the room of many roots.
pub const MAX_MANIFEST_BYTES: u64 = 256 * 1024;
const MAX_BUNDLE_BYTES: u64 = 16 * 1024 * 1024;
/// What the files and warnings of one request may take in its reply, as JSON: the rest of the
/// 64 MiB message is room for its structure.
pub const MAX_REPLY_BYTES: usize = MAX_MESSAGE_BYTES / 4 * 3;
/// What a file or a warning costs in the reply besides its text.
const ITEM_OVERHEAD: usize = 64;

/// What one request's reply may still take, shared by its roots: without it, a few roots full
/// of control characters (six bytes each in JSON) or a few full roots would make a reply over
/// the message limit, and lose every root instead of one file.
#[derive(Debug)]
pub struct ReplyBudget {
    left: usize,
}

impl Default for ReplyBudget {
    fn default() -> Self {
        Self {
            left: MAX_REPLY_BYTES,
        }
    }
}

impl ReplyBudget {
    /// Takes `bytes` if they are left.
    fn take(&mut self, bytes: usize) -> bool {
        match self.left.checked_sub(bytes) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }
}

/// What one root has read so far, and what went wrong.
pub struct Reader<'a> {
    /// Bytes read from this root, failed reads included, so that a file that fails every
    /// time cannot be read over and over for free.
    bytes: u64,
    reply: &'a mut ReplyBudget,
    /// The reply's limit was reached (said once per root).
    full: bool,
    warnings: Vec<String>,
}

impl<'a> Reader<'a> {
    pub fn new(reply: &'a mut ReplyBudget) -> Self {
        Self {
            bytes: 0,
            reply,
            full: false,
            warnings: Vec::new(),
        }
    }

    /// The file at `path` (native), or `None` when it is absent, not a regular file, outside
    /// the plugin's roots (which reads as absent: nothing about it is revealed), or cannot be
    /// read (a warning says why).
    pub fn read(&mut self, path: &str) -> Option<CapabilityTextFile> {
        self.read_at_most(path, MAX_FILE_BYTES, "capability file")
    }

    /// As [`Self::read`], for a plugin manifest: at most [`MAX_MANIFEST_BYTES`].
    pub fn read_manifest(&mut self, path: &str) -> Option<CapabilityTextFile> {
        self.read_at_most(path, MAX_MANIFEST_BYTES, "capability manifest")
    }

    /// Takes room in the reply for `file` sent once more; `false` (and the reply is said to be
    /// full) when there is none.
    pub fn charge_again(&mut self, file: &CapabilityTextFile) -> bool {
        if self.reply.take(cost(file)) {
            return true;
        }
        self.reply_full();
        false
    }

    fn read_at_most(&mut self, path: &str, limit: u64, what: &str) -> Option<CapabilityTextFile> {
        let uri = uri::encode(path);
        let size = match fs::metadata(path, true) {
            Ok(meta) if meta.is_file => meta.size,
            Ok(_) => return None,
            Err(error) if matches!(error.kind, ErrorKind::NotFound | ErrorKind::OutsideRoots) => {
                return None;
            }
            Err(error) => {
                self.warn(format!(
                    "failed to inspect capability file {uri}: {}",
                    error.message
                ));
                return None;
            }
        };
        if size > limit {
            self.warn(format!("{what} {uri} exceeds the {limit}-byte limit"));
            return None;
        }
        if self.bytes + size > MAX_BUNDLE_BYTES {
            self.warn(format!(
                "capability root bundle exceeds the {MAX_BUNDLE_BYTES}-byte limit"
            ));
            return None;
        }
        let bytes = match fs::read_file(path) {
            Ok(bytes) => bytes,
            Err(error) => {
                self.warn(format!(
                    "failed to read capability file {uri}: {}",
                    error.message
                ));
                return None;
            }
        };
        let read = bytes.len() as u64;
        let within = self.bytes + read <= MAX_BUNDLE_BYTES;
        self.bytes += read;
        // The file may have grown since it was measured.
        if read > limit || !within {
            self.warn(format!("{what} {uri} exceeded its read limit"));
            return None;
        }
        let contents = match String::from_utf8(bytes) {
            Ok(contents) => contents,
            Err(error) => {
                self.warn(format!("capability file {uri} is not UTF-8: {error}"));
                return None;
            }
        };
        let file = CapabilityTextFile {
            path: uri,
            contents,
        };
        if !self.reply.take(cost(&file)) {
            self.reply_full();
            return None;
        }
        Some(file)
    }

    /// Notes a warning, as long as the reply has room for it.
    pub fn warn(&mut self, warning: String) {
        if self.reply.take(json_len(&warning) + ITEM_OVERHEAD) {
            self.warnings.push(warning);
        } else {
            self.reply_full();
        }
    }

    fn reply_full(&mut self) {
        if !self.full {
            self.full = true;
            self.warnings.push(format!(
                "capability discovery reply reached its {MAX_REPLY_BYTES}-byte limit; the rest of this root is left out"
            ));
        }
    }

    /// The warnings, in the order they arose.
    pub fn into_warnings(self) -> Vec<String> {
        self.warnings
    }
}

/// What `file` takes in the reply, each time it is sent (its path is a URI: no escapes).
fn cost(file: &CapabilityTextFile) -> usize {
    json_len(&file.contents) + file.path.len() + ITEM_OVERHEAD
}

/// The length of `text` as a JSON string's contents, escaped as serde_json escapes it.
fn json_len(text: &str) -> usize {
    text.bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_serde_jsons() {
        for text in [
            "plain",
            "a\"b\\c",
            "\n\r\t\u{8}\u{c}",
            "\u{1}\u{1f}\u{7f}",
            "é ✓",
        ] {
            let json = serde_json::to_string(text).unwrap();
            assert_eq!(json_len(text), json.len() - 2, "{text:?}");
        }
    }

    #[test]
    fn the_reply_budget_says_when_it_is_spent_once() {
        let mut budget = ReplyBudget { left: 200 };
        let mut reader = Reader::new(&mut budget);
        reader.warn("a".repeat(100));
        reader.warn("b".repeat(100));
        reader.warn("c".into());
        let warnings = reader.into_warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[1].contains("reply reached its"));
    }
}
