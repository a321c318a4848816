//! Bounded resources: each limit a client or plugin can push against is named, settable and
//! refused clearly (docs/protocol.md §12): WebSocket connections, live processes per
//! session and per host, bytes of inbound messages held at once, a plugin's log per call.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{
    PROBE_WASM, TempDir, http_raw, rpc_error, spawn_stdio, spawn_websocket, status_of,
};

use super::spawn_hostile;

fn sleeper(id: &str) -> Value {
    json!({
        "processId": id,
        "argv": ["sleep", "60"],
        "cwd": "/",
        "env": {"PATH": "/usr/bin:/bin"},
        "tty": false,
    })
}

#[tokio::test]
async fn websocket_connections_are_capped_with_503() {
    let server = spawn_websocket(&["--max-connections", "2"]).await;
    let mut first = server.connect().await;
    let _second = server.connect().await;
    let upgrade = format!(
        "GET / HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        server.addr()
    );
    let refused = http_raw(&server.addr(), &upgrade).await;
    assert_eq!(status_of(&refused), 503, "{refused}");
    assert!(refused.contains("Retry-After: 1"), "{refused}");
    let ready = http_raw(&server.addr(), "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status_of(&ready), 200, "health checks still answer");
    // A slot frees when a connection ends.
    first.close().await;
    let _ = first.expect_closed().await;
    drop(first);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        if let Ok(mut third) = server.connect_with(None).await {
            third.handshake().await;
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no slot came free");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A slowloris cannot lock clients out before authentication: 300 sockets that never finish
/// their HTTP head fill the pending table, yet a real client still connects, each new socket
/// displacing the oldest pending one of its address (64 per address).
#[tokio::test]
async fn sockets_that_never_finish_their_head_cannot_lock_clients_out() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = spawn_websocket(&[]).await;
    let mut slow = Vec::new();
    for _ in 0..300 {
        let mut socket = tokio::net::TcpStream::connect(server.addr())
            .await
            .expect("connect");
        socket
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("partial head");
        slow.push(socket);
    }
    let mut client = server
        .connect_with(None)
        .await
        .expect("a real client gets in");
    client.handshake().await;
    // The displaced sockets were closed, not left waiting out their 10 s.
    let mut closed = 0;
    for socket in &mut slow {
        let mut byte = [0u8; 1];
        let read =
            tokio::time::timeout(std::time::Duration::from_millis(20), socket.read(&mut byte))
                .await;
        if matches!(read, Ok(Ok(0) | Err(_))) {
            closed += 1;
        }
    }
    assert!(closed >= 300 - 64, "{closed} of 300 closed");
}

/// A client that sends many large reads and stops reading the replies costs wexec a bounded
/// amount of memory: 16 MiB queued, and the file contents of at most two 32 MiB replies
/// (96 MiB reserved); the other reads wait before they read. Every reply still arrives.
#[tokio::test]
async fn a_client_that_stops_reading_holds_bounded_memory_in_its_replies() {
    const READS: usize = 24;
    const SIZE: usize = 32 * 1024 * 1024;
    let dir = TempDir::new();
    let file = dir.path().join("big");
    let content: Vec<u8> = (0..SIZE).map(|index| (index % 251) as u8).collect();
    std::fs::write(&file, &content).expect("write");
    let (server, mut client) = spawn_stdio(&["--fs-root", &dir.path().display().to_string()]);
    client.handshake().await;
    let params = json!({"path": file.display().to_string()});
    for _ in 0..READS {
        client.send_request("fs/readFile", params.clone()).await;
    }
    // Unread, the replies back up; wexec's memory must level off.
    let mut peak = 0;
    for _ in 0..30 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        peak = peak.max(wexec_tests::resident_bytes(server.pid()));
    }
    eprintln!("peak resident: {} MiB", peak >> 20);
    let encoded = STANDARD.encode(&content);
    for _ in 0..READS {
        let reply = client.recv().await;
        assert!(
            reply["result"]["dataBase64"] == encoded.as_str(),
            "a whole reply: {}",
            reply.to_string().chars().take(200).collect::<String>()
        );
    }
    assert!(
        peak < 400 * 1024 * 1024,
        "{} MiB resident for {READS} unread replies of {} MiB",
        peak >> 20,
        SIZE >> 20
    );
}

#[tokio::test]
async fn live_processes_are_capped_per_session_and_per_host() {
    let server = spawn_websocket(&["--session-processes", "2", "--max-processes", "3"]).await;
    let mut a = server.connect().await;
    a.handshake().await;
    a.call("process/start", sleeper("a1")).await;
    a.call("process/start", sleeper("a2")).await;
    assert_eq!(
        a.call_err("process/start", sleeper("a3")).await,
        rpc_error(-32600, "session process limit of 2 reached")
    );
    let mut b = server.connect().await;
    b.handshake().await;
    b.call("process/start", sleeper("b1")).await;
    assert_eq!(
        b.call_err("process/start", sleeper("b2")).await,
        rpc_error(-32600, "host process limit of 3 reached")
    );
    // A terminated process gives its place back once it is gone.
    a.call("process/terminate", json!({"processId": "a1"}))
        .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let reply = b.request("process/start", sleeper("b2")).await;
        if reply.get("result").is_some() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{reply}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn inbound_bytes_held_at_once_are_capped_and_small_messages_still_pass() {
    let (_server, mut client) = spawn_stdio(&[
        "--plugin",
        PROBE_WASM,
        "--plugin-time-limit-ms",
        "2000",
        "--max-inbound-mib",
        "64",
    ]);
    client.handshake().await;
    // 40 MiB held for the 2 s the probe spins: the next 40 MiB message does not fit beside it.
    let pad = "x".repeat(40 * 1024 * 1024);
    let held = client.send_request("probe/spin", json!({"pad": pad})).await;
    let refused = client.send_request("probe/echo", json!({"pad": pad})).await;
    let reply = client.reply_to(&json!(refused)).await;
    assert_eq!(reply["error"]["code"], -32603, "{reply}");
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("inbound message of 41943")
            && message.ends_with("its limit is 67108864 (--max-inbound-mib); retry later"),
        "{message}"
    );
    assert_eq!(
        client.call("environment/status", json!({})).await,
        json!({"status": "ready"}),
        "a small message passes while the budget is spent"
    );
    let spun = client.reply_to(&json!(held)).await;
    assert_eq!(
        spun["error"]["message"],
        "plugin probe exceeded its time limit of 2000 ms"
    );
    // Answered, the first gave its share back.
    let echoed = client.call("probe/echo", json!({"pad": pad})).await;
    assert_eq!(echoed["pad"].as_str().map(str::len), Some(pad.len()));
}

#[tokio::test]
async fn a_plugins_log_is_capped_per_call_and_kept_on_one_line_per_message() {
    let dir = TempDir::new();
    let (server, mut client) = spawn_hostile(&dir, "", &["--plugin-log-limit-kib", "16"]).await;
    // 20,000 lines of 1 KiB: 20 MB asked for, 16 KiB allowed, each line charged 128 bytes
    // beyond its message.
    client
        .call("hostile/log", json!({"count": 20_000, "bytes": 1024}))
        .await;
    let log = server
        .stderr_containing("19986 log lines (20465664 bytes) dropped: a call may log 16384 bytes")
        .await;
    assert!(log.len() < 256 * 1024, "{} bytes of log", log.len());
    assert_eq!(
        log.matches(&"x".repeat(1024)).count(),
        14,
        "14 lines fit in 16 KiB"
    );
    // Empty messages are lines too: 128 fit.
    let before = log.lines().count();
    client
        .call("hostile/log", json!({"count": 100_000, "text": ""}))
        .await;
    let log = server
        .stderr_containing("99872 log lines (0 bytes) dropped")
        .await;
    let lines = log
        .lines()
        .skip(before)
        .filter(|line| line.contains("hostile"))
        .count();
    assert_eq!(lines, 128 + 1, "128 lines and the summary");
    // The next call logs again, and a line break cannot start a forged log line.
    let forged = "innocent\n2026-12-01T00:00:00.000000Z ERROR wexec: forged";
    client
        .call("hostile/log", json!({"count": 1, "text": forged}))
        .await;
    let log = server
        .stderr_containing(r"innocent\n2026-12-01T00:00:00.000000Z ERROR wexec: forged")
        .await;
    assert!(
        !log.lines()
            .any(|line| line.starts_with("2026-12-01T00:00:00.000000Z"))
    );
}

/// A `sandbox` costs policy work for each entry against every other: more than 256 entries
/// are refused at once, on `process/start` and on the fs methods alike.
#[tokio::test]
async fn sandboxes_with_too_many_entries_are_refused() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    // The whole disk readable, then paths.
    let entries = |count: usize| -> Vec<Value> {
        std::iter::once(wexec_tests::special("root", None, "read"))
            .chain((1..count).map(|i| {
                json!({"path": {"type": "path", "path": format!("{root}/e{i}")}, "access": "read"})
            }))
            .collect()
    };
    let refusal = rpc_error(
        -32602,
        "sandbox has 257 filesystem entries; the limit is 256",
    );
    let mut start = sleeper("many");
    start["cwd"] = json!(root);
    start["sandbox"] = wexec_tests::managed(dir.path(), entries(257), "restricted");
    assert_eq!(client.call_err("process/start", start).await, refusal);
    let write = json!({
        "path": format!("{root}/f"), "dataBase64": "eA==",
        "sandbox": wexec_tests::managed(dir.path(), entries(257), "restricted"),
    });
    assert_eq!(client.call_err("fs/writeFile", write).await, refusal);
    // 256 are fine.
    let mut start = sleeper("enough");
    start["argv"] = json!(["true"]);
    start["cwd"] = json!(root);
    start["sandbox"] = wexec_tests::managed(dir.path(), entries(256), "restricted");
    client.call("process/start", start).await;
}

