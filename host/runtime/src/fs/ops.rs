//! Filesystem operations on resolved paths.

use std::io::Read;
use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use rustix::fs::FileType;

use super::policy::{FsPolicy, may_read, may_write};
use super::resolve::Resolved;
use super::{DirEntry, FileKind, Metadata, OpenMode};
use super::{Error, ErrorKind, MAX_DIRECTORY_ENTRIES, MAX_READ_FILE_BYTES, Roots, invalid, open};

/// Most path components the symlinks of one directory listing may walk together: a
/// directory of 50,000 links of ten components each lists, while links built to be slow to
/// resolve (each up to [`super::resolve::MAX_PATH_COMPONENTS`]) cannot hold a call for more
/// than about a second (a step is a system call or two).
pub const MAX_LISTING_STEPS: usize = 1 << 19;

/// `ELOOP` as Codex's server words it (its musl libc's text; glibc says "Too many levels of
/// symbolic links").
fn symlink_loop() -> Error {
    Error {
        kind: ErrorKind::Other,
        message: "Symbolic link loop (os error 40)".to_owned(),
    }
}

fn contains_symlink() -> Error {
    invalid(wexec_protocol::CONTAINS_SYMLINK.to_owned())
}

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
    /// With `followSymlinks: false`, a symlink as the last component is refused, with the
    /// error Codex's server answers: `ELOOP` (its `O_NOFOLLOW` open) for reads and writes,
    /// `path contains a symbolic link` for metadata.
    fn refuse_symlink(resolved: &Resolved<'_>, refusal: fn() -> Error) -> Result<(), Error> {
        match resolved.root.dir.symlink_metadata(&resolved.relative) {
            Ok(meta) if meta.is_symlink() => Err(refusal()),
            _ => Ok(()),
        }
    }

    /// `read-file`.
    pub fn read_file(
        &self,
        path: &str,
        follow: bool,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<Vec<u8>, Error> {
        self.open_to_read(path, follow, policy)?.read()
    }

    /// The first half of `read-file`: the file opened and checked, its size known, nothing
    /// read yet.
    pub fn open_to_read(
        &self,
        path: &str,
        follow: bool,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<FileToRead, Error> {
        let resolved = self.resolve_following(path, follow)?;
        check(policy, |policy| may_read(policy, &resolved, false))?;
        if !follow {
            Self::refuse_symlink(&resolved, symlink_loop)?;
        }
        let (file, size) = open::read(&resolved)?;
        if size > MAX_READ_FILE_BYTES {
            return Err(too_large_to_read());
        }
        Ok(FileToRead {
            file,
            size,
            path: resolved.original,
        })
    }

    /// `write-file`: creates or truncates a regular file.
    pub fn write_file(
        &self,
        path: &str,
        data: &[u8],
        follow: bool,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<(), Error> {
        use std::io::Write;
        let resolved = self.resolve_following(path, follow)?;
        check(policy, |policy| may_write(policy, &resolved, false))?;
        resolved.writable()?;
        if !follow {
            Self::refuse_symlink(&resolved, symlink_loop)?;
        }
        open::write(&resolved, true)?
            .write_all(data)
            .map_err(|err| resolved.io_error(&err))
    }

    /// `create-directory`.
    pub fn create_directory(
        &self,
        path: &str,
        recursive: bool,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<(), Error> {
        let resolved = self.resolve(path, true)?;
        check(policy, |policy| may_write(policy, &resolved, false))?;
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
    pub fn metadata(
        &self,
        path: &str,
        follow: bool,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<Metadata, Error> {
        let resolved = if follow {
            self.resolve(path, false)?
        } else {
            self.resolve_without_links(path)?
        };
        check(policy, |policy| may_read(policy, &resolved, false))?;
        if !follow {
            Self::refuse_symlink(&resolved, contains_symlink)?;
        }
        let dir = &resolved.root.dir;
        let link = dir
            .symlink_metadata(&resolved.relative)
            .map_err(|err| resolved.io_error(&err))?;
        let meta = if follow && link.is_symlink() {
            let target = self.resolve(path, true)?;
            // What the link leads to is read too: the request's sandbox must allow it.
            check(policy, |policy| may_read(policy, &target, false))?;
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

    /// `canonicalize`: resolution follows every symlink inside the root, so once every
    /// component exists, what it reached is the canonical path, inside the root.
    pub fn canonicalize(&self, path: &str, policy: Option<&dyn FsPolicy>) -> Result<String, Error> {
        let resolved = self.resolve(path, true)?;
        check(policy, |policy| may_read(policy, &resolved, false))?;
        if !resolved.exists {
            // Whatever is missing or no directory answers as the OS would.
            let err = resolved
                .root
                .dir
                .symlink_metadata(&resolved.relative)
                .err()
                .unwrap_or_else(|| std::io::Error::from(rustix::io::Errno::NOENT));
            return Err(resolved.io_error(&err));
        }
        let full = if resolved.is_root() {
            resolved.root.path.clone()
        } else {
            resolved.root.path.join(&resolved.relative)
        };
        Ok(full.to_string_lossy().into_owned())
    }

    /// `read-directory`: types follow symlinks; dangling and escaping links are flagged; a
    /// hidden directory is omitted. The entries are counted before any link is resolved, and
    /// the links' resolution together walks at most `MAX_LISTING_STEPS` components.
    pub fn read_directory(
        &self,
        path: &str,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<Vec<DirEntry>, Error> {
        let (resolved, walk) = self.resolve_directory(path)?;
        check(policy, |policy| may_read(policy, &resolved, false))?;
        let dir = &resolved.root.dir;
        let entries = dir
            .read_dir(&resolved.relative)
            .map_err(|err| resolved.io_error(&err))?;
        let mut found = Vec::new();
        let mut count = 0usize;
        for entry in entries {
            let entry = entry.map_err(|err| resolved.io_error(&err))?;
            let name = entry.file_name();
            if resolved.root.hides(&child(&resolved, &name)) {
                continue;
            }
            count += 1;
            if count > MAX_DIRECTORY_ENTRIES {
                continue;
            }
            if let Ok(file_type) = entry.file_type() {
                found.push((name, file_type));
            }
        }
        if count > MAX_DIRECTORY_ENTRIES {
            return Err(Error {
                kind: ErrorKind::TooLarge,
                message: format!(
                    "fs/readDirectory returned {count} entries; limit is {MAX_DIRECTORY_ENTRIES}"
                ),
            });
        }
        let mut steps = 0usize;
        let mut listed = Vec::with_capacity(found.len());
        for (name, file_type) in found {
            let is_symlink = file_type.is_symlink();
            let (is_directory, is_file, target_missing) = if is_symlink {
                // Resolved from the directory like any request path, so an absolute link that
                // stays inside the root is typed rather than flagged.
                let target = self.resolve_entry(&walk, &name, &mut steps);
                if steps > MAX_LISTING_STEPS {
                    return Err(Error {
                        kind: ErrorKind::TooLarge,
                        message: format!(
                            "fs/readDirectory: resolving the symlinks in `{path}` walks more than {MAX_LISTING_STEPS} path components"
                        ),
                    });
                }
                match target
                    .ok()
                    .and_then(|target| target.last)
                    .map(|stat| FileType::from_raw_mode(stat.st_mode))
                {
                    Some(kind) => (
                        kind == FileType::Directory,
                        kind == FileType::RegularFile,
                        false,
                    ),
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
        Ok(listed)
    }

    /// `remove`: never follows symlinks; a granted root itself cannot be removed.
    pub fn remove(
        &self,
        path: &str,
        recursive: bool,
        force: bool,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<(), Error> {
        let resolved = self.resolve(path, false)?;
        check(policy, |policy| may_write(policy, &resolved, recursive))?;
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

    /// `copy`: both paths are checked before any I/O; links are copied as links; only regular
    /// files are read and written, FIFOs and devices inside a tree are skipped.
    pub fn copy(
        &self,
        source: &str,
        destination: &str,
        recursive: bool,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<(), Error> {
        let from = self.resolve(source, false)?;
        let to = self.resolve(destination, false)?;
        check(policy, |policy| may_read(policy, &from, recursive))?;
        check(policy, |policy| may_write(policy, &to, recursive))?;
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
            // On the resolved, symlink-free paths: a destination reached through a symlink
            // (or below directories that do not exist yet) is caught as surely as a plain one.
            if to.absolute().starts_with(from.absolute()) {
                return Err(invalid(
                    "fs/copy cannot copy a directory to itself or one of its descendants".into(),
                ));
            }
            return super::tree::copy_tree(&from, &to).map_err(|err| to.io_error(&err));
        }
        match copy_entry(&from, &meta, &to) {
            Ok(()) => Ok(()),
            Err(CopyError::Unsupported) => Err(invalid(
                "fs/copy only supports regular files, directories, and symlinks".into(),
            )),
            Err(CopyError::Refused(err)) => Err(err),
            Err(CopyError::Io(err)) => Err(to.io_error(&err)),
        }
    }

    /// Opens a file for a handle: a regular file to read, or a regular file created or
    /// truncated to write. Returns the file and whether it was opened for writing.
    pub fn open_file(
        &self,
        path: &str,
        mode: OpenMode,
        policy: Option<&dyn FsPolicy>,
    ) -> Result<(std::fs::File, bool), Error> {
        let resolved = self.resolve(path, true)?;
        match mode {
            OpenMode::Read => {
                check(policy, |policy| may_read(policy, &resolved, false))?;
                Ok((open::read(&resolved)?.0, false))
            }
            OpenMode::Replace => {
                check(policy, |policy| may_write(policy, &resolved, false))?;
                resolved.writable()?;
                Ok((open::write(&resolved, true)?, true))
            }
        }
    }
}

/// Applies the call's sandbox, if it has one.
fn check(
    policy: Option<&dyn FsPolicy>,
    allowed: impl FnOnce(&dyn FsPolicy) -> Result<(), Error>,
) -> Result<(), Error> {
    policy.map_or(Ok(()), allowed)
}

/// A regular file opened to be read whole ([`Roots::open_to_read`]).
#[derive(Debug)]
pub struct FileToRead {
    file: std::fs::File,
    size: u64,
    path: String,
}

impl FileToRead {
    /// Its size when it was opened (what it holds may differ by the time it is read).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Reads it whole, within [`MAX_READ_FILE_BYTES`].
    pub fn read(self) -> Result<Vec<u8>, Error> {
        let data =
            read_sized(self.file, self.size).map_err(|err| super::io_error(&self.path, &err))?;
        if data.len() as u64 > MAX_READ_FILE_BYTES {
            return Err(too_large_to_read());
        }
        Ok(data)
    }
}

fn too_large_to_read() -> Error {
    Error {
        kind: ErrorKind::TooLarge,
        message: format!("file is too large to read: limit is {MAX_READ_FILE_BYTES} bytes"),
    }
}

/// The entry `name` of a resolved directory, relative to the root.
fn child(directory: &Resolved<'_>, name: &std::ffi::OsStr) -> PathBuf {
    super::child_of(&directory.relative, name)
}

enum CopyError {
    Unsupported,
    /// The source or destination is not something wexec reads or writes.
    Refused(Error),
    Io(std::io::Error),
}

/// Copies one non-directory entry: a symlink as a link, a regular file's bytes.
fn copy_entry(
    from: &Resolved<'_>,
    meta: &cap_std::fs::Metadata,
    to: &Resolved<'_>,
) -> Result<(), CopyError> {
    if meta.is_symlink() {
        let target = (from.root.dir)
            .read_link_contents(&from.relative)
            .map_err(CopyError::Io)?;
        return (to.root.dir)
            .symlink_contents(target, &to.relative)
            .map_err(CopyError::Io);
    }
    if !meta.is_file() {
        return Err(CopyError::Unsupported);
    }
    let (mut source, _) = open::read(from).map_err(CopyError::Refused)?;
    let mut target = open::write(to, true).map_err(CopyError::Refused)?;
    std::io::copy(&mut source, &mut target)
        .map(drop)
        .map_err(CopyError::Io)
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
