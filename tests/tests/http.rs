//! `http/request` through the bundled `http` plugin, against an HTTP server inside the test
//! (docs/protocol.md §10).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use wexec_tests::{Client, Server, TIMEOUT, http_server, read_http_head, rpc_error, spawn_stdio};

/// The test origin: `/ok`, `/redirect`, `/big?<bytes>`, `/slow`, `/stall`.
struct Origin {
    addr: String,
    hits: Arc<AtomicUsize>,
}

async fn origin() -> Origin {
    let (addr, hits) = http_server(|line, mut stream| async move {
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let close = "Connection: close\r\n";
        match path {
            "/ok" => {
                let response = format!("HTTP/1.1 200 OK\r\nX-Rep: a\r\nContent-Type: text/plain\r\nX-Rep: b\r\nContent-Length: 5\r\n{close}\r\nhello");
                let _ = stream.write_all(response.as_bytes()).await;
            }
            "/redirect" => {
                let response = format!("HTTP/1.1 302 Found\r\nLocation: /ok\r\nContent-Length: 0\r\n{close}\r\n");
                let _ = stream.write_all(response.as_bytes()).await;
            }
            "/big" => {
                let size: usize = query.parse().unwrap_or(0);
                let response = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n{close}\r\n");
                let _ = stream.write_all(response.as_bytes()).await;
                let block = vec![b'z'; 64 * 1024];
                let mut left = size;
                while left > 0 {
                    let take = left.min(block.len());
                    if stream.write_all(&block[..take]).await.is_err() {
                        return;
                    }
                    left -= take;
                }
            }
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(3)).await;
                let _ = stream.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n{close}\r\nlate").as_bytes()).await;
            }
            _ => {
                // `/stall`: a head and half a body, then nothing for a long time.
                let _ = stream.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n{close}\r\nhalf.").as_bytes()).await;
                tokio::time::sleep(Duration::from_secs(20)).await;
            }
        }
    })
    .await;
    Origin { addr, hits }
}

async fn granted() -> (Origin, Server, Client) {
    let origin = origin().await;
    let (server, mut client) = spawn_stdio(&["--allow-host", "127.0.0.1:*"]);
    client.handshake().await;
    (origin, server, client)
}

fn get(url: String) -> Value {
    json!({"method": "GET", "url": url})
}

