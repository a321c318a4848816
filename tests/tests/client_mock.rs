//! `wexec_client` against scripted mock servers: the behaviours a real server cannot be made
//! to show on demand (reordered notifications, malformed output, a dropped socket mid-session).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers of a test fail the test on any error"
)]

use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use wexec_client::{
    Client, ClientError, ClientOptions, ProcessEvent, StdioCommand, WebSocketTarget,
};
use wexec_protocol::{OutputStream, ProcessStartParams};
use wexec_tests::{TIMEOUT, TempDir};

/// The initialize answer every mock gives (the client's first request has id 1).
const INIT: &str = r#"{"id":1,"result":{"sessionId":"s1","environmentInfo":{}}}"#;

/// A shell-scripted server. Its stderr goes nowhere, so a leftover child can never hold the
/// test harness's output pipe open.
fn mock(script: &str) -> StdioCommand {
    StdioCommand::new("sh").args(["-c", &format!("exec 2>/dev/null; {script}")])
}

/// Kills the listed processes when the test ends, passed or not.
struct Reap(Vec<u32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

fn options() -> ClientOptions {
    let mut options = ClientOptions::new("mock-test");
    options.initialize_timeout = Duration::from_secs(5);
    options
}

fn start(id: &str) -> ProcessStartParams {
    ProcessStartParams::new(id, vec!["true".into()], "/")
}

fn output(id: &str, seq: u64, text: &str) -> String {
    use base64::Engine as _;
    let chunk = base64::engine::general_purpose::STANDARD.encode(text);
    json!({"method": "process/output",
           "params": {"processId": id, "seq": seq, "stream": "stdout", "chunk": chunk}})
    .to_string()
}

async fn next(handle: &wexec_client::ProcessHandle) -> ProcessEvent {
    tokio::time::timeout(TIMEOUT, handle.next_event())
        .await
        .expect("an event in time")
        .expect("the route is open")
}

/// Whether `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_gone(pid: u32) {
    let deadline = std::time::Instant::now() + TIMEOUT;
    while !gone(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "process {pid} still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn read_pid(file: &Path) -> u32 {
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if let Ok(pid) = text.trim().parse() {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "no pid in {file:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn connects_over_a_stdio_command_and_completes_the_handshake() {
    let dir = TempDir::new();
    let log = dir.path().join("received");
    let script = format!(
        "read l; printf '%s\\n' \"$l\" > {log}; echo '{INIT}'; read l; printf '%s\\n' \"$l\" >> {log}; cat >/dev/null",
        log = log.display()
    );
    let client = Client::connect_stdio(mock(&script), options())
        .await
        .unwrap();
    assert_eq!(client.session_id().as_deref(), Some("s1"));
    let deadline = std::time::Instant::now() + TIMEOUT;
    let received = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() == 2 || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let lines: Vec<Value> = received
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["method"], "initialize");
    assert_eq!(lines[0]["id"], 1);
    assert_eq!(lines[0]["params"]["clientName"], "mock-test");
    assert_eq!(
        lines[1],
        json!({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    );
}

#[tokio::test]
async fn dropping_the_client_kills_the_server_and_its_child() {
    let dir = TempDir::new();
    let (server_pid, child_pid) = (dir.path().join("server"), dir.path().join("child"));
    // The server ignores the end of its stdin: only the client's signals can stop it.
    let script = format!(
        "echo $$ > {server}; sleep 1000 >/dev/null & echo $! > {child}; read l; echo '{INIT}'; read l; exec 0</dev/null; while :; do sleep 1; done",
        server = server_pid.display(),
        child = child_pid.display()
    );
    let client = Client::connect_stdio(mock(&script), options())
        .await
        .unwrap();
    let (server, child) = (read_pid(&server_pid).await, read_pid(&child_pid).await);
    let _reap = Reap(vec![server, child]);
    assert!(!gone(server) && !gone(child));
    drop(client);
    wait_gone(server).await;
    wait_gone(child).await;
}

#[tokio::test]
async fn malformed_server_output_fails_the_connect_and_kills_the_server() {
    let dir = TempDir::new();
    let pid_file = dir.path().join("server");
    let script = format!(
        "echo $$ > {}; echo 'this is not JSON-RPC'; exec sleep 1000",
        pid_file.display()
    );
    let err = Client::connect_stdio(mock(&script), options())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClientError::Protocol(message) if message.contains("malformed message from server")),
        "{err}"
    );
    let server = read_pid(&pid_file).await;
    let _reap = Reap(vec![server]);
    wait_gone(server).await;
}

#[tokio::test]
async fn a_server_that_never_answers_initialize_times_out() {
    let mut options = options();
    options.initialize_timeout = Duration::from_millis(300);
    let err = Client::connect_stdio(mock("exec sleep 1000"), options)
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::InitializeTimeout(_)), "{err}");
}

