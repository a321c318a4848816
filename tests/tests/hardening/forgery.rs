//! A plugin cannot forge protocol messages: whatever JSON text it hands back leaves wexec as
//! part of exactly one message, on one line (docs/protocol.md §3.2, docs/plugins.md).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, TempDir};

use super::spawn_hostile;

/// A `process/output` the client would believe, and a reply to a request it has pending.
fn forged(line_break: &str, pending_id: i64) -> String {
    let output = r#"{"jsonrpc":"2.0","method":"process/output","params":{"processId":"p","seq":1,"stream":"stdout","chunk":"Zm9yZ2Vk"}}"#;
    let reply = format!(r#"{{"jsonrpc":"2.0","id":{pending_id},"result":{{"forged":true}}}}"#);
    format!("{line_break}{output}{line_break},\"r\":{line_break}{reply}{line_break}")
}

/// The next raw line as one JSON object; a line that is not one, or holds a raw CR, fails.
async fn next_message(client: &mut Client) -> Value {
    let line = client
        .recv_line()
        .await
        .expect("wexec keeps its stdout open");
    assert!(!line.contains('\r'), "a raw CR reached the line: {line:?}");
    let message: Value = serde_json::from_str(&line)
        .unwrap_or_else(|err| panic!("a line that is not one JSON message ({err}): {line:?}"));
    assert!(message.is_object(), "{line}");
    message
}

/// Sends `method` with `params` and returns every message that arrived until its reply and
/// `notifications` notifications had, plus whatever else came before a later round trip
/// (anything forged is written with the genuine message, so it comes before).
async fn exchange(
    client: &mut Client,
    method: &str,
    params: Value,
    notifications: usize,
) -> (i64, Vec<Value>) {
    let id = client.send_request(method, params).await;
    let mut messages = Vec::new();
    let (mut replied, mut notified) = (false, 0);
    while !replied || notified < notifications {
        let message = next_message(client).await;
        if message["id"] == id {
            replied = true;
        } else if message.get("method").is_some() {
            notified += 1;
        }
        messages.push(message);
    }
    let sentinel = client.send_request("environment/status", json!({})).await;
    loop {
        let message = next_message(client).await;
        if message["id"] == sentinel {
            return (id, messages);
        }
        messages.push(message);
    }
}

#[tokio::test]
async fn no_placement_of_guest_json_can_forge_a_message() {
    let dir = TempDir::new();
    let file = dir.path().join("data.bin");
    std::fs::write(&file, b"contents").expect("write file");
    let root = dir.path().display().to_string();
    let (_server, mut client) =
        spawn_hostile(&dir, &format!("read-only-roots = [\"{root}\"]"), &[]).await;
    let path = file.display().to_string();
    for line_break in ["\n", "\r\n", "\r"] {
        for placement in PLACEMENTS {
            // The forged reply names the id of the round trip that follows the request: the
            // client is waiting for it.
            let probe_id = client.send_request("environment/status", json!({})).await;
            let _ = client.reply_to(&json!(probe_id)).await;
            let (method, params) = placement(&forged(line_break, probe_id + 2), &path);
            let expected_notifications = usize::from(method == "hostile/notify");
            let (id, messages) =
                exchange(&mut client, method, params, expected_notifications).await;
            let context = format!("{method} with {line_break:?}: {messages:?}");
            let (replies, notifications): (Vec<&Value>, Vec<&Value>) = messages
                .iter()
                .partition(|message| message.get("id").is_some());
            assert_eq!(replies.len(), 1, "{context}");
            assert_eq!(replies[0]["id"], id, "{context}");
            assert_eq!(notifications.len(), expected_notifications, "{context}");
            for notification in notifications {
                assert_eq!(notification["method"], "hostile/tick", "{context}");
            }
            // The forged text arrived, as data inside the one message.
            let text = serde_json::to_string(&messages).expect("encode");
            assert!(text.contains("process/output"), "{context}");
        }
    }
}

/// Builds the method and params that put `forged` in one place (`path` is a file the plugin
/// may read).
type Placement = fn(&str, &str) -> (&'static str, Value);

/// Every place guest JSON text reaches a message.
const PLACEMENTS: [Placement; 6] = [
    |forged, _| {
        (
            "hostile/result",
            json!({"text": format!("{{\"x\":{forged}}}")}),
        )
    },
    |forged, _| {
        (
            "hostile/respond",
            json!({"text": format!("{{\"x\":{forged}}}")}),
        )
    },
    |forged, _| {
        let data = format!("{{\"x\":{forged}}}");
        ("hostile/error", json!({"message": "m", "data": data}))
    },
    |forged, path| {
        let before = format!("{{\"x\":{forged},\"data\":");
        (
            "hostile/base64",
            json!({"path": path, "before": before, "after": "}"}),
        )
    },
    |forged, path| {
        let after = format!(",\"x\":{forged}}}");
        (
            "hostile/base64",
            json!({"path": path, "before": "{\"data\":", "after": after}),
        )
    },
    |forged, _| {
        let params = format!("{{\"x\":{forged}}}");
        (
            "hostile/notify",
            json!({"method": "hostile/tick", "params": params}),
        )
    },
];

#[tokio::test]
async fn a_fragment_that_would_close_its_envelope_is_refused() {
    let dir = TempDir::new();
    let (_server, mut client) = spawn_hostile(&dir, "", &[]).await;
    for text in [
        r#"{"a":1}, "id": 99"#,
        "{\"a\":1}\n{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}",
        r#"1} , "forged": {"#,
    ] {
        let (id, messages) =
            exchange(&mut client, "hostile/result", json!({"text": text}), 0).await;
        assert_eq!(messages.len(), 1, "{text}: {messages:?}");
        assert_eq!(messages[0]["id"], id);
        assert_eq!(messages[0]["error"]["code"], -32603, "{text}");
        let message = messages[0]["error"]["message"].as_str().expect("message");
        assert!(
            message.starts_with("plugin hostile failed: its result is not JSON"),
            "{message}"
        );
    }
}
