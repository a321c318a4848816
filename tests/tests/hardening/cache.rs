//! The compile cache cannot be used to inject native code: the filesystem capability never
//! exposes it, an artifact that does not match the digest written with it is compiled again,
//! and an artifact changing under a running wexec cannot touch it (docs/plugins.md, "The
//! compile cache").

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir, command, rpc_error, spawn_stdio_with};

/// wexec with its compile cache under `root/cache` and `root` as the fs root, after the
/// handshake.
async fn start(root: &std::path::Path) -> (Server, Client) {
    let mut command = command(&["--fs-root", &root.display().to_string()]);
    command.env("XDG_CACHE_HOME", root.join("cache"));
    let (server, mut client) = spawn_stdio_with(command);
    client.handshake().await;
    (server, client)
}

/// wexec's log once it has refused `count` cached artifacts (each is logged when its plugin is
/// linked: at startup, or in the background just after for the bundled plugins), or after 5 s.
async fn refusals(server: &Server, count: usize) -> String {
    let mut log = server.stderr_containing("does not match its digest").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while log.matches("does not match its digest").count() < count
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        log = server.stderr();
    }
    log
}

fn artifacts(cache: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(cache)
        .expect("cache dir")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn the_fs_capability_never_exposes_the_compile_cache() {
    let dir = TempDir::new();
    let root = dir.path();
    let (_server, mut client) = start(root).await;
    let cache = root.join("cache/wexec");
    let artifact = artifacts(&cache).pop().expect("artifacts were written");
    let before = std::fs::read(&artifact).expect("read artifact");

    let listing = client
        .call(
            "fs/readDirectory",
            json!({"path": root.join("cache").display().to_string()}),
        )
        .await;
    assert_eq!(listing, json!({"entries": []}), "the cache is not listed");
    std::os::unix::fs::symlink(&cache, root.join("peek")).expect("symlink");
    std::fs::write(root.join("evil.cwasm"), b"attacker's code").expect("write");
    let outside = |path: &std::path::Path| {
        rpc_error(
            -32600,
            &format!("path `{}` is outside the allowed roots", path.display()),
        )
    };
    let peek = root.join("peek");
    let through_link = root.join("peek").join(artifact.file_name().expect("name"));
    for (method, params, path) in [
        (
            "fs/getMetadata",
            json!({"path": cache.display().to_string()}),
            cache.clone(),
        ),
        (
            "fs/readFile",
            json!({"path": artifact.display().to_string()}),
            artifact.clone(),
        ),
        (
            "fs/writeFile",
            json!({"path": artifact.display().to_string(), "dataBase64": "eA=="}),
            artifact.clone(),
        ),
        (
            "fs/copy",
            json!({"sourcePath": root.join("evil.cwasm").display().to_string(), "destinationPath": artifact.display().to_string(), "recursive": false}),
            artifact.clone(),
        ),
        (
            "fs/remove",
            json!({"path": cache.display().to_string()}),
            cache.clone(),
        ),
        (
            "fs/readDirectory",
            json!({"path": peek.display().to_string()}),
            peek.clone(),
        ),
        (
            "fs/writeFile",
            json!({"path": through_link.display().to_string(), "dataBase64": "eA=="}),
            through_link.clone(),
        ),
    ] {
        let mut expected = outside(&path);
        if method == "fs/getMetadata" {
            // Outside the roots, metadata answers "not found" (docs/protocol.md §9.1).
            expected["code"] = json!(-32004);
        }
        assert_eq!(
            client.call_err(method, params).await,
            expected,
            "{method} {}",
            path.display()
        );
    }
    // Copying a tree that holds the cache leaves the cache out.
    let copy = root.join("copy");
    client
        .call(
            "fs/copy",
            json!({"sourcePath": root.join("cache").display().to_string(), "destinationPath": copy.display().to_string(), "recursive": true}),
        )
        .await;
    assert!(copy.is_dir() && !copy.join("wexec").exists());
    assert_eq!(std::fs::read(&artifact).expect("read artifact"), before);
}

/// The attack: remove the directory above the cache (its hidden path then names nothing),
/// put a symlink to a plugin-visible directory in its place, and wait for wexec to write its
/// next artifacts and digests there. Every step that changes a directory leading to the cache
/// is refused, so the cache stays where it was.
#[tokio::test]
async fn the_directories_leading_to_the_compile_cache_cannot_be_removed_or_replaced() {
    let dir = TempDir::new();
    let root = dir.path();
    let (_server, mut client) = start(root).await;
    let cache_home = root.join("cache");
    let artifact = artifacts(&cache_home.join("wexec"))
        .pop()
        .expect("artifacts were written");
    std::fs::create_dir(root.join("planted")).expect("mkdir");
    std::os::unix::fs::symlink(root.join("planted"), root.join("link")).expect("symlink");
    let denied = rpc_error(
        -32600,
        &format!(
            "path `{}` holds wexec's own files (its compile cache, config or plugins) and cannot be changed",
            cache_home.display()
        ),
    );
    let home = cache_home.display().to_string();
    for (method, params) in [
        (
            "fs/remove",
            json!({"path": home, "recursive": true, "force": true}),
        ),
        (
            "fs/copy",
            json!({"sourcePath": root.join("link").display().to_string(), "destinationPath": home, "recursive": false}),
        ),
        (
            "fs/copy",
            json!({"sourcePath": root.join("planted").display().to_string(), "destinationPath": home, "recursive": true}),
        ),
        ("fs/writeFile", json!({"path": home, "dataBase64": "eA=="})),
        (
            "fs/createDirectory",
            json!({"path": home, "recursive": false}),
        ),
    ] {
        assert_eq!(
            client.call_err(method, params.clone()).await,
            denied,
            "{method} {params}"
        );
    }
    // Through a symlink to the directory above the cache, the same.
    std::os::unix::fs::symlink(&cache_home, root.join("home-link")).expect("symlink");
    let via_link = root.join("home-link").display().to_string();
    assert_eq!(
        client
            .call_err(
                "fs/writeFile",
                json!({"path": via_link, "dataBase64": "eA=="})
            )
            .await,
        rpc_error(
            -32600,
            &format!(
                "path `{via_link}` holds wexec's own files (its compile cache, config or plugins) and cannot be changed"
            )
        )
    );
    assert!(artifact.is_file(), "the cache is intact");
    assert!(
        std::fs::symlink_metadata(&cache_home)
            .expect("stat")
            .is_dir()
    );
    // A sibling of the cache is the plugin's as before.
    let sibling = cache_home.join("other");
    client
        .call(
            "fs/createDirectory",
            json!({"path": sibling.display().to_string(), "recursive": false}),
        )
        .await;
    client
        .call(
            "fs/remove",
            json!({"path": sibling.display().to_string(), "recursive": true, "force": false}),
        )
        .await;
}

#[tokio::test]
async fn a_swapped_artifact_is_compiled_again_and_a_changing_one_cannot_touch_wexec() {
    let dir = TempDir::new();
    let root = dir.path();
    std::fs::write(root.join("note.txt"), "note").expect("write");
    let note = json!({"path": root.join("note.txt").display().to_string()});
    {
        let (_server, mut client) = start(root).await;
        assert_eq!(
            client.call("fs/readFile", note.clone()).await["dataBase64"],
            "bm90ZQ=="
        );
    }
    // Valid native code of the wrong plugin in every artifact: each file gets the next one's.
    let cache = root.join("cache/wexec");
    let found = artifacts(&cache);
    assert!(found.len() >= 3, "{found:?}");
    let contents: Vec<Vec<u8>> = found
        .iter()
        .map(|path| std::fs::read(path).expect("read"))
        .collect();
    for (index, path) in found.iter().enumerate() {
        std::fs::write(path, &contents[(index + 1) % contents.len()]).expect("swap");
    }

    let (server, mut client) = start(root).await;
    let info = client.call("environment/info", Value::Null).await;
    assert_eq!(
        wexec_tests::plugin_names(&info),
        vec!["fs", "http", "env", "config", "discovery"]
    );
    assert_eq!(
        client.call("fs/readFile", note.clone()).await["dataBase64"],
        "bm90ZQ=="
    );
    let log = refusals(&server, found.len()).await;
    assert_eq!(
        log.matches("does not match its digest").count(),
        found.len(),
        "each swapped artifact was refused: {log}"
    );
    // The refusal is logged before the recompiled artifact is written: wait for the writes.
    for (index, path) in found.iter().enumerate() {
        let swapped = &contents[(index + 1) % contents.len()];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::fs::read(path).expect("read") == *swapped && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(
            std::fs::read(path).expect("read") != *swapped,
            "{} rewritten by the recompile",
            path.display()
        );
    }

    // Cut every artifact short under the running wexec: a mapped artifact would raise SIGBUS
    // the next time its code runs.
    for path in artifacts(&cache) {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|file| file.set_len(0))
            .expect("truncate");
    }
    for _ in 0..3 {
        assert_eq!(
            client.call("fs/readFile", note.clone()).await["dataBase64"],
            "bm90ZQ=="
        );
        assert_eq!(
            client.call("environment/info", Value::Null).await["wexec"]["plugins"],
            info["wexec"]["plugins"]
        );
    }
}

