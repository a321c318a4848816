//! The WebSocket transport and sessions across connections, against the real binary
//! (docs/protocol.md §3.3, §5.3).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{command, http_raw, rpc_error, spawn_websocket, spawn_websocket_with, status_of};

#[tokio::test]
async fn readyz_origin_and_paths() {
    let server = spawn_websocket(&[]).await;
    let addr = server.addr();
    let get =
        |path: &str, extra: &str| format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}\r\n");

    let ready = http_raw(&addr, &get("/readyz", "")).await;
    assert_eq!(status_of(&ready), 200);
    assert!(ready.ends_with("\r\n\r\n"), "empty body: {ready:?}");
    assert_eq!(
        status_of(&http_raw(&addr, &get("/readyz", "Origin: https://a.example\r\n")).await),
        403
    );
    assert_eq!(status_of(&http_raw(&addr, &get("/nope", "")).await), 404);
    let browser_upgrade = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://localhost\r\n";
    assert_eq!(
        status_of(&http_raw(&addr, &get("/", browser_upgrade)).await),
        403
    );
    assert_eq!(
        status_of(&http_raw(&addr, &get("/", "")).await),
        400,
        "a plain GET / is not an upgrade"
    );
}

#[tokio::test]
async fn binary_in_text_out_and_requests_run_concurrently() {
    let server = spawn_websocket(&[]).await;
    let mut client = server.connect().await;
    client.handshake().await;
    client
        .send_binary(br#"{"id":"bin","method":"environment/status"}"#.to_vec())
        .await;
    // Client::recv panics on a binary frame from wexec.
    assert_eq!(
        client.recv().await,
        json!({"jsonrpc": "2.0", "id": "bin", "result": {"status": "ready"}})
    );

    for id in 0..200 {
        client
            .send(&json!({"id": id, "method": "environment/info"}))
            .await;
    }
    let mut seen = Vec::new();
    for _ in 0..200 {
        let reply = client.recv().await;
        assert!(reply["result"]["shell"].is_object());
        seen.push(reply["id"].as_i64().expect("integer id"));
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..200).collect::<Vec<_>>());

    // A malformed message names the websocket peer.
    client.send_text("nonsense").await;
    let reply = client.recv().await;
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("failed to parse JSON-RPC message from wexec websocket 127.0.0.1:"),
        "{message}"
    );
}

#[tokio::test]
async fn token_guards_upgrades_but_not_readyz() {
    let dir = wexec_tests::TempDir::new();
    let token_file = dir.path().join("token");
    // Codex's token files end with a newline; surrounding whitespace is not the token.
    std::fs::write(&token_file, "s3cret\n").expect("token file");
    let token_file = token_file.display().to_string();
    // printf s3cret | sha256sum
    let digest = "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0";
    for setup in [
        "--token",
        "WEXEC_TOKEN",
        "--ws-token-file",
        "--ws-token-sha256",
    ] {
        let mut cmd = command(&["--listen", "ws://127.0.0.1:0"]);
        match setup {
            "WEXEC_TOKEN" => {
                cmd.env("WEXEC_TOKEN", "s3cret");
            }
            "--token" => {
                cmd.args(["--token", "s3cret"]);
            }
            "--ws-token-file" => {
                cmd.args([
                    "--ws-auth",
                    "capability-token",
                    "--ws-token-file",
                    &token_file,
                ]);
            }
            _ => {
                cmd.args(["--ws-auth", "capability-token", "--ws-token-sha256", digest]);
            }
        }
        let server = spawn_websocket_with(cmd).await;
        let addr = server.addr();
        let upgrade = |auth: &str| {
            format!(
                "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{auth}\r\n"
            )
        };
        let denied = http_raw(&addr, &upgrade("")).await;
        assert_eq!(status_of(&denied), 401);
        assert!(denied.contains("WWW-Authenticate: Bearer\r\n"), "{denied}");
        assert_eq!(
            status_of(&http_raw(&addr, &upgrade("Authorization: Bearer wrong\r\n")).await),
            401
        );
        let ready = http_raw(
            &addr,
            &format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
        )
        .await;
        assert_eq!(status_of(&ready), 200);

        assert!(server.connect_with(None).await.is_err());
        let mut client = server
            .connect_with(Some("s3cret"))
            .await
            .expect("authorized upgrade");
        client.handshake().await;
        assert_eq!(
            client.call("environment/status", Value::Null).await["status"],
            "ready"
        );
    }
}

