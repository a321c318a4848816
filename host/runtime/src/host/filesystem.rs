//! The WIT `filesystem` interface: the grant check first, then the operation on the plugin's
//! roots ([`crate::fs`]), its time counted as host I/O rather than guest time, and its values
//! converted to WIT here, at the edge. Whole files the guest asks for as `contents` stay in
//! the host ([`Contents`]), so a result carries them as base64
//! (`responder.respond-with-base64`) without the bytes being copied into the plugin and back.

use std::time::Instant;

use wasmtime::component::Resource;

use crate::bindings::wexec::plugin::filesystem as wit;
use crate::bindings::wexec::plugin::filesystem::{Host, HostContents};
use crate::fs::{self, Error, ErrorKind, OpenMode, invalid};
use crate::port::Room;
use crate::resources::Contents;
use crate::state::HostState;
use crate::threads;

/// A write this large is long work ([`threads::long_blocking`]).
const LONG_WRITE_BYTES: usize = 1024 * 1024;

/// Most bytes of `contents` one instance may hold at once: they live outside its linear memory,
/// so its memory limit does not count them.
pub const MAX_HELD_BYTES: u64 = 64 * 1024 * 1024;

impl HostState {
    /// The grant check every filesystem import starts with: a plugin that did not declare the
    /// capability, or was granted no root, is denied everything, handles included.
    pub(crate) fn granted(&self) -> Result<(), Error> {
        if self.plugin.roots.is_empty() {
            return Err(Error {
                kind: ErrorKind::Denied,
                message: format!("plugin {} has no filesystem grant", self.plugin.name),
            });
        }
        Ok(())
    }

    /// Runs a filesystem operation after the grant check, counting its time as host I/O
    /// rather than guest time.
    fn timed<T>(&mut self, operation: impl FnOnce(&Self) -> Result<T, Error>) -> Result<T, Error> {
        self.granted()?;
        let started = Instant::now();
        let result = operation(self);
        self.clock.add_host_time(started.elapsed());
        result
    }

    /// [`HostState::timed`] for work that takes long by nature (copies, removals, listings,
    /// directory trees, large writes): it never holds up other tasks of the thread it is on.
    fn timed_long<T>(
        &mut self,
        operation: impl FnOnce(&Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.timed(|state| threads::long_blocking(|| operation(state)))
    }

    /// The sandbox of the call in progress, if its request carried one.
    fn policy(&self) -> Option<&dyn fs::FsPolicy> {
        self.call.as_ref().and_then(|call| call.sandbox.as_deref())
    }

    /// The handles the called plugin opened on the calling connection.
    fn handles(&self) -> Result<std::sync::Arc<fs::FileHandles>, Error> {
        self.call
            .as_ref()
            .map(|call| std::sync::Arc::clone(&call.handles))
            .ok_or_else(|| invalid("file handles are only available during a call".into()))
    }
}

impl HostState {
    /// Keeps `data` for the guest, within [`MAX_HELD_BYTES`].
    fn hold_contents(&mut self, data: Vec<u8>, room: Room) -> Result<Resource<Contents>, Error> {
        let len = data.len() as u64;
        if self.contents_held + len > MAX_HELD_BYTES {
            return Err(Error {
                kind: ErrorKind::TooLarge,
                message: format!(
                    "file contents held by the host would exceed {MAX_HELD_BYTES} bytes: drop some first"
                ),
            });
        }
        let contents = self
            .table()
            .push(Contents { data, room })
            .map_err(|err| Error {
                kind: ErrorKind::Other,
                message: format!("cannot hold file contents: {err}"),
            })?;
        self.contents_held += len;
        Ok(contents)
    }

    /// Takes the contents back from the guest (the handle is consumed).
    pub fn take_contents(&mut self, contents: Resource<Contents>) -> wasmtime::Result<Contents> {
        let contents = self.table().delete(contents)?;
        self.contents_held -= contents.data.len() as u64;
        Ok(contents)
    }
}

impl HostContents for HostState {
    async fn len(&mut self, contents: Resource<Contents>) -> u64 {
        // A handle the guest holds is in the table; anything else is reported as empty.
        self.table()
            .get(&contents)
            .map_or(0, |contents| contents.data.len() as u64)
    }

    async fn drop(&mut self, contents: Resource<Contents>) -> wasmtime::Result<()> {
        self.take_contents(contents).map(drop)
    }
}

/// A filesystem result as WIT's.
fn wit<T, U: From<T>>(result: Result<T, Error>) -> Result<U, wit::Error> {
    result.map(U::from).map_err(wit::Error::from)
}

impl Host for HostState {
    async fn read_file(
        &mut self,
        path: String,
        follow_symlinks: bool,
    ) -> Result<Vec<u8>, wit::Error> {
        wit(self
            .timed(|state| (state.plugin.roots).read_file(&path, follow_symlinks, state.policy())))
    }

    async fn read_file_contents(
        &mut self,
        path: String,
        follow_symlinks: bool,
    ) -> Result<Resource<Contents>, wit::Error> {
        let file = self.timed(|state| {
            (state.plugin.roots).open_to_read(&path, follow_symlinks, state.policy())
        })?;
        // Before the bytes exist: a client not reading its replies holds them back here.
        let room = self.reserve_room(file.size()).await;
        // Granted already: only the time is counted.
        let started = Instant::now();
        let data = file.read();
        self.clock.add_host_time(started.elapsed());
        Ok(self.hold_contents(data?, room)?)
    }

