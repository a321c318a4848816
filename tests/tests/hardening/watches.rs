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
