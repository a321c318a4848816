//! The reply slot every request has, and the [`CallPort`] the plugin runtime answers through:
//! a reply is sent exactly once, early by a plugin or when the handler returns.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::rpc::{RequestId, RpcResult, encode_notification, encode_reply, encode_success_with};
use crate::runtime::CallResult;
use crate::runtime::port::{CallPort, PortFuture, Room};
use crate::transport::{Outbound, Reservation, TrySend};

/// The reply to one request.
#[derive(Debug)]
pub struct Reply {
    id: RequestId,
    outbound: Outbound,
    sent: AtomicBool,
    /// Set once the reply is in the connection's queue: what follows it in the queue reaches
    /// the client after it.
    queued: AtomicBool,
    /// Wakes what waits for `queued` (a watch that fired before the reply went out).
    on_queued: tokio::sync::Notify,
    /// An early reply that found no room in the queue: sent before the call's first
    /// notification, or once the call has returned (and its instance is free again).
    deferred: Mutex<Option<(String, Reservation)>>,
    /// Room the handler reserved for the reply's payload, sent with it ([`Reply::hold_room`]).
    room: Mutex<Reservation>,
    /// What the request holds until its reply is queued ([`Reply::hold_until_queued`]).
    guards: Mutex<Guards>,
}

/// What a request holds until its reply is queued.
#[derive(Default)]
struct Guards(Vec<Box<dyn Send>>);

impl std::fmt::Debug for Guards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Guards({})", self.0.len())
    }
}

impl Reply {
    /// The reply slot of request `id` on a connection.
    pub fn new(id: RequestId, outbound: Outbound) -> Self {
        Self {
            id,
            outbound,
            sent: AtomicBool::new(false),
            queued: AtomicBool::new(false),
            on_queued: tokio::sync::Notify::new(),
            deferred: Mutex::new(None),
            room: Mutex::default(),
            guards: Mutex::default(),
        }
    }

    /// Keeps `reserved` with the reply until it is written: a handler that reserved room for
    /// its payload before producing it ([`Outbound::reserve`]).
    pub fn hold_room(&self, reserved: Reservation) {
        self.room
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .join(reserved);
    }

    /// Keeps `guard` until the reply is queued (a slot of a per-connection limit: a reply
    /// waiting for room holds its slot, so a client that stops reading stops new work).
    pub fn hold_until_queued(&self, guard: Box<dyn Send>) {
        self.guards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .push(guard);
    }

    /// Sends `outcome` unless a reply was already sent (then sends a deferred early reply).
    /// Waits for room in the queue.
    pub async fn send(&self, outcome: &RpcResult) {
        if self.sent.swap(true, Ordering::AcqRel) {
            self.flush().await;
            return;
        }
        let room = std::mem::take(&mut *self.room.lock().unwrap_or_else(PoisonError::into_inner));
        // A closed connection has nobody left to answer.
        let _ = self
            .outbound
            .send_reserved(encode_reply(&self.id, outcome), room)
            .await;
        self.mark_queued();
    }

    fn mark_queued(&self) {
        self.queued.store(true, Ordering::Release);
        self.on_queued.notify_waiters();
        self.guards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clear();
    }

    /// Queues a notification once `first` (what must reach the queue before it) is done.
    async fn notification(
        &self,
        method: &str,
        params: &serde_json::value::RawValue,
        first: impl std::future::Future<Output = ()>,
    ) -> Result<(), String> {
        let text = encode_notification(method, params).map_err(|err| err.message)?;
        first.await;
        (self.outbound.send(text).await).map_err(|_| "the connection is closed".to_owned())
    }

    /// Resolves once the reply is queued.
    async fn wait_queued(&self) {
        loop {
            let notified = self.on_queued.notified();
            tokio::pin!(notified);
            // Registered before the check, so a reply queued in between still wakes it.
            notified.as_mut().enable();
            if self.queued.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    /// Queues an early reply now if there is room, else defers it (see [`Reply::flush`]),
    /// unless a reply was already sent. `reserved` is the room the reply's file contents
    /// hold, kept until it is written.
    fn offer(&self, text: impl FnOnce() -> String, reserved: Reservation) {
        if self.sent.swap(true, Ordering::AcqRel) {
            return;
        }
        match self.outbound.try_send_reserved(text(), reserved) {
            Ok(()) | Err((TrySend::Closed, _)) => self.mark_queued(),
            Err((TrySend::Full(text), reserved)) => {
                *self.deferred.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((text, reserved));
            }
        }
    }

    /// Sends a deferred early reply, waiting for room.
    async fn flush(&self) {
        let deferred = self
            .deferred
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((text, reserved)) = deferred {
            let _ = self.outbound.send_reserved(text, reserved).await;
            self.mark_queued();
        }
    }
}

impl CallPort for Reply {
    fn respond(&self, outcome: CallResult) {
        let outcome = crate::rpc::call_outcome(outcome);
        self.offer(|| encode_reply(&self.id, &outcome), Reservation::default());
    }

    fn respond_with(&self, len: usize, write: &mut dyn FnMut(&mut String), room: Room) {
        let reserved = room.into_inner::<Reservation>().unwrap_or_default();
        self.offer(|| encode_success_with(&self.id, len, write), reserved);
    }

    fn notify<'a>(
        &'a self,
        method: &'a str,
        params: &'a serde_json::value::RawValue,
    ) -> PortFuture<'a, Result<(), String>> {
        // The response first, if it was deferred.
        Box::pin(self.notification(method, params, self.flush()))
    }

    fn notify_after_reply<'a>(
        &'a self,
        method: &'a str,
        params: &'a serde_json::value::RawValue,
    ) -> PortFuture<'a, Result<(), String>> {
        Box::pin(self.notification(method, params, self.wait_queued()))
    }

    fn try_room(&self, bytes: u64) -> Option<Room> {
        self.outbound.try_reserve(bytes).map(Room::new)
    }

    fn room(&self, bytes: u64) -> PortFuture<'_, Room> {
        // A closed connection reads nothing: there is nothing to hold back.
        Box::pin(async move {
            (self.outbound.reserve(bytes).await)
                .map(Room::new)
                .unwrap_or_default()
        })
    }
}
