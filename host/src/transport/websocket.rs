//! WebSocket (docs/protocol.md §3.3): each accepted TCP socket gets an HTTP front door
//! ([`http::decide`]); an upgraded socket becomes a [`Connection`]. Text and binary messages are
//! accepted, text is sent; a ping goes out every 30 s; a message over 64 MiB closes the socket
//! with code 1009.

pub mod credential;
pub mod handshakes;
pub mod http;
mod peer;

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use self::credential::Credential;
use self::handshakes::Pending;
use self::http::{Decision, MAX_HEAD_BYTES, Status};
use super::budget::ConnectionBudget;
use super::{Connection, INBOUND_QUEUE_MESSAGES, Inbound, Outbound, OutboundMessage, Received};
use crate::limits::{Counter, Token};
use crate::rpc::MAX_MESSAGE_BYTES;
use std::sync::Arc;

/// Interval between keep-alive pings. No pong deadline: a dead peer is noticed by TCP.
pub const PING_INTERVAL: Duration = Duration::from_secs(30);

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// After closing for an oversized message, wexec keeps discarding what the client still sends
/// until it has been silent this long, so the close frame reaches it instead of being lost to a
/// TCP reset (which discards unread data on the client side)...
const LINGER_IDLE: Duration = Duration::from_secs(2);

/// ...but never for longer than this in all.
const LINGER_MAX: Duration = Duration::from_secs(10);

/// Runs the HTTP front door on an accepted socket. Returns the connection, with its slot in
/// `connections`, if the socket was upgraded; every other request is answered and closed here.
/// Without a free slot (wexec serves `--max-connections` already), an upgrade gets 503.
/// `pending` is the socket's place among those still sending their head: given up once the
/// head is read, and the socket closed if a newer one displaces it first.
pub async fn accept(
    mut stream: TcpStream,
    peer: SocketAddr,
    credential: Option<&Credential>,
    connections: &Arc<Counter>,
    budget: ConnectionBudget,
    mut pending: Pending,
) -> Option<(Connection, Token)> {
    let head = tokio::select! {
        head = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)) => head,
        _ = &mut pending.displaced => {
            tracing::debug!(%peer, "closed while sending its request head: newer sockets displaced it");
            return None;
        }
    };
    drop(pending);
    let (head, leftover) = match head {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(status)) => {
            respond(&mut stream, status).await;
            return None;
        }
        Err(_) => {
            tracing::debug!(%peer, "request head not received in time");
            return None;
        }
    };
    let (accept_key, slot) = match http::decide(&head, credential) {
        Decision::Upgrade { .. } if credential.is_none() && !own_user(&stream, peer).await => {
            tracing::warn!(%peer, "refusing a websocket upgrade from another user's process: without a token (WEXEC_TOKEN) only wexec's own user and root may connect");
            respond(&mut stream, Status::Forbidden).await;
            return None;
        }
        Decision::Upgrade { accept_key } => match connections.take() {
            Some(slot) => (accept_key, slot),
            None => {
                tracing::warn!(%peer, "refusing a websocket upgrade: wexec serves --max-connections {} already", connections.limit());
                respond(&mut stream, Status::Unavailable).await;
                return None;
            }
        },
        Decision::Respond(status) => {
            tracing::debug!(%peer, method = head.method, path = head.path, ?status, "plain HTTP answer");
            respond(&mut stream, status).await;
            return None;
        }
    };
    let switching = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept_key}\r\n\r\n"
    );
    if let Err(err) = stream.write_all(switching.as_bytes()).await {
        tracing::debug!(%peer, "upgrade response failed: {err}");
        return None;
    }
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_MESSAGE_BYTES));
    let socket =
        WebSocketStream::from_partially_read(stream, leftover, Role::Server, Some(config)).await;
    tracing::info!(%peer, "websocket connection opened");
    Some((serve_socket(socket, peer, budget), slot))
}

/// Whether the client's socket belongs to wexec's user or root ([`peer`]); looked up off the
/// connections' threads (the table grows with the host's sockets).
pub async fn own_user(stream: &TcpStream, peer: SocketAddr) -> bool {
    let Ok(local) = stream.local_addr() else {
        return false;
    };
    tokio::task::spawn_blocking(move || peer::is_ours(peer, local))
        .await
        .unwrap_or(false)
}

async fn read_head(stream: &mut TcpStream) -> Result<(http::RequestHead, Vec<u8>), Status> {
    let mut buffer = Vec::with_capacity(1024);
    loop {
        let mut chunk = [0u8; 4096];
        let read = stream
            .read(&mut chunk)
            .await
            .map_err(|_| Status::BadRequest)?;
        if read == 0 {
            return Err(Status::BadRequest);
        }
        buffer.extend_from_slice(&chunk[..read]);
        match http::parse_head(&buffer) {
            Ok(Some((head, length))) => return Ok((head, buffer.split_off(length))),
            Ok(None) if buffer.len() > MAX_HEAD_BYTES => return Err(Status::HeadersTooLarge),
            Ok(None) => {}
            Err(httparse::Error::TooManyHeaders) => return Err(Status::HeadersTooLarge),
            Err(_) => return Err(Status::BadRequest),
        }
    }
}

