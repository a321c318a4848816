//! Builds the test guests (`plugins/test-guests/*`) and the example plugins
//! (`plugins/examples/*`) for `wasm32-wasip2` and tells the tests where they are
//! (`WEXEC_PROBE_WASM`, `WEXEC_HOSTILE_WASM`, `WEXEC_HELLO_WASM`, `WEXEC_GREP_WASM`). A nested cargo with its own target directory, as
//! wasmtime builds its test programs, so it never waits on the outer build's lock.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.parent().map(PathBuf::from).unwrap_or_default();
    let target_dir = root.join("target").join("guests");
    println!("cargo:rerun-if-changed=../plugins/test-guests");
    println!("cargo:rerun-if-changed=../plugins/examples");
    println!("cargo:rerun-if-changed=../wit");
    println!("cargo:rerun-if-changed=../guest-sdk");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "-p",
            "wexec-probe",
            "-p",
            "wexec-hostile",
            "-p",
            "wexec-example-hello",
            "-p",
            "wexec-example-grep",
            "--target-dir",
        ])
        .arg(&target_dir)
        .current_dir(&root)
        // The outer build's settings are for the host target, not for the guests.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET")
        .status();
    let built = status.as_ref().is_ok_and(std::process::ExitStatus::success);
    if !built {
        println!(
            "cargo:warning=building the test guests for wasm32-wasip2 failed; if the target is missing, run `rustup target add wasm32-wasip2`"
        );
        std::process::exit(1);
    }
    let wasm = target_dir
        .join("wasm32-wasip2")
        .join("release")
        .join("wexec_probe.wasm");
    println!("cargo:rustc-env=WEXEC_PROBE_WASM={}", wasm.display());
    let hostile = wasm.with_file_name("wexec_hostile.wasm");
    println!("cargo:rustc-env=WEXEC_HOSTILE_WASM={}", hostile.display());
    let hello = wasm.with_file_name("wexec_example_hello.wasm");
    println!("cargo:rustc-env=WEXEC_HELLO_WASM={}", hello.display());
    let grep = wasm.with_file_name("wexec_example_grep.wasm");
    println!("cargo:rustc-env=WEXEC_GREP_WASM={}", grep.display());
}