#[tokio::test]
async fn startup_refuses_non_loopback_without_a_token_and_bad_urls() {
    let cases = [
        (
            vec!["--listen", "ws://0.0.0.0:0"],
            "wexec: refusing to listen on ws://0.0.0.0:0 without a token; set --token or WEXEC_TOKEN",
        ),
        (
            vec!["--listen", "ws://localhost:1"],
            "wexec: invalid websocket --listen URL `ws://localhost:1`; expected `ws://IP:PORT`",
        ),
        (
            vec!["--listen", "tcp://1.2.3.4:5"],
            "wexec: unsupported --listen URL `tcp://1.2.3.4:5`; expected `ws://IP:PORT` or `stdio`",
        ),
        (
            vec!["--fs-root", "/nonexistent/wexec-root"],
            "wexec: --fs-root `/nonexistent/wexec-root` is not usable: No such file or directory (os error 2)",
        ),
        // Codex's `--ws-auth` spelling, with Codex's texts.
        (
            vec![
                "--listen",
                "ws://127.0.0.1:0",
                "--ws-auth",
                "capability-token",
            ],
            "wexec: `--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` is set",
        ),
        (
            vec!["--listen", "ws://127.0.0.1:0", "--ws-token-sha256", "00"],
            "wexec: websocket auth flags require `--ws-auth capability-token`",
        ),
        (
            vec![
                "--listen",
                "ws://127.0.0.1:0",
                "--ws-auth",
                "capability-token",
                "--ws-token-sha256",
                "abc",
            ],
            "wexec: --ws-token-sha256 must be a 64-character hex SHA-256 digest",
        ),
        (
            vec![
                "--listen",
                "ws://127.0.0.1:0",
                "--ws-auth",
                "capability-token",
                "--ws-token-sha256",
                "abc",
                "--ws-token-file",
                "/x",
            ],
            "wexec: `--ws-token-file` and `--ws-token-sha256` are mutually exclusive",
        ),
        (
            vec![
                "--listen",
                "ws://127.0.0.1:0",
                "--ws-auth",
                "capability-token",
                "--ws-token-file",
                "/nonexistent/wexec-token",
            ],
            "wexec: failed to read websocket auth secret /nonexistent/wexec-token: No such file or directory (os error 2)",
        ),
        (
            vec!["--ws-auth", "capability-token", "--ws-token-file", "/x"],
            "wexec: WebSocket auth requires a WebSocket listener, not stdio",
        ),
        (
            vec![
                "--listen",
                "ws://127.0.0.1:0",
                "--ws-auth",
                "signed-bearer-token",
            ],
            "wexec: --ws-auth signed-bearer-token is not supported by wexec; use --ws-auth capability-token",
        ),
    ];
    for (args, message) in cases {
        let output = command(&args).output().await.expect("run wexec");
        assert!(!output.status.success(), "{args:?}");
        assert!(output.stdout.is_empty(), "nothing on stdout for {args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.trim_end(), message, "{args:?}");
    }
}

#[tokio::test]
async fn version_and_help() {
    let output = command(&["--version"]).output().await.expect("run wexec");
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("wexec {}", wexec::VERSION)
    );
    let output = command(&["--help"]).output().await.expect("run wexec");
    let help = String::from_utf8_lossy(&output.stdout);
    for option in [
        "--listen",
        "--fs-root",
        "--allow-host",
        "--token",
        "--ws-auth",
        "--ws-token-file",
        "--ws-token-sha256",
        "--allow-header-env",
        "--detach-ttl",
        "--closed-retention",
        "--plugin",
        "--plugin-time-limit-ms",
        "--plugin-memory-limit-mib",
        "WEXEC_TOKEN",
        "--require-sandbox",
        "wexec doctor",
    ] {
        assert!(help.contains(option), "--help mentions {option}");
    }
    // Grouped, each option under its heading, and examples at the end.
    let heading_of = |option: &str| {
        let at = help
            .find(&format!("      {option}"))
            .expect("the option is listed");
        (help[..at].lines().rev())
            .find(|line| line.ends_with(':') && !line.starts_with(' '))
            .map(str::to_owned)
    };
    assert_eq!(heading_of("--listen").as_deref(), Some("Serving:"));
    assert_eq!(heading_of("--allow-host").as_deref(), Some("Grants:"));
    assert_eq!(heading_of("--config").as_deref(), Some("Plugins:"));
    assert_eq!(heading_of("--sandbox").as_deref(), Some("Process sandbox:"));
    assert_eq!(
        heading_of("--process-cpu-seconds").as_deref(),
        Some("Limits:")
    );
    assert_eq!(heading_of("--closed-retention").as_deref(), Some("Limits:"));
    assert!(help.contains("\nExamples:\n"), "{help}");
}

