//! Operator process limits and `timeoutMs` (docs/protocol.md §8.10).

use serde_json::{Value, json};
use wexec_tests::{TempDir, rpc_error, spawn_stdio};

use super::{run, run_with};

#[tokio::test]
async fn timeout_terminates_the_process_and_says_so() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let timed = run_with(
        &mut client,
        "t",
        "sleep 30",
        dir.path(),
        Value::Null,
        json!({"timeoutMs": 300}),
    )
    .await;
    assert_eq!(timed.exit, 143, "{timed:?}");
    assert_eq!(timed.failure, json!("process timed out after 300 ms"));
    let quick = run_with(
        &mut client,
        "q",
        "true",
        dir.path(),
        Value::Null,
        json!({"timeoutMs": 10000}),
    )
    .await;
    assert_eq!((quick.exit, quick.failure), (0, Value::Null));
    let zero = client
        .call_err(
            "process/start",
            json!({"processId": "z", "argv": ["true"], "cwd": root, "env": {}, "tty": false, "timeoutMs": 0}),
        )
        .await;
    assert_eq!(
        zero,
        rpc_error(-32602, "timeoutMs must be greater than zero")
    );
}

#[tokio::test]
async fn cpu_file_size_and_open_file_limits_hold() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&[
        "--fs-root",
        &root,
        "--process-cpu-seconds",
        "1",
        "--process-file-size-mib",
        "1",
        "--process-open-files",
        "32",
    ]);
    client.handshake().await;
    let spin = run(
        &mut client,
        "cpu",
        "while :; do :; done",
        dir.path(),
        Value::Null,
    )
    .await;
    assert_eq!(spin.exit, 152, "{spin:?}");
    assert_eq!(
        spin.failure,
        json!("process exceeded its CPU time limit of 1 s")
    );
    let big = run(
        &mut client,
        "fsize",
        "head -c 2097152 /dev/zero > big",
        dir.path(),
        Value::Null,
    )
    .await;
    assert_ne!(big.exit, 0, "{big:?}");
    let size = std::fs::metadata(dir.path().join("big"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert_eq!(size, 1024 * 1024);
    let files = run(&mut client, "nofile", "ulimit -n", dir.path(), Value::Null).await;
    assert_eq!(files.output, "32\n", "{files:?}");
}

/// Whether this host lets wexec make pids cgroups (cgroup v1, as root).
fn pids_cgroups_available() -> bool {
    let v1 = std::fs::read_to_string("/proc/self/cgroup")
        .is_ok_and(|groups| groups.lines().any(|line| line.contains(":pids:")));
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(2) == Some("0"))
    });
    v1 && root
}

#[tokio::test]
async fn the_session_process_limit_holds_forks_and_fork_bombs() {
    if !pids_cgroups_available() {
        eprintln!("skipped: needs a cgroup v1 pids hierarchy wexec may write (root)");
        return;
    }
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root, "--session-processes", "2"]);
    client.handshake().await;
    // The program and one child fit; the next fork gets EAGAIN.
    let forks = run(
        &mut client,
        "forks",
        "sleep 0.2 & sleep 0.2 & wait",
        dir.path(),
        Value::Null,
    )
    .await;
    assert!(forks.output.contains("Cannot fork"), "{forks:?}");
    // A fork bomb is held, ends, and leaves wexec serving.
    let bomb = run(
        &mut client,
        "bomb",
        "b() { b | b & }; b; sleep 0.5; exit 3",
        dir.path(),
        Value::Null,
    )
    .await;
    assert_ne!(bomb.exit, 0, "{bomb:?}");
    assert_eq!(
        client.call("environment/status", json!(null)).await["status"],
        "ready"
    );
    // Two live processes fill the session: a third start is refused before anything runs.
    for id in ["a", "b"] {
        client
            .call(
                "process/start",
                json!({"processId": id, "argv": ["sleep", "30"], "cwd": root, "env": {"PATH": "/usr/bin:/bin"}, "tty": false}),
            )
            .await;
    }
    let third = client
        .call_err(
            "process/start",
            json!({"processId": "c", "argv": ["true"], "cwd": root, "env": {}, "tty": false}),
        )
        .await;
    assert_eq!(
        third,
        rpc_error(-32600, "session process limit of 2 reached")
    );
}
