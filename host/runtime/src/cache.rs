//! Compiled components cached on disk, keyed by the component's content hash and the engine's
//! configuration, so a restart does not recompile (a compile costs hundreds of milliseconds, a
//! cached load a few). The key does not need the engine ([`Cache::lookup`] runs while it is
//! being built, off wexec's startup path): it hashes a fingerprint of the configuration wexec
//! builds the engine from; wasmtime checks an artifact's compatibility again when loading it.
//!
//! A cached artifact is native code wexec will run, so it is trusted only as far as this
//! holds (docs/plugins.md, "The compile cache"):
//! - the directory is private to this user (created 0700; no group or other access, checked
//!   on the opened directory), and no plugin can reach it: the filesystem capability hides it
//!   inside every root ([`Cache::dir`]), refuses to change the directories that lead to it,
//!   and a root inside it is refused;
//! - it is opened once, at startup, and every artifact is read and written relative to that
//!   descriptor, never through a symlink: renaming, removing or replacing the path (or any
//!   directory above it) cannot redirect a read or a write elsewhere;
//! - every artifact has a digest written beside it when it was compiled, BLAKE3 keyed with
//!   the user's secret key (kept in wexec's state directory, which no plugin and no confined
//!   process can read): an artifact that does not match it (changed, swapped, truncated, or
//!   written by anyone without the key, such as the plugins or processes of another wexec
//!   whose roots hold this directory) is compiled again and rewritten; remembered results
//!   ([`Cache::memo`]) carry the same kind of digest;
//! - the artifact is read into memory, checked, and deserialized from there, so a file changed
//!   under a running wexec cannot affect it (a mapped file cut short would raise SIGBUS).

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Largest artifact read back: far above any plugin's (a few MiB), small enough that a file
/// swapped for something huge costs nothing.
const MAX_ARTIFACT_BYTES: u64 = 256 * 1024 * 1024;

/// Where compiled components go: `$XDG_CACHE_HOME/wexec`, else `$HOME/.cache/wexec`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("wexec"))
}

/// Bytes of the key the cache's digests are keyed with.
pub const KEY_BYTES: usize = 32;

