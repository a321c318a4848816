//! Progress notifications for a request whose `_meta` carried a `progressToken`.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};

/// Where a request's progress goes.
#[derive(Debug, Clone)]
pub struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

impl Progress {
    /// Progress for the request with `token`, sent to `peer`.
    pub fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Self {
        Self { peer, token }
    }

    /// Reports `progress` (a count that only grows) with a message; a client that went away
    /// is no error.
    pub async fn report(&self, progress: f64, message: String) {
        let mut param = ProgressNotificationParam::new(self.token.clone(), progress);
        param.message = Some(message);
        if let Err(err) = self.peer.notify_progress(param).await {
            tracing::debug!("progress not sent: {err}");
        }
    }
}
