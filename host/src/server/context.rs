//! What a handler may use: the server, its session and its own connection. Plain state shared
//! by the processor (which builds it) and the handlers (which use it); neither depends on the
//! other through it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::ServerState;
use super::reply::Reply;
use super::session::{ConnectionId, SessionHandle};
use crate::rpc::RpcError;
use crate::runtime::{ConnectionHandles, PerPlugin, WatchSlot};
use crate::transport::Outbound;

/// One request's view of wexec.
#[derive(Clone)]
pub struct RequestContext {
    /// Process-wide state.
    pub server: Arc<ServerState>,
    /// The session the request belongs to.
    pub session: SessionHandle,
    /// The connection the request arrived on.
    pub connection: Arc<ConnectionContext>,
    /// The method called.
    pub method: String,
    /// Where the reply goes (a plugin may send it early).
    pub reply: Arc<Reply>,
}

/// Per-connection state shared with handlers.
pub struct ConnectionContext {
    /// This connection's id.
    pub id: ConnectionId,
    /// The peer, as named in error texts.
    pub peer: String,
    /// Where replies go.
    pub outbound: Outbound,
    /// The connection's open file handles, per plugin; they close with it.
    pub handles: ConnectionHandles,
    /// The connection's `fs/watchMissing` watch, per plugin; it ends with the connection.
    pub watches: PerPlugin<WatchSlot>,
    /// `requestId`s of the connection's active HTTP body streams.
    streams: Arc<Mutex<HashSet<String>>>,
    closing: watch::Receiver<bool>,
    /// Slots for plugin calls ([`crate::limits::PLUGIN_CALLS_PER_CONNECTION`]).
    pub plugin_calls: Arc<tokio::sync::Semaphore>,
}

impl ConnectionContext {
    /// A connection's context; `closing` turns `true` once it has stopped reading.
    pub fn new(peer: String, outbound: Outbound, closing: watch::Receiver<bool>) -> Self {
        Self {
            id: ConnectionId::next(),
            peer,
            outbound,
            handles: ConnectionHandles::default(),
            watches: PerPlugin::default(),
            streams: Arc::default(),
            closing,
            plugin_calls: Arc::new(tokio::sync::Semaphore::new(
                crate::limits::PLUGIN_CALLS_PER_CONNECTION,
            )),
        }
    }

    /// Where this connection's sessions send process events: its outbound queue, encoded.
    pub fn port(&self) -> crate::process::EventPort {
        crate::process::EventPort::Wire(self.outbound.clone())
    }

    /// Resolves once the connection has stopped reading (the client went away). Long polls use
    /// it to answer at once instead of holding up shutdown.
    pub async fn closing(&self) {
        let mut closing = self.closing.clone();
        // The sender lives until the processor returns, after which `true` was sent.
        let _ = closing.wait_for(|closing| *closing).await;
    }

    /// Takes the stream id `id` for as long as the returned value lives; a duplicate of an
    /// active stream is refused (docs/protocol.md §6).
    pub fn reserve_stream(&self, id: &str) -> Result<StreamReservation, RpcError> {
        let mut active = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if !active.insert(id.to_owned()) {
            return Err(RpcError::invalid_params(format!(
                "http/request streamResponse requestId `{id}` is already active"
            )));
        }
        Ok(StreamReservation {
            streams: Arc::clone(&self.streams),
            id: id.to_owned(),
        })
    }
}

/// An active stream's `requestId`, released on drop.
pub struct StreamReservation {
    streams: Arc<Mutex<HashSet<String>>>,
    id: String,
}

impl Drop for StreamReservation {
    fn drop(&mut self) {
        self.streams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}
