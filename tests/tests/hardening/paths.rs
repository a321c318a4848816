//! Path cost is bounded and linear: a request path longer than `PATH_MAX` or with more
//! components than wexec walks is refused at once with a clear error, and a deep path through
//! symlinks resolves (docs/plugins.md, "Filesystem").

use pretty_assertions::assert_eq;
use serde_json::json;
use wexec_tests::{TempDir, rpc_error, spawn_stdio};

#[tokio::test]
async fn overlong_paths_and_too_many_components_are_refused_at_once() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;

    // 195 KiB: once a second of host time, growing quadratically.
    let long = format!("{root}/{}", "abcdefg/".repeat(25_000));
    let error = client
        .call_err("fs/getMetadata", json!({"path": long}))
        .await;
    assert_eq!(error["code"], -32600);
    let shown: String = long.chars().take(64).collect();
    assert_eq!(
        error["message"],
        format!(
            "path `{shown}…` is {} bytes long; the limit is 4096 bytes",
            long.len()
        )
    );
    // Within 4096 bytes but over the component limit.
    let deep = format!("{root}/{}", "a/".repeat(1_100));
    assert!(deep.len() < 4096);
    assert_eq!(
        client
            .call_err("fs/getMetadata", json!({"path": deep}))
            .await,
        rpc_error(
            -32600,
            &format!("path `{deep}` has more than 1024 components to resolve")
        )
    );
    // A directory chain at the limit's edge resolves, link by link.
    let mut real = dir.path().to_path_buf();
    for _ in 0..200 {
        real.push("d");
    }
    std::fs::create_dir_all(&real).expect("deep directories");
    std::fs::write(real.join("leaf.txt"), "leaf").expect("write leaf");
    std::os::unix::fs::symlink(dir.path().join("d/d/d/d"), dir.path().join("hop")).expect("link");
    let through_links = format!("{root}/hop/{}leaf.txt", "d/".repeat(196));
    assert_eq!(
        client
            .call("fs/readFile", json!({"path": through_links}))
            .await,
        json!({"dataBase64": "bGVhZg=="})
    );
    // A symlink loop stops at the hop limit.
    std::os::unix::fs::symlink("loop", dir.path().join("loop")).expect("link");
    let looping = format!("{root}/loop");
    assert_eq!(
        client
            .call_err("fs/readFile", json!({"path": looping}))
            .await,
        rpc_error(
            -32600,
            &format!("path `{looping}` has too many levels of symbolic links")
        )
    );
}

/// A listing resolves each symlink to type it: links built to be slow to resolve (here 3,000
/// links of 999 steps each) are bounded together, with a clear error, while a directory of
/// ordinary links lists.
#[tokio::test]
async fn the_symlinks_of_one_listing_are_resolved_within_a_bound() {
    let dir = TempDir::new();
    let root = dir.path();
    let slow = root.join("slow");
    std::fs::create_dir_all(slow.join("d")).expect("mkdir");
    let target = format!("{}d", "d/../".repeat(499));
    for index in 0..3_000 {
        std::os::unix::fs::symlink(&target, slow.join(format!("link{index}"))).expect("symlink");
    }
    let plain = root.join("plain");
    std::fs::create_dir_all(plain.join("d")).expect("mkdir");
    for index in 0..3_000 {
        std::os::unix::fs::symlink("d", plain.join(format!("link{index}"))).expect("symlink");
    }
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root.display().to_string()]);
    client.handshake().await;
    let slow = slow.display().to_string();
    assert_eq!(
        client
            .call_err("fs/readDirectory", json!({"path": slow}))
            .await,
        rpc_error(
            -32603,
            &format!(
                "fs/readDirectory: resolving the symlinks in `{slow}` walks more than 524288 path components"
            )
        )
    );
    let listing = client
        .call(
            "fs/readDirectory",
            json!({"path": plain.display().to_string()}),
        )
        .await;
    let entries = listing["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 3_001);
    assert!(
        entries.iter().all(|entry| entry["isDirectory"] == true),
        "every link is typed as its target"
    );
}