async fn respond(stream: &mut TcpStream, status: Status) {
    // The peer may already be gone; there is nobody to tell.
    let _ = stream.write_all(status.response().as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn serve_socket(
    socket: WebSocketStream<TcpStream>,
    peer: SocketAddr,
    budget: ConnectionBudget,
) -> Connection {
    let (sink, stream) = socket.split();
    let (inbound_tx, inbound) = mpsc::channel(INBOUND_QUEUE_MESSAGES);
    let (outbound, outbound_rx) = Outbound::channel();
    let (close_tx, close_rx) = oneshot::channel();
    tokio::spawn(read_messages(stream, inbound_tx, close_tx, peer, budget));
    tokio::spawn(write_messages(sink, outbound_rx, close_rx, peer));
    Connection {
        peer: format!("wexec websocket {peer}"),
        inbound: Inbound::Queue(inbound),
        outbound,
        detachable: true,
    }
}

type Stream = futures_util::stream::SplitStream<WebSocketStream<TcpStream>>;
type Sink = futures_util::stream::SplitSink<WebSocketStream<TcpStream>, Message>;

/// What the reader hands the writer when the client broke a limit: the close frame to send,
/// and the read half, so the writer can reunite the socket and close it gracefully.
type Refusal = (CloseFrame, Stream);

async fn read_messages(
    mut stream: Stream,
    inbound: mpsc::Sender<Received>,
    close: oneshot::Sender<Refusal>,
    peer: SocketAddr,
    budget: ConnectionBudget,
) {
    while let Some(message) = stream.next().await {
        let bytes = match message {
            Ok(Message::Text(text)) => Vec::from(text.as_bytes()),
            Ok(Message::Binary(bytes)) => Vec::from(bytes),
            // tungstenite answers pings itself.
            Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => continue,
            Ok(Message::Close(_)) => break,
            Err(WsError::Capacity(err)) => {
                tracing::warn!(%peer, "closing websocket: {err}");
                let frame = CloseFrame {
                    code: CloseCode::Size,
                    reason: "message exceeds the 64 MiB limit".into(),
                };
                let _ = close.send((frame, stream));
                break;
            }
            Err(err) => {
                tracing::debug!(%peer, "websocket read ended: {err}");
                break;
            }
        };
        // Admitted (or refused, keeping only its id) before it waits in the queue.
        if inbound.send(Received::admit(bytes, &budget)).await.is_err() {
            break;
        }
    }
    tracing::info!(%peer, "websocket connection closed");
}

async fn write_messages(
    mut sink: Sink,
    mut queue: mpsc::Receiver<OutboundMessage>,
    mut close: oneshot::Receiver<Refusal>,
    peer: SocketAddr,
) {
    let mut ping =
        tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut reader_done = false;
    let result = loop {
        tokio::select! {
            // The reader sends a refusal before it drops its inbound sender, so the refusal is
            // always ready by the time the queue can close: check it first.
            biased;
            refusal = &mut close, if !reader_done => {
                if let Ok((frame, stream)) = refusal {
                    if let Err(err) = sink.send(Message::Close(Some(frame))).await {
                        tracing::debug!(%peer, "close frame not sent: {err}");
                    }
                    if let Ok(socket) = sink.reunite(stream) {
                        linger(socket).await;
                    }
                    queue.close();
                    while queue.recv().await.is_some() {}
                    return;
                }
                // The reader ended without a close to send: keep writing until the queue ends.
                reader_done = true;
            }
            message = queue.recv() => {
                let Some(message) = message.filter(|message| !message.end) else {
                    break sink.close().await;
                };
                if let Err(err) = sink.feed(Message::text(message.text)).await {
                    break Err(err);
                }
                // Batch whatever is already queued into one flush; never hold a message back.
                if queue.is_empty() && let Err(err) = sink.flush().await {
                    break Err(err);
                }
            }
            _ = ping.tick() => {
                if let Err(err) = sink.send(Message::Ping(Default::default())).await {
                    break Err(err);
                }
            }
        }
    };
    if let Err(err) = result {
        tracing::debug!(%peer, "websocket write ended: {err}");
    }
    // Senders must never block on a dead socket.
    queue.close();
    while queue.recv().await.is_some() {}
}

/// Half-closes the socket and discards input until the client goes quiet (see [`LINGER_IDLE`]),
/// so a client still sending receives the close frame already written rather than a reset.
async fn linger(mut socket: WebSocketStream<TcpStream>) {
    let tcp = socket.get_mut();
    let _ = tcp.shutdown().await;
    let _ = tokio::time::timeout(LINGER_MAX, async {
        let mut discard = vec![0u8; 64 * 1024];
        while let Ok(Ok(read)) = tokio::time::timeout(LINGER_IDLE, tcp.read(&mut discard)).await {
            if read == 0 {
                break;
            }
        }
    })
    .await;
}
