//! The filesystem capability's own values: what an operation answers or fails with. They
//! mirror the WIT `filesystem` records, and `host/filesystem.rs` converts them at the edge, so the
//! policy here is tested without bindgen.

/// Why an operation was refused or failed (docs/protocol.md §9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The path does not exist.
    NotFound,
    /// The path is outside every granted root (or hidden in one).
    OutsideRoots,
    /// The grant or the call's sandbox does not allow it.
    Denied,
    /// The operating system refused (EACCES, EPERM).
    PermissionDenied,
    /// The request cannot be done as asked (exists, not a directory, not empty, ...).
    Invalid,
    /// Over a documented limit.
    TooLarge,
    /// Anything else the operating system reported.
    Other,
}

/// A failed operation: its kind and a message naming the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The kind.
    pub kind: ErrorKind,
    /// What failed, for the client.
    pub message: String,
}

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// An entry's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// What it is.
    pub kind: FileKind,
    /// Whether it is (or, followed, leads to) a directory.
    pub is_directory: bool,
    /// Whether it is (or leads to) a regular file.
    pub is_file: bool,
    /// Whether it is a symbolic link.
    pub is_symlink: bool,
    /// Its size in bytes.
    pub size: u64,
    /// Creation time, ms since the epoch (0 when unknown).
    pub created_at_ms: u64,
    /// Modification time, ms since the epoch (0 when unknown).
    pub modified_at_ms: u64,
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Its name.
    pub name: String,
    /// Whether it is (or its symlink leads to) a directory.
    pub is_directory: bool,
    /// Whether it is (or leads to) a regular file.
    pub is_file: bool,
    /// Whether it is a symbolic link.
    pub is_symlink: bool,
    /// A symbolic link whose target does not exist.
    pub target_missing: bool,
}

/// How a handle opens its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// For reading.
    Read,
    /// Created or truncated, for writing.
    Replace,
}
