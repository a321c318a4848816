//! Compiled components cached on disk, keyed by the component's content hash and the engine's
//! configuration, so a restart does not recompile (a compile costs hundreds of milliseconds, a
//! cached load well under one).

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Where compiled components go: `$XDG_CACHE_HOME/wexec`, else `$HOME/.cache/wexec`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("wexec"))
}

/// Compiles `bytes`, or loads the artifact cached under `dir` from an earlier compile.
pub fn load_or_compile(
    engine: &Engine,
    bytes: &[u8],
    dir: Option<&Path>,
) -> wasmtime::Result<Component> {
    let Some(dir) = dir.filter(|dir| private_dir(dir)) else {
        return Component::new(engine, bytes);
    };
    let path = dir.join(format!("{}.cwasm", cache_key(engine, bytes)));
    if path.is_file() {
        #[expect(
            unsafe_code,
            reason = "loading a precompiled artifact is unsafe in wasmtime's API"
        )]
        // SAFETY: the file was written by `serialize` below into a directory only this user can
        // write (checked by `private_dir`), under a name that hashes the component and the
        // engine configuration; wasmtime also checks the artifact's header and compatibility.
        let loaded = unsafe { Component::deserialize_file(engine, &path) };
        match loaded {
            Ok(component) => return Ok(component),
            Err(err) => tracing::warn!(
                "ignoring unusable cached component {}: {err}",
                path.display()
            ),
        }
    }
    let component = Component::new(engine, bytes)?;
    match component.serialize() {
        Ok(artifact) => {
            if let Err(err) = write_atomically(&path, &artifact) {
                tracing::warn!(
                    "cannot cache compiled component at {}: {err}",
                    path.display()
                );
            }
        }
        Err(err) => tracing::warn!("cannot serialize compiled component: {err}"),
    }
    Ok(component)
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
    hasher
        .0
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Creates `dir` (mode 0700) if needed; true if it is a directory owned by this user that
/// nobody else can write, so its artifacts can be trusted.
fn private_dir(dir: &Path) -> bool {
    if let Err(err) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        tracing::warn!(
            "compile cache disabled: cannot create {}: {err}",
            dir.display()
        );
        return false;
    }
    let Ok(meta) = std::fs::metadata(dir) else {
        return false;
    };
    let ours = meta.uid() == rustix::process::geteuid().as_raw();
    let private = meta.permissions().mode() & 0o022 == 0;
    if !(meta.is_dir() && ours && private) {
        tracing::warn!(
            "compile cache disabled: {} is not a private directory of this user",
            dir.display()
        );
        return false;
    }
    true
}

fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(data)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}
