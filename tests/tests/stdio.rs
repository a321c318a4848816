//! The envelope, handshake and lifetime of a stdio connection, against the real binary
//! (docs/protocol.md §3.2, §4, §5).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Received, TIMEOUT, rpc_error, spawn_stdio};

#[tokio::test]
async fn handshake_yields_a_uuid_v4_session_and_environment_info() {
    let (_server, mut client) = spawn_stdio(&[]);
    let result = client.handshake().await;
    let session_id = result["sessionId"].as_str().expect("sessionId string");
    let uuid = uuid::Uuid::parse_str(session_id).expect("sessionId is a UUID");
    assert_eq!(uuid.get_version_num(), 4);

    let info = &result["environmentInfo"];
    assert_eq!(info["platformOs"], "linux");
    assert_eq!(info["executorVersion"], info["wexec"]["version"]);
    assert!(
        info["cwd"]
            .as_str()
            .is_some_and(|cwd| cwd.starts_with("file:///"))
    );
    assert!(
        info["tempDir"]
            .as_str()
            .is_some_and(|dir| dir.starts_with("file:///"))
    );
    assert_eq!(info["capabilities"]["fileWriteStreaming"], true);
    assert_eq!(info["capabilities"]["environmentConfigRead"], true);
    assert_eq!(info["capabilities"]["capabilityDiscoveryV2"], true);
    // Codex's ten fields, always present (docs/protocol.md §7.4).
    let provider = info["providerId"].as_str().expect("providerId");
    assert!(
        provider.len() == 71
            && provider.starts_with("sha256:")
            && provider[7..].bytes().all(|b| b.is_ascii_hexdigit()),
        "{provider}"
    );
    assert_eq!(info["prependPathDirs"], json!([]));
    assert!(info["temporaryDirectories"].is_array());
    let mut fields: Vec<&str> = info
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "capabilities",
            "cwd",
            "executorVersion",
            "platformOs",
            "prependPathDirs",
            "providerId",
            "shell",
            "tempDir",
            "temporaryDirectories",
            "userHomeDir",
            "wexec"
        ]
    );
    // environment/info returns what initialize embedded, and the sandbox probe's verdict,
    // which that copy, taken at startup, may lack.
    let asked = client.call("environment/info", Value::Null).await;
    assert_eq!(
        asked["wexec"]["sandbox"],
        json!({"tier": "namespaces"}),
        "{asked}"
    );
    assert_eq!(
        wexec_tests::without_sandbox_verdict(&asked),
        wexec_tests::without_sandbox_verdict(info)
    );
    assert_eq!(
        client.call("environment/status", json!({})).await,
        json!({"status": "ready"})
    );

    let again = client
        .call_err("initialize", json!({"clientName": "x"}))
        .await;
    assert_eq!(
        again,
        rpc_error(-32600, "initialize may only be sent once per connection")
    );
}

#[tokio::test]
async fn pipelined_early_requests_get_both_gating_errors_in_wire_order() {
    let (_server, mut client) = spawn_stdio(&[]);
    let batch = [
        json!({"id": 1, "method": "environment/status"}),
        json!({"id": 2, "method": "initialize", "params": {"clientName": "t"}}),
        json!({"id": 3, "method": "environment/info"}),
        json!({"method": "initialized", "params": {}}),
        json!({"id": 4, "method": "environment/status"}),
    ];
    let text: String = batch.iter().map(|m| format!("{m}\n")).collect();
    client.send_raw(text.as_bytes()).await;
    let mut replies = Vec::new();
    for _ in 0..4 {
        replies.push(client.recv().await);
    }
    assert_eq!(
        replies[0],
        json!({"jsonrpc": "2.0", "id": 1, "error": rpc_error(-32600, "client must call initialize before using environment status methods")})
    );
    assert_eq!(replies[1]["id"], 2);
    assert!(replies[1]["result"]["sessionId"].is_string());
    assert_eq!(
        replies[2],
        json!({"jsonrpc": "2.0", "id": 3, "error": rpc_error(-32600, "client must send initialized before using environment info methods")})
    );
    assert_eq!(
        replies[3],
        json!({"jsonrpc": "2.0", "id": 4, "result": {"status": "ready"}})
    );
}

#[tokio::test]
async fn a_failed_initialize_may_be_retried() {
    let (_server, mut client) = spawn_stdio(&[]);
    let error = client.call_err("initialize", json!({})).await;
    assert_eq!(error, rpc_error(-32602, "missing field `clientName`"));
    let error = client
        .call_err(
            "initialize",
            json!({"clientName": "t", "resumeSessionId": "nope"}),
        )
        .await;
    assert_eq!(error, rpc_error(-32600, "unknown session id nope"));
    client.handshake().await;
    assert_eq!(
        client.call("environment/status", Value::Null).await["status"],
        "ready"
    );
}

