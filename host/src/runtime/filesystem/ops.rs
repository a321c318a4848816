//! Filesystem operations on resolved paths, and the WIT host implementation around them.

use std::io::Read;
use std::path::Path;
use std::time::{Instant, UNIX_EPOCH};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use wasmtime::component::Resource;

use super::{
    Contents, Error, ErrorKind, MAX_DIRECTORY_ENTRIES, MAX_READ_FILE_BYTES, Resolved, Roots,
    invalid, normalize,
};
use crate::runtime::bindings::wexec::plugin::filesystem::{
    DirEntry, FileKind, Host, Metadata, OpenMode,
};
use crate::runtime::state::HostState;

/// Reads a regular file of `size` bytes (as `fstat` said) to its end, and at most one byte past
/// the read limit. A first read that returns exactly `size` bytes of the `size + 1` asked for
/// has met the end: the read that would return 0 is skipped. Files whose size says nothing
/// about their contents (procfs reports 0, sysfs a page) read short or long of it, and are read
/// on until a read returns 0.
fn read_sized(file: std::fs::File, size: u64) -> std::io::Result<Vec<u8>> {
    let expected = usize::try_from(size.min(MAX_READ_FILE_BYTES)).unwrap_or(0);
    // A size of 0 is often procfs's way of saying nothing: start with a page or two, not a byte.
    // Read into the spare capacity: zeroing what the read overwrites costs as much as copying.
    let mut data = Vec::with_capacity(if expected == 0 { 8192 } else { expected + 1 });
    let first = loop {
        match rustix::io::read(&file, rustix::buffer::spare_capacity(&mut data)) {
            Err(rustix::io::Errno::INTR) => {}
            read => break read?,
        }
    };
    if first != expected || expected == 0 {
        let rest = MAX_READ_FILE_BYTES + 1 - first as u64;
        file.take(rest).read_to_end(&mut data)?;
    }
    Ok(data)
}

impl Roots {
    fn refuse_symlink(resolved: &Resolved<'_>) -> Result<(), Error> {
        match resolved.root.dir.symlink_metadata(&resolved.relative) {
            Ok(meta) if meta.is_symlink() => Err(invalid(format!(
                "path `{}` is a symlink",
                resolved.original
            ))),
            _ => Ok(()),
        }
    }

    /// Opens a resolved path for reading, non-blocking. A single component already checked to
    /// be no symlink is opened with plain `openat(O_NOFOLLOW)` in the root: a name without `/`
    /// cannot leave the directory except through a symlink, and one swapped in meanwhile fails
    /// the open. Everything else goes through cap-std's confinement. (`openat` costs about
    /// 10% less than `openat2` here.)
    fn open_checked(resolved: &Resolved<'_>) -> std::io::Result<std::fs::File> {
        let mut components = resolved.relative.components();
        if let (Some(std::path::Component::Normal(name)), None, Some(_)) =
            (components.next(), components.next(), &resolved.last)
        {
            let flags = rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::NONBLOCK
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::NOCTTY
                | rustix::fs::OFlags::CLOEXEC;
            let fd =
                rustix::fs::openat(&resolved.root.dir, name, flags, rustix::fs::Mode::empty())?;
            return Ok(std::fs::File::from(fd));
        }
        let mut options = OpenOptions::new();
        options
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        Ok(resolved
            .root
            .dir
            .open_with(&resolved.relative, &options)?
            .into_std())
    }

    /// Opens a regular file for reading without ever blocking on a FIFO; returns it with its
    /// size.
    fn open_regular(resolved: &Resolved<'_>) -> Result<(std::fs::File, u64), Error> {
        let not_a_file = || invalid(format!("path `{}` is not a file", resolved.original));
        // Opening a FIFO or a device could have effects (a FIFO writer waiting in open()
        // proceeds), so the type is checked first: from resolution's own lstat when it made one.
        let is_file = match &resolved.last {
            Some(meta) => meta.is_file(),
            None => resolved
                .root
                .dir
                .metadata(&resolved.relative)
                .map_err(|err| resolved.io_error(&err))?
                .is_file(),
        };
        if !is_file {
            return Err(not_a_file());
        }
        let file = Self::open_checked(resolved).map_err(|err| resolved.io_error(&err))?;
        // The path may have been swapped for something else between the two calls. (`fstat`
        // rather than std's `statx` on an empty path, which costs a path lookup of its own.)
        match rustix::fs::fstat(&file) {
            Ok(stat)
                if rustix::fs::FileType::from_raw_mode(stat.st_mode)
                    == rustix::fs::FileType::RegularFile =>
            {
                Ok((file, u64::try_from(stat.st_size).unwrap_or(0)))
            }
            _ => Err(not_a_file()),
        }
    }

