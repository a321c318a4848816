//! Harness for end-to-end tests: starts the real `wexec` binary and talks to it over stdio or
//! WebSocket as a client would. Every wait has a fixed timeout, and a failing test prints what
//! wexec logged on stderr.
//!
//! The binary comes from `WEXEC_BIN`, else from the target directory of the running test
//! (`cargo test` builds it).

#![expect(
    clippy::expect_used,
    reason = "test harness: a failed expectation is a failed test"
)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The `probe` test guest (built by this crate's build script).
pub const PROBE_WASM: &str = env!("WEXEC_PROBE_WASM");

/// The `hostile` test guest (built by this crate's build script).
pub const HOSTILE_WASM: &str = env!("WEXEC_HOSTILE_WASM");

/// The `hello` example plugin (`plugins/examples/hello`), built by `build.rs`.
pub const HELLO_WASM: &str = env!("WEXEC_HELLO_WASM");

/// The `grep` example plugin (`plugins/examples/grep`), built by `build.rs`.
pub const GREP_WASM: &str = env!("WEXEC_GREP_WASM");

/// The longest any single wait in a test may take.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The `wexec` binary under test.
pub fn wexec_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("WEXEC_BIN") {
        return PathBuf::from(path);
    }
    // target/<profile>/deps/<test binary> → target/<profile>/wexec
    let exe = std::env::current_exe().expect("current test executable");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test executable lives in target/<profile>/deps");
    let bin = profile_dir.join("wexec");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p wexec` in this profile (cargo test does), or set WEXEC_BIN",
        bin.display()
    );
    bin
}

/// Runs cargo with `args` in `dir` into `target_dir`, without the outer build's settings (they
/// are for the outer build's target); fails the test, with cargo's stderr, if cargo fails.
pub fn nested_cargo(dir: &Path, target_dir: &Path, args: &[&str]) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = std::process::Command::new(cargo)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo {args:?} in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The names of the plugins an `environmentInfo` lists (`wexec.plugins`), in order.
pub fn plugin_names(environment_info: &Value) -> Vec<&str> {
    environment_info["wexec"]["plugins"]
        .as_array()
        .expect("environmentInfo lists its plugins")
        .iter()
        .filter_map(|plugin| plugin["name"].as_str())
        .collect()
}

/// A running wexec process.
pub struct Server {
    child: Child,
    stderr: Arc<Mutex<String>>,
    /// stdout lines after the address line of a WebSocket server: there must be none.
    stray_stdout: Arc<Mutex<Vec<String>>>,
    /// The bound `ws://` URL, for WebSocket servers.
    pub url: Option<String>,
}

/// Whether this test may do what only root may (plant files in `/etc`, act as another user);
/// `false`, saying the test is skipped, when it may not. CI runs as root: there a test never
/// skips.
pub fn running_as_root(what: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs as root: {what} needs it"
    );
    eprintln!("skipped: {what} needs root");
    false
}

/// The value of `variable`, naming a real client a test drives (installed by `.ci/run`), or
/// `None`, saying the test is skipped, when it is unset. Under CI (`CI` set) an unset one fails
/// the test: a real client's test never skips there.
pub fn real_client(variable: &str, what: &str) -> Option<String> {
    if let Some(value) = std::env::var_os(variable) {
        return Some(value.to_string_lossy().into_owned());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must run this test: set {variable} to {what}"
    );
    eprintln!("skipped: set {variable} to {what}");
    None
}

/// The system's `python3`, which every user may run (a per-user install may not be).
pub fn system_python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// The port of a `ws://ip:port` URL.
pub fn port_of(url: &str) -> String {
    url.rsplit(':').next().expect("a port").to_owned()
}

/// Where tests cache compiled plugins: beside the build, not in the user's home.
pub fn plugin_cache() -> PathBuf {
    wexec_bin()
        .parent()
        .map(|dir| dir.join("test-cache"))
        .unwrap_or_default()
}