#[tokio::test]
async fn events_are_delivered_in_seq_order_when_notifications_arrive_reordered() {
    let exited = r#"{"method":"process/exited","params":{"processId":"p","seq":3,"exitCode":7,"sandboxDenied":false}}"#;
    let closed = r#"{"method":"process/closed","params":{"processId":"p","seq":4}}"#;
    let script = format!(
        "read l; echo '{INIT}'; read l; read l; echo '{closed}'; echo '{one}'; echo '{exited}'; echo '{two}'; \
         echo '{one}'; echo '{{\"id\":2,\"result\":{{\"processId\":\"p\",\"sandboxType\":\"none\"}}}}'; cat >/dev/null",
        one = output("p", 1, "one"),
        two = output("p", 2, "two"),
    );
    let client = Client::connect_stdio(mock(&script), options())
        .await
        .unwrap();
    let handle = client.start_process(start("p")).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(TIMEOUT, handle.next_event())
        .await
        .unwrap()
    {
        events.push(event);
    }
    assert_eq!(
        events,
        [
            ProcessEvent::Output {
                seq: 1,
                stream: OutputStream::Stdout,
                data: b"one".to_vec()
            },
            ProcessEvent::Output {
                seq: 2,
                stream: OutputStream::Stdout,
                data: b"two".to_vec()
            },
            ProcessEvent::Exited {
                seq: 3,
                exit_code: 7
            },
            ProcessEvent::Closed { seq: 4 },
        ]
    );
}