/// The cache directory, created, checked and opened.
#[derive(Clone)]
pub struct Cache {
    /// Canonical: what the filesystem capability hides.
    dir: PathBuf,
    /// The directory itself, opened once: every artifact is named relative to it.
    handle: Arc<OwnedFd>,
    /// What every digest is keyed with.
    key: [u8; KEY_BYTES],
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Cache {
    /// Opens (creating, mode 0700) `dir`, whose digests are keyed with `key`; `None`, with a
    /// warning, unless it is a directory owned by this user that nobody else can read or write.
    pub fn open(dir: &Path, exposed: &[PathBuf], key: [u8; KEY_BYTES]) -> Option<Self> {
        let disabled = |reason: &dyn std::fmt::Display| {
            tracing::warn!("compile cache disabled: {}: {reason}", dir.display());
        };
        // The path is followed anew at every start: a link on it that a process or a plugin
        // may replace would let them choose the directory (and the native code) wexec loads.
        if let Some((link, root)) = redirectable_link(dir, exposed) {
            disabled(&format_args!(
                "it passes through the symbolic link {} inside {}, which processes or plugins may change; set XDG_CACHE_HOME to a path without links inside the writable and fs roots",
                link.display(),
                root.display()
            ));
            return None;
        }
        if let Err(err) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            disabled(&format_args!("cannot create it: {err}"));
            return None;
        }
        let handle = match rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(handle) => handle,
            Err(err) => {
                disabled(&format_args!("cannot open it as a directory: {err}"));
                return None;
            }
        };
        // Checked on the opened directory, so what is checked is what is used.
        let Ok(meta) = rustix::fs::fstat(&handle) else {
            return None;
        };
        let ours = meta.st_uid == rustix::process::geteuid().as_raw();
        // A directory a plugin created would carry the umask's group and other bits (plugins
        // cannot change modes); wexec creates this one 0700.
        let private = meta.st_mode & 0o077 == 0;
        if !(ours && private) {
            disabled(&"not a directory of this user closed to everyone else (mode 0700)");
            return None;
        }
        let canonical = std::fs::canonicalize(dir).ok()?;
        // The path hidden from plugins must be the directory opened.
        let same = std::fs::metadata(&canonical)
            .is_ok_and(|seen| seen.dev() == meta.st_dev && seen.ino() == meta.st_ino);
        if !same {
            disabled(&"it changed while it was opened");
            return None;
        }
        Some(Self {
            dir: canonical,
            handle: Arc::new(handle),
            key,
        })
    }

    /// The canonical directory: the filesystem capability never exposes it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the cache holds under `key` (a component's [`key`]): read and checked against its
    /// digest, without the engine, so this runs while the engine is being built.
    pub fn lookup(&self, key: &str) -> Entry {
        let (artifact_name, digest_name) = file_names(key);
        let artifact = match verified(self.handle.as_fd(), &artifact_name, &digest_name, &self.key)
        {
            Ok(found) => found,
            Err(reason) => {
                tracing::warn!(
                    "recompiling: cached component {} {reason}",
                    self.dir.join(&artifact_name).display()
                );
                None
            }
        };
        Entry {
            key: key.to_owned(),
            artifact,
        }
    }

    /// The component `entry` was looked up for: deserialized from its verified artifact, or
    /// compiled from `bytes` (and cached) when there is none or it is unusable.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
        entry: Entry,
    ) -> wasmtime::Result<Component> {
        let dir = self.handle.as_fd();
        let (artifact_name, digest_name) = file_names(&entry.key);
        let artifact = self.dir.join(&artifact_name);
        if let Some(data) = entry.artifact {
            #[expect(
                unsafe_code,
                reason = "loading a precompiled artifact is unsafe in wasmtime's API"
            )]
            // SAFETY: `data` is, byte for byte, what `serialize` below produced under a name
            // hashing the component and the engine configuration: its keyed BLAKE3 matches the
            // digest written with it, which only a holder of the user's key could write, in a
            // directory only this user can write and no plugin can reach. wasmtime also checks the header and compatibility (an artifact of
            // another engine configuration or version is refused, and compiled anew).
            let loaded = unsafe { Component::deserialize(engine, &data) };
            match loaded {
                Ok(component) => return Ok(component),
                Err(err) => tracing::warn!(
                    "ignoring unusable cached component {}: {err}",
                    artifact.display()
                ),
            }
        }
        let component = Component::new(engine, bytes)?;
        match component.serialize() {
            Ok(data) => {
                let sum = digest(&self.key, &artifact_name, &data);
                // The artifact first: a digest without its artifact never matches.
                let written = write_atomically(dir, &artifact_name, &data, true)
                    .and_then(|()| write_atomically(dir, &digest_name, sum.as_bytes(), true));
                if let Err(err) = written {
                    tracing::warn!(
                        "cannot cache compiled component at {}: {err}",
                        artifact.display()
                    );
                }
            }
            Err(err) => tracing::warn!("cannot serialize compiled component: {err}"),
        }
        Ok(component)
    }
}

/// The first symbolic link on the way to `dir` that lies inside one of `exposed` (directories
/// processes or plugins may write), with that directory.
fn redirectable_link(dir: &Path, exposed: &[PathBuf]) -> Option<(PathBuf, PathBuf)> {
    let mut walked = PathBuf::new();
    for component in dir.components() {
        walked.push(component);
        let is_link = std::fs::symlink_metadata(&walked).is_ok_and(|meta| meta.is_symlink());
        if !is_link {
            continue;
        }
        // Where the link itself is: its directory resolved, its own name kept.
        let located = walked
            .parent()
            .and_then(|parent| std::fs::canonicalize(parent).ok())
            .zip(walked.file_name())
            .map(|(parent, name)| parent.join(name))?;
        if let Some(root) = exposed.iter().find(|root| located.starts_with(root)) {
            return Some((located, root.clone()));
        }
    }
    None
}

/// One component's place in the cache: its key, and its artifact when one is cached and
/// matches its digest.
#[derive(Debug)]
pub struct Entry {
    key: String,
    artifact: Option<Vec<u8>>,
}

/// Largest remembered result read back (descriptions and `environmentInfo` are a few KiB).
const MAX_MEMO_BYTES: u64 = 1024 * 1024;

impl Cache {
    /// What [`Self::remember`] wrote as `name`, if anything: only data followed by its keyed
    /// digest, which only a holder of the key could have written.
    pub fn memo(&self, name: &str) -> Option<Vec<u8>> {
        let mut data = read_regular(self.handle.as_fd(), name, MAX_MEMO_BYTES).ok()?;
        let split = data.len().checked_sub(MEMO_DIGEST_BYTES)?;
        let sum = data.split_off(split);
        (sum == digest(&self.key, name, &data).as_bytes()).then_some(data)
    }