/// The wexec binary with `args` as a [`wexec_client::StdioCommand`], for tests that drive it
/// through the Rust client; logs warnings and errors to the test's stderr.
pub fn client_command(args: &[&str]) -> wexec_client::StdioCommand {
    wexec_client::StdioCommand::new(wexec_bin())
        .args(args.iter().copied())
        .env("XDG_CACHE_HOME", plugin_cache().display().to_string())
        .env("RUST_LOG", "wexec=warn")
}

/// A `Command` for wexec with `args`, in `cwd`, logging at debug level to stderr.
pub fn command(args: &[&str]) -> Command {
    command_under(&[], args)
}

/// Like [`command`], but wexec is started by `launcher` (a program and its arguments, which
/// must end by running its remaining arguments, e.g. `sh -c '...; exec "$0" "$@"'`).
pub fn command_under(launcher: &[&str], args: &[&str]) -> Command {
    let mut command = match launcher.split_first() {
        Some((program, launcher_args)) => {
            let mut command = Command::new(program);
            command.args(launcher_args).arg(wexec_bin());
            command
        }
        None => Command::new(wexec_bin()),
    };
    prepare(&mut command, args);
    command
}

/// Like [`command`], for another wexec binary (a benchmark's baseline build).
pub fn command_of(binary: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(binary);
    prepare(&mut command, args);
    command
}

/// `args`, the test cache and logging, piped stdio.
fn prepare(command: &mut Command, args: &[&str]) {
    let cache = plugin_cache();
    command
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .env("RUST_LOG", "wexec=debug")
        .env_remove("WEXEC_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
}

impl Server {
    fn from_child(mut child: Child) -> Self {
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut buffer = [0u8; 8192];
                while let Ok(read) = pipe.read(&mut buffer).await {
                    if read == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buffer[..read]).into_owned();
                    sink.lock().expect("stderr buffer").push_str(&text);
                }
            });
        }
        Self {
            child,
            stderr,
            stray_stdout: Arc::default(),
            url: None,
        }
    }

    /// What wexec has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr buffer").clone()
    }

    /// What wexec has written to stderr once it holds `text` (stderr is read as it comes);
    /// panics after [`TIMEOUT`].
    pub async fn stderr_containing(&self, text: &str) -> String {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let log = self.stderr();
            if log.contains(text) {
                return log;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "stderr never showed {text:?}:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for wexec to exit.
    pub async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(TIMEOUT, self.child.wait())
            .await
            .expect("wexec exits in time")
            .expect("wait for wexec")
    }

    /// wexec's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("wexec is running")
    }

    /// Sends `signal` (e.g. `libc` numbers via the `kill` command) to wexec.
    pub async fn kill_with(&self, signal: &str) {
        let status = Command::new("kill")
            .args(["-s", signal, &self.pid().to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(status.success());
    }

    /// Opens a WebSocket client connection.
    pub async fn connect(&self) -> Client {
        self.connect_with(None).await.expect("websocket upgrade")
    }

    /// Opens a WebSocket client connection, with a bearer token if given.
    pub async fn connect_with(
        &self,
        token: Option<&str>,
    ) -> Result<Client, tokio_tungstenite::tungstenite::Error> {
        let url = self.url.as_deref().expect("a websocket server");
        let mut request = url.into_client_request()?;
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().expect("header value");
            request.headers_mut().insert("Authorization", value);
        }
        let (socket, _) = tokio::time::timeout(
            TIMEOUT,
            tokio_tungstenite::connect_async_with_config(request, None, true),
        )
        .await
        .expect("websocket connect in time")?;
        Ok(Client::new(Link::WebSocket(Box::new(socket))))
    }

    /// Resumes `session_id` on a new connection, retrying -32010 every 100 ms as clients do
    /// (docs/protocol.md §5.3). Returns the client and the initialize result; panics on any other
    /// error.
    pub async fn resume(&self, session_id: &str) -> (Client, Value) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut client = self.connect().await;
        loop {
            let reply = client
                .request(
                    "initialize",
                    json!({"clientName": "wexec-tests", "resumeSessionId": session_id}),
                )
                .await;
            if let Some(result) = reply.get("result") {
                return (client, result.clone());
            }
            assert_eq!(
                reply["error"]["code"], -32010,
                "only -32010 is retried: {reply}"
            );
            assert!(
                std::time::Instant::now() < deadline,
                "resume kept failing: {reply}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The `host:port` the WebSocket server listens on.
    pub fn addr(&self) -> String {
        let url = self.url.as_deref().expect("a websocket server");
        url.trim_start_matches("ws://").to_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- wexec stderr ----\n{}\n----------------------",
                self.stderr()
            );
        }
    }
}