    /// `read-file`.
    pub fn read_file(&self, path: &str, follow: bool) -> Result<Vec<u8>, Error> {
        let resolved = self.resolve(path, follow)?;
        if !follow {
            Self::refuse_symlink(&resolved)?;
        }
        let too_large = || Error {
            kind: ErrorKind::TooLarge,
            message: format!("file is too large to read: limit is {MAX_READ_FILE_BYTES} bytes"),
        };
        let (file, size) = Self::open_regular(&resolved)?;
        if size > MAX_READ_FILE_BYTES {
            return Err(too_large());
        }
        let data = read_sized(file, size).map_err(|err| resolved.io_error(&err))?;
        if data.len() as u64 > MAX_READ_FILE_BYTES {
            return Err(too_large());
        }
        Ok(data)
    }

    /// `write-file`.
    pub fn write_file(&self, path: &str, data: &[u8], follow: bool) -> Result<(), Error> {
        let resolved = self.resolve(path, follow)?;
        resolved.writable()?;
        if !follow {
            Self::refuse_symlink(&resolved)?;
        }
        resolved
            .root
            .dir
            .write(&resolved.relative, data)
            .map_err(|err| resolved.io_error(&err))
    }

    /// `create-directory`.
    pub fn create_directory(&self, path: &str, recursive: bool) -> Result<(), Error> {
        let resolved = self.resolve(path, true)?;
        resolved.writable()?;
        let dir = &resolved.root.dir;
        let created = if recursive {
            dir.create_dir_all(&resolved.relative)
        } else {
            dir.create_dir(&resolved.relative)
        };
        created.map_err(|err| resolved.io_error(&err))
    }

    /// `metadata`.
    pub fn metadata(&self, path: &str, follow: bool) -> Result<Metadata, Error> {
        let resolved = self.resolve(path, false)?;
        let dir = &resolved.root.dir;
        let link = dir
            .symlink_metadata(&resolved.relative)
            .map_err(|err| resolved.io_error(&err))?;
        let meta = if follow && link.is_symlink() {
            let target = self.resolve(path, true)?;
            target
                .root
                .dir
                .metadata(&target.relative)
                .map_err(|err| target.io_error(&err))?
        } else {
            link.clone()
        };
        let millis = |time: std::io::Result<cap_std::time::SystemTime>| {
            time.ok()
                .and_then(|time| time.into_std().duration_since(UNIX_EPOCH).ok())
                .map_or(0, |since| {
                    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
                })
        };
        let kind = if meta.is_symlink() {
            FileKind::Symlink
        } else if meta.is_dir() {
            FileKind::Directory
        } else if meta.is_file() {
            FileKind::File
        } else {
            FileKind::Other
        };
        Ok(Metadata {
            kind,
            is_directory: meta.is_dir(),
            is_file: meta.is_file(),
            is_symlink: link.is_symlink(),
            size: meta.len(),
            created_at_ms: millis(meta.created()),
            modified_at_ms: millis(meta.modified()),
        })
    }

    /// `canonicalize`: cap-std resolves inside the root, so the result is inside it too.
    pub fn canonicalize(&self, path: &str) -> Result<String, Error> {
        let resolved = self.resolve(path, true)?;
        let inside = resolved
            .root
            .dir
            .canonicalize(&resolved.relative)
            .map_err(|err| resolved.io_error(&err))?;
        let full = if inside == Path::new(".") {
            resolved.root.path.clone()
        } else {
            resolved.root.path.join(inside)
        };
        Ok(full.to_string_lossy().into_owned())
    }

