//! Transports turn stdio and WebSocket into one [`Connection`]: a stream of inbound messages
//! (raw bytes, one JSON-RPC message each) and one ordered, bounded outbound queue. Transports
//! know nothing about methods or sessions.

pub mod stdio;
pub mod websocket;

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Messages a transport reads ahead of the processor before it stops reading.
pub const INBOUND_QUEUE_MESSAGES: usize = 16;

/// Messages waiting to be written to one connection. Beyond this (or the byte budget),
/// notifications are dropped and responses wait.
pub const OUTBOUND_QUEUE_MESSAGES: usize = 4_096;

/// Bytes waiting to be written to one connection: bounds a slow client's cost in memory.
pub const OUTBOUND_QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// One client connection, whatever the transport.
#[derive(Debug)]
pub struct Connection {
    /// Names the peer in error texts: `wexec stdio` or `wexec websocket <ip:port>`.
    pub peer: String,
    /// Inbound messages in arrival order; closed when the client goes away (or sent a message
    /// the transport refuses, such as an oversized line).
    pub inbound: mpsc::Receiver<Vec<u8>>,
    /// The outbound queue.
    pub outbound: Outbound,
    /// Whether the session survives the connection (WebSocket) or ends with it (stdio).
    pub detachable: bool,
}

/// A message queued for writing, holding its share of the byte budget until written.
#[derive(Debug)]
pub struct OutboundMessage {
    /// Compact JSON, without a line terminator.
    pub text: String,
    _budget: Option<OwnedSemaphorePermit>,
}

/// The sending side of a connection's outbound queue. Cloned freely; the queue is written in
/// the order messages were accepted.
#[derive(Debug, Clone)]
pub struct Outbound {
    queue: mpsc::Sender<OutboundMessage>,
    budget: Arc<Semaphore>,
}

/// The connection is gone: nothing more can be written to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the connection is closed")]
pub struct Closed;

/// Why a notification was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// The queue is full: the client reads too slowly.
    #[error("the outbound queue is full")]
    Full,
    /// The connection is gone.
    #[error("the connection is closed")]
    Closed,
}

impl Outbound {
    /// A queue and its receiving end, for a transport's writer task.
    pub fn channel() -> (Self, mpsc::Receiver<OutboundMessage>) {
        let (queue, receiver) = mpsc::channel(OUTBOUND_QUEUE_MESSAGES);
        let budget = Arc::new(Semaphore::new(OUTBOUND_QUEUE_BYTES));
        (Self { queue, budget }, receiver)
    }

    /// Queues a response, waiting for room: responses are never dropped.
    pub async fn send(&self, text: String) -> Result<(), Closed> {
        let permit = Arc::clone(&self.budget)
            .acquire_many_owned(budget_share(&text))
            .await
            .map_err(|_| Closed)?;
        self.queue
            .send(OutboundMessage {
                text,
                _budget: Some(permit),
            })
            .await
            .map_err(|_| Closed)
    }

    /// Queues a notification if there is room now; a full queue drops it (the client recovers
    /// what it missed with `process/read`).
    pub fn try_notify(&self, text: String) -> Result<(), NotifyError> {
        let permit = Arc::clone(&self.budget)
            .try_acquire_many_owned(budget_share(&text))
            .map_err(|_| NotifyError::Full)?;
        self.queue
            .try_send(OutboundMessage {
                text,
                _budget: Some(permit),
            })
            .map_err(|err| match err {
                mpsc::error::TrySendError::Full(_) => NotifyError::Full,
                mpsc::error::TrySendError::Closed(_) => NotifyError::Closed,
            })
    }

    /// Whether the writer has gone away.
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }
}

/// A message's claim on the byte budget: its size, capped at the whole budget so that one
/// message larger than the budget waits for an empty queue instead of forever.
fn budget_share(text: &str) -> u32 {
    let share = text.len().clamp(1, OUTBOUND_QUEUE_BYTES);
    u32::try_from(share).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notifications_drop_when_the_byte_budget_is_spent_and_responses_wait() {
        let (outbound, mut receiver) = Outbound::channel();
        let big = "x".repeat(OUTBOUND_QUEUE_BYTES / 2 + 1);
        outbound.try_notify(big.clone()).unwrap();
        assert_eq!(outbound.try_notify(big.clone()), Err(NotifyError::Full));

        let sender = outbound.clone();
        let response = tokio::spawn(async move { sender.send(big).await });
        tokio::task::yield_now().await;
        assert!(!response.is_finished(), "a response waits for room");
        drop(receiver.recv().await.unwrap());
        response.await.unwrap().unwrap();
        assert!(receiver.recv().await.is_some());
    }

    #[tokio::test]
    async fn message_count_is_bounded_too() {
        let (outbound, _receiver) = Outbound::channel();
        for _ in 0..OUTBOUND_QUEUE_MESSAGES {
            outbound.try_notify("{}".into()).unwrap();
        }
        assert_eq!(outbound.try_notify("{}".into()), Err(NotifyError::Full));
    }

    #[tokio::test]
    async fn sending_to_a_closed_connection_fails() {
        let (outbound, receiver) = Outbound::channel();
        drop(receiver);
        assert_eq!(outbound.send("{}".into()).await, Err(Closed));
        assert_eq!(outbound.try_notify("{}".into()), Err(NotifyError::Closed));
    }
}