/// Starts wexec on stdio with `args` and returns it with a client on its stdin/stdout.
pub fn spawn_stdio(args: &[&str]) -> (Server, Client) {
    spawn_stdio_with(command(args))
}

/// Starts a prepared wexec command on stdio.
pub fn spawn_stdio_with(mut command: Command) -> (Server, Client) {
    let mut child = command.spawn().expect("spawn wexec");
    let stdin = child.stdin.take().expect("stdin pipe");
    let stdout = BufReader::new(child.stdout.take().expect("stdout pipe")).lines();
    let server = Server::from_child(child);
    (
        server,
        Client::new(Link::Stdio {
            stdin: Some(stdin),
            stdout,
        }),
    )
}

/// The CPUs this thread may run on, lowest first.
pub fn allowed_cpus() -> Vec<usize> {
    let allowed = rustix::thread::sched_getaffinity(None).expect("CPU affinity");
    (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&cpu| allowed.is_set(cpu))
        .collect()
}

/// Starts a prepared wexec command on stdio, confined to `cpu` (a child inherits the affinity
/// of the thread that starts it); this thread's affinity is as it was afterwards.
pub fn spawn_stdio_on(cpu: usize, command: Command) -> (Server, Client) {
    let allowed = rustix::thread::sched_getaffinity(None).expect("CPU affinity");
    let mut one = rustix::thread::CpuSet::new();
    one.set(cpu);
    rustix::thread::sched_setaffinity(None, &one).expect("pin this thread");
    // The command is not used again whether or not the spawn panics.
    let spawned =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| spawn_stdio_with(command)));
    rustix::thread::sched_setaffinity(None, &allowed).expect("unpin this thread");
    spawned.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Starts wexec listening on `ws://127.0.0.1:0` (plus `args`) and reads the bound URL.
pub async fn spawn_websocket(args: &[&str]) -> Server {
    let mut full = vec!["--listen", "ws://127.0.0.1:0"];
    full.extend_from_slice(args);
    spawn_websocket_with(command(&full)).await
}

/// Starts a prepared wexec command that listens on a WebSocket, and reads the bound URL.
pub async fn spawn_websocket_with(mut command: Command) -> Server {
    let mut child = command.spawn().expect("spawn wexec");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout pipe")).lines();
    let mut server = Server::from_child(child);
    let line = tokio::time::timeout(TIMEOUT, stdout.next_line())
        .await
        .expect("address line in time")
        .expect("read stdout");
    let Some(line) = line else {
        panic!(
            "wexec printed no address line; stderr:\n{}",
            server.stderr()
        );
    };
    assert!(line.starts_with("ws://127.0.0.1:"), "address line: {line}");
    server.url = Some(line);
    // Nothing else may appear on stdout; keep draining it so a stray line is caught on drop.
    let stray = Arc::clone(&server.stray_stdout);
    tokio::spawn(async move {
        while let Ok(Some(line)) = stdout.next_line().await {
            stray.lock().expect("stray stdout").push(line);
        }
    });
    server
}

/// Sends a raw HTTP/1.1 request to `addr` and returns the whole response text.
pub async fn http_raw(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send request");
    let mut response = Vec::new();
    tokio::time::timeout(TIMEOUT, stream.read_to_end(&mut response))
        .await
        .expect("response in time")
        .expect("read response");
    String::from_utf8_lossy(&response).into_owned()
}

/// The status code of an HTTP response text.
pub fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"))
}

/// How a client reaches wexec.
pub enum Link {
    /// The child's stdin and stdout.
    Stdio {
        /// `None` once closed.
        stdin: Option<ChildStdin>,
        /// Lines of stdout.
        stdout: Lines<BufReader<ChildStdout>>,
    },
    /// A WebSocket.
    WebSocket(Box<WebSocketStream<MaybeTlsStream<TcpStream>>>),
}

