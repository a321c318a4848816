//! The WIT `filesystem` host implementation: the grant check first, then the operation, its
//! time counted as host I/O rather than guest time.

use std::time::Instant;

use wasmtime::component::Resource;

use super::{Contents, Error, ErrorKind, invalid};
use crate::runtime::threads;

/// A write this large is long work ([`threads::long_blocking`]).
const LONG_WRITE_BYTES: usize = 1024 * 1024;
use crate::runtime::bindings::wexec::plugin::filesystem::{DirEntry, Host, Metadata, OpenMode};
use crate::runtime::state::HostState;

impl HostState {
    /// The grant check every filesystem import starts with: a plugin that did not declare the
    /// capability, or was granted no root, is denied everything, handles included.
    fn granted(&self) -> Result<(), Error> {
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
    fn policy(&self) -> Option<&super::FsPolicy> {
        self.call.as_ref().and_then(|call| call.sandbox.as_deref())
    }

    /// The handles the called plugin opened on the calling connection.
    fn handles(&self) -> Result<std::sync::Arc<super::FileHandles>, Error> {
        self.call
            .as_ref()
            .map(|call| std::sync::Arc::clone(&call.handles))
            .ok_or_else(|| invalid("file handles are only available during a call".into()))
    }
}

impl Host for HostState {
    async fn read_file(&mut self, path: String, follow_symlinks: bool) -> Result<Vec<u8>, Error> {
        self.timed(|state| {
            state
                .plugin
                .roots
                .read_file(&path, follow_symlinks, state.policy())
        })
    }

    async fn read_file_contents(
        &mut self,
        path: String,
        follow_symlinks: bool,
    ) -> Result<Resource<Contents>, Error> {
        let file = self.timed(|state| {
            state
                .plugin
                .roots
                .open_to_read(&path, follow_symlinks, state.policy())
        })?;
        // Before the bytes exist: a client not reading its replies holds them back here.
        let reserved = self.reserve_contents(file.size()).await;
        // Granted already: only the time is counted.
        let started = Instant::now();
        let data = file.read();
        self.clock.add_host_time(started.elapsed());
        let data = data?;
        self.hold_contents(data, reserved)
    }

    async fn write_file(
        &mut self,
        path: String,
        data: Vec<u8>,
        follow_symlinks: bool,
    ) -> Result<(), Error> {
        let write = |state: &Self| {
            state
                .plugin
                .roots
                .write_file(&path, &data, follow_symlinks, state.policy())
        };
        if data.len() >= LONG_WRITE_BYTES {
            self.timed_long(write)
        } else {
            self.timed(write)
        }
    }

    async fn create_directory(&mut self, path: String, recursive: bool) -> Result<(), Error> {
        self.timed_long(|state| {
            state
                .plugin
                .roots
                .create_directory(&path, recursive, state.policy())
        })
    }

    async fn get_metadata(
        &mut self,
        path: String,
        follow_symlinks: bool,
    ) -> Result<Metadata, Error> {
        self.timed(|state| {
            state
                .plugin
                .roots
                .metadata(&path, follow_symlinks, state.policy())
        })
    }

    async fn canonicalize(&mut self, path: String) -> Result<String, Error> {
        self.timed(|state| state.plugin.roots.canonicalize(&path, state.policy()))
    }

    async fn read_directory(&mut self, path: String) -> Result<Vec<DirEntry>, Error> {
        self.timed_long(|state| state.plugin.roots.read_directory(&path, state.policy()))
    }

    async fn remove(&mut self, path: String, recursive: bool, force: bool) -> Result<(), Error> {
        self.timed_long(|state| {
            state
                .plugin
                .roots
                .remove(&path, recursive, force, state.policy())
        })
    }

    async fn copy(
        &mut self,
        source: String,
        destination: String,
        recursive: bool,
    ) -> Result<(), Error> {
        self.timed_long(|state| {
            state
                .plugin
                .roots
                .copy(&source, &destination, recursive, state.policy())
        })
    }

    async fn open(&mut self, handle_id: String, path: String, mode: OpenMode) -> Result<(), Error> {
        self.timed(|state| {
            state
                .handles()?
                .open(&handle_id, &state.plugin.roots, &path, mode, state.policy())
        })
    }

    async fn read_block(
        &mut self,
        handle_id: String,
        offset: u64,
        len: u32,
    ) -> Result<Vec<u8>, Error> {
        self.timed(|state| state.handles()?.read_block(&handle_id, offset, len))
    }

    async fn read_block_contents(
        &mut self,
        handle_id: String,
        offset: u64,
        len: u32,
    ) -> Result<Resource<Contents>, Error> {
        self.granted()?;
        let reserved = self.reserve_contents(u64::from(len)).await;
        let data = self.read_block(handle_id, offset, len).await?;
        self.hold_contents(data, reserved)
    }

    async fn write_block(
        &mut self,
        handle_id: String,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<(), Error> {
        self.timed(|state| state.handles()?.write_block(&handle_id, offset, &data))
    }

    async fn close(&mut self, handle_id: String) {
        // Closing is idempotent: denied or unknown, there is nothing to close.
        let _ = self.timed(|state| {
            state.handles()?.close(&handle_id);
            Ok(())
        });
    }
}