    /// `read-directory`: types follow symlinks; dangling and escaping links are flagged.
    pub fn read_directory(&self, path: &str) -> Result<Vec<DirEntry>, Error> {
        let resolved = self.resolve(path, true)?;
        let dir = &resolved.root.dir;
        let entries = dir
            .read_dir(&resolved.relative)
            .map_err(|err| resolved.io_error(&err))?;
        let mut listed = Vec::new();
        let mut count = 0usize;
        for entry in entries {
            let entry = entry.map_err(|err| resolved.io_error(&err))?;
            count += 1;
            if count > MAX_DIRECTORY_ENTRIES {
                continue;
            }
            let name = entry.file_name();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            let is_symlink = file_type.is_symlink();
            let (is_directory, is_file, target_missing) = if is_symlink {
                // Resolved like any request path, so an absolute link that stays inside the
                // root is typed rather than flagged.
                let child = format!("{}/{}", path.trim_end_matches('/'), name.to_string_lossy());
                let target = self
                    .resolve(&child, true)
                    .ok()
                    .and_then(|target| target.root.dir.metadata(&target.relative).ok());
                match target {
                    Some(target) => (target.is_dir(), target.is_file(), false),
                    None => (false, false, true),
                }
            } else {
                (file_type.is_dir(), file_type.is_file(), false)
            };
            listed.push(DirEntry {
                name: name.to_string_lossy().into_owned(),
                is_directory,
                is_file,
                is_symlink,
                target_missing,
            });
        }
        if count > MAX_DIRECTORY_ENTRIES {
            return Err(Error {
                kind: ErrorKind::TooLarge,
                message: format!(
                    "fs/readDirectory returned {count} entries; limit is {MAX_DIRECTORY_ENTRIES}"
                ),
            });
        }
        Ok(listed)
    }

    /// `remove`: never follows symlinks; a granted root itself cannot be removed.
    pub fn remove(&self, path: &str, recursive: bool, force: bool) -> Result<(), Error> {
        let resolved = self.resolve(path, false)?;
        resolved.writable()?;
        if resolved.is_root() {
            return Err(invalid(format!(
                "path `{path}` is a granted root and cannot be removed"
            )));
        }
        let dir = &resolved.root.dir;
        let meta = match dir.symlink_metadata(&resolved.relative) {
            Ok(meta) => meta,
            Err(err) if force && err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(resolved.io_error(&err)),
        };
        let removed = if meta.is_dir() {
            if recursive {
                dir.remove_dir_all(&resolved.relative)
            } else {
                dir.remove_dir(&resolved.relative)
            }
        } else {
            dir.remove_file(&resolved.relative)
        };
        removed.map_err(|err| resolved.io_error(&err))
    }

    /// `copy`: both paths are checked before any I/O; links are copied as links.
    pub fn copy(&self, source: &str, destination: &str, recursive: bool) -> Result<(), Error> {
        let from = self.resolve(source, false)?;
        let to = self.resolve(destination, false)?;
        to.writable()?;
        let meta = from
            .root
            .dir
            .symlink_metadata(&from.relative)
            .map_err(|err| from.io_error(&err))?;
        if meta.is_dir() {
            if !recursive {
                return Err(invalid(
                    "fs/copy requires recursive: true when sourcePath is a directory".into(),
                ));
            }
            let into_itself = || {
                invalid(
                    "fs/copy cannot copy a directory to itself or one of its descendants".into(),
                )
            };
            if let (Some(from_path), Some(to_path)) = (
                normalize(Path::new(source)),
                normalize(Path::new(destination)),
            ) && to_path.starts_with(&from_path)
            {
                return Err(into_itself());
            }
            // The same check on canonical paths, against symlinked destinations.
            if let (Ok(from_canon), Some(parent)) =
                (self.canonicalize(source), Path::new(destination).parent())
                && let Ok(parent_canon) = self.canonicalize(&parent.to_string_lossy())
                && Path::new(&parent_canon).starts_with(&from_canon)
            {
                return Err(into_itself());
            }
            return copy_tree(&from.root.dir, &from.relative, &to.root.dir, &to.relative)
                .map_err(|err| to.io_error(&err));
        }
        copy_entry(
            &from.root.dir,
            &from.relative,
            &meta,
            &to.root.dir,
            &to.relative,
        )
        .map_err(|err| match err {
            CopyError::Unsupported => {
                invalid("fs/copy only supports regular files, directories, and symlinks".into())
            }
            CopyError::Io(err) => to.io_error(&err),
        })
    }

    /// Opens a file for a handle: a regular file to read, or a file created or truncated to
    /// write. Returns the file and whether it was opened for writing.
    pub fn open_file(&self, path: &str, mode: OpenMode) -> Result<(std::fs::File, bool), Error> {
        let resolved = self.resolve(path, true)?;
        match mode {
            OpenMode::Read => Ok((Self::open_regular(&resolved)?.0, false)),
            OpenMode::Replace => {
                resolved.writable()?;
                let mut options = OpenOptions::new();
                options.write(true).create(true).truncate(true);
                let file = resolved
                    .root
                    .dir
                    .open_with(&resolved.relative, &options)
                    .map_err(|err| resolved.io_error(&err))?;
                Ok((file.into_std(), true))
            }
        }
    }
}

enum CopyError {
    Unsupported,
    Io(std::io::Error),
}

