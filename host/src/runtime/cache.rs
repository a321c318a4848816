//! Compiled components cached on disk, keyed by the component's content hash and the engine's
//! configuration, so a restart does not recompile (a compile costs hundreds of milliseconds, a
//! cached load a few).
//!
//! A cached artifact is native code wexec will run, so it is trusted only as far as this
//! holds (docs/plugins.md, "The compile cache"):
//! - the directory is private to this user (created 0700, checked), and no plugin can reach
//!   it: the filesystem capability hides it inside every root ([`Cache::dir`]), and a root
//!   inside it is refused;
//! - every artifact has a SHA-256 digest written beside it when it was compiled; an artifact
//!   that does not match it (changed, swapped, truncated) is compiled again and rewritten;
//! - the artifact is read into memory, checked, and deserialized from there, so a file changed
//!   under a running wexec cannot affect it (a mapped file cut short would raise SIGBUS).

use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

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

/// The cache directory, created and checked.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// Opens (creating, mode 0700) `dir`; `None`, with a warning, unless it is a directory owned
    /// by this user that nobody else can write.
    pub fn open(dir: &Path) -> Option<Self> {
        if let Err(err) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
        {
            tracing::warn!(
                "compile cache disabled: cannot create {}: {err}",
                dir.display()
            );
            return None;
        }
        let meta = std::fs::symlink_metadata(dir).ok()?;
        let ours = meta.uid() == rustix::process::geteuid().as_raw();
        let private = meta.permissions().mode() & 0o022 == 0;
        if !(meta.is_dir() && ours && private) {
            tracing::warn!(
                "compile cache disabled: {} is not a private directory of this user",
                dir.display()
            );
            return None;
        }
        let dir = std::fs::canonicalize(dir).ok()?;
        Some(Self { dir })
    }

    /// The canonical directory: the filesystem capability never exposes it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Compiles `bytes`, or loads the artifact an earlier compile cached, once it matches its
    /// digest.
    pub fn load_or_compile(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        let key = cache_key(engine, bytes);
        let artifact = self.dir.join(format!("{key}.cwasm"));
        let digest = self.dir.join(format!("{key}.sha256"));
        match verified(&artifact, &digest) {
            Ok(Some(data)) => {
                #[expect(
                    unsafe_code,
                    reason = "loading a precompiled artifact is unsafe in wasmtime's API"
                )]
                // SAFETY: `data` is, byte for byte, what `serialize` below produced under a
                // name hashing the component and the engine configuration: its SHA-256 matches
                // the digest written with it, in a directory only this user can write and no
                // plugin can reach. wasmtime also checks the header and compatibility.
                let loaded = unsafe { Component::deserialize(engine, &data) };
                match loaded {
                    Ok(component) => return Ok(component),
                    Err(err) => tracing::warn!(
                        "ignoring unusable cached component {}: {err}",
                        artifact.display()
                    ),
                }
            }
            Ok(None) => {}
            Err(reason) => tracing::warn!(
                "recompiling: cached component {} {reason}",
                artifact.display()
            ),
        }
        let component = Component::new(engine, bytes)?;
        match component.serialize() {
            Ok(data) => {
                let sum = hex(&Sha256::digest(&data));
                // The artifact first: a digest without its artifact never matches.
                let written = write_atomically(&artifact, &data)
                    .and_then(|()| write_atomically(&digest, sum.as_bytes()));
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

/// The cached artifact, read into memory, if it is there and matches its digest; `Ok(None)`
/// when nothing is cached yet, `Err` naming what is wrong otherwise.
fn verified(artifact: &Path, digest: &Path) -> Result<Option<Vec<u8>>, String> {
    let data = match read_regular(artifact, MAX_ARTIFACT_BYTES) {
        Ok(data) => data,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(format!("cannot be read: {err}")),
    };
    let expected = read_regular(digest, 64).map_err(|err| format!("has no digest: {err}"))?;
    if expected != hex(&Sha256::digest(&data)).as_bytes() {
        return Err("does not match its digest".into());
    }
    Ok(Some(data))
}

/// Reads a regular file (never through a symlink, never blocking on a FIFO) of at most `limit`
/// bytes.
fn read_regular(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(path)?;
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

/// SHA-256 of the component, the engine's compatibility hash and wexec's version.
fn cache_key(engine: &Engine, bytes: &[u8]) -> String {
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = ShaHasher(Sha256::new());
    hasher.write(bytes);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.write(crate::environment::VERSION.as_bytes());
    hex(&hasher.0.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)?;
    file.write_all(data)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wexec-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn an_artifact_that_does_not_match_its_digest_is_never_loaded() {
        let dir = cache_dir("digest");
        std::fs::create_dir_all(&dir).unwrap();
        let (artifact, digest) = (dir.join("k.cwasm"), dir.join("k.sha256"));
        assert_eq!(verified(&artifact, &digest), Ok(None));
        write_atomically(&artifact, b"compiled").unwrap();
        assert!(
            verified(&artifact, &digest)
                .unwrap_err()
                .contains("no digest")
        );
        write_atomically(&digest, hex(&Sha256::digest(b"compiled")).as_bytes()).unwrap();
        assert_eq!(verified(&artifact, &digest), Ok(Some(b"compiled".to_vec())));
        std::fs::write(&artifact, b"swapped!").unwrap();
        assert_eq!(
            verified(&artifact, &digest),
            Err("does not match its digest".into())
        );
        std::fs::remove_file(&artifact).unwrap();
        std::os::unix::fs::symlink(dir.join("k.sha256"), &artifact).unwrap();
        assert!(
            verified(&artifact, &digest)
                .unwrap_err()
                .contains("cannot be read")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_a_private_directory_of_this_user_is_used() {
        let dir = cache_dir("private");
        assert!(Cache::open(&dir).is_some());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(Cache::open(&dir).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
