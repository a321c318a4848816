//! The bytes of inbound messages wexec holds at once, across connections
//! (docs/protocol.md §12). A message is held from the moment its transport has read it until
//! its request has been answered: its parsed params, the data decoded from them and the copies
//! handed to a plugin all scale with it, so this bounds wexec's memory against clients that
//! send many large messages at once.
//!
//! Each connection also has a small allowance of its own, outside the shared budget, so that
//! however much others hold, its small messages (a `process/terminate`, a status) always get
//! through.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What each connection may hold outside the shared budget.
pub const CONNECTION_ALLOWANCE_BYTES: usize = 1024 * 1024;

/// The shared budget.
#[derive(Debug)]
pub struct InboundBudget {
    shared: Arc<Semaphore>,
    limit: usize,
}

impl InboundBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            shared: Arc::new(Semaphore::new(limit.min(Semaphore::MAX_PERMITS))),
            limit,
        })
    }

    /// A connection's view of it, with its own allowance.
    pub fn connection(self: &Arc<Self>) -> ConnectionBudget {
        ConnectionBudget {
            shared: Arc::clone(self),
            own: Arc::new(Semaphore::new(CONNECTION_ALLOWANCE_BYTES)),
        }
    }
}

/// One connection's admission of inbound messages.
#[derive(Debug)]
pub struct ConnectionBudget {
    shared: Arc<InboundBudget>,
    own: Arc<Semaphore>,
}

/// A message's share of the budget, given back when dropped.
#[derive(Debug)]
pub struct Held(#[allow(dead_code, reason = "held for its drop")] OwnedSemaphorePermit);

impl ConnectionBudget {
    /// Admits a message of `len` bytes, from the connection's allowance if it fits there, else
    /// from the shared budget; refuses it when neither has room now.
    pub fn admit(&self, len: usize) -> Result<Held, String> {
        let permits = u32::try_from(len.max(1)).unwrap_or(u32::MAX);
        if let Ok(permit) = Arc::clone(&self.own).try_acquire_many_owned(permits) {
            return Ok(Held(permit));
        }
        Arc::clone(&self.shared.shared)
            .try_acquire_many_owned(permits)
            .map(Held)
            .map_err(|_| {
                let held = self.shared.limit - self.shared.shared.available_permits();
                format!(
                    "inbound message of {len} bytes refused: wexec already holds {held} bytes of inbound messages, its limit is {} (--max-inbound-mib); retry later",
                    self.shared.limit
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_messages_share_the_budget_and_small_ones_always_pass() {
        let budget = InboundBudget::new(10 * 1024 * 1024);
        let (a, b) = (budget.connection(), budget.connection());
        let big = 6 * 1024 * 1024;
        let first = a.admit(big).unwrap();
        let refused = b.admit(big).unwrap_err();
        assert!(
            refused.starts_with("inbound message of 6291456 bytes refused"),
            "{refused}"
        );
        // Small messages come out of each connection's own allowance.
        let small: Vec<Held> = (0..8).map(|_| b.admit(100 * 1024).unwrap()).collect();
        drop(first);
        assert!(
            b.admit(big).is_ok(),
            "room again once the first is answered"
        );
        drop(small);
    }
}