#[tokio::test]
async fn a_transport_disconnect_fails_processes_and_rejects_new_ones() {
    let script = format!(
        "read l; echo '{INIT}'; read l; read l; echo '{one}'; \
         echo '{{\"id\":2,\"result\":{{\"processId\":\"p\",\"sandboxType\":\"none\"}}}}'; exit 0",
        one = output("p", 1, "one"),
    );
    let client = Client::connect_stdio(mock(&script), options())
        .await
        .unwrap();
    let handle = client.start_process(start("p")).await.unwrap();
    assert!(matches!(
        next(&handle).await,
        ProcessEvent::Output { seq: 1, .. }
    ));
    match next(&handle).await {
        ProcessEvent::Failed { message } => assert!(message.contains("disconnected"), "{message}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(handle.next_event().await, None);
    let err = client.start_process(start("q")).await.unwrap_err();
    assert!(matches!(err, ClientError::Disconnected(_)), "{err}");
    let read = handle.read(Some(1), None, None).await.unwrap();
    assert!(read.closed);
    assert!(read.failure.unwrap().contains("disconnected"));
    let err = client.environment_status().await.unwrap_err();
    assert!(err.is_disconnect(), "{err}");
}

#[tokio::test]
async fn a_noisy_process_does_not_delay_a_quiet_process_wake() {
    // 20,000 notifications for `noisy` that nobody consumes, then one for `quiet`.
    let script = format!(
        "read l; echo '{INIT}'; read l; read l; read l; \
         echo '{{\"id\":2,\"result\":{{\"processId\":\"noisy\",\"sandboxType\":\"none\"}}}}'; \
         echo '{{\"id\":3,\"result\":{{\"processId\":\"quiet\",\"sandboxType\":\"none\"}}}}'; \
         i=1; while [ $i -le 20000 ]; do printf '%s\\n' \"{{\\\"method\\\":\\\"process/output\\\",\\\"params\\\":{{\\\"processId\\\":\\\"noisy\\\",\\\"seq\\\":$i,\\\"stream\\\":\\\"stdout\\\",\\\"chunk\\\":\\\"eA==\\\"}}}}\"; i=$((i+1)); done; \
         echo '{quiet}'; cat >/dev/null",
        quiet = output("quiet", 1, "hi"),
    );
    let client = Client::connect_stdio(mock(&script), options())
        .await
        .unwrap();
    let (noisy, quiet) = tokio::join!(
        client.start_process(start("noisy")),
        client.start_process(start("quiet"))
    );
    let (noisy, quiet) = (noisy.unwrap(), quiet.unwrap());
    let event = next(&quiet).await;
    assert_eq!(
        event,
        ProcessEvent::Output {
            seq: 1,
            stream: OutputStream::Stdout,
            data: b"hi".to_vec()
        }
    );
    // All of the noisy process's events were routed without anyone reading them.
    let mut count = 0;
    while let Some(event) = noisy.try_next_event() {
        count += 1;
        assert_eq!(event.seq(), Some(count));
    }
    assert_eq!(count, 20_000);
}

#[tokio::test]
async fn a_lost_connection_ends_an_open_http_body_with_an_error() {
    let delta = r#"{"method":"http/request/bodyDelta","params":{"requestId":"r1","seq":1,"deltaBase64":"aGVsbG8=","done":false,"error":null}}"#;
    let script = format!(
        "read l; echo '{INIT}'; read l; read l; \
         echo '{{\"id\":2,\"result\":{{\"status\":200,\"headers\":[],\"bodyBase64\":\"\"}}}}'; echo '{delta}'; exit 0"
    );
    let client = Client::connect_stdio(mock(&script), options())
        .await
        .unwrap();
    let mut params = wexec_protocol::HttpRequestParams::new("GET", "http://example.com/");
    params.request_id = Some("r1".into());
    let (reply, mut body) = client.http_request_streamed(params).await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(&body.chunk().await.unwrap().unwrap()[..], b"hello");
    let err = body.chunk().await.unwrap().unwrap_err();
    assert!(err.is_disconnect(), "{err}");
}

/// A scripted WebSocket server: each accepted connection is handed to `script` with its index.
async fn ws_mock<F, Fut>(script: F) -> String
where
    F: Fn(usize, Conn) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut index = 0;
        while let Ok((stream, _)) = listener.accept().await {
            let socket = tokio_tungstenite::accept_async(stream).await.unwrap();
            tokio::spawn(script(index, Conn(socket)));
            index += 1;
        }
    });
    url
}

struct Conn(tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>);

