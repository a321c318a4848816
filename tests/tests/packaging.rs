//! The deployment recipes in packaging/ (docs/deploy.md): the Kubernetes manifests pass a real
//! schema validator (`kubernetes-validate`, strict), and the arguments the image and the pod
//! give wexec start the real binary, whose `/readyz` answers without the token and whose
//! upgrade needs it. The image itself is not built here: no container runtime runs on the
//! test machines (docs/deploy.md says what was tried).

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::Path;

use serde_json::Value;
use wexec_tests::{TempDir, command, http_raw, real_client, spawn_websocket_with, status_of};

use wexec_tests::{repository, repository_file as read};

/// The JSON array after `prefix` on the line that starts with it (a Dockerfile's exec form, a
/// flow sequence in YAML).
fn array_after(text: &str, prefix: &str) -> Vec<String> {
    let line = text
        .lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starts with {prefix}"));
    let parsed: Vec<Value> = serde_json::from_str(line.trim()).expect("a JSON array");
    (parsed.iter())
        .map(|arg| arg.as_str().expect("a string").to_owned())
        .collect()
}

#[test]
fn the_kubernetes_manifests_pass_a_strict_schema_validator() {
    let Some(validate) = real_client("WEXEC_K8S_VALIDATE", "the kubernetes-validate command")
    else {
        return;
    };
    let manifest = repository().join("packaging/kubernetes/wexec.yaml");
    let run = |path: &Path| {
        std::process::Command::new(&validate)
            .args(["--strict", "--quiet"])
            .arg(path)
            .output()
            .expect("run kubernetes-validate")
    };
    let valid = run(&manifest);
    assert!(
        valid.status.success(),
        "{}{}",
        String::from_utf8_lossy(&valid.stdout),
        String::from_utf8_lossy(&valid.stderr)
    );
    // The validator refuses what is wrong: a misspelt field fails.
    let dir = TempDir::new();
    let broken = dir.path().join("broken.yaml");
    let text = read("packaging/kubernetes/wexec.yaml").replace("procMount:", "procMounts:");
    std::fs::write(&broken, text).expect("write the broken copy");
    assert!(!run(&broken).status.success(), "a misspelt field passed");
}

#[tokio::test]
async fn the_image_and_the_pod_start_wexec_ready_and_behind_its_token() {
    let image = array_after(&read("packaging/docker/Dockerfile"), "CMD ");
    let pod = array_after(&read("packaging/kubernetes/wexec.yaml"), "args: ");
    assert_eq!(image, pod, "the image and the pod start wexec alike");
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    // The recipes' arguments, on a free loopback port and a workspace of the test's own.
    let args: Vec<&str> = (image.iter())
        .map(|arg| match arg.as_str() {
            "ws://0.0.0.0:8765" => "ws://127.0.0.1:0",
            "/workspace" => root.as_str(),
            other => other,
        })
        .collect();
    let mut wexec = command(&args);
    wexec.env("WEXEC_TOKEN", "a-token-from-the-secret");
    let server = spawn_websocket_with(wexec).await;
    let addr = server.addr();
    let get =
        |path: &str, extra: &str| format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}\r\n");
    assert_eq!(status_of(&http_raw(&addr, &get("/readyz", "")).await), 200);
    let upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    assert_eq!(status_of(&http_raw(&addr, &get("/", upgrade)).await), 401);
}
