//! Builds the bundled plugins (`plugins/fs`, `plugins/http`, `plugins/env`, `plugins/config`,
//! `plugins/discovery`) for
//! `wasm32-wasip2` so the `wexec` binary embeds them (`src/builtin.rs`).

use sha2::{Digest, Sha256};
use wexec_wasm_build::Profile;

const PLUGINS: [(&str, &str); 5] = [
    ("fs", "WEXEC_PLUGIN_FS_WASM"),
    ("http", "WEXEC_PLUGIN_HTTP_WASM"),
    ("env", "WEXEC_PLUGIN_ENV_WASM"),
    ("config", "WEXEC_PLUGIN_CONFIG_WASM"),
    ("discovery", "WEXEC_PLUGIN_DISCOVERY_WASM"),
];

fn main() {
    let packages = PLUGINS.map(|(name, _)| format!("wexec-plugin-{name}"));
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    let watch = [
        "plugins/fs",
        "plugins/http",
        "plugins/env",
        "plugins/config",
        "plugins/discovery",
        "wit",
        "guest-sdk",
        "host/protocol",
    ];
    let dir = wexec_wasm_build::build(&packages, Profile::Embedded, &watch);
    for (name, variable) in PLUGINS {
        let wasm = dir.join(format!("wexec_plugin_{name}.wasm"));
        println!("cargo:rustc-env={variable}={}", wasm.display());
        // Its cache key's digest, so that a start need not hash the component.
        let bytes = std::fs::read(&wasm).unwrap_or_else(|err| {
            panic!("cannot read {}: {err}", wasm.display());
        });
        let digest: String = (Sha256::digest(&bytes).iter())
            .map(|byte| format!("{byte:02x}"))
            .collect();
        println!("cargo:rustc-env={variable}_SHA256={digest}");
    }
}
