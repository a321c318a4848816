//! `fs/copy` cannot be turned against the server: a tree is never copied into itself, however
//! the destination is reached (a symlink, directories that do not exist yet), and a tree of
//! any depth is copied without risking the stack a plugin call runs on (docs/plugins.md,
//! "Filesystem").

use pretty_assertions::assert_eq;
use serde_json::json;
use wexec_tests::{TempDir, rpc_error, spawn_stdio};

#[tokio::test]
async fn a_tree_is_never_copied_into_itself_through_a_symlink() {
    let dir = TempDir::new();
    let root = dir.path();
    std::fs::create_dir_all(root.join("tree/sub")).expect("mkdir");
    std::fs::write(root.join("tree/sub/file"), "x").expect("write");
    std::os::unix::fs::symlink(root.join("tree"), root.join("link")).expect("symlink");
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root.display().to_string()]);
    client.handshake().await;
    let into_itself = rpc_error(
        -32600,
        "fs/copy cannot copy a directory to itself or one of its descendants",
    );
    for destination in ["link/new/deeper", "link/sub/new", "tree/./sub/../x"] {
        assert_eq!(
            client
                .call_err(
                    "fs/copy",
                    json!({
                        "sourcePath": root.join("tree").display().to_string(),
                        "destinationPath": root.join(destination).display().to_string(),
                        "recursive": true,
                    }),
                )
                .await,
            into_itself,
            "{destination}"
        );
    }
    assert!(!root.join("tree/new").exists());
    // Still serving, and copying beside the tree works.
    client
        .call(
            "fs/copy",
            json!({
                "sourcePath": root.join("link").display().to_string(),
                "destinationPath": root.join("beside").display().to_string(),
                "recursive": true,
            }),
        )
        .await;
    assert!(
        root.join("beside").is_symlink(),
        "a link is copied as a link"
    );
}

#[tokio::test]
async fn a_deep_tree_is_copied_without_exhausting_a_stack() {
    let dir = TempDir::new();
    let root = dir.path();
    // As deep as a path within PATH_MAX allows.
    let depth = (4000 - root.as_os_str().len() - 8) / 2;
    let deep = (0..depth).fold(root.join("a"), |path, _| path.join("d"));
    std::fs::create_dir_all(&deep).expect("mkdir");
    std::fs::write(deep.join("f"), "bottom").expect("write");
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root.display().to_string()]);
    client.handshake().await;
    client
        .call(
            "fs/copy",
            json!({
                "sourcePath": root.join("a").display().to_string(),
                "destinationPath": root.join("b").display().to_string(),
                "recursive": true,
            }),
        )
        .await;
    let copied = (0..depth).fold(root.join("b"), |path, _| path.join("d"));
    assert_eq!(
        std::fs::read_to_string(copied.join("f")).expect("copied"),
        "bottom"
    );
    // Still serving.
    assert_eq!(
        client
            .call(
                "fs/readDirectory",
                json!({"path": root.join("b").display().to_string()})
            )
            .await["entries"][0]["fileName"],
        "d"
    );
}
