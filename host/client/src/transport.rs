//! The two ways to reach a server: a spawned command's stdio, or a WebSocket.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::error::ClientError;

/// How long a dropped client lets a spawned server wind down (wexec ends its processes with
/// TERM, 2 s grace, KILL) before killing its process group.
const SERVER_EXIT_GRACE: Duration = Duration::from_secs(3);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A command that speaks the protocol on its stdin and stdout (`wexec` by default).
#[derive(Debug, Clone)]
pub struct StdioCommand {
    /// The program; looked up in `PATH` when it has no `/`.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables to set on top of the inherited environment.
    pub env: Vec<(String, String)>,
    /// Its working directory; the client's when `None`.
    pub cwd: Option<PathBuf>,
}

impl StdioCommand {
    /// `program` with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets a variable.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

/// Where and how to open a WebSocket connection.
#[derive(Debug, Clone)]
pub struct WebSocketTarget {
    /// `ws://host:port` (or `wss://` where TLS is configured).
    pub url: String,
    /// Sent as `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
    /// Limit for TCP connect plus the upgrade.
    pub connect_timeout: Duration,
}

impl WebSocketTarget {
    /// `url` without a token, with a 10 s connect timeout.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            bearer_token: None,
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// Adds a bearer token.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer_token = Some(token.into());
        self
    }
}

/// An open connection, split for the link's reader and writer tasks.
pub(crate) struct Transport {
    pub(crate) reader: Inbound,
    pub(crate) writer: Outbound,
    pub(crate) child: Option<ServerChild>,
}

pub(crate) enum Inbound {
    Stdio(BufReader<ChildStdout>),
    WebSocket(futures_util::stream::SplitStream<Socket>),
}

pub(crate) enum Outbound {
    Stdio(BufWriter<ChildStdin>),
    WebSocket(futures_util::stream::SplitSink<Socket, Message>),
}

