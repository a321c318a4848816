//! `fs/*` methods (docs/protocol.md §9), served by the `fs` plugin. Paths are PathUris or absolute
//! paths; every path in a result is a PathUri.

use serde::{Deserialize, Serialize};

/// `fs/readFile`.
pub const FS_READ_FILE: &str = "fs/readFile";
/// `fs/writeFile`.
pub const FS_WRITE_FILE: &str = "fs/writeFile";
/// `fs/createDirectory`.
pub const FS_CREATE_DIRECTORY: &str = "fs/createDirectory";
/// `fs/getMetadata`.
pub const FS_GET_METADATA: &str = "fs/getMetadata";
/// `fs/canonicalize`.
pub const FS_CANONICALIZE: &str = "fs/canonicalize";
/// `fs/readDirectory`.
pub const FS_READ_DIRECTORY: &str = "fs/readDirectory";
/// `fs/walk`.
pub const FS_WALK: &str = "fs/walk";
/// `fs/remove`.
pub const FS_REMOVE: &str = "fs/remove";
/// `fs/copy`.
pub const FS_COPY: &str = "fs/copy";
/// `fs/open`.
pub const FS_OPEN: &str = "fs/open";
/// `fs/readBlock`.
pub const FS_READ_BLOCK: &str = "fs/readBlock";
/// `fs/writeBlock`.
pub const FS_WRITE_BLOCK: &str = "fs/writeBlock";
/// `fs/close`.
pub const FS_CLOSE: &str = "fs/close";
/// `fs/watchMissing`.
pub const FS_WATCH_MISSING: &str = "fs/watchMissing";
/// `fs/missingChanged`, the notification a watch sends once.
pub const FS_MISSING_CHANGED: &str = "fs/missingChanged";

/// The filesystem capability's refusal of a symlink as the last component of a path looked up
/// with `follow-symlinks: false` (Codex's text, docs/protocol.md §9.3).
pub const CONTAINS_SYMLINK: &str = "path contains a symbolic link";

/// Params of the methods that take one path: `fs/readFile`, `fs/getMetadata`,
/// `fs/canonicalize`, `fs/readDirectory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsPathParams {
    /// The path.
    pub path: String,
    /// `false`: follow no symlink in the path; one as the last component is refused
    /// (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_symlinks: Option<bool>,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

impl FsPathParams {
    /// `path` with default options.
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            follow_symlinks: None,
            sandbox: None,
        }
    }
}

/// Params of `fs/writeFile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsWriteFileParams {
    /// The path.
    pub path: String,
    /// The new contents, base64.
    pub data_base64: String,
    /// `false`: follow no symlink in the path; refuse to write through one as the last
    /// component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_symlinks: Option<bool>,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// Params of `fs/createDirectory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsCreateDirectoryParams {
    /// The path.
    pub path: String,
    /// Create missing parents (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    /// `false`: follow no symlink in the path (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_symlinks: Option<bool>,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// Params of `fs/remove`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsRemoveParams {
    /// The path; a symlink is removed, never followed.
    pub path: String,
    /// Remove a directory with its contents (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    /// Ignore a missing path (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// `false`: follow no symlink in the path, and refuse one as the last component
    /// (default `true`: the last component is removed, never followed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_symlinks: Option<bool>,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// Params of `fs/copy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsCopyParams {
    /// What to copy.
    pub source_path: String,
    /// Where to.
    pub destination_path: String,
    /// Required `true` for directories.
    pub recursive: bool,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// Result of `fs/readFile`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsReadFileResponse {
    /// The contents, base64.
    pub data_base64: String,
}

/// Result of `fs/getMetadata`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsMetadata {
    /// A directory (following symlinks unless asked not to).
    pub is_directory: bool,
    /// A regular file.
    pub is_file: bool,
    /// The path itself is a symlink.
    pub is_symlink: bool,
    /// Size in bytes.
    pub size: u64,
    /// Creation time, epoch ms; 0 if unknown.
    pub created_at_ms: u64,
    /// Modification time, epoch ms; 0 if unknown.
    pub modified_at_ms: u64,
}