/// The digest beside an artifact is a MAC keyed with the user's secret key, over the file's
/// name and contents: a cache directory that another wexec's plugins or processes can write (it
/// lies inside that wexec's roots) can be given swapped artifacts with digests anyone can
/// compute (plain BLAKE3, or BLAKE3 keyed with any other key), or another plugin's genuine
/// artifact and digest under this one's names, and wexec compiles every one of them again
/// instead of running it.
#[tokio::test]
async fn an_artifact_with_a_digest_made_without_the_key_is_compiled_again() {
    let dir = TempDir::new();
    let root = dir.path();
    drop(start(root).await);
    let cache = root.join("cache/wexec");
    let found = artifacts(&cache);
    assert!(found.len() >= 3, "{found:?}");
    let contents: Vec<Vec<u8>> = found
        .iter()
        .map(|path| std::fs::read(path).expect("read"))
        .collect();
    // Whatever the digest beside an artifact is called.
    let digest_of = |path: &std::path::Path| {
        let stem = path.file_stem().expect("stem").to_owned();
        let digests: Vec<_> = std::fs::read_dir(&cache)
            .expect("cache")
            .flatten()
            .map(|entry| entry.path())
            .filter(|other| {
                other != path
                    && other.file_stem() == Some(stem.as_os_str())
                    && std::fs::read(other).is_ok_and(|text| text.len() == 64)
            })
            .collect();
        assert_eq!(digests.len(), 1, "{digests:?}");
        digests[0].clone()
    };
    let genuine: Vec<Vec<u8>> = found
        .iter()
        .map(|path| std::fs::read(digest_of(path)).expect("read digest"))
        .collect();
    for (index, path) in found.iter().enumerate() {
        let next = (index + 1) % contents.len();
        let swapped = &contents[next];
        std::fs::write(path, swapped).expect("swap");
        let forged = match index % 3 {
            0 => blake3::hash(swapped).to_hex().to_string().into_bytes(),
            1 => blake3::keyed_hash(&[7; 32], swapped)
                .to_hex()
                .to_string()
                .into_bytes(),
            // The genuine pair of another plugin, copied under this one's names.
            _ => genuine[next].clone(),
        };
        std::fs::write(digest_of(path), forged).expect("forge");
    }
    let (server, mut client) = start(root).await;
    let info = client.call("environment/info", Value::Null).await;
    assert_eq!(
        wexec_tests::plugin_names(&info),
        vec!["fs", "http", "env", "config", "discovery"]
    );
    let log = refusals(&server, found.len()).await;
    assert_eq!(
        log.matches("does not match its digest").count(),
        found.len(),
        "each forged artifact was refused: {log}"
    );
}

#[tokio::test]
async fn a_root_inside_the_compile_cache_is_refused() {
    let dir = TempDir::new();
    let inside = dir.path().join("cache/wexec/sub");
    std::fs::create_dir_all(&inside).expect("mkdir");
    std::fs::set_permissions(
        dir.path().join("cache/wexec"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    let mut command = command(&["--fs-root", &inside.display().to_string()]);
    command.env("XDG_CACHE_HOME", dir.path().join("cache"));
    let (mut server, _client) = spawn_stdio_with(command);
    assert!(!server.wait().await.success());
    let stderr = server.stderr();
    assert!(
        stderr.contains(&format!(
            "its filesystem root {} lies inside wexec's compile cache",
            inside.display()
        )),
        "{stderr}"
    );
}
