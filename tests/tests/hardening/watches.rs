//! A plugin's watch is its own: without a filesystem grant it gets none, its ids are not the
//! `fs` plugin's, and what fires for it is announced in its own namespace only
//! (docs/plugins.md, "Watch").

use pretty_assertions::assert_eq;
use serde_json::json;
use wexec_tests::TempDir;

use super::spawn_hostile;

#[tokio::test]
async fn a_plugin_without_a_filesystem_grant_cannot_watch() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_hostile(&dir, "", &["--fs-root", &root]).await;
    let missing = json!([format!("{root}/x")]);
    let error = client
        .call_err("hostile/watch", json!({"watchId": 1, "missing": missing}))
        .await;
    assert_eq!(
        error,
        json!({"code": -32603, "message": "plugin hostile has no filesystem grant"})
    );
}

#[tokio::test]
async fn watches_are_per_plugin_and_fire_in_the_plugins_namespace() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let grants = format!("read-only-roots = [\"{root}\"]");
    let (_server, mut client) = spawn_hostile(&dir, &grants, &["--fs-root", &root]).await;
    let watch = |id: u64, name: &str| json!({"watchId": id, "missing": [format!("{root}/{name}")]});
    assert_eq!(
        client.call("fs/watchMissing", watch(9, "a")).await,
        json!({"watching": true})
    );
    // The fs plugin's id 9 means nothing to hostile's watch, nor does hostile's replace it.
    assert_eq!(
        client.call("hostile/watch", watch(1, "b")).await,
        json!({"watching": true})
    );
    std::fs::write(dir.path().join("b"), "").expect("write");
    assert_eq!(
        client.next_notification().await,
        json!({"jsonrpc": "2.0", "method": "hostile/missingChanged", "params": {"watchId": 1}})
    );
    std::fs::write(dir.path().join("a"), "").expect("write");
    assert_eq!(
        client.next_notification().await,
        json!({"jsonrpc": "2.0", "method": "fs/missingChanged", "params": {"watchId": 9}})
    );
}

/// CPU time wexec (`pid`) has used, all its threads, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("comm")
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// One `fs/watchMissing` with a 40 KB path took 3.2–4.7 s of host time (every ancestor of every
/// path was collected before any length check: quadratic), outside the plugin's time limit, and
/// two at once held another connection's `fs/readFile` for seconds. The resolver's limits now
/// apply first and ancestors are counted in linear time: such paths cost next to nothing and
/// are not watched, as Codex answers them.
#[tokio::test]
async fn deep_and_long_paths_cost_linear_time() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    std::fs::write(dir.path().join("note.txt"), "note").expect("write");
    let server = wexec_tests::spawn_websocket(&["--fs-root", &root]).await;
    let mut reader = server.connect().await;
    reader.handshake().await;
    let mut watchers = Vec::new();
    for _ in 0..2 {
        let mut watcher = server.connect().await;
        watcher.handshake().await;
        watchers.push(watcher);
    }
    let deep = format!("{root}/{}x", "a/".repeat(20_000));
    // Within the resolver's limits, but with more than 64 ancestors, and one path of 64 ancestors
    // repeated: answered without watching.
    let many = format!("{root}/{}x", "b/".repeat(1_000));
    let before = cpu_ticks(server.pid());
    let mut ids = Vec::new();
    for (watcher, missing) in watchers.iter_mut().zip([vec![&deep], vec![&many; 64]]) {
        let params = json!({"watchId": 1, "missing": missing});
        ids.push(watcher.send_request("fs/watchMissing", params).await);
    }
    let note = json!({"path": dir.path().join("note.txt").display().to_string()});
    let read = reader.call("fs/readFile", note).await;
    assert_eq!(read["dataBase64"], "bm90ZQ==");
    for (watcher, id) in watchers.iter_mut().zip(ids) {
        let reply = watcher.reply_to(&json!(id)).await;
        assert_eq!(reply["result"], json!({"watching": false}), "{reply}");
    }
    // Clock ticks are 10 ms: the two watches took less than 0.5 s of CPU in all (they took
    // seconds each).
    let used = cpu_ticks(server.pid()) - before;
    assert!(used < 50, "{used} ticks of CPU");
}
