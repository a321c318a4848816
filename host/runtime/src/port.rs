//! The runtime's one door to the client a call came from. The runtime knows nothing of
//! transports, queues or request ids: the server implements [`CallPort`] for each request
//! (`server/reply.rs`) and the `responder` and `filesystem` capabilities use it.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use crate::outcome::CallResult;

/// A future a port returns.
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The call's way back to its client.
pub trait CallPort: Send + Sync {
    /// Answers the call with `outcome`, unless it was answered already. Never waits: a reply
    /// that finds no room is kept by the port and sent before the call's next notification
    /// or once the call has returned, so a guest never waits for a slow client while it holds
    /// its instance.
    fn respond(&self, outcome: CallResult);

    /// Answers the call with a result of about `len` bytes that `write` appends (the text is
    /// made only if the call was not answered yet); `room` is held until the reply is written.
    fn respond_with(&self, len: usize, write: &mut dyn FnMut(&mut String), room: Room);

    /// Sends a notification (its method already checked to be in the plugin's namespace),
    /// after a reply the port kept back; waits for room. Fails when the client is gone.
    fn notify<'a>(
        &'a self,
        method: &'a str,
        params: &'a serde_json::value::RawValue,
    ) -> PortFuture<'a, Result<(), String>>;

    /// Sends a notification once the call's response has been queued, however long after the
    /// call that is (a watch firing); waits for room. Fails when the client is gone.
    fn notify_after_reply<'a>(
        &'a self,
        method: &'a str,
        params: &'a serde_json::value::RawValue,
    ) -> PortFuture<'a, Result<(), String>>;

    /// Room in the client's replies for `bytes` of file contents, if there is some now.
    fn try_room(&self, bytes: u64) -> Option<Room>;

    /// Room for `bytes` of file contents, waiting while the client is not reading its replies
    /// (none is needed once it is gone).
    fn room(&self, bytes: u64) -> PortFuture<'_, Room>;
}

/// Room a port set aside in its client's replies, opaque to the runtime; given back when
/// dropped. The default holds nothing.
#[derive(Default)]
pub struct Room(Option<Box<dyn Any + Send + Sync>>);

impl Room {
    /// Wraps what a port holds for the room.
    pub fn new<T: Any + Send + Sync>(held: T) -> Self {
        Self(Some(Box::new(held)))
    }

    /// What the port put in, if it was a `T`.
    pub fn into_inner<T: Any>(self) -> Option<T> {
        self.0?.downcast::<T>().ok().map(|held| *held)
    }
}

impl std::fmt::Debug for Room {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Room").field(&self.0.is_some()).finish()
    }
}