#[tokio::test]
async fn buffered_requests_keep_header_order_and_repeats() {
    let (origin, _server, mut client) = granted().await;
    let result = client
        .call("http/request", get(format!("http://{}/ok", origin.addr)))
        .await;
    assert_eq!(result["status"], 200);
    assert_eq!(result["bodyBase64"], STANDARD.encode("hello"));
    let headers: Vec<(String, String)> = result["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .map(|h| {
            (
                h["name"].as_str().unwrap_or_default().to_owned(),
                h["value"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let repeated: Vec<&str> = headers
        .iter()
        .filter(|(name, _)| name == "x-rep")
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(repeated, ["a", "b"], "{headers:?}");

    let posted = client
        .call(
            "http/request",
            json!({"method": "POST", "url": format!("http://{}/ok", origin.addr), "headers": [{"name": "X-Test", "value": "1"}], "bodyBase64": STANDARD.encode("payload")}),
        )
        .await;
    assert_eq!(posted["status"], 200);
}

#[tokio::test]
async fn redirects_stop_or_follow() {
    let (origin, _server, mut client) = granted().await;
    let url = format!("http://{}/redirect", origin.addr);
    let stopped = client
        .call(
            "http/request",
            json!({"method": "GET", "url": url, "redirectPolicy": "stop"}),
        )
        .await;
    assert_eq!(stopped["status"], 302);
    assert!(
        stopped["headers"]
            .as_array()
            .expect("headers")
            .iter()
            .any(|h| h["name"] == "location" && h["value"] == "/ok")
    );
    let followed = client.call("http/request", get(url)).await;
    assert_eq!(
        (followed["status"].clone(), followed["bodyBase64"].clone()),
        (json!(200), json!(STANDARD.encode("hello")))
    );
}

#[tokio::test]
async fn streamed_bodies_come_after_the_response_in_order_and_whole() {
    let (origin, _server, mut client) = granted().await;
    let size = 3 * 1024 * 1024 + 12_345;
    let params = json!({"method": "GET", "url": format!("http://{}/big?{size}", origin.addr), "requestId": "big", "streamResponse": true});
    client
        .send(&json!({"id": "stream", "method": "http/request", "params": params}))
        .await;
    // The response comes first.
    let first = client.recv().await;
    assert_eq!(
        first["id"], "stream",
        "the response precedes its body deltas: {first}"
    );
    assert_eq!(
        (
            first["result"]["status"].clone(),
            first["result"]["bodyBase64"].clone()
        ),
        (json!(200), json!(""))
    );
    let mut received = 0usize;
    let mut expected_seq = 1;
    loop {
        let delta = client.next_notification().await;
        assert_eq!(delta["method"], "http/request/bodyDelta");
        let params = &delta["params"];
        assert_eq!(params["requestId"], "big");
        assert_eq!(params["seq"], expected_seq, "contiguous seqs from 1");
        expected_seq += 1;
        let bytes = STANDARD
            .decode(params["deltaBase64"].as_str().expect("delta"))
            .expect("base64");
        assert!(
            bytes.len() <= 1024 * 1024,
            "at most 1 MiB decoded per delta"
        );
        assert!(bytes.iter().all(|&b| b == b'z'));
        received += bytes.len();
        if params["done"] == true {
            assert!(bytes.is_empty(), "the final delta is empty");
            assert_eq!(params["error"], Value::Null);
            break;
        }
    }
    assert_eq!(received, size);
}

#[tokio::test]
async fn timeouts_failures_and_duplicate_stream_ids() {
    let (origin, _server, mut client) = granted().await;
    let slow =
        json!({"method": "GET", "url": format!("http://{}/slow", origin.addr), "timeoutMs": 300});
    assert_eq!(
        client.call_err("http/request", slow).await,
        rpc_error(-32603, "http/request failed: timed out")
    );

    let stall = |id: &str| json!({"method": "GET", "url": format!("http://{}/stall", origin.addr), "requestId": id, "streamResponse": true, "timeoutMs": 1500});
    assert_eq!(client.call("http/request", stall("s")).await["status"], 200);
    assert_eq!(
        client.call_err("http/request", stall("s")).await,
        rpc_error(
            -32602,
            "http/request streamResponse requestId `s` is already active"
        )
    );
    // The first stream ends with one terminal delta carrying the failure; then the id is free.
    let mut terminal = None;
    while terminal.is_none() {
        let delta = client.next_notification().await;
        if delta["params"]["requestId"] == "s" && delta["params"]["done"] == true {
            terminal = Some(delta);
        }
    }
    let terminal = terminal.expect("terminal delta");
    assert!(
        terminal["params"]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{terminal}"
    );
    // The id is released as the stream's call returns, just after it sent that delta.
    let busy = rpc_error(
        -32602,
        "http/request streamResponse requestId `s` is already active",
    );
    let deadline = Instant::now() + TIMEOUT;
    let again = loop {
        let reply = client.request("http/request", stall("s")).await;
        if reply["error"] != busy || Instant::now() >= deadline {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        again["result"]["status"], 200,
        "the id is free again: {again}"
    );
}

#[tokio::test]
async fn invalid_requests_are_refused_before_anything_is_sent() {
    let (origin, _server, mut client) = granted().await;
    let url = format!("http://{}/ok", origin.addr);
    assert_eq!(
        client
            .call_err(
                "http/request",
                json!({"method": "GET", "url": "ftp://127.0.0.1/x"})
            )
            .await,
        rpc_error(
            -32602,
            "http/request only supports http and https URLs, got ftp"
        )
    );
    assert_eq!(
        client
            .call_err("http/request", json!({"method": "BAD METHOD", "url": url}))
            .await["code"],
        -32602
    );
    assert_eq!(
        client
            .call_err("http/request", json!({"method": "GET", "url": "not a url"}))
            .await["code"],
        -32602
    );
    // Absent means follow; `null` is no policy (Codex's exec-server answers the same).
    assert_eq!(
        client
            .call_err(
                "http/request",
                json!({"method": "GET", "url": url, "redirectPolicy": null})
            )
            .await,
        rpc_error(-32602, "invalid type: null, expected string or map")
    );
    assert_eq!(
        client
            .call_err("http/request", json!({"method": "GET", "url": url, "headers": [{"name": "Authorization", "value": "", "valueEnvVar": "TOKEN"}]}))
            .await,
        rpc_error(-32602, "http/request header Authorization requires executor environment variable TOKEN"),
        "no variable is granted by default"
    );
    assert_eq!(
        client
            .call_err(
                "http/request",
                json!({"method": "GET", "url": url, "streamResponse": true})
            )
            .await,
        rpc_error(-32602, "http/request streamResponse requires requestId")
    );
    assert_eq!(origin.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn targets_outside_the_grants_are_denied_and_the_origin_untouched() {
    let origin = origin().await;
    let port = origin
        .addr
        .rsplit_once(':')
        .map(|(_, port)| port.to_owned())
        .expect("port");
    for grant in [
        None,
        Some("127.0.0.1:1"),
        Some("127.0.0.1"),
        Some("*.0.0.1:*"),
    ] {
        let (_server, mut client) = match grant {
            Some(grant) => spawn_stdio(&["--allow-host", grant]),
            None => spawn_stdio(&[]),
        };
        client.handshake().await;
        assert_eq!(
            client
                .call_err("http/request", get(format!("http://127.0.0.1:{port}/ok")))
                .await,
            rpc_error(
                -32600,
                &format!("http/request to 127.0.0.1:{port} is not allowed")
            ),
            "grant {grant:?}"
        );
    }
    assert_eq!(
        origin.hits.load(Ordering::SeqCst),
        0,
        "nothing touched the network"
    );
}

#[tokio::test]
async fn value_env_var_headers_read_only_granted_variables() {
    // A server that answers every request with the `Authorization` header it received.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Some(head) = read_http_head(&mut stream).await else {
                    return;
                };
                let auth = head
                    .lines()
                    .find_map(|line| {
                        let (name, value) = line.split_once(':')?;
                        name.eq_ignore_ascii_case("authorization")
                            .then(|| value.trim().to_owned())
                    })
                    .unwrap_or_default();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{auth}",
                    auth.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    let mut command = wexec_tests::command(&[
        "--allow-host",
        "127.0.0.1:*",
        "--allow-header-env",
        "WEXEC_TEST_MCP_TOKEN",
        "--allow-header-env",
        "WEXEC_TEST_EMPTY",
        "--allow-header-env",
        "WEXEC_TEST_UNSET",
    ]);
    command
        .env("WEXEC_TEST_MCP_TOKEN", "s3cret-value")
        .env("WEXEC_TEST_EMPTY", "")
        .env("WEXEC_TEST_NOT_GRANTED", "hidden")
        .env_remove("WEXEC_TEST_UNSET")
        // Everything logged, so that the check below means something.
        .env("RUST_LOG", "trace");
    let (server, mut client) = wexec_tests::spawn_stdio_with(command);
    client.handshake().await;
    let request = |var: &str| json!({"method": "GET", "url": format!("http://{addr}/"), "headers": [{"name": "Authorization", "value": "Bearer ", "valueEnvVar": var}]});
    let result = client
        .call("http/request", request("WEXEC_TEST_MCP_TOKEN"))
        .await;
    assert_eq!(
        STANDARD
            .decode(result["bodyBase64"].as_str().expect("body"))
            .expect("base64"),
        b"Bearer s3cret-value",
        "the granted variable is appended to the value"
    );
    for (var, message) in [
        (
            "WEXEC_TEST_NOT_GRANTED",
            "http/request header Authorization requires executor environment variable WEXEC_TEST_NOT_GRANTED",
        ),
        (
            "WEXEC_TEST_UNSET",
            "http/request header Authorization requires executor environment variable WEXEC_TEST_UNSET",
        ),
        (
            "WEXEC_TEST_EMPTY",
            "http/request header Authorization requires a non-empty executor environment variable WEXEC_TEST_EMPTY",
        ),
    ] {
        assert_eq!(
            client.call_err("http/request", request(var)).await,
            rpc_error(-32602, message),
            "{var}"
        );
    }
    let listing = client.call("plugin/list", json!({})).await;
    let http = listing["plugins"]
        .as_array()
        .and_then(|plugins| plugins.iter().find(|plugin| plugin["name"] == "http"))
        .expect("http plugin")
        .clone();
    assert_eq!(
        http["grants"]["envVars"],
        json!([
            "WEXEC_TEST_EMPTY",
            "WEXEC_TEST_MCP_TOKEN",
            "WEXEC_TEST_UNSET"
        ])
    );
    drop(client);
    let logs = server.stderr();
    assert!(!logs.is_empty(), "trace logging is on");
    assert!(
        !logs.contains("s3cret-value"),
        "the value never reaches the logs"
    );
}
