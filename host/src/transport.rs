//! Transports turn stdio and WebSocket into one [`Connection`]: a stream of inbound messages
//! (raw bytes, one JSON-RPC message each) and one ordered, bounded outbound queue. Transports
//! know nothing about methods or sessions.

pub mod budget;
pub mod stdio;
pub mod websocket;

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Messages a transport reads ahead of the processor before it stops reading.
pub const INBOUND_QUEUE_MESSAGES: usize = 16;

/// Messages waiting to be written to one connection. Beyond this (or the byte budget), senders
/// wait: responses are never dropped, and process output backs up into the child's pipe.
pub const OUTBOUND_QUEUE_MESSAGES: usize = 4_096;

/// Bytes waiting to be written to one connection: bounds a slow client's cost in memory.
pub const OUTBOUND_QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// Bytes of file contents one connection's replies may hold, from the read until the reply
/// carrying them (as base64) is written: two of the largest `fs/readFile` replies. A client
/// that stops reading its replies holds at most this much in them; further reads wait.
pub const OUTBOUND_CONTENTS_BYTES: usize = 96 * 1024 * 1024;

/// Bytes of reply payloads (file contents, process output, HTTP bodies read) all connections'
/// unsent replies may hold together: without it, [`OUTBOUND_CONTENTS_BYTES`] per connection
/// times the connections would be gigabytes.
pub const HOST_CONTENTS_BYTES: usize = 512 * 1024 * 1024;

/// The host-wide side of every [`Reservation`].
static HOST_CONTENTS: std::sync::LazyLock<Arc<Semaphore>> =
    std::sync::LazyLock::new(|| Arc::new(Semaphore::new(HOST_CONTENTS_BYTES)));

/// One client connection, whatever the transport.
#[derive(Debug)]
pub struct Connection {
    /// Names the peer in error texts: `wexec stdio` or `wexec websocket <ip:port>`.
    pub peer: String,
    /// Inbound messages in arrival order; ends when the client goes away (or sent a message
    /// the transport refuses, such as an oversized line).
    pub inbound: Inbound,
    /// The outbound queue.
    pub outbound: Outbound,
    /// Whether the session survives the connection (WebSocket) or ends with it (stdio).
    pub detachable: bool,
}

/// One inbound message, as the transport read it.
#[derive(Debug)]
pub enum Received {
    /// Admitted: its bytes, and its share of the inbound budget (held until it is answered).
    Message(Vec<u8>, budget::Held),
    /// Refused by the inbound budget: the id it carried (if one could be read) and why. Its
    /// bytes are gone already.
    Refused(Option<crate::rpc::RequestId>, String),
}

impl Received {
    /// Admits `bytes` against `budget`, or refuses them, keeping only their id.
    pub fn admit(bytes: Vec<u8>, budget: &budget::ConnectionBudget) -> Self {
        match budget.admit(bytes.len()) {
            Ok(held) => Self::Message(bytes, held),
            Err(reason) => Self::Refused(crate::rpc::parse::peek_id(&bytes), reason),
        }
    }
}

/// Where a connection's messages come from.
pub enum Inbound {
    /// Read by a transport task and queued.
    Queue(mpsc::Receiver<Received>),
    /// Read on demand, blocking, by whoever asks: stdio, when the processor runs on a thread of
    /// its own (one switch between threads fewer per request).
    Lines(stdio::LineReader),
}

impl Inbound {
    /// The next message; `None` at the end. With [`Inbound::Lines`] this blocks the calling
    /// thread, which must not be a runtime worker.
    pub async fn recv(&mut self) -> Option<Received> {
        match self {
            Inbound::Queue(queue) => queue.recv().await,
            Inbound::Lines(lines) => lines.next_message(),
        }
    }

    /// The message last received was no work (see [`stdio::LineReader::not_work`]).
    pub fn not_work(&mut self) {
        if let Inbound::Lines(lines) = self {
            lines.not_work();
        }
    }

    /// Whether no further message is ready to be read without waiting.
    pub fn is_empty(&self) -> bool {
        match self {
            Inbound::Queue(queue) => queue.is_empty(),
            Inbound::Lines(lines) => !lines.has_buffered_line(),
        }
    }
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Inbound::Queue(_) => "Inbound::Queue",
            Inbound::Lines(_) => "Inbound::Lines",
        })
    }
}

/// A message queued for writing, holding its share of the byte budget until written.
#[derive(Debug)]
pub struct OutboundMessage {
    /// Compact JSON, without a line terminator.
    pub text: String,
    /// Not a message: the writer flushes what came before and stops ([`Outbound::finish`]).
    pub end: bool,
    _budget: Option<OwnedSemaphorePermit>,
    _reserved: Reservation,
}