fn copy_entry(
    from_dir: &Dir,
    from: &Path,
    meta: &cap_std::fs::Metadata,
    to_dir: &Dir,
    to: &Path,
) -> Result<(), CopyError> {
    if meta.is_symlink() {
        let target = from_dir.read_link_contents(from).map_err(CopyError::Io)?;
        to_dir.symlink_contents(target, to).map_err(CopyError::Io)
    } else if meta.is_file() {
        from_dir
            .copy(from, to_dir, to)
            .map(|_| ())
            .map_err(CopyError::Io)
    } else {
        Err(CopyError::Unsupported)
    }
}

fn copy_tree(from_dir: &Dir, from: &Path, to_dir: &Dir, to: &Path) -> std::io::Result<()> {
    to_dir.create_dir_all(to)?;
    for entry in from_dir.read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let (from_child, to_child) = (from.join(&name), to.join(&name));
        let meta = from_dir.symlink_metadata(&from_child)?;
        if meta.is_dir() {
            copy_tree(from_dir, &from_child, to_dir, &to_child)?;
        } else {
            // Sockets, FIFOs and devices inside a tree are skipped rather than failing it.
            match copy_entry(from_dir, &from_child, &meta, to_dir, &to_child) {
                Ok(()) | Err(CopyError::Unsupported) => {}
                Err(CopyError::Io(err)) => return Err(err),
            }
        }
    }
    Ok(())
}

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
        self.timed(|state| state.plugin.roots.read_file(&path, follow_symlinks))
    }

    async fn read_file_contents(
        &mut self,
        path: String,
        follow_symlinks: bool,
    ) -> Result<Resource<Contents>, Error> {
        let data = self.timed(|state| state.plugin.roots.read_file(&path, follow_symlinks))?;
        self.hold_contents(data)
    }

    async fn write_file(
        &mut self,
        path: String,
        data: Vec<u8>,
        follow_symlinks: bool,
    ) -> Result<(), Error> {
        self.timed(|state| state.plugin.roots.write_file(&path, &data, follow_symlinks))
    }

    async fn create_directory(&mut self, path: String, recursive: bool) -> Result<(), Error> {
        self.timed(|state| state.plugin.roots.create_directory(&path, recursive))
    }

    async fn get_metadata(
        &mut self,
        path: String,
        follow_symlinks: bool,
    ) -> Result<Metadata, Error> {
        self.timed(|state| state.plugin.roots.metadata(&path, follow_symlinks))
    }

    async fn canonicalize(&mut self, path: String) -> Result<String, Error> {
        self.timed(|state| state.plugin.roots.canonicalize(&path))
    }

    async fn read_directory(&mut self, path: String) -> Result<Vec<DirEntry>, Error> {
        self.timed(|state| state.plugin.roots.read_directory(&path))
    }

    async fn remove(&mut self, path: String, recursive: bool, force: bool) -> Result<(), Error> {
        self.timed(|state| state.plugin.roots.remove(&path, recursive, force))
    }

    async fn copy(
        &mut self,
        source: String,
        destination: String,
        recursive: bool,
    ) -> Result<(), Error> {
        self.timed(|state| state.plugin.roots.copy(&source, &destination, recursive))
    }

    async fn open(&mut self, handle_id: String, path: String, mode: OpenMode) -> Result<(), Error> {
        self.timed(|state| {
            state
                .handles()?
                .open(&handle_id, &state.plugin.roots, &path, mode)
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
        let data = self.read_block(handle_id, offset, len).await?;
        self.hold_contents(data)
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn file_with(content: &[u8]) -> (std::fs::File, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!(
            "wexec-read-sized-{}-{}",
            std::process::id(),
            content.len()
        ));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(content)
            .unwrap();
        (std::fs::File::open(&path).unwrap(), path)
    }

    #[test]
    fn reads_whatever_the_file_holds_whatever_its_size_said() {
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        // As fstat said; grown since (size smaller than the contents); shrunk since (size
        // larger); procfs-like (size 0).
        for size in [10_000, 4_096, 1, 20_000, 0] {
            let (file, path) = file_with(&content);
            assert_eq!(read_sized(file, size).unwrap(), content, "size {size}");
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn reads_procfs_files_that_report_no_size() {
        // Reported size 0, contents well over the first buffer, handed out a page per read.
        let file = std::fs::File::open("/proc/self/smaps").unwrap();
        let data = read_sized(file, 0).unwrap();
        assert!(
            data.len() > 16 * 1024,
            "read to the end: {} bytes",
            data.len()
        );
        assert!(data.ends_with(b"\n"));
    }
}