impl Transport {
    /// Spawns `command` in its own process group with piped stdin and stdout; stderr is
    /// inherited so the server's logs stay visible.
    pub(crate) fn spawn(command: &StdioCommand) -> Result<Transport, ClientError> {
        let mut builder = Command::new(&command.program);
        builder
            .args(&command.args)
            .envs(command.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(cwd) = &command.cwd {
            builder.current_dir(cwd);
        }
        let spawn_error = |reason: String| ClientError::Spawn {
            program: command.program.display().to_string(),
            reason,
        };
        let mut child = builder
            .spawn()
            .map_err(|err| spawn_error(err.to_string()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(spawn_error("stdio pipes were not created".into()));
        };
        Ok(Transport {
            reader: Inbound::Stdio(BufReader::with_capacity(256 * 1024, stdout)),
            writer: Outbound::Stdio(BufWriter::with_capacity(64 * 1024, stdin)),
            child: Some(ServerChild { child: Some(child) }),
        })
    }

    /// Opens a WebSocket connection within the target's connect timeout.
    pub(crate) async fn connect(target: &WebSocketTarget) -> Result<Transport, ClientError> {
        let connect_error = |reason: String| ClientError::Connect {
            url: target.url.clone(),
            reason,
        };
        let mut request = (target.url.as_str())
            .into_client_request()
            .map_err(|err| connect_error(err.to_string()))?;
        if let Some(token) = &target.bearer_token {
            let value = format!("Bearer {token}").parse().map_err(|_| {
                connect_error("the bearer token is not a valid header value".into())
            })?;
            request.headers_mut().insert("Authorization", value);
        }
        let (socket, _) = tokio::time::timeout(
            target.connect_timeout,
            tokio_tungstenite::connect_async_with_config(request, None, true),
        )
        .await
        .map_err(|_| ClientError::ConnectTimeout {
            url: target.url.clone(),
            timeout: target.connect_timeout,
        })?
        .map_err(|err| connect_error(err.to_string()))?;
        let (sink, stream) = socket.split();
        Ok(Transport {
            reader: Inbound::WebSocket(stream),
            writer: Outbound::WebSocket(sink),
            child: None,
        })
    }
}

impl Inbound {
    /// The next message; an error when the connection ended or carried something that is not
    /// a protocol message.
    pub(crate) async fn next(&mut self) -> Result<String, ClientError> {
        match self {
            Inbound::Stdio(reader) => loop {
                let mut line = Vec::new();
                let read = reader
                    .read_until(b'\n', &mut line)
                    .await
                    .map_err(|err| ClientError::Disconnected(format!("reading stdout: {err}")))?;
                if read == 0 {
                    return Err(ClientError::Disconnected(
                        "the server closed its stdout".into(),
                    ));
                }
                while matches!(line.last(), Some(b'\n' | b'\r')) {
                    line.pop();
                }
                if line.is_empty() {
                    continue;
                }
                return String::from_utf8(line).map_err(|_| {
                    ClientError::Protocol("malformed message from server: invalid UTF-8".into())
                });
            },
            Inbound::WebSocket(stream) => loop {
                let message = match stream.next().await {
                    None => {
                        return Err(ClientError::Disconnected(
                            "the server closed the connection".into(),
                        ));
                    }
                    Some(Err(err)) => return Err(ClientError::Disconnected(err.to_string())),
                    Some(Ok(message)) => message,
                };
                match message {
                    Message::Text(text) => return Ok(text.as_str().to_owned()),
                    Message::Close(frame) => {
                        let reason = match frame {
                            Some(frame) => format!(
                                "the server closed the connection ({}: {})",
                                u16::from(frame.code),
                                frame.reason
                            ),
                            None => "the server closed the connection".into(),
                        };
                        return Err(ClientError::Disconnected(reason));
                    }
                    Message::Binary(_) => {
                        return Err(ClientError::Protocol(
                            "the server sent a binary WebSocket message".into(),
                        ));
                    }
                    Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
                }
            },
        }
    }
}

impl Outbound {
    /// Writes queued lines until the queue closes or the connection fails, flushing whenever
    /// the queue runs dry.
    pub(crate) async fn run(mut self, mut queue: mpsc::Receiver<String>) {
        while let Some(line) = queue.recv().await {
            let mut next = Some(line);
            while let Some(line) = next.take() {
                if self.feed(line).await.is_err() {
                    return;
                }
                next = queue.try_recv().ok();
            }
            if self.flush().await.is_err() {
                return;
            }
        }
        if let Outbound::WebSocket(sink) = &mut self {
            let _ = sink.close().await;
        }
    }

    async fn feed(&mut self, line: String) -> Result<(), ()> {
        match self {
            Outbound::Stdio(writer) => {
                writer.write_all(line.as_bytes()).await.map_err(drop)?;
                writer.write_all(b"\n").await.map_err(drop)
            }
            Outbound::WebSocket(sink) => sink.feed(Message::text(line)).await.map_err(drop),
        }
    }

    async fn flush(&mut self) -> Result<(), ()> {
        match self {
            Outbound::Stdio(writer) => writer.flush().await.map_err(drop),
            Outbound::WebSocket(sink) => sink.flush().await.map_err(drop),
        }
    }
}

/// A spawned server. Dropping it closes nothing by itself (the link's writer owns stdin) but
/// asks the server's process group to stop with SIGTERM and kills it if it is still there after
/// a grace period, so neither the server nor its children outlive the client.
pub(crate) struct ServerChild {
    child: Option<Child>,
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let Some(group) = child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id as i32))
        else {
            return; // already reaped
        };
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::TERM);
        let kill_group = move || {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let guard = KillOnDrop(Some(Box::new(kill_group)));
                    let exited = tokio::time::timeout(SERVER_EXIT_GRACE, child.wait()).await;
                    if exited.is_err() {
                        let _ = child.start_kill();
                    }
                    // Whatever is left of the group (children that ignored SIGTERM) goes too.
                    drop(guard);
                    let _ = child.wait().await;
                });
            }
            Err(_) => kill_group(),
        }
    }
}

/// Runs its action when dropped, also when the runtime drops the task early.
struct KillOnDrop(Option<Box<dyn FnOnce() + Send>>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(action) = self.0.take() {
            action();
        }
    }
}
