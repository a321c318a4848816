//! `fs/copy` cannot be turned against the server: a tree is never copied into itself, however
//! the destination is reached (a symlink, directories that do not exist yet), no symlink
//! inside either tree is gone through (so a planted link cannot aim the copy at the compile
//! cache or at its own output), and a tree of any depth is copied without risking the stack a
//! plugin call runs on (docs/plugins.md, "Filesystem").

use pretty_assertions::assert_eq;
use serde_json::json;
use wexec_tests::{TempDir, rpc_error, spawn_stdio};

/// The params of a recursive `fs/copy`.
fn tree_copy(from: &std::path::Path, to: &std::path::Path) -> serde_json::Value {
    json!({
        "sourcePath": from.display().to_string(),
        "destinationPath": to.display().to_string(),
        "recursive": true,
    })
}

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
                    tree_copy(&root.join("tree"), &root.join(destination))
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
            tree_copy(&root.join("link"), &root.join("beside")),
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
        .call("fs/copy", tree_copy(&root.join("a"), &root.join("b")))
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

/// A link planted inside the destination tree, pointing at the compile cache: copying a tree
/// with the same layout would write the attacker's artifact and digest into the cache, to be
/// run as native code at the next start. The copy leaves the link alone.
#[tokio::test]
async fn a_link_planted_in_the_destination_cannot_aim_a_copy_at_the_compile_cache() {
    let dir = TempDir::new();
    let root = dir.path();
    let mut command = wexec_tests::command(&["--fs-root", &root.display().to_string()]);
    command.env("XDG_CACHE_HOME", root.join("c"));
    let (_server, mut client) = wexec_tests::spawn_stdio_with(command);
    client.handshake().await;
    let cache = root.join("c/wexec");
    let snapshot = || {
        // Names and content hashes: a diff of megabytes would not fit in a failure message.
        let mut files: Vec<(std::path::PathBuf, u64)> = std::fs::read_dir(&cache)
            .expect("cache")
            .flatten()
            .map(|entry| {
                use std::hash::{Hash, Hasher};
                let path = entry.path();
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                match std::fs::symlink_metadata(&path) {
                    Ok(meta) if meta.is_file() => {
                        std::fs::read(&path).expect("read").hash(&mut hasher)
                    }
                    _ => "not a regular file".hash(&mut hasher),
                }
                (path, hasher.finish())
            })
            .collect();
        files.sort();
        files
    };
    let before = snapshot();
    let artifact = before
        .iter()
        .find(|(path, _)| path.extension().is_some_and(|ext| ext == "cwasm"))
        .map(|(path, _)| path.file_name().expect("name").to_owned())
        .expect("an artifact");
    std::fs::create_dir_all(root.join("S/sub")).expect("mkdir");
    std::fs::write(root.join("S/sub").join(&artifact), "attacker's code").expect("write");
    std::fs::write(root.join("S/sub/new.cwasm"), "attacker's code").expect("write");
    std::fs::create_dir_all(root.join("T")).expect("mkdir");
    std::os::unix::fs::symlink("../c/wexec", root.join("T/sub")).expect("symlink");
    client
        .call("fs/copy", tree_copy(&root.join("S"), &root.join("T")))
        .await;
    assert_eq!(snapshot(), before, "the cache is untouched");
    assert!(root.join("T/sub").is_symlink());
}

/// A link in the destination back into the source: followed, each level of the copy would
/// land inside the source and be copied again (2,049 levels and 2 GB from a 1 MB file, until
/// the name grew too long). Not followed, the copy ends at once.
#[tokio::test]
async fn a_link_in_the_destination_cannot_make_a_copy_feed_on_its_output() {
    let dir = TempDir::new();
    let root = dir.path();
    std::fs::create_dir_all(root.join("S/a/a")).expect("mkdir");
    std::fs::write(root.join("S/a/a/blob"), vec![7u8; 100_000]).expect("write");
    std::fs::create_dir_all(root.join("T")).expect("mkdir");
    std::os::unix::fs::symlink("../S/a/a", root.join("T/a")).expect("symlink");
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root.display().to_string()]);
    client.handshake().await;
    client
        .call("fs/copy", tree_copy(&root.join("S"), &root.join("T")))
        .await;
    let mut names: Vec<String> = std::fs::read_dir(root.join("S/a/a"))
        .expect("list")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["blob"], "nothing was copied into the source");
}
