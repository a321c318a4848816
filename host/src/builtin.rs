//! The plugins bundled with wexec, embedded in the binary by `build.rs`.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::grants::{FsRoot, Grants, HostPattern};
use crate::runtime::{Limits, PluginSpec};

static FS: &[u8] = include_bytes!(env!("WEXEC_PLUGIN_FS_WASM"));
static HTTP: &[u8] = include_bytes!(env!("WEXEC_PLUGIN_HTTP_WASM"));
static ENV: &[u8] = include_bytes!(env!("WEXEC_PLUGIN_ENV_WASM"));

/// `fs` with the `--fs-root` roots (read-write), `http` with the `--allow-host` patterns and
/// the `--allow-header-env` variables, and `env`, which needs nothing.
pub fn specs(
    fs_roots: &[std::path::PathBuf],
    allow_hosts: &[HostPattern],
    header_env: &BTreeSet<String>,
    limits: Limits,
) -> Vec<PluginSpec> {
    let spec = |name: &str, bytes: &'static [u8], grants: Grants| PluginSpec {
        origin: format!("built-in {name}"),
        bytes: Arc::from(bytes),
        grants,
        limits,
        builtin: true,
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
    ]
}