/// Every big reply waits for room before it is produced, not only file contents: a client that
/// pipelines `process/read`s of 1 MiB of output, or listings of 49,000 entries, and reads none
/// of the replies holds a bounded amount of wexec's memory (2.6 GB in 1.4 s before).
#[tokio::test]
async fn unread_process_output_and_listings_hold_bounded_memory() {
    let dir = TempDir::new();
    let many = dir.path().join("many");
    std::fs::create_dir(&many).expect("mkdir");
    for index in 0..49_000 {
        std::fs::File::create(many.join(format!("f{index:05}_{}", "n".repeat(40)))).expect("touch");
    }
    let root = dir.path().display().to_string();
    let (server, mut client) =
        spawn_stdio(&["--fs-root", &root, "--sandbox", "danger-full-access"]);
    client.handshake().await;
    let mut start = sleeper("out");
    start["argv"] = json!(["head", "-c", "1048576", "/dev/urandom"]);
    client.call("process/start", start).await;
    // Wait for the whole output.
    loop {
        let read = client
            .call("process/read", json!({"processId": "out", "waitMs": 1000}))
            .await;
        if read["closed"] == true {
            break;
        }
    }
    let baseline = wexec_tests::resident_bytes(server.pid());
    let mut ids = Vec::new();
    for _ in 0..600 {
        ids.push(
            client
                .send_request("process/read", json!({"processId": "out"}))
                .await,
        );
    }
    for _ in 0..200 {
        let path = many.display().to_string();
        ids.push(
            client
                .send_request("fs/readDirectory", json!({"path": path}))
                .await,
        );
    }
    let mut peak = 0;
    for _ in 0..30 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        peak = peak.max(wexec_tests::resident_bytes(server.pid()));
    }
    // 600 × 1.4 MB + 200 × 5 MB unbounded; the budgets allow a few hundred MB.
    let grown = peak.saturating_sub(baseline);
    assert!(grown < 400 * 1024 * 1024, "grew {} MiB", grown >> 20);
    for id in ids {
        let reply = client.reply_to(&json!(id)).await;
        assert!(
            reply.get("result").is_some(),
            "{}",
            reply.to_string().chars().take(200).collect::<String>()
        );
    }
}

