//! The bearer token stays wexec's: no child inherits `WEXEC_TOKEN`, and neither wexec's nor its
//! supervisor's `/proc/<pid>/environ` shows it, even to a reader allowed to open it (as root
//! is; others are kept out because wexec is not dumpable).

use serde_json::json;
use wexec_tests::{command, spawn_websocket_with};

const TOKEN: &str = "wexec-test-token-d1f9a4";

#[tokio::test]
async fn no_child_and_no_environ_file_shows_the_token() {
    let mut wexec = command(&["--listen", "ws://127.0.0.1:0"]);
    wexec.env("WEXEC_TOKEN", TOKEN);
    let server = spawn_websocket_with(wexec).await;
    let mut client = server
        .connect_with(Some(TOKEN))
        .await
        .expect("upgrade with the token");
    client.handshake().await;
    let pid = server.pid();
    let script = format!("env; cat /proc/{pid}/environ; echo done");
    let params = json!({
        "processId": "reader",
        "argv": ["sh", "-c", script],
        "cwd": "/",
        "env": {},
        "envPolicy": {"inherit": "all", "ignoreDefaultExcludes": true, "exclude": [], "set": {}, "includeOnly": []},
        "tty": false,
    });
    client.call("process/start", params).await;
    let mut output = Vec::new();
    loop {
        let notification = client.next_notification().await;
        match notification["method"].as_str() {
            Some("process/output") => {
                let chunk = notification["params"]["chunk"].as_str().expect("chunk");
                output.extend(
                    base64::Engine::decode(&base64::engine::general_purpose::STANDARD, chunk)
                        .expect("base64"),
                );
            }
            Some("process/closed") => break,
            _ => {}
        }
    }
    let output = String::from_utf8_lossy(&output);
    assert!(output.contains("done"), "{output}");
    assert!(!output.contains(TOKEN), "the token leaked: {output}");
    // Read from outside too, wexec's and its children's (the supervisor): the test may be
    // allowed to read them.
    let mut readers = vec![pid];
    readers.extend(children(pid));
    assert!(
        readers.len() >= 2,
        "the supervisor's zygote is a child: {readers:?}"
    );
    for reader in readers {
        if let Ok(environ) = std::fs::read(format!("/proc/{reader}/environ")) {
            assert!(
                !String::from_utf8_lossy(&environ).contains(TOKEN),
                "pid {reader}"
            );
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let dumpable = std::fs::metadata(format!("/proc/{pid}/environ")).expect("environ");
    // Not dumpable: its per-process files belong to root.
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&dumpable),
        0,
        "{status}"
    );
}

/// The children of `pid`, from `/proc`'s parent links.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

/// The status line a WebSocket upgrade to `addr` gets from a Python client run by `launcher`.
async fn upgrade_status(launcher: &[&str], addr: &str) -> String {
    let script = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode())
"#;
    let (program, arguments) = launcher.split_first().expect("a launcher");
    let python = wexec_tests::system_python();
    let output = tokio::process::Command::new(program)
        .args(arguments)
        .args([python, "-c", script, addr])
        .output()
        .await
        .expect("run the client");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Without a token a listener is on loopback, where every local user can connect; it admits
/// only wexec's own user (and root). Another user needs the token (docs/protocol.md §3.3).
#[tokio::test]
async fn without_a_token_only_wexecs_own_user_may_connect_on_loopback() {
    if !wexec_tests::running_as_root("connecting as another user") {
        return;
    }
    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let server = spawn_websocket_with(command(&["--listen", "ws://127.0.0.1:0"])).await;
    assert_eq!(
        upgrade_status(&["env"], &server.addr()).await,
        "HTTP/1.1 101 Switching Protocols"
    );
    assert_eq!(
        upgrade_status(&nobody, &server.addr()).await,
        "HTTP/1.1 403 Forbidden"
    );
    // A client on an IPv6 socket through a mapped address is found as well.
    let mapped = format!("[::ffff:{}", server.addr().replacen(':', "]:", 1));
    assert_eq!(
        upgrade_status(&["env"], &mapped).await,
        "HTTP/1.1 101 Switching Protocols"
    );
    // With a token, whoever presents it.
    let mut wexec = command(&["--listen", "ws://127.0.0.1:0"]);
    wexec.env("WEXEC_TOKEN", TOKEN);
    let server = spawn_websocket_with(wexec).await;
    assert_eq!(
        upgrade_status(&nobody, &server.addr()).await,
        "HTTP/1.1 401 Unauthorized"
    );
}

/// A socket its owner closed stays in the kernel's table for a while (`TIME_WAIT`, orphaned),
/// listed as root's: another user sent an upgrade with the requests after it, corked, closed the
/// socket before wexec looked its owner up, and wexec, taking it for root's, ran the process.
/// A closed socket is nobody's: refused, and nothing it sent runs.
#[tokio::test]
async fn a_connection_closed_before_its_owner_is_known_runs_nothing() {
    if !wexec_tests::running_as_root("connecting as another user") {
        return;
    }
    let dir = wexec_tests::TempDir::new();
    let marker = dir.path().join("ran");
    let server = spawn_websocket_with(command(&[
        "--listen",
        "ws://127.0.0.1:0",
        "--sandbox",
        "danger-full-access",
    ]))
    .await;
    let script = r#"
import base64, json, os, socket, struct, sys
port, marker = int(sys.argv[1]), sys.argv[2]
def frame(message):
    data = json.dumps(message).encode()
    head = bytes([0x81, 0x80 | 126]) + struct.pack(">H", len(data)) if len(data) >= 126 else bytes([0x81, 0x80 | len(data)])
    return head + b"\0\0\0\0" + data
upgrade = ("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: " + base64.b64encode(os.urandom(16)).decode() + "\r\n"
    "Sec-WebSocket-Version: 13\r\nX-Pad: " + "a" * 2000 + "\r\n\r\n").encode()
start = {"id": 2, "method": "process/start", "params": {"processId": "p", "argv": ["touch", marker],
    "cwd": "/", "env": {"PATH": "/usr/bin:/bin"}, "tty": False}}
payload = upgrade + frame({"id": 1, "method": "initialize", "params": {"clientName": "x"}})     + frame({"method": "initialized", "params": {}}) + frame(start)
s = socket.create_connection(("127.0.0.1", port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
s.sendall(payload)
s.close()
"#;
    let python = wexec_tests::system_python();
    let port = wexec_tests::port_of(&server.addr());
    for _ in 0..10 {
        let status = tokio::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", python])
            .args(["-c", script, &port, &marker.display().to_string()])
            .status()
            .await
            .expect("run the client");
        assert!(status.success());
    }
    // wexec decides on each socket once it has its head: refused, or opened (and then its
    // requests would run). Every one refused, nothing after a head was read.
    let refused = "refusing a websocket upgrade from another user's process";
    let opened = "websocket connection opened";
    let deadline = std::time::Instant::now() + wexec_tests::TIMEOUT;
    let log = loop {
        let log = server.stderr();
        if log.matches(refused).count() + log.matches(opened).count() >= 10 {
            break log;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "undecided sockets:\n{log}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(log.matches(opened).count(), 0, "{log}");
    assert!(!marker.exists(), "a closed socket's requests ran");
}
