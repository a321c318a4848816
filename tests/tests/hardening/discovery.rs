//! One hostile file in a repository cannot fail a client's whole capability discovery
//! (docs/protocol.md §7.6): a root's manifest is sent twice (as its plugin's and as its
//! namespace's) and is charged against the reply twice; a manifest is at most 256 KiB; what does
//! not fit is left out with a warning, never the request.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{TempDir, spawn_stdio};

const V1: &str = "capabilityRoots/discoverV1";

/// `count` roots under `dir`, each with a `.codex-plugin/plugin.json` of `bytes` control
/// characters (six bytes each in JSON); their `discoverV1` params.
fn hostile_roots(dir: &TempDir, count: usize, bytes: usize) -> Value {
    let manifest = vec![1u8; bytes];
    let roots: Vec<Value> = (0..count)
        .map(|index| {
            let root = dir.path().join(format!("r{index:02}"));
            std::fs::create_dir_all(root.join(".codex-plugin")).expect("mkdir");
            std::fs::write(root.join(".codex-plugin/plugin.json"), &manifest).expect("write");
            json!({"id": format!("r{index:02}"), "path": format!("file://{}", root.display())})
        })
        .collect();
    json!({ "roots": roots })
}

/// 8 roots with a 1 MiB manifest each made the reply fail with "result would exceed the 64 MiB
/// message limit". Now a manifest that large is refused on its own.
#[tokio::test]
async fn an_oversized_manifest_is_refused_not_the_discovery() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let result = client.call(V1, hostile_roots(&dir, 8, 1024 * 1024)).await;
    let roots = result["roots"].as_array().expect("roots");
    assert_eq!(roots.len(), 8);
    for (index, root) in roots.iter().enumerate() {
        let manifest = format!(
            "file://{}/r{index:02}/.codex-plugin/plugin.json",
            dir.path().display()
        );
        assert_eq!(root["plugin"], Value::Null, "{index}");
        assert_eq!(
            root["warnings"],
            json!([format!(
                "capability manifest {manifest} exceeds the 262144-byte limit"
            )]),
            "{index}"
        );
    }
}

/// Manifests within the limit but sent twice: once charged, 40 of them (1.2 MB of JSON each,
/// twice) made a reply of ~96 MB. Charged as sent, the reply stays within one message and the
/// roots that no longer fit say so.
#[tokio::test]
async fn a_manifest_sent_twice_is_charged_twice() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let reply = client
        .request(V1, hostile_roots(&dir, 40, 200 * 1024))
        .await;
    let roots = reply["result"]["roots"].as_array().unwrap_or_else(|| {
        let shown: String = reply.to_string().chars().take(300).collect();
        panic!("no roots: {shown}")
    });
    assert_eq!(roots.len(), 40);
    let full = "capability discovery reply reached its 50331648-byte limit; the rest of this root is left out";
    let answered = roots
        .iter()
        .filter(|root| root["plugin"].is_object())
        .count();
    let left_out = roots
        .iter()
        .filter(|root| root["warnings"] == json!([full]))
        .count();
    assert!((1..40).contains(&answered), "{answered} of 40 answered");
    assert_eq!(answered + left_out, 40);
    // An answered root carries its manifest both ways.
    let first = &roots[0];
    assert_eq!(
        first["plugin"]["manifest"], first["namespaceManifests"][0],
        "the root's own manifest, as its namespace"
    );
}
