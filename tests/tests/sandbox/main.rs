//! The process sandbox against the real binary (docs/sandbox.md; docs/protocol.md §7.3, §8.10):
//! the `sandbox` objects real Codex 0.169 sends, under the operator ceiling, every assertion on
//! disk or on the wire.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

mod ceiling;
mod doctor;
mod escapes;
mod fs_methods;
mod landlock;
mod lifetime;
mod limits;
mod modes;
mod network;
mod placeholders;
mod secrets;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use wexec_tests::{Client, running_where};
pub use wexec_tests::{codex_read_only, codex_workspace_write, managed, special};

/// A launcher (for [`wexec_tests::command_under`]) that takes user namespaces away from
/// wexec for real, as Docker's default seccomp profile or Ubuntu's AppArmor restriction do:
/// a user namespace whose `max_user_namespaces` is 0. `None` (said, and a failure under
/// `CI`) where `unshare -U -r` cannot make one.
pub fn without_user_namespaces() -> Option<[&'static str; 6]> {
    let launcher = wexec_tests::WITHOUT_USER_NAMESPACES;
    let made = std::process::Command::new(launcher[0])
        .args(&launcher[1..])
        .arg("true")
        .status();
    if made.is_ok_and(|status| status.success()) {
        return Some(launcher);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: unshare -U -r cannot make the namespace-less environment this test needs"
    );
    eprintln!("skipped: unshare -U -r is not available here");
    None
}

/// A finished process, as `process/read` reported it.
#[derive(Debug)]
pub struct Run {
    /// The `process/start` result.
    pub start: Value,
    /// `exitCode`.
    pub exit: i64,
    /// `sandboxDenied`.
    pub denied: bool,
    /// `failure`.
    pub failure: Value,
    /// stdout and stderr, interleaved as read.
    pub output: String,
}

/// Runs `sh -c script` in `cwd` under `sandbox` (JSON `null` for none) to its close.
pub async fn run(client: &mut Client, id: &str, script: &str, cwd: &Path, sandbox: Value) -> Run {
    run_with(client, id, script, cwd, sandbox, json!({})).await
}

/// As [`run`], with more `process/start` params (`extra` members win).
pub async fn run_with(
    client: &mut Client,
    id: &str,
    script: &str,
    cwd: &Path,
    sandbox: Value,
    extra: Value,
) -> Run {
    let mut params = json!({
        "processId": id,
        "argv": ["sh", "-c", script],
        "cwd": cwd.display().to_string(),
        "env": {"PATH": "/usr/bin:/bin", "HOME": std::env::var("HOME").unwrap_or_default()},
        "tty": false,
        "sandbox": sandbox,
    });
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    let start = client.call("process/start", params).await;
    finish(client, id, start).await
}

/// Reads process `id` (started with reply `start`) to its close.
pub async fn finish(client: &mut Client, id: &str, start: Value) -> Run {
    let (read, output) = wexec_tests::read_to_close(client, id).await;
    Run {
        start,
        exit: read["exitCode"].as_i64().expect("exitCode"),
        denied: read["sandboxDenied"] == true,
        failure: read["failure"].clone(),
        output: String::from_utf8_lossy(&output).into_owned(),
    }
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// Host pids whose command line contains `marker` as an argument.
pub fn pids_with_argument(marker: &str) -> Vec<u32> {
    running_where(|cmdline| {
        cmdline
            .split(|&byte| byte == 0)
            .any(|argument| argument == marker.as_bytes())
    })
}

/// Waits until `count` processes carry `marker` (they started); returns them.
pub async fn wait_for_pids(marker: &str, count: usize) -> Vec<u32> {
    for _ in 0..500 {
        let pids = pids_with_argument(marker);
        if pids.len() >= count {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{count} processes with {marker} did not start");
}

/// Waits up to `within` until no process carries `marker`.
pub async fn none_left(marker: &str, within: Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if pids_with_argument(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pids_with_argument(marker).is_empty()
}