/// What the next inbound item was.
#[derive(Debug)]
pub enum Received {
    /// A JSON message.
    Message(Value),
    /// The connection ended (EOF, or a WebSocket close with this code).
    Closed(Option<u16>),
}

/// A protocol client over one link.
pub struct Client {
    link: Link,
    next_id: i64,
    /// Notifications received while waiting for a reply, in arrival order.
    pub notifications: VecDeque<Value>,
    /// Replies received while waiting for a different one.
    pub replies: VecDeque<Value>,
}

impl Client {
    fn new(link: Link) -> Self {
        Self {
            link,
            next_id: 1,
            notifications: VecDeque::new(),
            replies: VecDeque::new(),
        }
    }

    /// Sends one message as text (a line on stdio, a text frame on WebSocket).
    pub async fn send_text(&mut self, text: &str) {
        match &mut self.link {
            Link::Stdio { stdin, .. } => {
                let stdin = stdin.as_mut().expect("stdin still open");
                // One write per line: a line written in two pieces wakes the server twice.
                let line = format!("{text}\n");
                stdin.write_all(line.as_bytes()).await.expect("write stdin");
                stdin.flush().await.expect("flush stdin");
            }
            Link::WebSocket(socket) => socket.send(Message::text(text)).await.expect("send text"),
        }
    }