impl Conn {
    async fn recv(&mut self) -> Option<Value> {
        loop {
            match self.0.next().await? {
                Ok(Message::Text(text)) => return Some(serde_json::from_str(&text).unwrap()),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    async fn send(&mut self, message: Value) {
        self.0
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_remote_client_resumes_its_session_and_recovers_missed_events() {
    const BURST: u64 = 2_048;
    let url = ws_mock(|index, mut conn| async move {
        let init = conn.recv().await.unwrap();
        match index {
            0 => {
                assert_eq!(init["params"]["resumeSessionId"], Value::Null);
                conn.send(
                    json!({"id": init["id"], "result": {"sessionId": "s1", "environmentInfo": {}}}),
                )
                .await;
                assert_eq!(conn.recv().await.unwrap()["method"], "initialized");
                let start = conn.recv().await.unwrap();
                conn.send(
                    json!({"id": start["id"], "result": {"processId": "p", "sandboxType": "none"}}),
                )
                .await;
                conn.send(serde_json::from_str(&output("p", 1, "a")).unwrap())
                    .await;
                // Two calls in flight when the socket goes: a status (idempotent) and a write.
                let mut methods = Vec::new();
                while methods.len() < 2 {
                    methods.push(
                        conn.recv().await.unwrap()["method"]
                            .as_str()
                            .unwrap()
                            .to_owned(),
                    );
                }
                methods.sort();
                assert_eq!(methods, ["environment/status", "process/write"]);
                conn.0.close(None).await.unwrap();
            }
            1 => {
                assert_eq!(init["params"]["resumeSessionId"], "s1");
                conn.send(json!({"id": init["id"], "error": {"code": -32010,
                    "message": "session s1 is already attached to another connection"}}))
                    .await;
                while conn.recv().await.is_some() {}
            }
            _ => {
                assert_eq!(init["params"]["resumeSessionId"], "s1");
                // A burst of notifications ahead of the initialize response.
                for seq in 2..=BURST + 1 {
                    conn.send(serde_json::from_str(&output("p", seq, "b")).unwrap())
                        .await;
                }
                conn.send(
                    json!({"id": init["id"], "result": {"sessionId": "s1", "environmentInfo": {}}}),
                )
                .await;
                while let Some(message) = conn.recv().await {
                    let id = message["id"].clone();
                    match message["method"].as_str().unwrap() {
                        "initialized" => {}
                        "environment/status" => {
                            conn.send(json!({"id": id, "result": {"status": "ready"}}))
                                .await;
                        }
                        "process/read" => {
                            // Recovery reads from the last delivered seq; the exit and close
                            // happened while detached.
                            assert_eq!(message["params"]["afterSeq"], BURST + 1);
                            conn.send(json!({"id": id, "result": {
                                "chunks": [], "nextSeq": BURST + 4, "exited": true, "exitCode": 3,
                                "closed": true, "failure": null, "sandboxDenied": false}}))
                                .await;
                        }
                        other => panic!("unexpected {other}"),
                    }
                }
            }
        }
    })
    .await;
    let client = Client::remote(WebSocketTarget::new(url), options());
    let handle = client.start_process(start("p")).await.unwrap();
    assert_eq!(client.session_id().as_deref(), Some("s1"));
    assert!(matches!(
        next(&handle).await,
        ProcessEvent::Output { seq: 1, .. }
    ));
    let (status, write) = tokio::join!(client.environment_status(), handle.write(b"x"));
    assert_eq!(status.unwrap().status, "ready");
    let err = write.unwrap_err();
    assert!(matches!(err, ClientError::Disconnected(_)), "{err}");
    for seq in 2..=BURST + 1 {
        assert_eq!(next(&handle).await.seq(), Some(seq));
    }
    assert_eq!(
        next(&handle).await,
        ProcessEvent::Exited {
            seq: BURST + 2,
            exit_code: 3
        }
    );
    assert_eq!(next(&handle).await, ProcessEvent::Closed { seq: BURST + 3 });
    assert_eq!(handle.next_event().await, None);
    assert_eq!(client.session_id().as_deref(), Some("s1"));
}

#[tokio::test]
async fn a_resume_answering_another_session_is_a_protocol_error() {
    let url = ws_mock(|index, mut conn| async move {
        let init = conn.recv().await.unwrap();
        let session = if index == 0 { "s1" } else { "s2" };
        conn.send(
            json!({"id": init["id"], "result": {"sessionId": session, "environmentInfo": {}}}),
        )
        .await;
        let _ = conn.recv().await;
        if index == 0 {
            let start = conn.recv().await.unwrap();
            conn.send(
                json!({"id": start["id"], "result": {"processId": "p", "sandboxType": "none"}}),
            )
            .await;
            conn.0.close(None).await.unwrap();
        }
        while conn.recv().await.is_some() {}
    })
    .await;
    let client = Client::remote(WebSocketTarget::new(url), options());
    let handle = client.start_process(start("p")).await.unwrap();
    match next(&handle).await {
        ProcessEvent::Failed { message } => {
            assert!(
                message.contains("initialize answered session s2"),
                "{message}"
            );
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    let err = client.start_process(start("q")).await.unwrap_err();
    assert!(matches!(err, ClientError::Disconnected(_)), "{err}");
}
