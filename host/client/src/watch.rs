//! `fs/watchMissing`: a one-shot watch that ends with one `fs/missingChanged` notification
//! (docs/protocol.md §9.6).

use std::sync::Arc;

use tokio::sync::oneshot;

use super::error::ClientError;
use super::router::{Router, WatchEnd};

/// A watch the server accepted. It belongs to the connection it was made on: a newer watch on
/// that connection replaces it, and it ends with the connection (a resume does not bring it
/// back).
pub struct MissingWatch {
    pub(crate) watch_id: u64,
    pub(crate) receiver: oneshot::Receiver<WatchEnd>,
    pub(crate) router: Arc<Router>,
}

impl MissingWatch {
    /// The watch's `watchId`.
    pub fn id(&self) -> u64 {
        self.watch_id
    }

    /// Waits for the watch to fire: `Ok` once a `missing` path (or a missing ancestor) was
    /// created or `present` changed. An error when it never will: the connection was lost
    /// ([`ClientError::Disconnected`]) or a newer watch replaced it ([`ClientError::Protocol`]).
    pub async fn changed(mut self) -> Result<(), ClientError> {
        let watch_id = self.watch_id;
        (&mut self.receiver).await.unwrap_or_else(|_| {
            Err(ClientError::Protocol(format!(
                "fs/watchMissing watch {watch_id} was replaced by a newer watch"
            )))
        })
    }
}

impl Drop for MissingWatch {
    fn drop(&mut self) {
        self.router.remove_watch(self.watch_id);
    }
}

impl std::fmt::Debug for MissingWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MissingWatch")
            .field("watch_id", &self.watch_id)
            .finish_non_exhaustive()
    }
}