#[tokio::test]
async fn malformed_messages_get_id_minus_one_and_the_connection_survives() {
    let (_server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    let huge_array = format!(
        r#"{{"id":9,"method":"environment/status","params":[{}]}}"#,
        vec!["1"; 300_000].join(",")
    );
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"garbage".to_vec(), "expected value at line 1 column 1"),
        (
            br#"{"id":1,"id":2,"method":"environment/status"}"#.to_vec(),
            "duplicate JSON object key `id`",
        ),
        (
            huge_array.into_bytes(),
            "JSON-RPC message exceeds the limit of 262144 JSON values",
        ),
        (
            b"[1,2]".to_vec(),
            "a JSON-RPC message must be a JSON object",
        ),
        (
            br#"{"id":1.5,"method":"environment/status"}"#.to_vec(),
            "`id` must be an integer (i64) or a string",
        ),
        (
            br#"{"id":null,"method":"environment/status"}"#.to_vec(),
            "`id` must be an integer (i64) or a string",
        ),
        (
            br#"{"id":1,"method":null}"#.to_vec(),
            "`method` must be a string",
        ),
        (
            b"{\"id\":1,\"method\":\"\xff\"}".to_vec(),
            "message is not valid UTF-8: invalid utf-8 sequence of 1 bytes from index 18",
        ),
    ];
    for (bytes, detail) in cases {
        let mut line = bytes;
        line.push(b'\n');
        client.send_raw(&line).await;
        let reply = client.recv().await;
        let expected = json!({
            "jsonrpc": "2.0",
            "id": -1,
            "error": rpc_error(-32600, &format!("failed to parse JSON-RPC message from wexec stdio: {detail}")),
        });
        assert_eq!(reply, expected);
    }
    assert_eq!(
        client.call("environment/status", Value::Null).await["status"],
        "ready"
    );
}

#[tokio::test]
async fn ids_are_echoed_verbatim_and_unknown_methods_are_minus_32601() {
    let (_server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    for id in [
        json!("abc"),
        json!(""),
        json!(-5),
        json!(i64::MAX),
        json!(0),
    ] {
        client
            .send(&json!({"id": id, "method": "environment/status", "jsonrpc": "2.0"}))
            .await;
        let reply = client.recv().await;
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": id, "result": {"status": "ready"}})
        );
    }
    let error = client.call_err("no/such", json!({})).await;
    assert_eq!(
        error,
        rpc_error(-32601, "exec-server stub does not implement `no/such` yet")
    );
    let error = client.call_err("environment/status", json!([1])).await;
    assert_eq!(error["code"], -32602);
}

#[tokio::test]
async fn crlf_and_blank_lines_are_accepted() {
    let (_server, mut client) = spawn_stdio(&[]);
    client
        .send_raw(b"\n   \r\n{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"t\"}}\r\n\t\n")
        .await;
    assert!(client.recv().await["result"]["sessionId"].is_string());
    client
        .send_raw(
            b"{\"method\":\"initialized\"}\r\n{\"id\":2,\"method\":\"environment/status\"}\r\n",
        )
        .await;
    assert_eq!(
        client.recv().await,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"status": "ready"}})
    );
}

#[tokio::test]
async fn protocol_violations_close_the_connection_and_wexec_exits_cleanly() {
    let violations = [
        // A notification other than `initialized`.
        json!({"method": "process/output", "params": {}}),
        // A response from the client.
        json!({"id": 7, "result": {}}),
        json!({"id": 7, "error": {"code": 1, "message": "x"}}),
    ];
    for violation in violations {
        let (mut server, mut client) = spawn_stdio(&[]);
        client.handshake().await;
        client.send(&violation).await;
        client.expect_closed().await;
        assert!(server.wait().await.success(), "after {violation}");
    }
    // `initialized` before a successful `initialize`.
    let (mut server, mut client) = spawn_stdio(&[]);
    client
        .send(&json!({"method": "initialized", "params": {}}))
        .await;
    client.expect_closed().await;
    assert!(server.wait().await.success());
}