/// Result of `fs/canonicalize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsCanonicalizeResponse {
    /// The canonical PathUri.
    pub path: String,
}

/// Result of `fs/readDirectory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsReadDirectoryResponse {
    /// The entries, in any order.
    pub entries: Vec<FsDirectoryEntry>,
}

/// One entry of `fs/readDirectory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsDirectoryEntry {
    /// The entry's name.
    pub file_name: String,
    /// A directory (following links).
    pub is_directory: bool,
    /// A regular file (following links).
    pub is_file: bool,
}

/// Params of `fs/walk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsWalkParams {
    /// The directory to walk; it is not listed itself.
    pub path: String,
    /// Bounds and options.
    pub options: FsWalkOptions,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// `fs/walk` options (docs/protocol.md §9.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsWalkOptions {
    /// 0 = direct children only; at most 64.
    pub max_depth: u64,
    /// Traversed directories, the root included; at most 10,000.
    pub max_directories: u64,
    /// Examined entries; at most 50,000.
    pub max_entries: u64,
    /// Enter symlinked directories (never twice).
    pub follow_directory_symlinks: bool,
    /// List dot-directories without entering them.
    #[serde(default)]
    pub prune_hidden_directories: bool,
}

/// Result of `fs/walk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsWalkResponse {
    /// Entries, breadth-first.
    pub entries: Vec<FsWalkEntry>,
    /// Entries that could not be examined.
    pub errors: Vec<FsWalkError>,
    /// A bound or the response budget stopped the walk.
    pub truncated: bool,
}

/// One entry of `fs/walk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsWalkEntry {
    /// Its PathUri.
    pub path: String,
    /// `directory` or `file` (any non-directory).
    pub kind: String,
}

/// One error of `fs/walk`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsWalkError {
    /// Its PathUri.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// `fs/open` mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FsOpenMode {
    /// Read an existing regular file.
    Read,
    /// Create or truncate for writing.
    Replace,
}

/// Params of `fs/open`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsOpenParams {
    /// Client-chosen, at most 32 bytes, unique among the connection's open handles.
    pub handle_id: String,
    /// The file.
    pub path: String,
    /// `read` (default) or `replace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<FsOpenMode>,
    /// A Codex sandbox context (docs/protocol.md §7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<serde_json::Value>,
}

/// Params of `fs/readBlock`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsReadBlockParams {
    /// The handle.
    pub handle_id: String,
    /// Byte offset.
    pub offset: u64,
    /// 1..=1,048,576.
    pub len: u64,
}

/// Result of `fs/readBlock`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsReadBlockResponse {
    /// The bytes, base64.
    pub chunk: String,
    /// Fewer than `len` bytes came back.
    pub eof: bool,
}

/// Params of `fs/writeBlock`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsWriteBlockParams {
    /// The handle.
    pub handle_id: String,
    /// Byte offset.
    pub offset: u64,
    /// 1..=1,048,576 bytes, base64.
    pub chunk: String,
}

/// Params of `fs/close`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsHandleParams {
    /// The handle.
    pub handle_id: String,
}

/// Params of `fs/watchMissing` (docs/protocol.md §9.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsWatchMissingParams {
    /// The watch's id: it replaces the connection's current watch only if above every id seen.
    pub watch_id: u64,
    /// Paths that do not exist yet; the creation of any of them (or of a missing ancestor)
    /// fires the watch.
    pub missing: Vec<String>,
    /// An existing path whose change, removal or replacement fires the watch too.
    #[serde(default)]
    pub present: Option<String>,
}

/// Result of `fs/watchMissing`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsWatchMissingResponse {
    /// Whether the watch was started; `false` leaves the current watch as it was.
    pub watching: bool,
}

/// Params of `fs/missingChanged`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsMissingChangedParams {
    /// The watch that fired.
    pub watch_id: u64,
}