#[tokio::test]
async fn a_dropped_connection_detaches_and_resume_returns_the_identical_result() {
    let server = spawn_websocket(&[]).await;
    let mut first = server.connect().await;
    let original = first.handshake().await;
    let session_id = original["sessionId"]
        .as_str()
        .expect("session id")
        .to_owned();

    // While the first connection is attached, a resume is refused with -32010.
    let mut intruder = server.connect().await;
    let error = intruder
        .call_err(
            "initialize",
            json!({"clientName": "t", "resumeSessionId": session_id}),
        )
        .await;
    assert_eq!(
        error,
        rpc_error(
            -32010,
            &format!("session {session_id} is already attached to another connection")
        )
    );

    first.close().await;
    drop(first);
    let (mut second, resumed) = server.resume(&session_id).await;
    assert_eq!(
        resumed, original,
        "a resume returns exactly the first result"
    );
    second
        .send(&json!({"method": "initialized", "params": {}}))
        .await;
    assert_eq!(
        second.call("environment/status", Value::Null).await["status"],
        "ready"
    );

    // The intruder's failed initialize may be retried as a fresh session.
    let fresh = intruder.handshake().await;
    assert_ne!(fresh["sessionId"], original["sessionId"]);
}

#[tokio::test]
async fn unknown_and_expired_sessions_are_minus_32600_and_a_fresh_initialize_still_works() {
    let server = spawn_websocket(&["--detach-ttl", "1"]).await;
    let mut first = server.connect().await;
    let session_id = first.handshake().await["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    first.close().await;
    drop(first);
    server.stderr_containing("detached session expired").await;

    let mut client = server.connect().await;
    let error = client
        .call_err(
            "initialize",
            json!({"clientName": "t", "resumeSessionId": session_id}),
        )
        .await;
    assert_eq!(
        error,
        rpc_error(-32600, &format!("unknown session id {session_id}"))
    );
    let error = client
        .call_err(
            "initialize",
            json!({"clientName": "t", "resumeSessionId": "not-a-session"}),
        )
        .await;
    assert_eq!(error, rpc_error(-32600, "unknown session id not-a-session"));
    client.handshake().await;
    assert_eq!(
        client.call("environment/status", Value::Null).await["status"],
        "ready"
    );
}

#[tokio::test]
async fn a_message_over_64_mib_closes_the_socket_with_1009() {
    let server = spawn_websocket(&[]).await;
    let mut client = server.connect().await;
    client.handshake().await;
    // wexec refuses at the frame header; whether the rest of our send completes depends on how
    // much it drains before closing, so only the close code is asserted.
    if let Err(err) = client
        .try_send_binary(vec![b' '; wexec::MAX_MESSAGE_BYTES + 1])
        .await
    {
        eprintln!("oversized send failed: {err}");
    }
    assert_eq!(client.expect_closed().await, Some(1009));
    // The server keeps serving others.
    let mut other = server.connect().await;
    other.handshake().await;
}

#[tokio::test]
async fn sigterm_stops_the_listener_with_status_zero() {
    let mut server = spawn_websocket(&[]).await;
    let mut client = server.connect().await;
    client.handshake().await;
    server.kill_with("INT").await;
    assert!(server.wait().await.success());
}

#[tokio::test]
async fn file_contents_answer_concurrent_reads_over_websocket() {
    // fs/readFile and fs/readBlock answer early from the host; over WebSocket those replies
    // go through the connection's queue while other requests run on other threads.
    let dir = wexec_tests::TempDir::new();
    let files: Vec<(String, Vec<u8>)> = [0usize, 1, 4096, 1 << 20]
        .iter()
        .map(|&len| {
            let path = dir.path().join(format!("f{len}"));
            let data: Vec<u8> = (0..len).map(|i| (i * 7 % 256) as u8).collect();
            std::fs::write(&path, &data).expect("write");
            (path.display().to_string(), data)
        })
        .collect();
    let root = dir.path().display().to_string();
    let server = spawn_websocket(&["--fs-root", &root]).await;
    let mut client = server.connect().await;
    client.handshake().await;
    let (big_path, big) = &files[3];
    client
        .call("fs/open", json!({"handleId": "big", "path": big_path}))
        .await;

    let rounds = 25;
    for round in 0..rounds {
        for (index, (path, _)) in files.iter().enumerate() {
            client
                .send(&json!({"id": round * 10 + index, "method": "fs/readFile", "params": {"path": path}}))
                .await;
        }
        let offset = round * 40_000;
        client
            .send(&json!({"id": round * 10 + 9, "method": "fs/readBlock", "params": {"handleId": "big", "offset": offset, "len": 50_000}}))
            .await;
    }
    let decode = |text: &Value| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_str().expect("base64 text"))
            .expect("base64")
    };
    for _ in 0..rounds * (files.len() + 1) {
        let reply = client.recv().await;
        let id = reply["id"].as_u64().expect("integer id") as usize;
        let (round, index) = (id / 10, id % 10);
        if index == 9 {
            let offset = round * 40_000;
            assert_eq!(
                decode(&reply["result"]["chunk"]),
                big[offset..offset + 50_000],
                "{id}"
            );
            assert_eq!(reply["result"]["eof"], false);
        } else {
            assert!(
                decode(&reply["result"]["dataBase64"]) == files[index].1,
                "{id}: the whole file"
            );
        }
    }
}
