//! File handles belong to the plugin that opened them: another plugin on the same connection
//! cannot read, write or close them, and without a filesystem grant it is denied every
//! filesystem import (docs/protocol.md §9.5, docs/plugins.md).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, TempDir};

use super::spawn_hostile;

/// The `kind` and message of a hostile filesystem call that failed.
async fn failure(client: &mut Client, method: &str, params: Value) -> (String, String) {
    let error = client.call_err(method, params).await;
    (
        error["data"]["kind"].as_str().expect("kind").to_owned(),
        error["message"].as_str().expect("message").to_owned(),
    )
}

/// Opens `id` through the `fs` plugin on `path`, for reading or replacing.
async fn open(client: &mut Client, id: &str, path: &str, mode: &str) {
    client
        .call(
            "fs/open",
            json!({"handleId": id, "path": path, "mode": mode}),
        )
        .await;
}

#[tokio::test]
async fn a_plugin_without_a_filesystem_grant_is_denied_everything_handles_included() {
    let dir = TempDir::new();
    let file = dir.path().join("secret.txt");
    std::fs::write(&file, "fs plugin's file").expect("write");
    let path = file.display().to_string();
    let root = dir.path().display().to_string();
    // The fs plugin's root is the directory; the hostile plugin is granted nothing.
    let (_server, mut client) = spawn_hostile(&dir, "", &["--fs-root", &root]).await;
    open(&mut client, "r1", &path, "read").await;
    open(
        &mut client,
        "w1",
        &dir.path().join("out.txt").display().to_string(),
        "replace",
    )
    .await;

    let denied = "plugin hostile has no filesystem grant".to_owned();
    for (op, id) in [("read", "r1"), ("read-contents", "r1"), ("write", "w1")] {
        let params =
            json!({"op": op, "handleId": id, "offset": 0, "len": 4, "data": "overwritten"});
        assert_eq!(
            failure(&mut client, "hostile/handle", params).await,
            ("denied".to_owned(), denied.clone()),
            "{op}"
        );
    }
    client
        .call("hostile/handle", json!({"op": "close", "handleId": "r1"}))
        .await;
    for op in [
        "read",
        "write",
        "metadata",
        "list",
        "canonicalize",
        "mkdir",
        "remove",
        "copy",
    ] {
        let params = json!({"op": op, "path": path, "to": format!("{path}.copy"), "data": "x"});
        assert_eq!(
            failure(&mut client, "hostile/fs", params).await,
            ("denied".to_owned(), denied.clone()),
            "{op}"
        );
    }
    // The fs plugin's handles are untouched: still open, still its own file.
    let block = client
        .call(
            "fs/readBlock",
            json!({"handleId": "r1", "offset": 0, "len": 100}),
        )
        .await;
    assert_eq!(block["chunk"], "ZnMgcGx1Z2luJ3MgZmlsZQ==");
    client
        .call(
            "fs/writeBlock",
            json!({"handleId": "w1", "offset": 0, "chunk": "b2s="}),
        )
        .await;
    client.call("fs/close", json!({"handleId": "w1"})).await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).expect("read"),
        "ok"
    );
    assert!(!dir.path().join("secret.txt.copy").exists());
}

#[tokio::test]
async fn another_plugins_handle_is_unknown_exactly_as_if_it_did_not_exist() {
    let dir = TempDir::new();
    let theirs = dir.path().join("theirs.txt");
    let mine = dir.path().join("mine.txt");
    std::fs::write(&theirs, "the fs plugin's").expect("write");
    std::fs::write(&mine, "hostile's own").expect("write");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_hostile(
        &dir,
        &format!("read-write-roots = [\"{root}\"]"),
        &["--fs-root", &root],
    )
    .await;
    open(&mut client, "h1", &theirs.display().to_string(), "read").await;
    open(
        &mut client,
        "w1",
        &dir.path().join("out.txt").display().to_string(),
        "replace",
    )
    .await;

    for (op, id) in [("read", "h1"), ("read-contents", "h1"), ("write", "w1")] {
        let params = |id: &str| json!({"op": op, "handleId": id, "offset": 0, "len": 4, "data": "overwritten"});
        let foreign = failure(&mut client, "hostile/handle", params(id)).await;
        let never_opened = failure(&mut client, "hostile/handle", params("never")).await;
        assert_eq!(foreign.0, "not-found", "{op}: {foreign:?}");
        assert_eq!(
            foreign.1.replace(id, "<id>"),
            never_opened.1.replace("never", "<id>"),
            "{op}: a foreign handle reads as one that never existed"
        );
    }
    client
        .call("hostile/handle", json!({"op": "close", "handleId": "h1"}))
        .await;
    // The same id names the plugin's own handle, apart from the fs plugin's.
    client
        .call(
            "hostile/handle",
            json!({"op": "open", "handleId": "h1", "path": mine.display().to_string()}),
        )
        .await;
    let own = client
        .call(
            "hostile/handle",
            json!({"op": "read", "handleId": "h1", "offset": 0, "len": 100}),
        )
        .await;
    assert_eq!(own, json!({"text": "hostile's own"}));
    let block = client
        .call(
            "fs/readBlock",
            json!({"handleId": "h1", "offset": 0, "len": 100}),
        )
        .await;
    assert_eq!(
        block["chunk"], "dGhlIGZzIHBsdWdpbidz",
        "the fs plugin's handle is intact"
    );
    client.call("fs/close", json!({"handleId": "w1"})).await;
    assert_eq!(
        std::fs::read(dir.path().join("out.txt")).expect("read"),
        b""
    );
}

/// A read-only root nested in a writable one stays read-only when a path of the writable one
/// reaches it through a symbolic link (which a client can plant with `process/start ln -s`).
#[tokio::test]
async fn a_nested_read_only_root_is_not_writable_through_a_link() {
    let dir = TempDir::new();
    let (outer, inner) = (dir.path().join("a"), dir.path().join("a/b"));
    std::fs::create_dir_all(&inner).expect("mkdir");
    std::fs::write(inner.join("secret.txt"), "original").expect("write");
    std::os::unix::fs::symlink("b", outer.join("dirlink")).expect("link");
    std::os::unix::fs::symlink("b/secret.txt", outer.join("filelink")).expect("link");
    let grants = format!(
        "read-write-roots = [\"{}\"]\nread-only-roots = [\"{}\"]",
        outer.display(),
        inner.display()
    );
    let (_server, mut client) = spawn_hostile(&dir, &grants, &[]).await;
    let outer = outer.display().to_string();
    for (op, path) in [
        ("write", format!("{outer}/dirlink/secret.txt")),
        ("write", format!("{outer}/filelink")),
        ("write", format!("{outer}/dirlink/new.txt")),
        ("mkdir", format!("{outer}/dirlink/newdir")),
        ("remove", format!("{outer}/dirlink/secret.txt")),
    ] {
        let (kind, message) = failure(
            &mut client,
            "hostile/fs",
            json!({"op": op, "path": path, "data": "PWNED"}),
        )
        .await;
        assert_eq!(kind, "denied", "{op} {path}: {message}");
        assert_eq!(message, format!("path `{path}` is in a read-only root"));
    }
    assert_eq!(
        std::fs::read_to_string(inner.join("secret.txt")).expect("read"),
        "original"
    );
    assert!(!inner.join("new.txt").exists() && !inner.join("newdir").exists());
    // The writable root around it is still writable.
    client
        .call(
            "hostile/fs",
            json!({"op": "write", "path": format!("{outer}/beside.txt"), "data": "ok"}),
        )
        .await;
}