    /// Writes `data` as `name` (a key-derived name), followed by its keyed digest. Not synced
    /// to disk: a memo lost or cut short by a crash reads back as nothing, and is derived
    /// again.
    pub fn remember(&self, name: &str, data: &[u8]) {
        let mut text = data.to_vec();
        text.extend_from_slice(digest(&self.key, name, data).as_bytes());
        if let Err(err) = write_atomically(self.handle.as_fd(), name, &text, false) {
            tracing::warn!("cannot cache {}: {err}", self.dir.join(name).display());
        }
    }
}

/// The name an artifact's digest has beside it: `<key>.keyed-blake3`.
const DIGEST_SUFFIX: &str = "keyed-blake3";

/// Bytes of a digest as hex, at a memo's end.
const MEMO_DIGEST_BYTES: usize = 64;

/// The names of `key`'s artifact and of its digest.
fn file_names(key: &str) -> (String, String) {
    (format!("{key}.cwasm"), format!("{key}.{DIGEST_SUFFIX}"))
}

/// The digest an artifact or a memo is checked against, as hex: BLAKE3 in its keyed mode (a
/// MAC) over the file's name and its contents, so that a genuine file copied under another
/// name (another plugin's artifact, another key's memo) does not pass. Every start checks the
/// artifacts of all bundled plugins, one of them on the way to the first plugin call, so the
/// hash is the fastest strong one at hand.
fn digest(key: &[u8; KEY_BYTES], name: &str, data: &[u8]) -> String {
    let mut hasher = blake3::Hasher::new_keyed(key);
    hasher.update(&(name.len() as u64).to_le_bytes());
    hasher.update(name.as_bytes());
    hasher.update(data);
    hasher.finalize().to_hex().to_string()
}

/// SHA-256 over `parts` (each length-prefixed), as hex: the key of a result derived from them.
pub fn derived_key(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part);
    }
    hex(&hasher.finalize())
}

/// The cached artifact `artifact` in `dir`, read into memory, if it is there and matches its
/// digest; `Ok(None)` when nothing is cached yet, `Err` naming what is wrong otherwise.
fn verified(
    dir: std::os::fd::BorrowedFd<'_>,
    artifact: &str,
    digest_name: &str,
    key: &[u8; KEY_BYTES],
) -> Result<Option<Vec<u8>>, String> {
    let data = match read_regular(dir, artifact, MAX_ARTIFACT_BYTES) {
        Ok(data) => data,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot be read: {err}")),
    };
    let expected =
        read_regular(dir, digest_name, 64).map_err(|err| format!("has no digest: {err}"))?;
    if expected != digest(key, artifact, &data).as_bytes() {
        return Err("does not match its digest".into());
    }
    Ok(Some(data))
}

/// Reads the regular file `name` in `dir` (never through a symlink, never blocking on a FIFO)
/// of at most `limit` bytes.
fn read_regular(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &str,
    limit: u64,
) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::from(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?);
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > limit {
        return Err(std::io::Error::other(
            "not a regular file of the expected size",
        ));
    }
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit).read_to_end(&mut data)?;
    Ok(data)
}

