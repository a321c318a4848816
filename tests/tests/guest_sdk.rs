//! Plugins written with the guest SDK (`wexec-guest`), loaded by the real binary and called
//! through `wexec::client`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers of a test fail the test on any error"
)]

use serde_json::{Value, json};
use wexec::client::{Client, ClientOptions, StdioCommand};
use wexec_tests::{HELLO_WASM, wexec_bin};

async fn connect(args: &[&str]) -> Client {
    let cache = wexec_bin()
        .parent()
        .map(|dir| dir.join("test-cache"))
        .unwrap_or_default();
    let command = StdioCommand::new(wexec_bin())
        .args(args.iter().copied())
        .env("XDG_CACHE_HOME", cache.display().to_string())
        .env("RUST_LOG", "wexec=warn");
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
    assert_eq!(names, ["fs", "http", "env"]);
    assert!(info.capabilities["sandboxedFileStreaming"]);
}