    /// Writes raw bytes to stdin (no terminator added).
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        let Link::Stdio { stdin, .. } = &mut self.link else {
            panic!("send_raw is for stdio");
        };
        let stdin = stdin.as_mut().expect("stdin still open");
        stdin.write_all(bytes).await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Sends a binary WebSocket message.
    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.try_send_binary(bytes).await.expect("send binary");
    }

    /// Sends a binary WebSocket message, reporting a failure instead of panicking.
    pub async fn try_send_binary(
        &mut self,
        bytes: Vec<u8>,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        let Link::WebSocket(socket) = &mut self.link else {
            panic!("send_binary is for websocket");
        };
        socket.send(Message::binary(bytes)).await
    }

    /// Sends a JSON message.
    pub async fn send(&mut self, message: &Value) {
        self.send_text(&message.to_string()).await;
    }

    /// Closes stdin (stdio) or sends a close frame (WebSocket).
    pub async fn close(&mut self) {
        match &mut self.link {
            Link::Stdio { stdin, .. } => drop(stdin.take()),
            Link::WebSocket(socket) => {
                let _ = (**socket).close(None).await;
            }
        }
    }

    /// The next inbound item. Panics after [`TIMEOUT`].
    pub async fn receive(&mut self) -> Received {
        tokio::time::timeout(TIMEOUT, self.receive_inner())
            .await
            .expect("a message from wexec in time")
    }

    async fn receive_inner(&mut self) -> Received {
        match &mut self.link {
            Link::Stdio { stdout, .. } => match stdout.next_line().await.expect("read stdout") {
                Some(line) => Received::Message(
                    serde_json::from_str(&line)
                        .unwrap_or_else(|err| panic!("stdout line is not JSON ({err}): {line}")),
                ),
                None => Received::Closed(None),
            },
            Link::WebSocket(socket) => loop {
                match socket.next().await {
                    Some(Ok(Message::Text(text))) => {
                        return Received::Message(
                            serde_json::from_str(&text).expect("text frame is JSON"),
                        );
                    }
                    Some(Ok(Message::Binary(_))) => panic!("wexec must send text frames only"),
                    Some(Ok(Message::Close(frame))) => {
                        return Received::Closed(frame.map(|frame| u16::from(frame.code)));
                    }
                    Some(Ok(_)) => continue,
                    Some(Err(err)) => {
                        eprintln!("websocket read error: {err}");
                        return Received::Closed(None);
                    }
                    None => return Received::Closed(None),
                }
            },
        }
    }

    /// The next raw stdout line, exactly as wexec wrote it (without its `\n`); `None` at the
    /// end of output. For tests of the framing itself.
    pub async fn recv_line(&mut self) -> Option<String> {
        let Link::Stdio { stdout, .. } = &mut self.link else {
            panic!("recv_line is for stdio");
        };
        tokio::time::timeout(TIMEOUT, stdout.next_line())
            .await
            .expect("a line from wexec in time")
            .expect("read stdout")
    }

    /// Sends a request with a fresh integer id without waiting for its reply; returns the id.
    pub async fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// The next message; panics if the connection closed.
    pub async fn recv(&mut self) -> Value {
        match self.receive().await {
            Received::Message(message) => message,
            Received::Closed(code) => {
                panic!("connection closed (code {code:?}) while a message was expected")
            }
        }
    }

    /// The next notification: stashed ones first, then from the wire (stashing replies).
    pub async fn next_notification(&mut self) -> Value {
        if let Some(notification) = self.notifications.pop_front() {
            return notification;
        }
        loop {
            let message = self.recv().await;
            if message.get("id").is_some() {
                self.replies.push_back(message);
            } else {
                return message;
            }
        }
    }

    /// The notifications stashed while waiting for replies, taken.
    pub fn take_stashed_notifications(&mut self) -> Vec<Value> {
        self.notifications.drain(..).collect()
    }

    /// Asserts the connection closes next (nothing else arrives first).
    pub async fn expect_closed(&mut self) -> Option<u16> {
        match self.receive().await {
            Received::Closed(code) => code,
            Received::Message(message) => panic!("expected the connection to close, got {message}"),
        }
    }

    /// The reply to `id`, stashing notifications and other replies met on the way.
    pub async fn reply_to(&mut self, id: &Value) -> Value {
        if let Some(index) = self.replies.iter().position(|reply| &reply["id"] == id) {
            return self.replies.remove(index).expect("index is valid");
        }
        loop {
            let message = self.recv().await;
            if message.get("id").is_none() {
                self.notifications.push_back(message);
            } else if &message["id"] == id {
                return message;
            } else {
                self.replies.push_back(message);
            }
        }
    }

    /// Sends a request with a fresh integer id and returns the whole reply message.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}))
            .await;
        let reply = self.reply_to(&json!(id)).await;
        assert_eq!(
            reply["jsonrpc"], "2.0",
            "every reply carries jsonrpc 2.0: {reply}"
        );
        reply
    }

    /// Sends a request and returns its result, panicking on an error reply.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params).await;
        match reply.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} failed: {reply}"),
        }
    }

    /// Sends a request and returns its `error` member, panicking on success.
    pub async fn call_err(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params).await;
        match reply.get("error") {
            Some(error) => error.clone(),
            None => panic!("{method} was expected to fail: {reply}"),
        }
    }

    /// `initialize` with a fresh session; returns the result.
    pub async fn initialize(&mut self) -> Value {
        self.call("initialize", json!({"clientName": "wexec-tests"}))
            .await
    }

    /// `initialize` + `initialized`; returns the initialize result.
    pub async fn handshake(&mut self) -> Value {
        let result = self.initialize().await;
        self.send(&json!({"method": "initialized", "params": {}}))
            .await;
        result
    }
}

/// The JSON-RPC error object `{code, message}`.
pub fn rpc_error(code: i64, message: &str) -> Value {
    json!({"code": code, "message": message})
}

/// A fresh directory under the OS temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates one.
    pub fn new() -> Self {
        let path = std::env::temp_dir().join(format!("wexec-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        // Canonical, so roots and paths compare as wexec reports them.
        Self(std::fs::canonicalize(&path).expect("canonicalize temp dir"))
    }

    /// Its path.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Default for TempDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Resident memory of a process, in bytes (`VmRSS`).
pub fn resident_bytes(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next()?.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .expect("VmRSS line")
}

/// Whether the process exists and is not a zombie (a reaped-late zombie holds no resources and
/// runs no code, so the lifetime tests count it as gone).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

/// Running processes (see [`running`]) whose command line (NUL-separated arguments) satisfies
/// `matches`.
pub fn running_where(matches: impl Fn(&[u8]) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| matches(&cmdline))
                && running(pid)
        })
        .collect()
}

