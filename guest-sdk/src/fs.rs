//! The filesystem capability: every path is a native absolute path (decode request paths with
//! [`crate::path::decode`]) confined by the host to the roots granted to this plugin. A path
//! outside them fails with [`ErrorKind::OutsideRoots`] before any I/O.

use crate::RpcError;
use crate::bindings::wexec::plugin::filesystem as wit;
pub use crate::bindings::wexec::plugin::filesystem::{
    Contents, DirEntry, Error, ErrorKind, FileKind, Metadata, OpenMode,
};
use wexec_protocol::rpc;

impl From<Error> for RpcError {
    /// wexec's mapping (docs/protocol.md §9.2): not found → -32004; outside the roots, denied,
    /// invalid, too large → -32600; other → -32603.
    fn from(error: Error) -> Self {
        let code = match error.kind {
            ErrorKind::NotFound => rpc::NOT_FOUND,
            ErrorKind::OutsideRoots
            | ErrorKind::Denied
            | ErrorKind::PermissionDenied
            | ErrorKind::Invalid
            | ErrorKind::TooLarge => rpc::INVALID_REQUEST,
            ErrorKind::Other => rpc::INTERNAL_ERROR,
        };
        RpcError::new(code, error.message)
    }
}

/// Reads a whole regular file (at most 32 MiB, counted against the plugin's memory).
pub fn read_file(path: &str) -> Result<Vec<u8>, Error> {
    wit::read_file(path, true)
}

/// Reads a whole regular file; with `follow_symlinks: false` a symlink in the final component
/// is refused.
pub fn read_file_with(path: &str, follow_symlinks: bool) -> Result<Vec<u8>, Error> {
    wit::read_file(path, follow_symlinks)
}

/// Reads a whole regular file and leaves its bytes with the host: answer with them through
/// [`crate::respond::early_base64`], which sends them to the client as base64 without copying
/// them into the plugin. The fastest way to serve file contents. [`Contents::len`] is the
/// size; the contents an instance holds at once are limited to 64 MiB, so drop what is unused.
pub fn read_file_contents(path: &str, follow_symlinks: bool) -> Result<Contents, Error> {
    wit::read_file_contents(path, follow_symlinks)
}

/// Creates or truncates a file with `data`.
pub fn write_file(path: &str, data: &[u8], follow_symlinks: bool) -> Result<(), Error> {
    wit::write_file(path, data, follow_symlinks)
}

/// Creates a directory (and its parents with `recursive`).
pub fn create_directory(path: &str, recursive: bool) -> Result<(), Error> {
    wit::create_directory(path, recursive)
}

/// Metadata; with `follow_symlinks: false` a final symlink is described itself.
pub fn metadata(path: &str, follow_symlinks: bool) -> Result<Metadata, Error> {
    wit::get_metadata(path, follow_symlinks)
}

/// The canonical path (inside the roots).
pub fn canonicalize(path: &str) -> Result<String, Error> {
    wit::canonicalize(path)
}

/// A directory's entries, in no particular order.
pub fn read_directory(path: &str) -> Result<Vec<DirEntry>, Error> {
    wit::read_directory(path)
}

/// Removes a file, symlink or directory (never following a final symlink).
pub fn remove(path: &str, recursive: bool, force: bool) -> Result<(), Error> {
    wit::remove(path, recursive, force)
}

/// Copies a file, symlink or (with `recursive`) directory.
pub fn copy(source: &str, destination: &str, recursive: bool) -> Result<(), Error> {
    wit::copy(source, destination, recursive)
}

/// Opens `path` as handle `id` for later calls on the same connection (the handle outlives
/// the call; see [`File`] for one that closes itself).
pub fn open(id: &str, path: &str, mode: OpenMode) -> Result<(), Error> {
    wit::open(id, path, mode)
}

/// Reads up to `len` bytes at `offset` from handle `id`.
pub fn read_block(id: &str, offset: u64, len: u32) -> Result<Vec<u8>, Error> {
    wit::read_block(id, offset, len)
}

/// [`read_block`], with the bytes left with the host for [`crate::respond::early_base64`].
pub fn read_block_contents(id: &str, offset: u64, len: u32) -> Result<Contents, Error> {
    wit::read_block_contents(id, offset, len)
}

/// Writes `data` at `offset` to handle `id`.
pub fn write_block(id: &str, offset: u64, data: &[u8]) -> Result<(), Error> {
    wit::write_block(id, offset, data)
}

/// Closes handle `id` (idempotent).
pub fn close(id: &str) {
    wit::close(id);
}

/// A file opened for block reads or writes. Handles belong to the calling connection (at most
/// 128 per connection, shared with `fs/open`); dropping it closes the file.
#[derive(Debug)]
pub struct File {
    id: String,
}

impl File {
    /// Opens `path` as `id` (at most 32 bytes, unique among the connection's handles).
    pub fn open(id: impl Into<String>, path: &str, mode: OpenMode) -> Result<File, Error> {
        let id = id.into();
        wit::open(&id, path, mode)?;
        Ok(File { id })
    }

    /// Reads up to `len` bytes (1..=1 MiB) at `offset`; fewer means end of file.
    pub fn read_at(&self, offset: u64, len: u32) -> Result<Vec<u8>, Error> {
        wit::read_block(&self.id, offset, len)
    }

    /// Writes `data` (1..=1 MiB) at `offset`.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<(), Error> {
        wit::write_block(&self.id, offset, data)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        wit::close(&self.id);
    }
}

/// Starts this plugin's watch `id` on the calling connection (docs/protocol.md §9.6): whether it
/// watches `missing` (native absolute paths that do not exist) and `present` (one that does).
/// Once the call's response is sent, the first change sends `<plugin>/missingChanged
/// {"watchId": id}` to the client, once. Needs the filesystem capability; an error is the OS
/// refusing the watch.
pub fn watch_missing(id: u64, missing: &[String], present: Option<&str>) -> Result<bool, String> {
    crate::bindings::wexec::plugin::watch::watch_missing(id, missing, present)
}
