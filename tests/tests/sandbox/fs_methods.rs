//! The `sandbox` param of `fs/*` (docs/protocol.md §7.3): enforced by the host's filesystem
//! capability for the call, on top of the plugin's roots, with the reference server's errors.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, TempDir, rpc_error, spawn_stdio};

use super::{codex_read_only, codex_workspace_write, uri};

const READ_ONLY_FS: &str = "Read-only file system (os error 30)";

/// Every write method on `dir`, each with `sandbox`.
fn writes(dir: &std::path::Path, sandbox: &Value) -> Vec<(&'static str, Value)> {
    vec![
        (
            "fs/writeFile",
            json!({"path": uri(&dir.join("new.txt")), "dataBase64": "eA==", "sandbox": sandbox}),
        ),
        (
            "fs/createDirectory",
            json!({"path": uri(&dir.join("newdir")), "sandbox": sandbox}),
        ),
        (
            "fs/remove",
            json!({"path": uri(&dir.join("kept.txt")), "sandbox": sandbox}),
        ),
        (
            "fs/copy",
            json!({"sourcePath": uri(&dir.join("kept.txt")), "destinationPath": uri(&dir.join("copy.txt")), "recursive": false, "sandbox": sandbox}),
        ),
        (
            "fs/open",
            json!({"handleId": "h", "path": uri(&dir.join("kept.txt")), "mode": "replace", "sandbox": sandbox}),
        ),
    ]
}

async fn assert_unchanged_after_refused_writes(
    client: &mut Client,
    dir: &std::path::Path,
    sandbox: &Value,
) {
    for (method, params) in writes(dir, sandbox) {
        assert_eq!(
            client.call_err(method, params).await,
            rpc_error(-32603, READ_ONLY_FS),
            "{method}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("kept.txt")).expect("kept"),
        "kept"
    );
    for name in ["new.txt", "newdir", "copy.txt"] {
        assert!(!dir.join(name).exists(), "{name}");
    }
}

#[tokio::test]
async fn the_request_sandbox_bounds_fs_writes_and_reads() {
    let dir = TempDir::new();
    let work = dir.path();
    std::fs::create_dir_all(work.join(".git")).expect("mkdir");
    std::fs::write(work.join("kept.txt"), "kept").expect("write");
    std::fs::write(work.join(".git/config"), "c").expect("write");
    let root = work.display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    // Codex's read-only object: every write refused as the reference answers, reads work.
    let read_only = codex_read_only(work);
    assert_unchanged_after_refused_writes(&mut client, work, &read_only).await;
    let read = client
        .call(
            "fs/readFile",
            json!({"path": uri(&work.join("kept.txt")), "sandbox": read_only}),
        )
        .await;
    assert_eq!(read["dataBase64"], "a2VwdA==");
    // Codex's workspace-write object: the workspace is writable, its .git is not.
    let mut workspace = codex_workspace_write(work, "restricted", false);
    workspace["policyContext"] = json!({"cwd": uri(work), "workspaceRoots": [uri(work)]});
    workspace["userHomeDir"] = json!(uri(work));
    client
        .call(
            "fs/writeFile",
            json!({"path": uri(&work.join("new.txt")), "dataBase64": "eA==", "sandbox": workspace}),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(work.join("new.txt")).expect("new"),
        "x"
    );
    let git = client
        .call_err("fs/writeFile", json!({"path": uri(&work.join(".git/config")), "dataBase64": "eA==", "sandbox": workspace}))
        .await;
    assert_eq!(git, rpc_error(-32603, READ_ONLY_FS));
    let removed = client
        .call_err(
            "fs/remove",
            json!({"path": uri(work), "sandbox": workspace}),
        )
        .await;
    // Its read-only .git makes the tree unremovable before the root rule is even reached.
    assert_eq!(removed, rpc_error(-32603, READ_ONLY_FS));
    assert_eq!(
        std::fs::read_to_string(work.join(".git/config")).expect("config"),
        "c"
    );
    // A `none` entry denies reads too.
    let denied = super::managed(
        work,
        vec![
            super::special("root", None, "read"),
            json!({"path": {"type": "path", "path": uri(&work.join("kept.txt"))}, "access": "none"}),
        ],
        "restricted",
    );
    let error = client
        .call_err(
            "fs/readFile",
            json!({"path": uri(&work.join("kept.txt")), "sandbox": denied}),
        )
        .await;
    assert_eq!(error, rpc_error(-32600, "Permission denied (os error 13)"));
    // Nor does a link to it show its size and times.
    std::os::unix::fs::symlink(work.join("kept.txt"), work.join("to-kept")).expect("link");
    let error = client
        .call_err(
            "fs/getMetadata",
            json!({"path": uri(&work.join("to-kept")), "sandbox": denied}),
        )
        .await;
    assert_eq!(error, rpc_error(-32600, "Permission denied (os error 13)"));
    let malformed = client
        .call_err("fs/readFile", json!({"path": uri(&work.join("kept.txt")), "sandbox": {"permissions": {"type": "disabled"}}}))
        .await;
    assert_eq!(
        malformed,
        rpc_error(-32602, "missing field `windowsSandboxLevel`")
    );
}

#[tokio::test]
async fn a_read_only_ceiling_refuses_fs_writes_without_a_sandbox() {
    let dir = TempDir::new();
    std::fs::write(dir.path().join("kept.txt"), "kept").expect("write");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root, "--sandbox", "read-only"]);
    client.handshake().await;
    assert_unchanged_after_refused_writes(&mut client, dir.path(), &Value::Null).await;
}

/// `current_working_directory` on an fs method is the sandbox's own `cwd`: a write grant on it
/// covers that directory, not the disk (the host has no process cwd for an fs call).
#[tokio::test]
async fn current_working_directory_on_fs_methods_is_the_sandbox_cwd() {
    let dir = TempDir::new();
    let (inside, outside) = (dir.path().join("inside"), dir.path().join("outside"));
    for path in [&inside, &outside] {
        std::fs::create_dir_all(path).expect("mkdir");
    }
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let sandbox = super::managed(
        &inside,
        vec![
            super::special("root", None, "read"),
            super::special("current_working_directory", None, "write"),
        ],
        "restricted",
    );
    let write = |path: &std::path::Path| json!({"path": uri(&path.join("x.txt")), "dataBase64": "eA==", "sandbox": sandbox});
    client.call("fs/writeFile", write(&inside)).await;
    assert_eq!(std::fs::read(inside.join("x.txt")).expect("written"), b"x");
    assert_eq!(
        client.call_err("fs/writeFile", write(&outside)).await,
        rpc_error(-32603, READ_ONLY_FS)
    );
    assert!(!outside.join("x.txt").exists());
}
