//! Operator process limits and `timeoutMs` (conformance item 20).

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
