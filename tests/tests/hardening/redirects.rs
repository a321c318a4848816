//! Credentials never follow a redirect to another origin: `Authorization`, `Cookie`,
//! `Proxy-Authorization` and every header an executor variable supplies (`valueEnvVar`) are
//! dropped whenever the scheme, host or port changes, as browsers and curl do for the first
//! three, and kept on a redirect within the origin (docs/protocol.md §10.1).

use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use wexec_tests::{Client, TempDir, read_http_head, spawn_stdio};

const CREDENTIALS: [(&str, &str); 3] = [
    ("Authorization", "Bearer secret-token"),
    ("Cookie", "session=secret-cookie"),
    ("Proxy-Authorization", "Basic c2VjcmV0"),
];

/// A plain HTTP server that records every request head and answers it with `respond(head)`.
async fn server(respond: fn(&str) -> String) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&heads);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                let Some(head) = read_http_head(&mut stream).await else {
                    return;
                };
                let response = respond(&head);
                recorded.lock().expect("heads").push(head);
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, heads)
}

fn redirect_to(location: &str) -> String {
    format!(
        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}

/// Answers `/final` with 200 and anything else with a redirect to `/final` on itself (a
/// same-origin hop).
async fn recorder() -> (u16, Arc<Mutex<Vec<String>>>) {
    server(|head| {
        if head.starts_with("GET /final") {
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_owned()
        } else {
            redirect_to("/final")
        }
    })
    .await
}

/// Redirects every request to its `?to=` value.
async fn redirector() -> u16 {
    let (port, _) = server(|head| {
        let to = head
            .split_whitespace()
            .nth(1)
            .and_then(|target| target.split_once("?to="))
            .map_or("", |(_, to)| to);
        redirect_to(to)
    })
    .await;
    port
}

/// GETs `url` with the credentials and an ordinary header, following redirects; returns the
/// status.
async fn fetch(client: &mut Client, url: &str) -> serde_json::Value {
    let mut headers: Vec<serde_json::Value> = CREDENTIALS
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    headers.push(json!({"name": "X-Ordinary", "value": "kept"}));
    let result = client
        .call(
            "http/request",
            json!({"method": "GET", "url": url, "headers": headers, "timeoutMs": 10_000}),
        )
        .await;
    result["status"].clone()
}

/// The credentials a recorded head carries, and whether the ordinary header arrived.
fn carried(head: &str) -> (Vec<&'static str>, bool) {
    let lower = head.to_ascii_lowercase();
    let credentials = CREDENTIALS
        .iter()
        .filter(|(name, value)| {
            lower.contains(&format!(
                "{}: {}",
                name.to_ascii_lowercase(),
                value.to_ascii_lowercase()
            ))
        })
        .map(|(name, _)| *name)
        .collect();
    (credentials, lower.contains("x-ordinary: kept"))
}

fn last_head(heads: &Mutex<Vec<String>>) -> String {
    heads
        .lock()
        .expect("heads")
        .last()
        .cloned()
        .expect("a request arrived")
}

#[tokio::test]
async fn credentials_are_dropped_when_the_port_or_host_changes_and_kept_within_the_origin() {
    let (port, heads) = recorder().await;
    let hop = redirector().await;
    let (_server, mut client) =
        spawn_stdio(&["--allow-host", "127.0.0.1:*", "--allow-host", "localhost:*"]);
    client.handshake().await;

    // Within the origin: the recorder redirects /start to /final on itself.
    assert_eq!(
        fetch(&mut client, &format!("http://127.0.0.1:{port}/start")).await,
        200
    );
    assert_eq!(
        carried(&last_head(&heads)),
        (vec!["Authorization", "Cookie", "Proxy-Authorization"], true),
        "a same-origin hop keeps them"
    );
    for (case, to) in [
        (
            "another port of the same host",
            format!("http://127.0.0.1:{port}/final"),
        ),
        ("another host", format!("http://localhost:{port}/final")),
    ] {
        let url = format!("http://127.0.0.1:{hop}/?to={to}");
        assert_eq!(fetch(&mut client, &url).await, 200, "{case}");
        assert_eq!(carried(&last_head(&heads)), (vec![], true), "{case}");
    }
}

/// A self-signed certificate for 127.0.0.1 (openssl), in `dir`: (cert, key).
fn certificate(dir: &TempDir) -> (String, String) {
    let cert = dir.path().join("cert.pem").display().to_string();
    let key = dir.path().join("key.pem").display().to_string();
    let config = dir.path().join("openssl.cnf");
    std::fs::write(&config, "[req]\ndistinguished_name=dn\n[dn]\n").expect("write config");
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args([
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &key,
            "-out",
            &cert,
        ])
        .arg("-config")
        .arg(&config)
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("this test needs the openssl command");
    assert!(status.success(), "openssl made no certificate");
    (cert, key)
}

/// An HTTPS server (Python's, over the certificate) that redirects every GET to `to`.
async fn https_redirector(cert: &str, key: &str, to: &str) -> (tokio::process::Child, u16) {
    let script = r#"
import http.server, ssl, sys
to, cert, key = sys.argv[1:4]
class Redirect(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;
    let mut child = tokio::process::Command::new("python3")
        .args(["-c", script, to, cert, key])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("this test needs python3");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = tokio::io::BufReader::new(stdout);
    let mut line = String::new();
    tokio::io::AsyncBufReadExt::read_line(&mut lines, &mut line)
        .await
        .expect("port line");
    (child, line.trim().parse().expect("a port"))
}

#[tokio::test]
async fn credentials_are_dropped_when_https_redirects_to_http() {
    let dir = TempDir::new();
    let (cert, key) = certificate(&dir);
    let (port, heads) = recorder().await;
    let (_python, tls_port) =
        https_redirector(&cert, &key, &format!("http://127.0.0.1:{port}/final")).await;
    let mut command = wexec_tests::command(&["--allow-host", "127.0.0.1:*"]);
    command.env("SSL_CERT_FILE", &cert);
    let (_server, mut client) = wexec_tests::spawn_stdio_with(command);
    client.handshake().await;
    assert_eq!(
        fetch(&mut client, &format!("https://127.0.0.1:{tls_port}/")).await,
        200
    );
    assert_eq!(
        carried(&last_head(&heads)),
        (vec![], true),
        "a downgrade to http gets no credentials"
    );
}

/// A header whose value an executor variable supplies (`valueEnvVar`) is a credential wherever
/// it goes (`X-Api-Key`, a bearer token): it stays with the origin it was written for, like
/// `Authorization`. It used to follow every redirect.
#[tokio::test]
async fn value_env_var_headers_are_dropped_when_the_origin_changes() {
    let (port, heads) = recorder().await;
    let hop = redirector().await;
    let mut command = wexec_tests::command(&[
        "--allow-host",
        "127.0.0.1:*",
        "--allow-header-env",
        "WEXEC_TEST_API_KEY",
    ]);
    command.env("WEXEC_TEST_API_KEY", "secret-api-key");
    let (_server, mut client) = wexec_tests::spawn_stdio_with(command);
    client.handshake().await;
    let fetch = |url: String| {
        json!({"method": "GET", "url": url, "timeoutMs": 10_000, "headers": [
            {"name": "X-Api-Key", "value": "", "valueEnvVar": "WEXEC_TEST_API_KEY"},
            {"name": "Authorization", "value": "Bearer ", "valueEnvVar": "WEXEC_TEST_API_KEY"},
            {"name": "X-Ordinary", "value": "kept"},
        ]})
    };
    let carried = |head: &str| {
        let lower = head.to_ascii_lowercase();
        (
            lower.contains("x-api-key: secret-api-key"),
            lower.contains("authorization: bearer secret-api-key"),
            lower.contains("x-ordinary: kept"),
        )
    };
    let within = client
        .call(
            "http/request",
            fetch(format!("http://127.0.0.1:{port}/start")),
        )
        .await;
    assert_eq!(within["status"], 200);
    assert_eq!(
        carried(&last_head(&heads)),
        (true, true, true),
        "same origin"
    );
    let across = client
        .call(
            "http/request",
            fetch(format!(
                "http://127.0.0.1:{hop}/?to=http://127.0.0.1:{port}/final"
            )),
        )
        .await;
    assert_eq!(across["status"], 200);
    assert_eq!(
        carried(&last_head(&heads)),
        (false, false, true),
        "another origin gets neither"
    );
}