#[tokio::test]
async fn repeated_initialized_is_ignored() {
    let (_server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    client
        .send(&json!({"method": "initialized", "params": {}}))
        .await;
    assert_eq!(
        client.call("environment/status", Value::Null).await["status"],
        "ready"
    );
}

#[tokio::test]
async fn end_of_input_answers_what_was_sent_then_exits_zero() {
    let (mut server, mut client) = spawn_stdio(&[]);
    let mut text = String::new();
    text.push_str("{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"t\"}}\n");
    text.push_str("{\"method\":\"initialized\"}\n");
    for id in 2..50 {
        text.push_str(&format!(
            "{{\"id\":{id},\"method\":\"environment/status\"}}\n"
        ));
    }
    client.send_raw(text.as_bytes()).await;
    client.close().await;
    let mut ids = Vec::new();
    while let Received::Message(message) = client.receive().await {
        ids.push(message["id"].as_i64().expect("integer id"));
    }
    ids.sort_unstable();
    assert_eq!(ids, (1..50).collect::<Vec<_>>());
    assert!(server.wait().await.success());
}

#[tokio::test]
async fn an_oversized_line_closes_without_reply() {
    let (mut server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    let mut line = vec![b' '; wexec::MAX_MESSAGE_BYTES + 1];
    line.push(b'\n');
    // wexec stops reading once it has seen the excess, so the write may fail: that is fine.
    let writer = tokio::spawn(async move {
        client.send_raw(&line).await;
        client
    });
    let status = server.wait().await;
    assert!(status.success());
    let mut client = tokio::time::timeout(TIMEOUT, writer)
        .await
        .expect("writer ends")
        .expect("writer task");
    client.expect_closed().await;
}

#[tokio::test]
async fn a_message_of_exactly_64_mib_is_accepted() {
    let (_server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    // Unknown members of typed params are ignored: the pad reaches the method.
    let head = r#"{"id":"big","method":"process/read","params":{"processId":"nobody","pad":""#;
    let tail = r#""}}"#;
    let pad = wexec::MAX_MESSAGE_BYTES - head.len() - tail.len();
    let mut line = Vec::with_capacity(wexec::MAX_MESSAGE_BYTES + 2);
    line.extend_from_slice(head.as_bytes());
    line.resize(head.len() + pad, b'x');
    line.extend_from_slice(tail.as_bytes());
    assert_eq!(line.len(), wexec::MAX_MESSAGE_BYTES);
    line.extend_from_slice(b"\r\n");
    client.send_raw(&line).await;
    assert_eq!(
        client.recv().await,
        json!({"jsonrpc": "2.0", "id": "big", "error": {"code": -32600, "message": "unknown process id nobody"}})
    );
}

#[tokio::test]
async fn sigterm_ends_wexec_with_status_zero() {
    let (mut server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    server.kill_with("TERM").await;
    assert!(server.wait().await.success());
    client.expect_closed().await;
}

#[tokio::test]
async fn stdout_carries_only_protocol_lines_even_with_debug_logging() {
    // The harness runs wexec with RUST_LOG=wexec=debug; every stdout line must parse as JSON
    // (Client::recv panics otherwise) and the logs must reach stderr instead.
    let (server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    client.call("environment/info", Value::Null).await;
    assert!(
        server.stderr().contains("initialized"),
        "stderr: {}",
        server.stderr()
    );
}

/// On a machine with one CPU wexec runs requests that arrive together one after another on the
/// connection's thread and lets their replies ride along in one write; the last of a burst is
/// still written as soon as the input runs dry, with no further input to prompt it.
#[tokio::test]
async fn a_pipelined_burst_on_one_cpu_is_answered_in_full_without_further_input() {
    let dir = wexec_tests::TempDir::new();
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "one CPU\n").expect("write file");
    // One CPU, the first allowed.
    let cpu = *wexec_tests::allowed_cpus().first().expect("an allowed CPU");
    let root = dir.path().display().to_string();
    let mut command = wexec_tests::command(&["--fs-root", &root]);
    command.env("RUST_LOG", "warn");
    let (server, mut client) = wexec_tests::spawn_stdio_on(cpu, command);
    client.handshake().await;
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.pid())).expect("wexec's status");
    assert!(
        status.contains(&format!("Cpus_allowed_list:\t{cpu}\n")),
        "wexec runs on one CPU: {status}"
    );

    let path = file.display().to_string();
    let burst: String = (1000..1300)
        .map(|id| {
            let (method, params) = match id % 3 {
                0 => ("fs/readFile", json!({"path": path})),
                1 => ("environment/status", json!({})),
                _ => ("no/such", json!({})),
            };
            format!(
                "{}\n",
                json!({"id": id, "method": method, "params": params})
            )
        })
        .collect();
    // A message with no reply last: nothing written after the burst's last reply flushes it.
    client
        .send_raw(format!("{burst}{{\"method\":\"initialized\"}}\n").as_bytes())
        .await;
    let mut seen = Vec::new();
    for _ in 1000..1300 {
        let reply = tokio::time::timeout(TIMEOUT, client.recv())
            .await
            .expect("every reply of the burst arrives without further input");
        let id = reply["id"].as_i64().expect("integer id");
        match id % 3 {
            0 => assert_eq!(reply["result"]["dataBase64"], "b25lIENQVQo=", "{reply}"),
            1 => assert_eq!(reply["result"]["status"], "ready", "{reply}"),
            _ => assert_eq!(reply["error"]["code"], -32601, "{reply}"),
        }
        seen.push(id);
    }
    seen.sort_unstable();
    assert_eq!(seen, (1000..1300).collect::<Vec<_>>());
    assert_eq!(
        client.call("environment/status", json!({})).await["status"],
        "ready"
    );
}

#[tokio::test]
async fn temporary_directories_are_always_sent() {
    for tmpdir in [None, Some("/tmp")] {
        let mut command = wexec_tests::command(&[]);
        match tmpdir {
            Some(dir) => command.env("TMPDIR", dir),
            None => command.env_remove("TMPDIR"),
        };
        let (_server, mut client) = wexec_tests::spawn_stdio_with(command);
        let info = client.handshake().await["environmentInfo"].clone();
        let expected = match tmpdir {
            Some(_) => json!(["file:///tmp"]),
            None => json!([]),
        };
        assert_eq!(info["temporaryDirectories"], expected, "TMPDIR={tmpdir:?}");
        assert_eq!(info["tempDir"], "file:///tmp");
    }
}
