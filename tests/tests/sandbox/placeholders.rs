//! Nothing of the sandbox stays in the user's tree (docs/sandbox.md, "Placeholders"): the empty
//! directories that hold an absent `.git`, `.agents`, `.codex` or `.aws` read-only exist only
//! while a process runs, are gone when its `process/closed` is sent, and a wexec killed by
//! SIGKILL has its leftovers removed by the next one that starts.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use wexec_tests::{Client, TempDir, spawn_stdio};

use super::{codex_workspace_write, none_left, wait_for_pids};

/// What `dir` holds, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `process/start` params of `sh -c script` in `cwd` under Codex's workspace-write.
fn start_params(id: &str, script: &str, cwd: &Path) -> Value {
    json!({
        "processId": id,
        "argv": ["sh", "-c", script],
        "cwd": cwd.display().to_string(),
        "env": {"PATH": "/usr/bin:/bin"},
        "tty": false,
        "sandbox": codex_workspace_write(cwd, "restricted", false),
    })
}

/// Waits for `process/closed` of `id`; returns the output the process wrote.
async fn until_closed(client: &mut Client, id: &str) -> String {
    use base64::Engine;
    let mut output = Vec::new();
    loop {
        let notification = client.next_notification().await;
        if notification["params"]["processId"] != id {
            continue;
        }
        match notification["method"].as_str() {
            Some("process/output") => output.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(notification["params"]["chunk"].as_str().expect("chunk"))
                    .expect("base64"),
            ),
            Some("process/closed") => return String::from_utf8_lossy(&output).into_owned(),
            _ => {}
        }
    }
}

#[tokio::test]
async fn nothing_is_left_in_the_tree_the_moment_a_process_has_closed() {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    // Back to back, as an agent runs its commands: each close leaves the directory as it was.
    for round in 0..5 {
        let id = format!("p{round}");
        let script = "ls -A; touch .git/x 2>/dev/null || echo held";
        client
            .call("process/start", start_params(&id, script, &work))
            .await;
        let output = until_closed(&mut client, &id).await;
        // While it ran, the absent names were there, empty and read-only.
        assert_eq!(
            output, ".agents\n.aws\n.codex\n.git\nheld\n",
            "round {round}"
        );
        assert_eq!(listing(&work), Vec::<String>::new(), "round {round}");
    }
}

#[tokio::test]
async fn while_a_process_runs_its_placeholders_are_visible_and_shared() {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let marker = "300.1811";
    for id in ["a", "b"] {
        client
            .call(
                "process/start",
                start_params(id, &format!("exec sleep {marker}"), &work),
            )
            .await;
    }
    wait_for_pids(marker, 2).await;
    // What remains visible on the host while a process runs (docs/sandbox.md).
    assert_eq!(listing(&work), [".agents", ".aws", ".codex", ".git"]);
    client
        .call("process/terminate", json!({"processId": "a"}))
        .await;
    until_closed(&mut client, "a").await;
    // The other process still needs them.
    assert_eq!(listing(&work), [".agents", ".aws", ".codex", ".git"]);
    client
        .call("process/terminate", json!({"processId": "b"}))
        .await;
    until_closed(&mut client, "b").await;
    assert_eq!(listing(&work), Vec::<String>::new());
}

#[tokio::test]
async fn a_sigkilled_wexecs_placeholders_are_removed_by_the_next_wexec() {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    // Not a placeholder: an empty directory of the user's, which must stay.
    let own = dir.path().join("mine/.codex");
    std::fs::create_dir_all(&own).expect("mkdir");
    let root = dir.path().display().to_string();
    let (mut server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let marker = "300.1812";
    client
        .call(
            "process/start",
            start_params("p", &format!("exec sleep {marker}"), &work),
        )
        .await;
    wait_for_pids(marker, 1).await;
    assert_eq!(listing(&work), [".agents", ".aws", ".codex", ".git"]);
    server.kill_with("KILL").await;
    let _ = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
    assert!(none_left(marker, Duration::from_secs(5)).await);
    // A SIGKILLed wexec cleans up nothing: the next wexec, whatever it serves, does once its
    // startup is over (any wexec of this user that starts meanwhile may be the one).
    let other = TempDir::new();
    let other_root = other.path().display().to_string();
    let (_next, mut next) = spawn_stdio(&["--fs-root", &other_root]);
    next.handshake().await;
    for _ in 0..250 {
        if listing(&work).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(listing(&work), Vec::<String>::new());
    assert!(own.is_dir());
}
