//! `fs/*` through the bundled `fs` plugin, against the real binary (docs/protocol.md §9). Each test
//! gets a fresh root; escapes must fail with no side effect.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir, rpc_error, spawn_stdio};

/// A temp dir with `root/` granted as the fs root and `outside/` next to it.
struct Fixture {
    dir: TempDir,
    _server: Server,
    client: Client,
}

impl Fixture {
    async fn new() -> Self {
        let dir = TempDir::new();
        std::fs::create_dir(dir.path().join("root")).expect("mkdir root");
        std::fs::create_dir(dir.path().join("outside")).expect("mkdir outside");
        std::fs::write(dir.path().join("outside/secret.txt"), "secret").expect("write secret");
        let root = dir.path().join("root").display().to_string();
        let (server, mut client) = spawn_stdio(&["--fs-root", &root]);
        client.handshake().await;
        Self {
            dir,
            _server: server,
            client,
        }
    }

    fn root(&self) -> String {
        self.dir.path().join("root").display().to_string()
    }

    fn outside(&self) -> String {
        self.dir.path().join("outside").display().to_string()
    }

    fn uri(&self, relative: &str) -> String {
        format!("file://{}/{}", self.root(), relative.replace(' ', "%20"))
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.client.call(method, params).await
    }

    async fn err(&mut self, method: &str, params: Value) -> Value {
        self.client.call_err(method, params).await
    }
}

fn b64(text: &str) -> String {
    STANDARD.encode(text)
}

