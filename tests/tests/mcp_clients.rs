//! `wexec mcp` driven by real MCP clients nobody here wrote: the official Python SDK (PyPI
//! `mcp` 2.3) in its `auto` mode (`server/discover` first, the stateless 2026-07-28 era) and
//! its `legacy` mode (`initialize`), over stdio and over Streamable HTTP, calling every tool
//! and checking the denials (tests/scripts/mcp_client.py). `WEXEC_MCP_PYTHON` names a Python
//! with the SDK installed (`.ci/run` makes one); without it the tests skip, except under CI.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use wexec_tests::{TempDir, real_client, wexec_bin};

const SDK: &str = "a python3 with the PyPI `mcp` 2.3 SDK installed";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mcp_client.py")
}

/// A root the tools may use, and a directory beside it they may not.
struct Dirs {
    _dir: TempDir,
    root: String,
    outside: String,
}

fn dirs() -> Dirs {
    let dir = TempDir::new();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret.txt"), "secret").expect("write");
    Dirs {
        root: root.display().to_string(),
        outside: outside.display().to_string(),
        _dir: dir,
    }
}

/// `wexec mcp`'s options for `dirs`: files in the root, processes writing only there, fetches
/// to loopback.
fn options(dirs: &Dirs) -> Vec<String> {
    [
        "--fs-root",
        &dirs.root,
        "--writable-root",
        &dirs.root,
        "--allow-host",
        "127.0.0.1:*",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Runs the client script; returns what it printed on success.
fn run_client(python: &str, args: &[String]) -> Value {
    let output = Command::new(python)
        .arg(script())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the MCP client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the MCP client failed ({}):\n{}\n{stdout}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("the client's report")
}

fn over_stdio(mode: &str, expected_version: &str) {
    let Some(python) = real_client("WEXEC_MCP_PYTHON", SDK) else {
        return;
    };
    let dirs = dirs();
    let mut args: Vec<String> = [
        "--mode",
        mode,
        "--root",
        &dirs.root,
        "--outside",
        &dirs.outside,
        "--",
    ]
    .map(str::to_owned)
    .to_vec();
    args.push(wexec_bin().display().to_string());
    args.push("mcp".to_owned());
    args.extend(options(&dirs));
    let report = run_client(&python, &args);
    assert_eq!(report["protocol_version"], expected_version, "{report}");
    assert!(!dirs.outside.is_empty() && Path::new(&dirs.outside).join("secret.txt").exists());
}

fn over_http(mode: &str, expected_version: &str) {
    let Some(python) = real_client("WEXEC_MCP_PYTHON", SDK) else {
        return;
    };
    let dirs = dirs();
    let options = options(&dirs);
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let (_server, url) = wexec_tests::spawn_mcp_http(&options, "t0ken");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let args: Vec<String> = [
        "--mode",
        mode,
        "--url",
        &url,
        "--token",
        "t0ken",
        "--root",
        &dirs.root,
        "--outside",
        &dirs.outside,
    ]
    .map(str::to_owned)
    .to_vec();
    let report = run_client(&python, &args);
    assert_eq!(report["protocol_version"], expected_version, "{report}");
}

#[test]
fn python_sdk_auto_mode_over_stdio_discovers_and_calls_every_tool() {
    over_stdio("auto", "2026-07-28");
}

#[test]
fn python_sdk_legacy_mode_over_stdio_initializes_and_calls_every_tool() {
    over_stdio("legacy", "2025-11-25");
}

#[test]
fn python_sdk_auto_mode_over_streamable_http() {
    over_http("auto", "2026-07-28");
}

#[test]
fn python_sdk_legacy_mode_over_streamable_http() {
    over_http("legacy", "2025-11-25");
}
