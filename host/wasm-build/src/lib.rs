//! What `host/build.rs` (the bundled plugins) and `tests/build.rs` (the test guests and
//! examples) share: building workspace crates for `wasm32-wasip2` from a build script.
//!
//! A nested cargo with its own target directory under the build script's `OUT_DIR`, as wasmtime
//! builds its test programs: it never waits on the outer build's lock, and writes nothing
//! outside cargo's output folders. The outer build's settings are for the host target, so they
//! are not passed on.

#![expect(
    clippy::print_stdout,
    reason = "a build script talks to cargo through stdout"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target the components are built for.
pub const TARGET: &str = "wasm32-wasip2";

/// How the crates are compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `--release` as the workspace configures it.
    Release,
    /// `--release` with one codegen unit, LTO, no debug info and stripped: for components
    /// embedded in the binary, where guest time per call is in every plugin round trip.
    Embedded,
}

/// Builds `packages` (package names of this workspace) and returns the directory holding their
/// `.wasm` files. Exits the build script with a message saying what to do when the target is
/// missing or the build fails; tells cargo to rerun it when a crate under `watch` changes.
pub fn build(packages: &[&str], profile: Profile, watch: &[&str]) -> PathBuf {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = workspace_root(&manifest);
    for path in watch {
        println!("cargo:rerun-if-changed={}", root.join(path).display());
    }
    if !target_installed() {
        fail(&format!(
            "wexec builds plugins for {TARGET}, which this toolchain lacks: run `rustup target add {TARGET}`"
        ));
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let target_dir = out_dir.join("wasm");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args(["build", "--release", "--target", TARGET]);
    if profile == Profile::Embedded {
        command.args([
            "--config",
            "profile.release.debug=false",
            "--config",
            "profile.release.strip=true",
            "--config",
            "profile.release.lto=true",
            "--config",
            "profile.release.codegen-units=1",
        ]);
    }
    for package in packages {
        command.args(["-p", package]);
    }
    command
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&root)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET");
    if !command.status().is_ok_and(|status| status.success()) {
        fail(&format!(
            "building {} for {TARGET} failed (see above)",
            packages.join(", ")
        ));
    }
    target_dir.join(TARGET).join("release")
}

/// The workspace holding `manifest_dir`: the nearest ancestor whose Cargo.toml has
/// `[workspace]`.
fn workspace_root(manifest_dir: &Path) -> PathBuf {
    manifest_dir
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|text| text.lines().any(|line| line.trim() == "[workspace]"))
        })
        .unwrap_or(manifest_dir)
        .to_path_buf()
}

/// Whether the compiler has the standard library for [`TARGET`].
fn target_installed() -> bool {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .is_some_and(|sysroot| {
            Path::new(sysroot.trim())
                .join("lib/rustlib")
                .join(TARGET)
                .is_dir()
        })
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    println!("cargo:warning={message}");
    std::process::exit(1);
}