    async fn write_file(
        &mut self,
        path: String,
        data: Vec<u8>,
        follow_symlinks: bool,
    ) -> Result<(), wit::Error> {
        let write = |state: &Self| {
            (state.plugin.roots).write_file(&path, &data, follow_symlinks, state.policy())
        };
        if data.len() >= LONG_WRITE_BYTES {
            wit(self.timed_long(write))
        } else {
            wit(self.timed(write))
        }
    }

    async fn create_directory(&mut self, path: String, recursive: bool) -> Result<(), wit::Error> {
        wit(self.timed_long(|state| {
            (state.plugin.roots).create_directory(&path, recursive, state.policy())
        }))
    }

    async fn get_metadata(
        &mut self,
        path: String,
        follow_symlinks: bool,
    ) -> Result<wit::Metadata, wit::Error> {
        wit(self
            .timed(|state| (state.plugin.roots).metadata(&path, follow_symlinks, state.policy())))
    }

    async fn canonicalize(&mut self, path: String) -> Result<String, wit::Error> {
        wit(self.timed(|state| state.plugin.roots.canonicalize(&path, state.policy())))
    }

    async fn read_directory(&mut self, path: String) -> Result<Vec<wit::DirEntry>, wit::Error> {
        let entries =
            self.timed_long(|state| state.plugin.roots.read_directory(&path, state.policy()))?;
        Ok(entries.into_iter().map(wit::DirEntry::from).collect())
    }

    async fn remove(
        &mut self,
        path: String,
        recursive: bool,
        force: bool,
    ) -> Result<(), wit::Error> {
        wit(self.timed_long(|state| {
            (state.plugin.roots).remove(&path, recursive, force, state.policy())
        }))
    }

    async fn copy(
        &mut self,
        source: String,
        destination: String,
        recursive: bool,
    ) -> Result<(), wit::Error> {
        wit(self.timed_long(|state| {
            (state.plugin.roots).copy(&source, &destination, recursive, state.policy())
        }))
    }

    async fn open(
        &mut self,
        handle_id: String,
        path: String,
        mode: wit::OpenMode,
    ) -> Result<(), wit::Error> {
        let mode = match mode {
            wit::OpenMode::Read => OpenMode::Read,
            wit::OpenMode::Replace => OpenMode::Replace,
        };
        wit(self.timed(|state| {
            (state.handles()?).open(&handle_id, &state.plugin.roots, &path, mode, state.policy())
        }))
    }

    async fn read_block(
        &mut self,
        handle_id: String,
        offset: u64,
        len: u32,
    ) -> Result<Vec<u8>, wit::Error> {
        wit(self.timed(|state| state.handles()?.read_block(&handle_id, offset, len)))
    }

    async fn read_block_contents(
        &mut self,
        handle_id: String,
        offset: u64,
        len: u32,
    ) -> Result<Resource<Contents>, wit::Error> {
        self.granted()?;
        let room = self.reserve_room(u64::from(len)).await;
        let data = self.read_block(handle_id, offset, len).await?;
        Ok(self.hold_contents(data, room)?)
    }

    async fn write_block(
        &mut self,
        handle_id: String,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<(), wit::Error> {
        wit(self.timed(|state| state.handles()?.write_block(&handle_id, offset, &data)))
    }

    async fn close(&mut self, handle_id: String) {
        // Closing is idempotent: denied or unknown, there is nothing to close.
        let _ = self.timed(|state| {
            state.handles()?.close(&handle_id);
            Ok(())
        });
    }
}

impl From<Error> for wit::Error {
    fn from(error: Error) -> Self {
        let kind = match error.kind {
            ErrorKind::NotFound => wit::ErrorKind::NotFound,
            ErrorKind::OutsideRoots => wit::ErrorKind::OutsideRoots,
            ErrorKind::Denied => wit::ErrorKind::Denied,
            ErrorKind::PermissionDenied => wit::ErrorKind::PermissionDenied,
            ErrorKind::Invalid => wit::ErrorKind::Invalid,
            ErrorKind::TooLarge => wit::ErrorKind::TooLarge,
            ErrorKind::Other => wit::ErrorKind::Other,
        };
        Self {
            kind,
            message: error.message,
        }
    }
}

impl From<fs::Metadata> for wit::Metadata {
    fn from(metadata: fs::Metadata) -> Self {
        let kind = match metadata.kind {
            fs::FileKind::File => wit::FileKind::File,
            fs::FileKind::Directory => wit::FileKind::Directory,
            fs::FileKind::Symlink => wit::FileKind::Symlink,
            fs::FileKind::Other => wit::FileKind::Other,
        };
        Self {
            kind,
            is_directory: metadata.is_directory,
            is_file: metadata.is_file,
            is_symlink: metadata.is_symlink,
            size: metadata.size,
            created_at_ms: metadata.created_at_ms,
            modified_at_ms: metadata.modified_at_ms,
        }
    }
}

impl From<fs::DirEntry> for wit::DirEntry {
    fn from(entry: fs::DirEntry) -> Self {
        Self {
            name: entry.name,
            is_directory: entry.is_directory,
            is_file: entry.is_file,
            is_symlink: entry.is_symlink,
            target_missing: entry.target_missing,
        }
    }
}