/// The cache key of component `bytes` (whose SHA-256 is `sha256`, when known ahead): SHA-256
/// over the component's SHA-256, the engine configuration's fingerprint, wexec's version and
/// the artifact digest's name (a cache whose artifacts carry another digest is not read: it
/// would warn, for every plugin, that its artifacts have none).
pub fn key(fingerprint: &str, bytes: &[u8], sha256: Option<&str>) -> String {
    let computed;
    let digest = match sha256 {
        Some(digest) => digest,
        None => {
            computed = hex(&Sha256::digest(bytes));
            &computed
        }
    };
    derived_key(&[
        digest.as_bytes(),
        fingerprint.as_bytes(),
        crate::facts::VERSION.as_bytes(),
        DIGEST_SUFFIX.as_bytes(),
    ])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Writes `name` in `dir` through a new private file renamed over it, synced first if `sync`.
fn write_atomically(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &str,
    data: &[u8],
    sync: bool,
) -> std::io::Result<()> {
    let temporary = format!("{name}.tmp{}", std::process::id());
    let mut file = std::fs::File::from(rustix::fs::openat(
        dir,
        &temporary,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?);
    file.write_all(data)?;
    if sync {
        file.sync_all()?;
    }
    Ok(rustix::fs::renameat(dir, &temporary, dir, name)?)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_digest_known_ahead_gives_the_same_key() {
        let digest = hex(&Sha256::digest(b"component"));
        assert_eq!(
            key("fp", b"component", None),
            key("fp", b"component", Some(&digest))
        );
        assert_ne!(key("fp", b"component", None), key("fp", b"other", None));
    }

    const KEY: [u8; KEY_BYTES] = [42; KEY_BYTES];

    #[test]
    fn a_memo_is_read_back_only_with_its_keyed_digest() {
        let path = cache_dir("memo");
        let cache = Cache::open(&path, &[], KEY).unwrap();
        cache.remember("m.json", b"{}");
        assert_eq!(cache.memo("m.json"), Some(b"{}".to_vec()));
        let other = Cache::open(&path, &[], [7; KEY_BYTES]).unwrap();
        assert_eq!(other.memo("m.json"), None);
        std::fs::write(path.join("m.json"), b"{}").unwrap();
        assert_eq!(cache.memo("m.json"), None);
        std::fs::remove_dir_all(&path).unwrap();
    }

    fn cache_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wexec-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn an_artifact_that_does_not_match_its_digest_is_never_loaded() {
        let path = cache_dir("digest");
        let cache = Cache::open(&path, &[], KEY).unwrap();
        let dir = cache.handle.as_fd();
        let check = || verified(dir, "k.cwasm", "k.blake3", &KEY);
        assert_eq!(check(), Ok(None));
        write_atomically(dir, "k.cwasm", b"compiled", true).unwrap();
        assert!(check().unwrap_err().contains("no digest"));
        // Anyone can compute the unkeyed hash, or a hash with another key.
        for forged in [
            blake3::hash(b"compiled").to_hex().to_string(),
            digest(&[7; KEY_BYTES], "k.cwasm", b"compiled"),
            // The right key, but another file's name: a genuine artifact copied over.
            digest(&KEY, "other.cwasm", b"compiled"),
        ] {
            write_atomically(dir, "k.blake3", forged.as_bytes(), true).unwrap();
            assert_eq!(check(), Err("does not match its digest".into()));
        }
        write_atomically(
            dir,
            "k.blake3",
            digest(&KEY, "k.cwasm", b"compiled").as_bytes(),
            true,
        )
        .unwrap();
        assert_eq!(check(), Ok(Some(b"compiled".to_vec())));
        std::fs::write(path.join("k.cwasm"), b"swapped!").unwrap();
        assert_eq!(check(), Err("does not match its digest".into()));
        std::fs::remove_file(path.join("k.cwasm")).unwrap();
        std::os::unix::fs::symlink(path.join("k.blake3"), path.join("k.cwasm")).unwrap();
        assert!(check().unwrap_err().contains("cannot be read"));
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn the_opened_directory_is_used_whatever_becomes_of_its_path() {
        let path = cache_dir("moved");
        let cache = Cache::open(&path, &[], KEY).unwrap();
        let elsewhere = cache_dir("moved-away");
        std::fs::rename(&path, &elsewhere).unwrap();
        std::fs::create_dir(&path).unwrap();
        write_atomically(cache.handle.as_fd(), "k.cwasm", b"compiled", true).unwrap();
        assert!(elsewhere.join("k.cwasm").is_file());
        assert!(!path.join("k.cwasm").exists());
        std::fs::remove_dir_all(&path).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }

    #[test]
    fn a_path_through_a_link_inside_an_exposed_directory_is_refused() {
        let root = cache_dir("linked");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink("real", root.join("link")).unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        let through = root.join("link/wexec");
        assert!(Cache::open(&through, std::slice::from_ref(&root), KEY).is_none());
        // Outside the exposed directories a link is the operator's own business.
        assert!(Cache::open(&through, &[root.join("real")], KEY).is_some());
        assert!(Cache::open(&root.join("real/wexec"), std::slice::from_ref(&root), KEY).is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn only_a_private_directory_of_this_user_is_used() {
        let dir = cache_dir("private");
        assert!(Cache::open(&dir, &[], KEY).is_some());
        for mode in [0o777, 0o755, 0o750] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(Cache::open(&dir, &[], KEY).is_none(), "{mode:o}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