/// Reads an HTTP request head, byte by byte (nothing of the body is consumed); `None` if the
/// peer closes first.
pub async fn read_http_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap_or(0) == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// An HTTP/1.1 server on 127.0.0.1 for tests: reads each request head and hands its request
/// line and the socket to `handle`. Returns the `host:port` and a count of connections.
pub async fn http_server<F, Fut>(handle: F) -> (String, Arc<std::sync::atomic::AtomicUsize>)
where
    F: Fn(String, TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    let handle = Arc::new(handle);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let handle = Arc::clone(&handle);
            tokio::spawn(async move {
                let Some(head) = read_http_head(&mut stream).await else {
                    return;
                };
                let line = head.lines().next().unwrap_or_default().to_owned();
                handle(line, stream).await;
            });
        }
    });
    (addr, hits)
}

/// The `file://` URI of a native path, unescaped (test paths need no escaping).
fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A `sandbox` entry for a special path (`root`, `project_roots`, ...), as Codex 0.169 sends it.
pub fn special(kind: &str, subpath: Option<&str>, access: &str) -> Value {
    let mut value = json!({"kind": kind});
    if let Some(subpath) = subpath {
        value["subpath"] = json!(subpath);
    }
    json!({"path": {"type": "special", "value": value}, "access": access, "missing_path_behavior": "skip"})
}

/// The object Codex 0.169 sends with `-s read-only`.
pub fn codex_read_only(cwd: &Path) -> Value {
    managed(cwd, vec![special("root", None, "read")], "restricted")
}

/// The object Codex 0.169 sends with `-s workspace-write` (`exclude_slash_tmp` and
/// `exclude_tmpdir_env_var` drop the `/tmp` entries).
pub fn codex_workspace_write(cwd: &Path, network: &str, slash_tmp: bool) -> Value {
    let mut entries = vec![
        special("root", None, "read"),
        special("project_roots", None, "write"),
    ];
    if slash_tmp {
        entries.push(special("slash_tmp", None, "write"));
        entries.push(special("tmpdir", None, "write"));
    }
    for name in [".git", ".agents", ".codex", ".aws"] {
        entries.push(special("project_roots", Some(name), "read"));
    }
    managed(cwd, entries, network)
}

/// A managed, restricted sandbox with `entries`.
pub fn managed(cwd: &Path, entries: Vec<Value>, network: &str) -> Value {
    json!({
        "permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": entries}, "network": network},
        "cwd": file_uri(cwd),
        "workspaceRoots": [file_uri(cwd)],
        "windowsSandboxLevel": "disabled",
        "windowsSandboxProxySettingsMode": "reconcile",
        "useLegacyLandlock": false,
    })
}

