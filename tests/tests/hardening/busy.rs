//! Slow host work and busy guests never hold the threads that serve connections: while other
//! connections' requests copy large files or spin in a guest, `environment/status` and plugin
//! calls on another connection keep being answered (docs/plugins.md, "Calls, limits and
//! failures").

use serde_json::{Value, json};
use wexec_tests::{PROBE_WASM, TempDir, spawn_websocket};

/// Sends `count` round trips of `method` one after another, each waiting for its reply.
async fn round_trips(client: &mut wexec_tests::Client, method: &str, params: Value, count: usize) {
    for _ in 0..count {
        let reply = client.request(method, params.clone()).await;
        assert!(reply.get("result").is_some(), "{method}: {reply}");
    }
}

/// A WebSocket server with the probe plugin under `time_limit_ms`, rooted at `dir`, where
/// `note.txt` holds "note"; returns the server and the `fs/readFile` params of the note.
async fn probe_server(dir: &TempDir, time_limit_ms: &str) -> (wexec_tests::Server, Value) {
    let root = dir.path().display().to_string();
    std::fs::write(dir.path().join("note.txt"), "note").expect("write");
    let server = spawn_websocket(&[
        "--fs-root",
        &root,
        "--plugin",
        PROBE_WASM,
        "--plugin-time-limit-ms",
        time_limit_ms,
    ])
    .await;
    let note = json!({"path": dir.path().join("note.txt").display().to_string()});
    (server, note)
}

#[tokio::test]
async fn slow_copies_on_other_connections_do_not_hold_up_status() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    // A tree of 1,000 files: copying it takes a while (creating files is slow), though no
    // single system call does.
    let tree = dir.path().join("tree");
    for branch in 0..2 {
        let branch = tree.join(format!("b{branch}"));
        std::fs::create_dir_all(&branch).expect("mkdir");
        for file in 0..500 {
            std::fs::write(branch.join(format!("f{file}")), b"x").expect("write");
        }
    }
    let server = spawn_websocket(&["--fs-root", &root]).await;
    let mut copiers = Vec::new();
    for index in 0..4 {
        let mut client = server.connect().await;
        client.handshake().await;
        let destination = dir
            .path()
            .join(format!("copy-{index}"))
            .display()
            .to_string();
        let params = json!({"sourcePath": tree.display().to_string(), "destinationPath": destination, "recursive": true});
        let id = client.send_request("fs/copy", params).await;
        copiers.push((client, id));
    }
    let mut watcher = server.connect().await;
    watcher.handshake().await;
    round_trips(&mut watcher, "environment/status", json!({}), 20).await;
    for (client, id) in &mut copiers {
        let early =
            tokio::time::timeout(std::time::Duration::ZERO, client.reply_to(&json!(*id))).await;
        assert!(
            early.is_err(),
            "a copy finished before 20 status round trips on another connection: {early:?}"
        );
    }
    for (client, id) in &mut copiers {
        let reply = client.reply_to(&json!(*id)).await;
        assert_eq!(reply["result"], json!({}), "{reply}");
    }
}

#[tokio::test]
async fn spinning_guests_on_other_connections_do_not_hold_up_others() {
    let dir = TempDir::new();
    let (server, note) = probe_server(&dir, "4000").await;
    let mut spinners = Vec::new();
    for _ in 0..8 {
        let mut client = server.connect().await;
        client.handshake().await;
        let id = client.send_request("probe/spin", json!({})).await;
        spinners.push((client, id));
    }
    let mut watcher = server.connect().await;
    watcher.handshake().await;
    // The spinners run for 4 s of guest time each. Served in time slices behind 8 spinning
    // guests, a round trip took 60-120 ms; these must all be answered long before.
    round_trips(&mut watcher, "environment/status", json!({}), 40).await;
    round_trips(&mut watcher, "fs/readFile", note.clone(), 40).await;
    round_trips(&mut watcher, "probe/noop", json!({}), 40).await;
    for (client, id) in &mut spinners {
        let early =
            tokio::time::timeout(std::time::Duration::ZERO, client.reply_to(&json!(*id))).await;
        assert!(
            early.is_err(),
            "a spinner ended before the watcher was done: {early:?}"
        );
    }
    for (client, id) in &mut spinners {
        let reply = client.reply_to(&json!(*id)).await;
        assert_eq!(
            reply["error"]["message"], "plugin probe exceeded its time limit of 4000 ms",
            "{reply}"
        );
    }
}

/// One connection cannot take the engine's instance slots from everyone: its plugin calls run
/// eight at a time, the rest wait their turn, and another connection's calls go on (with 1,010
/// spinning calls on one connection, every other plugin call failed before).
#[tokio::test]
async fn one_connection_cannot_take_every_plugin_instance() {
    let dir = TempDir::new();
    let (server, note) = probe_server(&dir, "3000").await;
    let mut greedy = server.connect().await;
    greedy.handshake().await;
    for _ in 0..1_010 {
        greedy.send_request("probe/spin", json!({})).await;
    }
    // A connection is read in order, and `environment/status` never waits for a slot
    // (docs/protocol.md §6): its reply means every spin before it has been taken in.
    greedy.call("environment/status", json!({})).await;
    let mut other = server.connect().await;
    other.handshake().await;
    let started = std::time::Instant::now();
    assert_eq!(
        other.call("fs/readFile", note).await,
        json!({"dataBase64": "bm90ZQ=="})
    );
    other.call("probe/noop", json!({})).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
