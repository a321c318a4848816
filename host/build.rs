//! Builds the bundled plugins (`plugins/fs`, `plugins/http`, `plugins/env`) for
//! `wasm32-wasip2` so the `wexec` binary embeds them. A nested cargo with its own target
//! directory, as wasmtime builds its test programs, so it never waits on the outer build.

use std::path::{Path, PathBuf};
use std::process::Command;

const PLUGINS: [(&str, &str); 3] = [
    ("fs", "WEXEC_PLUGIN_FS_WASM"),
    ("http", "WEXEC_PLUGIN_HTTP_WASM"),
    ("env", "WEXEC_PLUGIN_ENV_WASM"),
];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
    for (name, _) in PLUGINS {
        println!("cargo:rerun-if-changed=../plugins/{name}");
    }
    println!("cargo:rerun-if-changed=../wit");
    println!("cargo:rerun-if-changed=../guest-sdk");
    if !wasm_target_installed() {
        eprintln!(
            "error: wexec embeds plugins built for wasm32-wasip2, which this toolchain lacks: run `rustup target add wasm32-wasip2`"
        );
        std::process::exit(1);
    }
    let target_dir = root.join("target").join("plugins");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        // Embedded plugins need no debug info. One codegen unit with LTO lets serde_json, the
        // SDK and the bindings inline into the handlers (guest time per call is in every
        // plugin round trip).
        .args([
            "--config",
            "profile.release.debug=false",
            "--config",
            "profile.release.strip=true",
            "--config",
            "profile.release.lto=true",
            "--config",
            "profile.release.codegen-units=1",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&root)
        // The outer build's settings are for the host target, not for the plugins.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET");
    for (name, _) in PLUGINS {
        command.args(["-p", &format!("wexec-plugin-{name}")]);
    }
    if !command.status().is_ok_and(|status| status.success()) {
        eprintln!("error: building wexec's bundled plugins for wasm32-wasip2 failed (see above)");
        std::process::exit(1);
    }
    for (name, variable) in PLUGINS {
        let wasm = target_dir
            .join("wasm32-wasip2")
            .join("release")
            .join(format!("wexec_plugin_{name}.wasm"));
        println!("cargo:rustc-env={variable}={}", wasm.display());
    }
}

/// Whether the compiler has the standard library for `wasm32-wasip2`.
fn wasm_target_installed() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .is_some_and(|sysroot| {
            Path::new(sysroot.trim())
                .join("lib/rustlib/wasm32-wasip2")
                .is_dir()
        })
}
