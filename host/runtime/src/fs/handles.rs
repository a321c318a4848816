//! File handles (docs/protocol.md §9.5): named by the client, scoped to its connection and to the
//! plugin that opened them, closed with the connection.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, PoisonError};

use super::OpenMode;
use super::{Error, ErrorKind, Roots, invalid};

pub use wexec_protocol::limits::{MAX_BLOCK_BYTES, MAX_HANDLE_ID_BYTES, MAX_HANDLES};

/// One connection's state of each plugin, `T` per plugin (its file handles, its watch): a plugin
/// sees only its own, and another plugin's handle id is unknown to it, exactly as if it did not
/// exist.
#[derive(Debug)]
pub struct PerPlugin<T> {
    /// By plugin name, so a reloaded plugin keeps what its earlier version opened.
    tables: Mutex<HashMap<String, Arc<T>>>,
}

impl<T> Default for PerPlugin<T> {
    fn default() -> Self {
        Self {
            tables: Mutex::default(),
        }
    }
}

impl<T: Default> PerPlugin<T> {
    /// What `plugin` has on this connection.
    pub fn for_plugin(&self, plugin: &str) -> Arc<T> {
        let mut tables = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(table) = tables.get(plugin) {
            return Arc::clone(table);
        }
        let table = Arc::new(T::default());
        tables.insert(plugin.to_owned(), Arc::clone(&table));
        table
    }
}

/// One connection's handle tables, one per plugin.
pub type ConnectionHandles = PerPlugin<FileHandles>;

/// One plugin's handles on one connection.
#[derive(Debug, Default)]
pub struct FileHandles {
    slots: Mutex<HashMap<String, Slot>>,
}

#[derive(Debug)]
enum Slot {
    /// Reserved while the file is being opened, so it counts against the limit.
    Opening,
    Open {
        file: Arc<std::fs::File>,
        writable: bool,
    },
}

impl FileHandles {
    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens `path` as handle `id`.
    pub fn open(
        &self,
        id: &str,
        roots: &Roots,
        path: &str,
        mode: OpenMode,
        policy: Option<&dyn super::FsPolicy>,
    ) -> Result<(), Error> {
        if id.len() > MAX_HANDLE_ID_BYTES {
            return Err(invalid("file handle ID must not exceed 32 bytes".into()));
        }
        {
            let mut slots = self.slots();
            if slots.contains_key(id) {
                return Err(invalid(format!("file handle `{id}` already exists")));
            }
            if slots.len() >= MAX_HANDLES {
                return Err(invalid(format!(
                    "at most {MAX_HANDLES} file handles may be open per connection"
                )));
            }
            slots.insert(id.to_owned(), Slot::Opening);
        }
        let opened = roots.open_file(path, mode, policy);
        let mut slots = self.slots();
        match opened {
            Ok((file, writable)) => {
                slots.insert(
                    id.to_owned(),
                    Slot::Open {
                        file: Arc::new(file),
                        writable,
                    },
                );
                Ok(())
            }
            Err(err) => {
                slots.remove(id);
                Err(err)
            }
        }
    }

    /// The handle's file. A handle used the other way fails as the OS fails it, with `EBADF`
    /// (as Codex's server answers: -32603 `Bad file descriptor (os error 9)`); a read then
    /// closes the handle, as any read error does, a write keeps it.
    fn get(&self, id: &str, for_writing: bool) -> Result<Arc<std::fs::File>, Error> {
        let mut slots = self.slots();
        match slots.get(id) {
            Some(Slot::Open { file, writable }) if *writable == for_writing => Ok(Arc::clone(file)),
            Some(Slot::Open { .. }) => {
                if !for_writing {
                    slots.remove(id);
                }
                Err(super::io_error(id, &rustix::io::Errno::BADF.into()))
            }
            _ => Err(Error {
                kind: ErrorKind::NotFound,
                message: format!("unknown file handle `{id}`"),
            }),
        }
    }

    /// Reads up to `len` bytes at `offset`; fewer means end of file. An I/O error closes the
    /// handle.
    pub fn read_block(&self, id: &str, offset: u64, len: u32) -> Result<Vec<u8>, Error> {
        let len = len as usize;
        if !(1..=MAX_BLOCK_BYTES).contains(&len) {
            return Err(invalid(format!(
                "file read block length must be between 1 and {MAX_BLOCK_BYTES}"
            )));
        }
        let file = self.get(id, false)?;
        let mut buffer = vec![0u8; len];
        let mut filled = 0;
        while filled < len {
            match file.read_at(&mut buffer[filled..], offset + filled as u64) {
                Ok(0) => break,
                Ok(read) => filled += read,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => {
                    self.close(id);
                    return Err(super::io_error(id, &err));
                }
            }
        }
        buffer.truncate(filled);
        Ok(buffer)
    }

    /// Writes `data` at `offset`, straight to the file. An I/O error closes the handle.
    pub fn write_block(&self, id: &str, offset: u64, data: &[u8]) -> Result<(), Error> {
        if !(1..=MAX_BLOCK_BYTES).contains(&data.len()) {
            return Err(invalid(format!(
                "file write block length must be between 1 and {MAX_BLOCK_BYTES}"
            )));
        }
        let file = self.get(id, true)?;
        file.write_all_at(data, offset).map_err(|err| {
            self.close(id);
            super::io_error(id, &err)
        })
    }

    /// Closes `id`; unknown ids are fine.
    pub fn close(&self, id: &str) {
        self.slots().remove(id);
    }
}
