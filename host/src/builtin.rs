//! The plugins bundled with wexec, embedded in the binary by `build.rs`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::grants::{FsRoot, Grants, HostPattern};
use crate::runtime::{Limits, PluginSpec};

/// A bundled component and its SHA-256, computed by `build.rs` from the same file.
type Bundled = (&'static [u8], &'static str);

/// The component `build.rs` names `WEXEC_PLUGIN_<NAME>_WASM`, and its digest.
macro_rules! bundled {
    ($name:literal) => {
        (
            include_bytes!(env!(concat!("WEXEC_PLUGIN_", $name, "_WASM"))),
            env!(concat!("WEXEC_PLUGIN_", $name, "_WASM_SHA256")),
        )
    };
}

static FS: Bundled = bundled!("FS");
static HTTP: Bundled = bundled!("HTTP");
static ENV: Bundled = bundled!("ENV");
static CONFIG: Bundled = bundled!("CONFIG");
static DISCOVERY: Bundled = bundled!("DISCOVERY");

/// `fs` with the `--fs-root` roots (read-write), `http` with the `--allow-host` patterns and
/// the `--allow-header-env` variables, `env`, which needs nothing, `config`, which reads
/// Codex's config files: `/etc/codex`, the Codex home and the fs roots, read-only
/// (docs/protocol.md §7.5), and `discovery`, which reads plugins and skills there and in
/// `$HOME/.agents`, read-only (§7.6).
pub fn specs(
    fs_roots: &[std::path::PathBuf],
    allow_hosts: &[HostPattern],
    header_env: &BTreeSet<String>,
    limits: Limits,
) -> Vec<PluginSpec> {
    let spec = |name: &str, (bytes, sha256): Bundled, grants: Grants| PluginSpec {
        origin: format!("built-in {name}"),
        bytes: bytes::Bytes::from_static(bytes),
        grants,
        limits,
        builtin: true,
        sha256: Some(sha256),
    };
    vec![
        spec(
            "fs",
            FS,
            Grants {
                fs_roots: fs_roots
                    .iter()
                    .map(|path| FsRoot {
                        path: path.clone(),
                        writable: true,
                    })
                    .collect(),
                ..Grants::default()
            },
        ),
        spec(
            "http",
            HTTP,
            Grants {
                allow_hosts: allow_hosts.to_vec(),
                env_vars: header_env.clone(),
                ..Grants::default()
            },
        ),
        spec("env", ENV, Grants::default()),
        spec(
            "config",
            CONFIG,
            Grants {
                fs_roots: read_only_roots(fs_roots, &[]),
                env_vars: BTreeSet::from(["CODEX_HOME".to_owned()]),
                ..Grants::default()
            },
        ),
        spec(
            "discovery",
            DISCOVERY,
            Grants {
                fs_roots: read_only_roots(fs_roots, &[".agents"]),
                env_vars: BTreeSet::from(["CODEX_HOME".to_owned()]),
                ..Grants::default()
            },
        ),
    ]
}

/// Read-only roots for Codex's own files: the fs roots, and `/etc/codex`, the Codex home and
/// each of `home_dirs` under `$HOME` where they are directories now (canonical, as roots are).
fn read_only_roots(fs_roots: &[PathBuf], home_dirs: &[&str]) -> Vec<FsRoot> {
    let var = |name| std::env::var(name).ok();
    let home = var("HOME").filter(|home| !home.is_empty());
    let codex_home = crate::protocol::codex_home(var("CODEX_HOME").as_deref(), home.as_deref());
    let in_home = home_dirs
        .iter()
        .filter_map(|dir| Some(PathBuf::from(home.as_deref()?).join(dir)));
    let codex_dirs = [Some(PathBuf::from("/etc/codex")), codex_home]
        .into_iter()
        .flatten()
        .chain(in_home)
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .filter(|dir| dir.is_dir());
    let mut roots: Vec<PathBuf> = Vec::new();
    for dir in fs_roots.iter().cloned().chain(codex_dirs) {
        if !roots.contains(&dir) {
            roots.push(dir);
        }
    }
    roots
        .into_iter()
        .map(|path| FsRoot {
            path,
            writable: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    #[test]
    fn the_digests_built_in_are_the_components() {
        for (bytes, sha256) in [FS, HTTP, ENV, CONFIG, DISCOVERY] {
            let digest: String = (Sha256::digest(bytes).iter())
                .map(|byte| format!("{byte:02x}"))
                .collect();
            assert_eq!(digest, sha256);
        }
    }
}
