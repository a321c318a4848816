//! Nothing a confined process starts outlives it (docs/protocol.md §8.8): its PID namespace's
//! init is tied to its helper, and the helper to wexec, so `setsid` and double-forked
//! descendants die with the process, its session and wexec, SIGKILL included.

use std::time::Duration;

use serde_json::{Value, json};
use wexec_tests::{Client, TempDir, spawn_stdio};

use super::{none_left, wait_for_pids};

/// A tree that escapes its group: a `setsid` leader, its child and a double-forked `setsid`
/// orphan, each a `sleep` carrying `marker`; the process itself then runs `then`.
fn tree(dir: &std::path::Path, marker: &str, then: &str) -> Value {
    let script = format!(
        "setsid sh -c 'sleep {marker} & (setsid sleep {marker} &); exec sleep {marker}' & {then}"
    );
    json!({
        "processId": "tree",
        "argv": ["sh", "-c", script],
        "cwd": dir.display().to_string(),
        "env": {"PATH": "/usr/bin:/bin"},
        "tty": false,
    })
}

async fn start_tree(client: &mut Client, dir: &std::path::Path, marker: &str, then: &str) {
    let result = client.call("process/start", tree(dir, marker, then)).await;
    assert_eq!(result["sandboxType"], "linuxSeccomp");
    wait_for_pids(marker, 3).await;
}

#[tokio::test]
async fn terminate_kills_the_whole_confined_tree() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let marker = "300.1801";
    start_tree(&mut client, dir.path(), marker, "exec sleep 300").await;
    let result = client
        .call("process/terminate", json!({"processId": "tree"}))
        .await;
    assert_eq!(result, json!({"running": true}));
    assert!(none_left(marker, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_program_that_exits_takes_its_descendants_with_it() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let marker = "300.1802";
    start_tree(&mut client, dir.path(), marker, "sleep 0.3; exit 4").await;
    assert!(none_left(marker, Duration::from_secs(5)).await);
    let read = client
        .call("process/read", json!({"processId": "tree", "waitMs": 3000}))
        .await;
    assert_eq!(read["exitCode"], 4, "{read}");
}

#[tokio::test]
async fn stdin_eof_sigterm_and_sigkill_of_wexec_leave_nothing() {
    for (case, marker) in [
        ("eof", "300.1803"),
        ("TERM", "300.1804"),
        ("KILL", "300.1805"),
    ] {
        let dir = TempDir::new();
        let root = dir.path().display().to_string();
        let (mut server, mut client) = spawn_stdio(&["--fs-root", &root]);
        client.handshake().await;
        start_tree(&mut client, dir.path(), marker, "exec sleep 300").await;
        match case {
            "eof" => client.close().await,
            signal => server.kill_with(signal).await,
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
        assert!(none_left(marker, Duration::from_secs(5)).await, "{case}");
    }
}

/// An unconfined process runs with wexec's rights and can kill its own helper (its parent),
/// whose tree its descendants then leave (docs/sandbox.md, "What is not protected"). With a
/// session's pids cgroup (`--session-processes`) they stay in the session's group, which only
/// root can leave, and wexec kills what is left there when the session ends.
#[tokio::test]
async fn descendants_that_left_their_helper_end_with_their_sessions_cgroup() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    // Unique to this run: a failed run leaves its escapees behind.
    let marker = format!("300.18{:07}", std::process::id());
    let marker = marker.as_str();
    let (mut server, mut client) = spawn_stdio(&[
        "--fs-root",
        &root,
        "--sandbox",
        "danger-full-access",
        "--session-processes",
        "64",
    ]);
    client.handshake().await;
    let script = format!(
        "setsid sh -c 'sleep {marker} & exec sleep {marker}' & sleep 0.3; kill -9 $PPID; exit 0"
    );
    let params = json!({
        "processId": "escape",
        "argv": ["sh", "-c", script],
        "cwd": root,
        "env": {"PATH": "/usr/bin:/bin"},
        "tty": false,
    });
    let started = client.request("process/start", params).await;
    if started["error"]["message"]
        .as_str()
        .is_some_and(|message| message.contains("pids cgroup"))
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI has a writable cgroup v1 pids hierarchy: {started}"
        );
        eprintln!("skipped: no writable cgroup v1 pids hierarchy here: {started}");
        return;
    }
    assert_eq!(started["result"]["sandboxType"], "none", "{started}");
    // The program ended with its helper; the setsid pair has left the helper's tree.
    loop {
        let notification = client.next_notification().await;
        if notification["method"] == "process/exited" {
            break;
        }
    }
    assert_eq!(wait_for_pids(marker, 2).await.len(), 2);
    client.close().await;
    let _ = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
    assert!(none_left(marker, Duration::from_secs(5)).await);
}