/// A reply's claim on [`OUTBOUND_CONTENTS_BYTES`] and [`HOST_CONTENTS_BYTES`], taken before
/// the payload it will carry is produced ([`Outbound::reserve`]), and given back once the reply
/// is written (or dropped).
#[derive(Debug, Default)]
pub struct Reservation(#[allow(dead_code, reason = "held for its drop")] Vec<OwnedSemaphorePermit>);

impl Reservation {
    /// Adds `other`'s claims to this one's.
    pub fn join(&mut self, other: Reservation) {
        self.0.extend(other.0);
    }
}

/// The sending side of a connection's outbound queue. Cloned freely; the queue is written in
/// the order messages were accepted.
#[derive(Clone)]
pub struct Outbound {
    queue: mpsc::Sender<OutboundMessage>,
    budget: Arc<Semaphore>,
    contents: Arc<Semaphore>,
    /// A way around the queue, when the transport has one (stdio: `stdio/direct.rs`).
    direct: Option<Arc<dyn DirectSink>>,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("direct", &self.direct.is_some())
            .finish_non_exhaustive()
    }
}

/// Output a sender may write itself, keeping the queue's order, when that cannot block.
pub trait DirectSink: Send + Sync {
    /// Writes `text` as one message if this thread may, nothing is queued ahead of it and it
    /// fits without blocking; `false` leaves it to the queue.
    fn try_write(&self, text: &str) -> bool;
    /// A message is about to be queued (it must be written before any direct write).
    fn queued(&self);
    /// A message announced by [`DirectSink::queued`] could not be queued after all.
    fn dropped(&self);
}

/// Why [`Outbound::try_send`] did not queue a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrySend {
    /// No room now: the message, handed back.
    Full(String),
    /// The connection is gone.
    Closed,
}

/// The connection is gone: nothing more can be written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the connection is closed")]
pub struct Closed;

impl Outbound {
    /// A queue and its receiving end, for a transport's writer task.
    pub fn channel() -> (Self, mpsc::Receiver<OutboundMessage>) {
        let (queue, receiver) = mpsc::channel(OUTBOUND_QUEUE_MESSAGES);
        let budget = Arc::new(Semaphore::new(OUTBOUND_QUEUE_BYTES));
        let outbound = Self {
            queue,
            budget,
            contents: Arc::new(Semaphore::new(OUTBOUND_CONTENTS_BYTES)),
            direct: None,
        };
        (outbound, receiver)
    }

    /// Adds a way around the queue (see [`DirectSink`]).
    pub fn with_direct(mut self, direct: Arc<dyn DirectSink>) -> Self {
        self.direct = Some(direct);
        self
    }

    /// Queues a message, waiting for room: nothing is dropped, and a slow client slows its
    /// producers instead of growing wexec's memory.
    pub async fn send(&self, text: String) -> Result<(), Closed> {
        self.send_reserved(text, Reservation::default()).await
    }

    /// [`Outbound::send`] for a reply holding a [`Reservation`], kept until it is written.
    pub async fn send_reserved(&self, text: String, reserved: Reservation) -> Result<(), Closed> {
        if let Some(direct) = &self.direct {
            if direct.try_write(&text) {
                return Ok(());
            }
            direct.queued();
        }
        let queued = self.enqueue(text, reserved).await;
        if queued.is_err()
            && let Some(direct) = &self.direct
        {
            direct.dropped();
        }
        queued
    }

    /// Queues a reply holding a [`Reservation`] if there is room now; otherwise hands both
    /// back (or fails if the connection is closed). For senders that must not wait where
    /// they are.
    pub fn try_send_reserved(
        &self,
        text: String,
        reserved: Reservation,
    ) -> Result<(), (TrySend, Reservation)> {
        if let Some(direct) = &self.direct {
            if direct.try_write(&text) {
                return Ok(());
            }
            direct.queued();
        }
        let queued = match Arc::clone(&self.budget)
            .try_acquire_many_owned(budget_share(text.len(), OUTBOUND_QUEUE_BYTES))
        {
            Ok(permit) => self
                .queue
                .try_send(OutboundMessage {
                    text,
                    end: false,
                    _budget: Some(permit),
                    _reserved: reserved,
                })
                .map_err(|err| match err {
                    mpsc::error::TrySendError::Full(message) => {
                        (TrySend::Full(message.text), message._reserved)
                    }
                    mpsc::error::TrySendError::Closed(message) => {
                        (TrySend::Closed, message._reserved)
                    }
                }),
            Err(tokio::sync::TryAcquireError::NoPermits) => Err((TrySend::Full(text), reserved)),
            Err(tokio::sync::TryAcquireError::Closed) => Err((TrySend::Closed, reserved)),
        };
        if queued.is_err()
            && let Some(direct) = &self.direct
        {
            direct.dropped();
        }
        queued
    }

