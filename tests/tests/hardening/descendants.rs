//! No descendant outlives its session or wexec: a process's whole tree — `setsid` and
//! double-forked children included — is killed when the process is terminated, when its
//! session ends (stdin EOF, a detached session's expiry) and when wexec ends by any signal,
//! SIGKILL included (docs/protocol.md §8.8).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir, running, running_where, spawn_stdio, spawn_websocket};

/// Starts a tree that escapes its process group three ways, writing each pid to a file in
/// `dir`: a `setsid` session leader, its child, and a double-forked `setsid` grandchild
/// orphaned at once. The process itself then runs `main_then` (exits, or waits).
fn escaping_tree(dir: &Path, main_then: &str) -> Value {
    let script = format!(
        r#"setsid sh -c 'sleep 300 & echo $! > "$0/child"; (setsid sleep 301 & echo $! > "$0/orphan"); echo $$ > "$0/leader"; exec sleep 302' "$1" & {main_then}"#
    );
    json!({
        "processId": "tree",
        "argv": ["sh", "-c", script, "sh", dir.display().to_string()],
        "cwd": "/",
        "env": {"PATH": "/usr/bin:/bin"},
        "tty": false,
    })
}

/// The three pids, once the tree has written them all.
async fn tree_pids(dir: &Path) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<u32> = ["leader", "child", "orphan"]
            .iter()
            .filter_map(|name| std::fs::read_to_string(dir.join(name)).ok())
            .filter_map(|text| text.trim().parse().ok())
            .collect();
        if pids.len() == 3 {
            assert!(pids.iter().all(|&pid| running(pid)), "{pids:?}");
            return pids;
        }
        assert!(Instant::now() < deadline, "the tree did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts every pid is gone within a few seconds (the termination grace is 2 s).
async fn all_gone(pids: &[u32], case: &str) {
    let deadline = Instant::now() + Duration::from_secs(6);
    while pids.iter().any(|&pid| running(pid)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let survivors: Vec<&u32> = pids.iter().filter(|&&pid| running(pid)).collect();
    assert!(survivors.is_empty(), "{case}: {survivors:?} outlived it");
}

async fn stdio_with_tree(dir: &TempDir, main_then: &str) -> (Server, Client, Vec<u32>) {
    let (server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    client
        .call("process/start", escaping_tree(dir.path(), main_then))
        .await;
    let pids = tree_pids(dir.path()).await;
    (server, client, pids)
}

#[tokio::test]
async fn the_whole_tree_ends_with_stdin_eof() {
    let dir = TempDir::new();
    // The process itself exits at once; its tree lives on until the session ends.
    let (mut server, mut client, pids) = stdio_with_tree(&dir, "exit 0").await;
    client.close().await;
    assert!(server.wait().await.success());
    all_gone(&pids, "stdin EOF").await;
}

#[tokio::test]
async fn the_whole_tree_ends_with_sigterm() {
    let dir = TempDir::new();
    let (mut server, _client, pids) = stdio_with_tree(&dir, "sleep 600").await;
    server.kill_with("TERM").await;
    assert!(server.wait().await.success());
    all_gone(&pids, "SIGTERM").await;
}

#[tokio::test]
async fn the_whole_tree_ends_when_wexec_is_killed() {
    let dir = TempDir::new();
    let (mut server, _client, pids) = stdio_with_tree(&dir, "sleep 600").await;
    server.kill_with("KILL").await;
    let _ = server.wait().await;
    all_gone(&pids, "SIGKILL of wexec").await;
}

#[tokio::test]
async fn terminate_ends_the_whole_tree() {
    let dir = TempDir::new();
    let (_server, mut client, pids) = stdio_with_tree(&dir, "sleep 600").await;
    assert_eq!(
        client
            .call("process/terminate", json!({"processId": "tree"}))
            .await,
        json!({"running": true})
    );
    all_gone(&pids, "process/terminate").await;
    assert_eq!(
        client.call("environment/status", json!({})).await,
        json!({"status": "ready"})
    );
}

#[tokio::test]
async fn the_whole_tree_ends_when_a_detached_session_expires() {
    let dir = TempDir::new();
    let server = spawn_websocket(&["--sandbox", "danger-full-access", "--detach-ttl", "1"]).await;
    let mut client = server.connect().await;
    client.handshake().await;
    client
        .call("process/start", escaping_tree(dir.path(), "exit 0"))
        .await;
    let pids = tree_pids(dir.path()).await;
    client.close().await;
    drop(client);
    server.stderr_containing("detached session expired").await;
    all_gone(&pids, "session expiry").await;
}

/// Every process below `pid`, as `(pid, state)`, from the `children` files.
fn tree_of(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let mut pending = vec![pid];
    while let Some(pid) = pending.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children
                .split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
            {
                let state = std::fs::read_to_string(format!("/proc/{child}/stat"))
                    .ok()
                    .and_then(|stat| {
                        Some(
                            stat.rsplit_once(')')?
                                .1
                                .split_whitespace()
                                .next()?
                                .to_owned(),
                        )
                    })
                    .unwrap_or_default();
                found.push((child, state));
                pending.push(child);
            }
        }
    }
    found
}

/// Processes whose command line contains `marker`.
fn marked(marker: &str) -> Vec<u32> {
    running_where(|cmdline| String::from_utf8_lossy(cmdline).contains(marker))
}

/// An unconfined program's orphans are reaped as they end, not when it does (400 of them
/// used to wait as zombies, and a long-lived program could fill the process table); and a
/// descendant that keeps forking and exiting — a new pid each time — is caught when wexec is
/// killed (its helper used to chase it through all of `/proc`, at 100% CPU, for ever).
#[tokio::test]
async fn orphans_are_reaped_at_once_and_a_pid_hopper_dies_with_wexec() {
    let (mut server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let marker = format!("wexec-hop-{}", std::process::id());
    // Bounded by itself (20 s), should the test fail.
    let script = format!(
        r#"for i in $(seq 400); do (true &); done; perl -e '$0="{marker}"; my $end = time + 20; while (time < $end) {{ exit if fork }}' & sleep 600"#
    );
    client
        .call(
            "process/start",
            json!({"processId": "hop", "argv": ["sh", "-c", script], "cwd": "/",
                   "env": {"PATH": "/usr/bin:/bin"}, "tty": false}),
        )
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while marked(&marker).is_empty() {
        assert!(Instant::now() < deadline, "the hopper did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The 400 orphans were made before the hopper started. A hop in flight may be a zombie for
    // an instant; 400 may not, and they would wait for the program's end (600 s) unreaped.
    let zombies = || {
        tree_of(server.pid())
            .iter()
            .filter(|(_, state)| state == "Z")
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while zombies() >= 20 {
        assert!(
            Instant::now() < deadline,
            "{} zombies under wexec",
            zombies()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill_with("KILL").await;
    let _ = server.wait().await;
    let deadline = Instant::now() + Duration::from_secs(6);
    while !marked(&marker).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        marked(&marker),
        Vec::<u32>::new(),
        "the hopper outlived wexec"
    );
}