/// A scripted model: a local Responses API (as Codex's CLI speaks it) whose every answer is
/// the one output item `respond` gives for the request body. Returns its address and every
/// request body it was sent.
pub async fn scripted_model(
    respond: impl Fn(&Value) -> Value + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&bodies);
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            let respond = Arc::clone(&respond);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; length];
                if stream.read_exact(&mut body).await.is_err() {
                    return;
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let item = respond(&request);
                seen.lock().expect("lock").push(request);
                let events = [
                    json!({"type": "response.created", "response": {"id": "r"}}),
                    json!({"type": "response.output_item.done", "item": item}),
                    json!({"type": "response.completed", "response": {"id": "r", "usage": {
                        "input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
                        "output_tokens_details": null, "total_tokens": 2}}}),
                ];
                let data: String = events
                    .iter()
                    .map(|event| {
                        format!(
                            "event: {}\ndata: {event}\n\n",
                            event["type"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{data}",
                    data.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (addr, bodies)
}

/// A scripted model's output item: an assistant message saying `text`.
pub fn model_says(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "id": "m1",
           "content": [{"type": "output_text", "text": text}]})
}

/// A scripted model's output item: a call of function `name` with `arguments`.
pub fn model_calls(name: &str, arguments: &Value) -> Value {
    let call_id = format!("call-{}", uuid::Uuid::new_v4());
    json!({"type": "function_call", "id": "fc1", "call_id": call_id, "name": name,
           "arguments": arguments.to_string()})
}

/// A scratch workspace for the real Codex CLI: the directory holding it, `work` (its working
/// directory) and `home` (its `HOME`, with `.codex` made for `CODEX_HOME`).
pub fn codex_workspace() -> (TempDir, PathBuf, PathBuf) {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&work).expect("mkdir work");
    std::fs::create_dir_all(home.join(".codex")).expect("mkdir .codex");
    (dir, work, home)
}

/// `codex exec -s <sandbox> ... go` in `work` with `home` as its home, its model the scripted
/// one at `model` (see [`scripted_model`]); add what the test needs, then run it.
pub fn codex_exec_command(
    codex: &str,
    model: &str,
    work: &Path,
    home: &Path,
    sandbox: &str,
) -> Command {
    let provider = format!(
        r#"model_providers.scripted={{name="scripted",base_url="http://{model}/v1",wire_api="responses",env_key="OPENAI_API_KEY"}}"#
    );
    let mut command = Command::new(codex);
    command
        .args([
            "exec",
            "--skip-git-repo-check",
            "-s",
            sandbox,
            "-m",
            "scripted-model",
        ])
        .args(["-c", "model_provider=scripted", "-c", &provider, "-C"])
        .arg(work)
        .arg("go")
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env("OPENAI_API_KEY", "unused")
        .stdin(Stdio::null());
    command
}

/// A `wexec mcp --listen http://127.0.0.1:0/mcp` with `args` and `token` (killed on drop), and
/// the URL it printed.
pub fn spawn_mcp_http(args: &[&str], token: &str) -> (McpHttp, String) {
    let mut child = std::process::Command::new(wexec_bin())
        .args(["mcp", "--listen", "http://127.0.0.1:0/mcp"])
        .args(args)
        .env("WEXEC_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn wexec mcp");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("stdout");
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).expect("read");
    (McpHttp(child), line.trim().to_owned())
}

/// A `wexec mcp` HTTP listener, killed on drop.
pub struct McpHttp(std::process::Child);

impl Drop for McpHttp {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `environmentInfo` without `wexec.sandbox`: the copy `initialize` embeds is taken before
/// the sandbox probe has answered, and `environment/info` asked later has it
/// (docs/protocol.md, `environment/info`).
pub fn without_sandbox_verdict(info: &Value) -> Value {
    let mut info = info.clone();
    if let Some(wexec) = info.get_mut("wexec").and_then(Value::as_object_mut) {
        wexec.remove("sandbox");
    }
    info
}

/// A launcher (for [`command_under`]) that takes user namespaces away from what it runs, for
/// real, as Docker's default seccomp profile or Ubuntu's AppArmor restriction do: a user
/// namespace whose `max_user_namespaces` is 0. wexec then runs under its Landlock tier.
pub const WITHOUT_USER_NAMESPACES: [&str; 6] = [
    "unshare",
    "-U",
    "-r",
    "sh",
    "-c",
    "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"",
];

/// The repository's root (the parent of `tests/`).
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository holds tests/")
        .to_path_buf()
}

/// A file of the repository, by its path from the root.
pub fn repository_file(relative: &str) -> String {
    std::fs::read_to_string(repository().join(relative))
        .unwrap_or_else(|err| panic!("{relative}: {err}"))
}

/// Reads process `id` to its close: the last `process/read` result and everything it wrote
/// (stdout and stderr, interleaved as read).
pub async fn read_to_close(client: &mut Client, id: &str) -> (Value, Vec<u8>) {
    use base64::Engine;
    let mut output = Vec::new();
    let mut after = 0;
    loop {
        let read = client
            .call(
                "process/read",
                json!({"processId": id, "afterSeq": after, "waitMs": 5000}),
            )
            .await;
        for chunk in read["chunks"].as_array().expect("chunks") {
            output.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(chunk["chunk"].as_str().expect("chunk"))
                    .expect("base64"),
            );
        }
        after = read["nextSeq"].as_u64().expect("nextSeq") - 1;
        if read["closed"] == true {
            return (read, output);
        }
    }
}
