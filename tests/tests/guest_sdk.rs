//! Plugins written with the guest SDK (`wexec-guest`), loaded by the real binary and called
//! through `wexec_client`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers of a test fail the test on any error"
)]

use serde_json::{Value, json};
use wexec_client::{Client, ClientOptions};
use wexec_tests::{GREP_WASM, HELLO_WASM, TempDir};

async fn connect(args: &[&str]) -> Client {
    let command = wexec_tests::client_command(args);
    Client::connect_stdio(command, ClientOptions::new("guest-sdk-test"))
        .await
        .unwrap()
}

#[tokio::test]
async fn the_hello_example_is_loaded_listed_and_called() {
    let client = connect(&["--plugin", HELLO_WASM]).await;
    let list = client.plugin_list().await.unwrap();
    let hello = list
        .plugins
        .iter()
        .find(|plugin| plugin.name == "hello")
        .unwrap();
    assert_eq!(hello.version, "1.0.0");
    assert_eq!(hello.methods, ["hello/greet"]);
    assert_eq!(hello.grants, Default::default());

    let reply: Value = client
        .call("hello/greet", &json!({"name": "Ada"}))
        .await
        .unwrap();
    assert_eq!(
        reply,
        json!({"greeting": "Hello, Ada!", "host": format!("wexec {}", wexec::VERSION)})
    );

    let err = client
        .call::<_, Value>("hello/greet", &json!({"nom": "Ada"}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(-32602), "{err}");
    assert!(err.to_string().contains("missing field `name`"), "{err}");
    let err = client
        .call::<_, Value>("hello/greet", &json!({"name": ""}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "server error -32602: name must not be empty"
    );
}

#[tokio::test]
async fn the_bundled_plugins_built_on_the_sdk_still_serve_their_families() {
    let client = connect(&[]).await;
    let info = client.environment_info().await.unwrap();
    let names: Vec<&str> = (info.wexec.as_ref().unwrap().plugins.iter())
        .map(|plugin| plugin.name.as_str())
        .collect();
    assert_eq!(names, ["fs", "http", "env", "config", "discovery"]);
    // Exactly docs/protocol.md §7.4's flags.
    let flags: Vec<(&str, bool)> = (info.capabilities.iter())
        .map(|(name, value)| (name.as_str(), *value))
        .collect();
    assert_eq!(
        flags,
        [
            ("capabilityDiscoverySandbox", true),
            ("capabilityDiscoveryV2", true),
            ("credentialMasking", false),
            ("credentialMaskingCustomProviders", false),
            ("environmentConfigRead", true),
            ("fileWriteStreaming", true),
            ("fsWatchMissing", true),
            ("httpHeaderEnvVars", true),
            ("linuxApprovedRootWritePreservesRestrictions", true),
            ("linuxRootWritePreservesDevices", true),
            ("networkProxyLaunch", false),
            ("networkProxyReviewDomains", false),
            ("sandboxedFileStreaming", true),
            ("shellSnapshotV2", false),
            ("windowsMxc", false),
        ]
    );
}

#[tokio::test]
async fn the_grep_example_searches_only_the_granted_root() {
    let dir = TempDir::new();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::create_dir_all(root.join(".hidden")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(root.join("a.txt"), "alpha\nbeta\nALPHAbet\n").unwrap();
    std::fs::write(root.join("sub/b.txt"), "no\nalpha here\n").unwrap();
    std::fs::write(root.join(".hidden/c.txt"), "alpha hidden\n").unwrap();
    std::fs::write(root.join("bin.dat"), b"alpha\0\x01").unwrap();
    std::fs::write(outside.join("secret.txt"), "alpha secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
    let config = dir.path().join("wexec.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugins]]\nfile = \"{GREP_WASM}\"\nread-only-roots = [\"{}\"]\n",
            root.display()
        ),
    )
    .unwrap();
    let client = connect(&["--config", config.to_str().unwrap()]).await;
    let root_path = root.to_str().unwrap();

    let found: Value = client
        .call(
            "grep/search",
            &json!({"pattern": "alpha", "path": root_path, "caseInsensitive": true}),
        )
        .await
        .unwrap();
    let lines: Vec<(String, u64)> = found["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let path = m["path"].as_str().unwrap();
            let name = path
                .strip_prefix(&format!("file://{root_path}/"))
                .unwrap()
                .to_owned();
            (name, m["line"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("a.txt".to_owned(), 1),
            ("a.txt".to_owned(), 3),
            ("sub/b.txt".to_owned(), 2)
        ],
        "{found}"
    );
    assert_eq!(found["truncated"], false);
    let skipped = found["skipped"].to_string();
    assert!(
        skipped.contains("bin.dat") && skipped.contains("binary"),
        "{skipped}"
    );
    assert!(!found.to_string().contains("secret"), "{found}");

    let hidden: Value = client
        .call(
            "grep/search",
            &json!({"pattern": "hidden", "path": root_path, "includeHidden": true}),
        )
        .await
        .unwrap();
    assert_eq!(hidden["matches"].as_array().unwrap().len(), 1, "{hidden}");

    let limited: Value = client
        .call(
            "grep/search",
            &json!({"pattern": "a", "path": root_path, "maxResults": 1}),
        )
        .await
        .unwrap();
    assert_eq!(
        (
            limited["matches"].as_array().unwrap().len(),
            &limited["truncated"]
        ),
        (1, &json!(true))
    );

    let outside_path = outside.to_str().unwrap();
    for path in [
        outside_path.to_owned(),
        format!("{root_path}/escape"),
        format!("{root_path}/../outside"),
    ] {
        let err = client
            .call::<_, Value>("grep/search", &json!({"pattern": "alpha", "path": path}))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(-32600), "{path}: {err}");
        assert!(
            err.to_string().contains("outside the allowed roots"),
            "{err}"
        );
    }
    let err = client
        .call::<_, Value>("grep/search", &json!({"pattern": "(", "path": root_path}))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(-32602), "{err}");
    assert!(err.to_string().contains("invalid pattern"), "{err}");
}