#[tokio::test]
async fn each_method_in_the_root_with_encoded_and_plain_paths() {
    let mut f = Fixture::new().await;
    let root = f.root();
    let spaced = f.uri("a b.txt");
    assert_eq!(
        f.call(
            "fs/writeFile",
            json!({"path": spaced, "dataBase64": b64("hello")})
        )
        .await,
        json!({})
    );
    assert_eq!(
        std::fs::read_to_string(format!("{root}/a b.txt")).expect("written"),
        "hello"
    );
    assert_eq!(
        f.call("fs/readFile", json!({"path": format!("{root}/a b.txt")}))
            .await,
        json!({"dataBase64": b64("hello")}),
        "a plain absolute path names the same file, unencoded"
    );
    let meta = f.call("fs/getMetadata", json!({"path": spaced})).await;
    assert_eq!(
        (
            meta["isFile"].clone(),
            meta["isDirectory"].clone(),
            meta["isSymlink"].clone(),
            meta["size"].clone()
        ),
        (json!(true), json!(false), json!(false), json!(5))
    );
    assert!(
        meta["modifiedAtMs"]
            .as_u64()
            .is_some_and(|ms| ms > 1_600_000_000_000)
    );

    f.call("fs/createDirectory", json!({"path": f.uri("d/e/f")}))
        .await;
    assert!(
        std::path::Path::new(&format!("{root}/d/e/f")).is_dir(),
        "recursive by default"
    );
    assert_eq!(
        f.err(
            "fs/createDirectory",
            json!({"path": f.uri("x/y"), "recursive": false})
        )
        .await["code"],
        -32004
    );

    assert_eq!(
        f.call(
            "fs/canonicalize",
            json!({"path": format!("{root}/d/e/../e")})
        )
        .await,
        json!({"path": f.uri("d/e")})
    );
    let mut entries = f.call("fs/readDirectory", json!({"path": root})).await["entries"]
        .as_array()
        .expect("entries")
        .clone();
    entries.sort_by_key(|entry| entry["fileName"].as_str().unwrap_or_default().to_owned());
    assert_eq!(
        entries,
        vec![
            json!({"fileName": "a b.txt", "isDirectory": false, "isFile": true}),
            json!({"fileName": "d", "isDirectory": true, "isFile": false}),
        ]
    );

    f.call(
        "fs/copy",
        json!({"sourcePath": spaced, "destinationPath": f.uri("copy.txt"), "recursive": false}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(format!("{root}/copy.txt")).expect("copied"),
        "hello"
    );
    assert_eq!(
        f.err(
            "fs/copy",
            json!({"sourcePath": f.uri("d"), "destinationPath": f.uri("d2"), "recursive": false})
        )
        .await,
        rpc_error(
            -32600,
            "fs/copy requires recursive: true when sourcePath is a directory"
        )
    );
    assert_eq!(
        f.err("fs/copy", json!({"sourcePath": f.uri("d"), "destinationPath": f.uri("d/e/inner"), "recursive": true})).await,
        rpc_error(-32600, "fs/copy cannot copy a directory to itself or one of its descendants")
    );
    f.call(
        "fs/copy",
        json!({"sourcePath": f.uri("d"), "destinationPath": f.uri("d2"), "recursive": true}),
    )
    .await;
    assert!(std::path::Path::new(&format!("{root}/d2/e/f")).is_dir());

    f.call("fs/remove", json!({"path": f.uri("d2")})).await;
    assert!(
        !std::path::Path::new(&format!("{root}/d2")).exists(),
        "recursive by default"
    );
    assert_eq!(
        f.call("fs/remove", json!({"path": f.uri("never-existed")}))
            .await,
        json!({}),
        "force by default"
    );
    assert_eq!(
        f.err(
            "fs/remove",
            json!({"path": f.uri("never-existed"), "force": false})
        )
        .await["code"],
        -32004
    );
    assert_eq!(
        f.err("fs/remove", json!({"path": root})).await,
        rpc_error(
            -32600,
            &format!("path `{root}` is a granted root and cannot be removed")
        )
    );
}

#[tokio::test]
async fn not_found_invalid_and_symlink_cases_have_their_codes_and_texts() {
    let mut f = Fixture::new().await;
    let root = f.root();
    for (method, params) in [
        ("fs/readFile", json!({"path": f.uri("missing")})),
        ("fs/getMetadata", json!({"path": f.uri("missing")})),
        (
            "fs/writeFile",
            json!({"path": f.uri("no/parent"), "dataBase64": ""}),
        ),
        ("fs/readDirectory", json!({"path": f.uri("missing")})),
    ] {
        assert_eq!(f.err(method, params).await["code"], -32004, "{method}");
    }
    assert_eq!(
        f.err("fs/readFile", json!({"path": root})).await,
        rpc_error(-32600, &format!("path `{root}` is not a file"))
    );
    let fifo = format!("{root}/pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    assert_eq!(
        f.err("fs/readFile", json!({"path": fifo})).await,
        rpc_error(-32600, &format!("path `{fifo}` is not a file")),
        "a FIFO never blocks"
    );
    let bad = f
        .err(
            "fs/writeFile",
            json!({"path": f.uri("x"), "dataBase64": "@@@"}),
        )
        .await;
    assert_eq!(bad["code"], -32600);
    assert!(
        bad["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("fs/writeFile requires valid base64 dataBase64: ")),
        "{bad}"
    );
    assert_eq!(
        f.err("fs/readFile", json!({})).await,
        rpc_error(-32602, "missing field `path`")
    );
    // What the OS refuses is an internal error, with the OS text, as Codex answers.
    std::fs::create_dir_all(format!("{root}/full/inner")).expect("mkdir");
    std::fs::write(format!("{root}/plain"), "p").expect("write");
    for (method, params, text) in [
        (
            "fs/createDirectory",
            json!({"path": f.uri("full"), "recursive": false}),
            "File exists (os error 17)",
        ),
        (
            "fs/createDirectory",
            json!({"path": f.uri("plain")}),
            "File exists (os error 17)",
        ),
        (
            "fs/remove",
            json!({"path": f.uri("full"), "recursive": false}),
            "Directory not empty (os error 39)",
        ),
        (
            "fs/readFile",
            json!({"path": f.uri("plain/x")}),
            "Not a directory (os error 20)",
        ),
        (
            "fs/writeFile",
            json!({"path": f.uri("full"), "dataBase64": ""}),
            "Is a directory (os error 21)",
        ),
    ] {
        assert_eq!(
            f.err(method, params.clone()).await,
            rpc_error(-32603, text),
            "{method} {params}"
        );
    }
    // URIs as Codex reads them: `localhost` is this host, another authority or a drive is
    // another machine's path, another scheme no path at all.
    assert_eq!(
        f.call(
            "fs/readFile",
            json!({"path": format!("file://localhost{root}/plain")})
        )
        .await,
        json!({"dataBase64": b64("p")})
    );
    for foreign in [
        format!("file://host{root}/plain"),
        "file:///C:/x".to_owned(),
    ] {
        assert_eq!(
            f.err("fs/readFile", json!({"path": foreign})).await,
            rpc_error(-32600, &format!("'{foreign}' is invalid on 'linux'"))
        );
    }
    for (path, text) in [
        ("http://example.com/x", "unsupported path URI scheme `http`"),
        (
            "file:///x?y",
            "query parameters are not allowed in path URIs",
        ),
        ("file:///x#y", "fragments are not allowed in path URIs"),
        ("file:///x%00", "'file:///x%00' is invalid on 'linux'"),
    ] {
        assert_eq!(
            f.err("fs/getMetadata", json!({"path": path})).await,
            rpc_error(-32602, text),
            "{path}"
        );
    }
    assert_eq!(
        f.err("fs/readFile", json!({"path": "relative/path"})).await,
        rpc_error(
            -32602,
            "expected a file:// URI or an absolute path, got `relative/path`"
        )
    );

    std::fs::write(format!("{root}/target.txt"), "t").expect("write");
    std::os::unix::fs::symlink(format!("{root}/target.txt"), format!("{root}/link"))
        .expect("symlink");
    let link = format!("{root}/link");
    assert_eq!(
        f.call("fs/readFile", json!({"path": link})).await,
        json!({"dataBase64": b64("t")}),
        "followed inside the root"
    );
    assert_eq!(
        f.err(
            "fs/readFile",
            json!({"path": link, "followSymlinks": false})
        )
        .await,
        rpc_error(-32603, "Symbolic link loop (os error 40)")
    );
    assert_eq!(
        f.err(
            "fs/writeFile",
            json!({"path": link, "dataBase64": "", "followSymlinks": false})
        )
        .await,
        rpc_error(-32603, "Symbolic link loop (os error 40)")
    );
    for method in ["fs/getMetadata", "fs/remove"] {
        assert_eq!(
            f.err(
                method,
                json!({"path": link, "followSymlinks": false, "recursive": false})
            )
            .await,
            rpc_error(-32600, "path contains a symbolic link"),
            "{method}"
        );
    }
    assert_eq!(
        f.err("fs/remove", json!({"path": link, "followSymlinks": false}))
            .await,
        rpc_error(-32603, "recursive no-follow removal is unsupported")
    );
    // A symlink before the last component is not followed either: no directory.
    std::fs::create_dir(format!("{root}/real")).expect("mkdir");
    std::fs::write(format!("{root}/real/inner"), "i").expect("write");
    std::os::unix::fs::symlink(format!("{root}/real"), format!("{root}/dirlink")).expect("symlink");
    let through = format!("{root}/dirlink/inner");
    for (method, params) in [
        (
            "fs/readFile",
            json!({"path": through, "followSymlinks": false}),
        ),
        (
            "fs/getMetadata",
            json!({"path": through, "followSymlinks": false}),
        ),
        (
            "fs/writeFile",
            json!({"path": through, "dataBase64": "", "followSymlinks": false}),
        ),
        (
            "fs/createDirectory",
            json!({"path": format!("{root}/dirlink/new"), "followSymlinks": false}),
        ),
        (
            "fs/createDirectory",
            json!({"path": format!("{root}/dirlink"), "followSymlinks": false}),
        ),
        (
            "fs/remove",
            json!({"path": through, "followSymlinks": false, "recursive": false}),
        ),
    ] {
        assert_eq!(
            f.err(method, params.clone()).await,
            rpc_error(-32603, "Not a directory (os error 20)"),
            "{method} {params}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(format!("{root}/real/inner")).expect("kept"),
        "i",
        "nothing written or removed"
    );
    let long = format!("{root}/{}", "x".repeat(5000));
    let refused = f
        .err(
            "fs/createDirectory",
            json!({"path": long, "followSymlinks": false}),
        )
        .await;
    assert_eq!(refused["code"], -32600, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|message| message.ends_with("the limit is 4096 bytes")),
        "another invalid path keeps its own error: {refused}"
    );
    assert!(!std::path::Path::new(&format!("{root}/real/new")).exists());
    assert_eq!(
        f.call(
            "fs/remove",
            json!({"path": f.uri("real/inner"), "followSymlinks": false, "recursive": false})
        )
        .await,
        json!({}),
        "no symlink: removed"
    );
    let meta = f
        .call(
            "fs/getMetadata",
            json!({"path": f.uri("target.txt"), "followSymlinks": false}),
        )
        .await;
    assert_eq!(meta["isSymlink"], false);
    assert_eq!(meta["isFile"], true);
    let meta = f.call("fs/getMetadata", json!({"path": link})).await;
    assert_eq!(
        meta["isSymlink"], true,
        "a followed link still says it is one"
    );
    assert_eq!(
        f.call("fs/getMetadata", json!({"path": link})).await["isFile"],
        true
    );

    // A `sandbox` is decoded as Codex's type (its enforcement: tests/sandbox/fs_methods.rs).
    let malformed =
        json!({"permissions": {"type": "workspace-write"}, "windowsSandboxLevel": "disabled"});
    assert_eq!(
        f.err("fs/readFile", json!({"path": link, "sandbox": malformed}))
            .await,
        rpc_error(
            -32602,
            "unknown variant `workspace-write`, expected one of `managed`, `disabled`, `external`"
        )
    );
}

#[tokio::test]
async fn block_reads_and_writes_through_handles() {
    let mut f = Fixture::new().await;
    let root = f.root();
    std::fs::write(format!("{root}/digits"), "0123456789").expect("write");
    f.call("fs/open", json!({"handleId": "h", "path": f.uri("digits")}))
        .await;
    let block = |offset: u64, len: u64| json!({"handleId": "h", "offset": offset, "len": len});
    for (offset, len, text, eof) in [
        (6, 3, "678", false),
        (1, 2, "12", false),
        (8, 4, "89", true),
        (0, 2, "01", false),
        (7, 3, "789", false),
        (10, 3, "", true),
    ] {
        assert_eq!(
            f.call("fs/readBlock", block(offset, len)).await,
            json!({"chunk": b64(text), "eof": eof}),
            "({offset},{len})"
        );
    }
    assert_eq!(
        f.err("fs/readBlock", block(0, 0)).await,
        rpc_error(
            -32600,
            "file read block length must be between 1 and 1048576"
        )
    );
    assert_eq!(
        f.err("fs/open", json!({"handleId": "h", "path": f.uri("digits")}))
            .await,
        rpc_error(-32600, "file handle `h` already exists")
    );
    assert_eq!(
        f.err(
            "fs/writeBlock",
            json!({"handleId": "h", "offset": 0, "chunk": b64("x")})
        )
        .await,
        rpc_error(-32603, "Bad file descriptor (os error 9)"),
        "Codex's answer; the handle is kept"
    );
    assert_eq!(
        f.call("fs/readBlock", block(0, 1)).await,
        json!({"chunk": b64("0"), "eof": false}),
        "still open for reading"
    );
    let long_id = "x".repeat(33);
    assert_eq!(
        f.err(
            "fs/open",
            json!({"handleId": long_id, "path": f.uri("digits")})
        )
        .await,
        rpc_error(-32600, "file handle ID must not exceed 32 bytes")
    );
    assert_eq!(
        f.call("fs/close", json!({"handleId": "h"})).await,
        json!({})
    );
    assert_eq!(
        f.call("fs/close", json!({"handleId": "h"})).await,
        json!({}),
        "idempotent"
    );
    assert_eq!(
        f.err("fs/readBlock", block(0, 1)).await,
        json!({"code": -32004, "message": "unknown file handle `h`"})
    );

    f.call(
        "fs/open",
        json!({"handleId": "w", "path": f.uri("out.bin"), "mode": "replace"}),
    )
    .await;
    f.call(
        "fs/writeBlock",
        json!({"handleId": "w", "offset": 3, "chunk": b64("def")}),
    )
    .await;
    f.call(
        "fs/writeBlock",
        json!({"handleId": "w", "offset": 0, "chunk": b64("abc")}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(format!("{root}/out.bin")).expect("written"),
        "abcdef",
        "written straight through"
    );
    assert_eq!(
        f.err(
            "fs/readBlock",
            json!({"handleId": "w", "offset": 0, "len": 1})
        )
        .await,
        rpc_error(-32603, "Bad file descriptor (os error 9)")
    );
    assert_eq!(
        f.err(
            "fs/writeBlock",
            json!({"handleId": "w", "offset": 0, "chunk": b64("x")})
        )
        .await,
        json!({"code": -32004, "message": "unknown file handle `w`"}),
        "a failed read closes the handle, as Codex does"
    );

    for i in 0..128 {
        f.call(
            "fs/open",
            json!({"handleId": format!("n{i}"), "path": f.uri("digits")}),
        )
        .await;
    }
    assert_eq!(
        f.err(
            "fs/open",
            json!({"handleId": "n128", "path": f.uri("digits")})
        )
        .await,
        rpc_error(
            -32600,
            "at most 128 file handles may be open per connection"
        )
    );
    f.call("fs/close", json!({"handleId": "n0"})).await;
    f.call(
        "fs/open",
        json!({"handleId": "n128", "path": f.uri("digits")}),
    )
    .await;
}

#[tokio::test]
async fn walk_lists_as_codex_does_sorted_bounded_and_without_escapes() {
    let mut f = Fixture::new().await;
    let root = f.root();
    for dir in ["a/b/c", ".hidden/x"] {
        std::fs::create_dir_all(format!("{root}/{dir}")).expect("mkdir");
    }
    std::fs::write(format!("{root}/a/file"), "f").expect("write");
    std::fs::write(format!("{root}/Z"), "z").expect("write");
    let link = |target: String, name: &str| {
        std::os::unix::fs::symlink(target, format!("{root}/{name}")).expect("symlink")
    };
    link(f.outside(), "out-link");
    link(format!("{root}/nowhere"), "dangling");
    link(format!("{root}/Z"), "file-link");
    link(format!("{root}/a"), "dir-link");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(format!("{root}/fifo"))
            .status()
            .expect("mkfifo")
            .success()
    );
    let options = |depth: u64, dirs: u64, entries: u64, follow: bool| json!({"maxDepth": depth, "maxDirectories": dirs, "maxEntries": entries, "followDirectorySymlinks": follow, "pruneHiddenDirectories": true});
    let listed = |walk: &Value| -> Vec<String> {
        walk["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["kind"].as_str().unwrap_or_default(),
                    e["path"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let base = f.uri("");
    let expect = |entries: &[&str]| -> Vec<String> {
        entries
            .iter()
            .map(|entry| {
                let (kind, path) = entry.split_once(' ').expect("kind path");
                format!("{kind} {base}{path}")
            })
            .collect()
    };
    let walk = f
        .call(
            "fs/walk",
            json!({"path": root, "options": options(10, 100, 100, false)}),
        )
        .await;
    // Breadth-first, each directory sorted bytewise; FIFOs, file links, dangling and escaping
    // links omitted; the directory link too, as it is not followed.
    assert_eq!(
        listed(&walk),
        expect(&[
            "directory .hidden",
            "file Z",
            "directory a",
            "directory a/b",
            "file a/file",
            "directory a/b/c"
        ]),
        "hidden directories listed, not entered"
    );
    assert_eq!(walk["errors"], json!([]));
    assert_eq!(walk["truncated"], false);
    let followed = f
        .call(
            "fs/walk",
            json!({"path": root, "options": options(10, 100, 100, true)}),
        )
        .await;
    assert_eq!(
        listed(&followed),
        expect(&[
            "directory .hidden",
            "file Z",
            "directory a",
            "directory dir-link",
            "directory a/b",
            "file a/file",
            "directory a/b/c"
        ]),
        "a followed link is listed under its own path, its directory entered once"
    );
    let shallow = f
        .call(
            "fs/walk",
            json!({"path": root, "options": options(0, 100, 100, false)}),
        )
        .await;
    assert_eq!(
        listed(&shallow),
        expect(&["directory .hidden", "file Z", "directory a"]),
        "maxDepth 0 lists direct children only"
    );
    // Sorted: .hidden Z a dangling dir-link fifo file-link out-link. Omitted entries count,
    // dangling and escaping links do not (Codex passes over them as if absent).
    for (entries, truncated, last) in [
        (3, true, "directory a"),
        (4, true, "directory a"),
        (5, true, "directory a"),
        (6, false, "directory a"),
    ] {
        let cut = f
            .call(
                "fs/walk",
                json!({"path": root, "options": options(0, 100, entries, false)}),
            )
            .await;
        assert_eq!(
            (listed(&cut).last().cloned(), cut["truncated"].clone()),
            (expect(&[last]).pop(), json!(truncated)),
            "maxEntries {entries}"
        );
    }
    assert_eq!(
        f.err(
            "fs/walk",
            json!({"path": root, "options": options(1, 0, 1, true)})
        )
        .await,
        rpc_error(-32600, "filesystem walk limits must be greater than zero")
    );
    assert_eq!(
        f.err(
            "fs/walk",
            json!({"path": root, "options": options(65, 1, 1, true)})
        )
        .await,
        rpc_error(
            -32600,
            "filesystem walk limits exceed maximums: depth=64, directories=10000, entries=50000"
        )
    );
    assert_eq!(
        f.err(
            "fs/walk",
            json!({"path": f.uri("missing"), "options": options(1, 1, 1, true)})
        )
        .await["code"],
        -32004
    );
    let file_root = f
        .call(
            "fs/walk",
            json!({"path": f.uri("a/file"), "options": options(1, 1, 1, true)}),
        )
        .await;
    assert_eq!(
        file_root,
        json!({"entries": [], "errors": [], "truncated": false})
    );
    let link_root = f
        .call(
            "fs/walk",
            json!({"path": f.uri("dir-link"), "options": options(1, 10, 10, false)}),
        )
        .await;
    assert_eq!(
        link_root,
        json!({"entries": [], "errors": [], "truncated": false}),
        "a symlink as the root is followed only with followDirectorySymlinks"
    );
    let followed_root = f
        .call(
            "fs/walk",
            json!({"path": f.uri("dir-link"), "options": options(0, 10, 10, true)}),
        )
        .await;
    assert_eq!(
        followed_root["entries"],
        json!([{"kind": "directory", "path": f.uri("dir-link/b")}, {"kind": "file", "path": f.uri("dir-link/file")}]),
        "listed under the link's path"
    );
}

#[tokio::test]
async fn rejects_escape_attempts_with_no_side_effect() {
    let mut f = Fixture::new().await;
    let root = f.root();
    let outside = f.outside();
    std::os::unix::fs::symlink(format!("{outside}/secret.txt"), format!("{root}/file-link"))
        .expect("symlink");
    std::os::unix::fs::symlink(&outside, format!("{root}/dir-link")).expect("symlink");
    let escapes = [
        "/etc/passwd".to_owned(),
        format!("{root}/../outside/secret.txt"),
        format!("file://{root}/%2E%2E/outside/secret.txt"),
        format!("{root}/file-link"),
        format!("{root}/dir-link/secret.txt"),
        format!("/proc/self/root{outside}/secret.txt"),
        format!("{outside}/secret.txt"),
    ];
    for path in &escapes {
        let native = path
            .strip_prefix("file://")
            .map(|p| p.replace("%2E", "."))
            .unwrap_or_else(|| path.clone());
        let outside_text = rpc_error(
            -32600,
            &format!("path `{native}` is outside the allowed roots"),
        );
        assert_eq!(
            f.err("fs/readFile", json!({"path": path})).await,
            outside_text,
            "read {path}"
        );
        // Outside the roots, metadata is "not found" whether or not the path exists (so
        // Codex's probes for `.git` above the workspace see no marker), with the same text.
        assert_eq!(
            f.err("fs/getMetadata", json!({"path": path})).await,
            json!({"code": -32004, "message": outside_text["message"]}),
            "stat {path}"
        );
        assert_eq!(
            f.err("fs/open", json!({"handleId": "e", "path": path}))
                .await,
            outside_text,
            "open {path}"
        );
    }
    for (method, params) in [
        (
            "fs/writeFile",
            json!({"path": format!("{root}/dir-link/planted"), "dataBase64": b64("x")}),
        ),
        (
            "fs/writeFile",
            json!({"path": format!("{outside}/planted"), "dataBase64": b64("x")}),
        ),
        (
            "fs/createDirectory",
            json!({"path": format!("{root}/dir-link/planted")}),
        ),
        (
            "fs/createDirectory",
            json!({"path": format!("{root}/../planted")}),
        ),
        (
            "fs/copy",
            json!({"sourcePath": format!("{outside}/secret.txt"), "destinationPath": format!("{root}/stolen"), "recursive": false}),
        ),
        (
            "fs/copy",
            json!({"sourcePath": format!("{root}/file-link"), "destinationPath": format!("{outside}/planted"), "recursive": false}),
        ),
        (
            "fs/open",
            json!({"handleId": "w", "path": format!("{root}/dir-link/planted"), "mode": "replace"}),
        ),
        (
            "fs/remove",
            json!({"path": format!("{outside}/secret.txt")}),
        ),
        (
            "fs/remove",
            json!({"path": format!("{root}/dir-link/secret.txt")}),
        ),
        ("fs/readDirectory", json!({"path": "/"})),
        (
            "fs/readDirectory",
            json!({"path": format!("{root}/dir-link")}),
        ),
        (
            "fs/canonicalize",
            json!({"path": format!("{root}/dir-link")}),
        ),
    ] {
        let error = f.err(method, params.clone()).await;
        assert_eq!(error["code"], -32600, "{method} {params}: {error}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("is outside the allowed roots")),
            "{method} {params}: {error}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(format!("{outside}/secret.txt")).expect("intact"),
        "secret"
    );
    let outside_entries: Vec<_> = std::fs::read_dir(&outside)
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside_entries,
        vec![std::ffi::OsString::from("secret.txt")],
        "nothing planted outside"
    );
    assert!(!std::path::Path::new(&format!("{root}/stolen")).exists());
    assert!(!f.dir.path().join("planted").exists());
}

#[tokio::test]
async fn a_file_at_the_read_limit_is_read_whole_under_a_small_plugin_memory_limit() {
    // The bytes go from the host to the client without entering the plugin, so its memory
    // limit does not bound what fs/readFile returns (copied through the guest, 32 MiB and its
    // base64 took more than 64 MiB).
    let dir = TempDir::new();
    let limit = 32 * 1024 * 1024;
    let data: Vec<u8> = (0..limit).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("limit.bin"), &data).expect("write");
    std::fs::write(dir.path().join("over.bin"), vec![0u8; limit + 1]).expect("write");
    let root = dir.path().display().to_string();
    let (_server, mut client) =
        spawn_stdio(&["--fs-root", &root, "--plugin-memory-limit-mib", "64"]);
    client.handshake().await;

    let read = client
        .call("fs/readFile", json!({"path": format!("{root}/limit.bin")}))
        .await;
    let encoded = read["dataBase64"].as_str().expect("dataBase64");
    assert!(
        STANDARD.decode(encoded).expect("base64") == data,
        "every byte arrives"
    );
    assert_eq!(
        client
            .call_err("fs/readFile", json!({"path": format!("{root}/over.bin")}))
            .await,
        rpc_error(-32600, "file is too large to read: limit is 33554432 bytes")
    );
}