    async fn enqueue(&self, text: String, reserved: Reservation) -> Result<(), Closed> {
        let permit = Arc::clone(&self.budget)
            .acquire_many_owned(budget_share(text.len(), OUTBOUND_QUEUE_BYTES))
            .await
            .map_err(|_| Closed)?;
        self.queue
            .send(OutboundMessage {
                text,
                end: false,
                _budget: Some(permit),
                _reserved: reserved,
            })
            .await
            .map_err(|_| Closed)
    }

    /// Reserves room for a reply that will carry `bytes` of file contents as base64, waiting
    /// while this connection's replies already hold [`OUTBOUND_CONTENTS_BYTES`] (its client is
    /// not reading them). Free while the client keeps up: one atomic operation.
    pub async fn reserve(&self, bytes: u64) -> Result<Reservation, Closed> {
        let connection = Arc::clone(&self.contents)
            .acquire_many_owned(contents_share(bytes, OUTBOUND_CONTENTS_BYTES))
            .await
            .map_err(|_| Closed)?;
        // The connection's share first: a connection waits on the host only for what its own
        // budget already let through.
        let host = Arc::clone(&HOST_CONTENTS)
            .acquire_many_owned(contents_share(bytes, HOST_CONTENTS_BYTES))
            .await
            .map_err(|_| Closed)?;
        Ok(Reservation(vec![connection, host]))
    }

    /// [`Outbound::reserve`] if there is room now: no future, no wait.
    pub fn try_reserve(&self, bytes: u64) -> Option<Reservation> {
        let connection = Arc::clone(&self.contents)
            .try_acquire_many_owned(contents_share(bytes, OUTBOUND_CONTENTS_BYTES))
            .ok()?;
        let host = Arc::clone(&HOST_CONTENTS)
            .try_acquire_many_owned(contents_share(bytes, HOST_CONTENTS_BYTES))
            .ok()?;
        Some(Reservation(vec![connection, host]))
    }

    /// Asks the writer to write everything queued so far and stop, although senders may still
    /// exist (wexec is exiting while a thread still holds the connection). Later sends fail.
    pub async fn finish(&self) {
        let end = OutboundMessage {
            text: String::new(),
            end: true,
            _budget: None,
            _reserved: Reservation::default(),
        };
        let _ = self.queue.send(end).await;
    }
}

/// The claim on a contents budget of `limit` of `bytes` of contents: their base64 size.
fn contents_share(bytes: u64, limit: usize) -> u32 {
    let encoded = usize::try_from(bytes.div_ceil(3).saturating_mul(4)).unwrap_or(usize::MAX);
    budget_share(encoded, limit)
}

/// A claim of `len` bytes on a byte budget of `limit`, capped at the whole budget so that one
/// message larger than the budget waits for an empty budget instead of forever.
fn budget_share(len: usize, limit: usize) -> u32 {
    u32::try_from(len.clamp(1, limit)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn senders_wait_once_the_byte_budget_is_spent() {
        let (outbound, mut receiver) = Outbound::channel();
        let big = "x".repeat(OUTBOUND_QUEUE_BYTES / 2 + 1);
        outbound.send(big.clone()).await.unwrap();
        let sender = outbound.clone();
        let second = tokio::spawn(async move { sender.send(big).await });
        tokio::task::yield_now().await;
        assert!(!second.is_finished(), "the second message waits for room");
        drop(receiver.recv().await.unwrap());
        second.await.unwrap().unwrap();
        assert!(receiver.recv().await.is_some());
    }

    #[tokio::test]
    async fn message_count_is_bounded_too() {
        let (outbound, _receiver) = Outbound::channel();
        for _ in 0..OUTBOUND_QUEUE_MESSAGES {
            outbound.send("{}".into()).await.unwrap();
        }
        let blocked = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            outbound.send("{}".into()),
        )
        .await;
        assert!(blocked.is_err());
    }

    #[tokio::test]
    async fn sending_to_a_closed_connection_fails() {
        let (outbound, receiver) = Outbound::channel();
        drop(receiver);
        assert_eq!(outbound.send("{}".into()).await, Err(Closed));
    }
}