/// Closed processes keep their output 30 s for late reads, within a host-wide budget: a client
/// that keeps starting processes of 1 MiB of output holds a bounded amount of wexec's memory
/// (1 MiB per process started in the last 30 s before: 3.5 GB after 16 s).
#[tokio::test]
async fn output_of_closed_processes_is_bounded_host_wide() {
    let (server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let baseline = wexec_tests::resident_bytes(server.pid());
    for round in 0..600 {
        let mut start = sleeper(&format!("p{round}"));
        start["argv"] = json!(["head", "-c", "1048576", "/dev/zero"]);
        client.call("process/start", start).await;
        // Until it closed: its output reached wexec.
        loop {
            let message = client.next_notification().await;
            if message["method"] == "process/closed" {
                break;
            }
        }
    }
    let grown = wexec_tests::resident_bytes(server.pid()).saturating_sub(baseline);
    // 600 MiB retained before; the budget is 256 MiB.
    assert!(grown < 400 * 1024 * 1024, "grew {} MiB", grown >> 20);
    // The newest is still readable whole.
    let read = client
        .call("process/read", json!({"processId": "p599"}))
        .await;
    let bytes: usize = read["chunks"]
        .as_array()
        .expect("chunks")
        .iter()
        .map(|chunk| {
            STANDARD
                .decode(chunk["chunk"].as_str().expect("chunk"))
                .expect("b64")
                .len()
        })
        .sum();
    assert_eq!(bytes, 1024 * 1024);
}

/// Ids a client chooses for what wexec keeps are capped in size, not only in number: 24
/// `process/write`s with 2 MiB `writeId`s grew wexec by ~95 MiB (each kept twice until the
/// process ended), 12 `process/start`s with 2 MiB `processId`s by ~90 MiB (kept 30 s after the
/// close). Codex's ids are call ids and UUIDs.
#[tokio::test]
async fn client_chosen_ids_are_capped_in_size() {
    let (server, mut client) = spawn_stdio(&[]);
    client.handshake().await;
    let limit = wexec_protocol::limits::MAX_ID_BYTES;
    let long = "p".repeat(limit + 1);
    let error = client.call_err("process/start", sleeper(&long)).await;
    assert_eq!(
        error,
        rpc_error(
            -32602,
            &format!(
                "processId is {} bytes long; the limit is {limit} bytes",
                limit + 1
            )
        )
    );
    // At the limit it is an id like any other.
    let longest = "p".repeat(limit);
    let mut start = sleeper(&longest);
    start["pipeStdin"] = json!(true);
    client.call("process/start", start).await;
    let chunk = STANDARD.encode(b"x");
    let before = wexec_tests::resident_bytes(server.pid());
    let huge = "w".repeat(2 * 1024 * 1024);
    for _ in 0..24 {
        let error = client
            .call_err(
                "process/write",
                json!({"processId": longest, "chunk": chunk, "writeId": huge}),
            )
            .await;
        assert_eq!(
            error,
            rpc_error(
                -32602,
                &format!(
                    "writeId is {} bytes long; the limit is {limit} bytes",
                    huge.len()
                )
            )
        );
    }
    let written = client
        .call(
            "process/write",
            json!({"processId": longest, "chunk": chunk, "writeId": "w".repeat(limit)}),
        )
        .await;
    assert_eq!(written, json!({"status": "accepted"}));
    // Nothing of the refused ids was kept (what the allocator holds on to is well below the
    // ~95 MiB they took).
    let grown = wexec_tests::resident_bytes(server.pid()).saturating_sub(before);
    assert!(grown < 32 * 1024 * 1024, "grew by {grown} bytes");
    let error = client
        .call_err(
            "http/request",
            json!({"method": "GET", "url": "http://127.0.0.1:9/", "streamResponse": true, "requestId": "r".repeat(limit + 1)}),
        )
        .await;
    assert_eq!(
        error,
        rpc_error(
            -32602,
            &format!(
                "requestId is {} bytes long; the limit is {limit} bytes",
                limit + 1
            )
        )
    );
}
