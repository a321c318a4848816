//! Reading the files a capability root offers: regular UTF-8 files of at most 1 MiB each and
//! 16 MiB per root, a file that cannot be read becoming a warning (docs/protocol.md §7.6).

use wexec_guest::fs::{self, ErrorKind};
use wexec_guest::path as uri;
use wexec_guest::protocol::CapabilityTextFile;

const MAX_FILE_BYTES: u64 = 1024 * 1024;
const MAX_BUNDLE_BYTES: u64 = 16 * 1024 * 1024;

/// What one root has read so far, and what went wrong.
#[derive(Default)]
pub struct Reader {
    bytes: u64,
    pub warnings: Vec<String>,
}

impl Reader {
    /// The file at `path` (native), or `None` when it is absent, not a regular file, outside
    /// the plugin's roots (which reads as absent: nothing about it is revealed), or cannot be
    /// read (a warning says why).
    pub fn read(&mut self, path: &str) -> Option<CapabilityTextFile> {
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
        if size > MAX_FILE_BYTES {
            self.warn(format!(
                "capability file {uri} exceeds the {MAX_FILE_BYTES}-byte limit"
            ));
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
        // The file may have grown since it was measured.
        let read = bytes.len() as u64;
        if read > MAX_FILE_BYTES || self.bytes + read > MAX_BUNDLE_BYTES {
            self.warn(format!("capability file {uri} exceeded its read limit"));
            return None;
        }
        let contents = match String::from_utf8(bytes) {
            Ok(contents) => contents,
            Err(error) => {
                self.warn(format!("capability file {uri} is not UTF-8: {error}"));
                return None;
            }
        };
        self.bytes += read;
        Some(CapabilityTextFile {
            path: uri,
            contents,
        })
    }

    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }
}
