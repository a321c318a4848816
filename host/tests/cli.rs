//! The `wexec` command line. Also guarantees `cargo test` builds the binary that the
//! end-to-end tests in `tests/` drive (cargo builds a package's binaries for its integration
//! tests).

use std::process::Command;

fn wexec() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_wexec"));
    command.env_remove("WEXEC_TOKEN");
    command
}

#[test]
fn version_prints_the_crate_version() {
    let output = wexec().arg("--version").output().unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("wexec {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn startup_errors_go_to_stderr_with_a_nonzero_status() {
    let output = wexec()
        .args(["--listen", "ws://0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "wexec: refusing to listen on ws://0.0.0.0:0 without a token; set --token or WEXEC_TOKEN"
    );
}
