//! What one wexec serves at most, across every client (docs/protocol.md §12). Each limit
//! is set on the command line; each refusal names the limit and the option that sets it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Default `--max-connections`: WebSocket connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Default `--session-processes`: live processes one session may have.
pub const DEFAULT_SESSION_PROCESSES: usize = 256;

/// Default `--max-processes`: live processes across all sessions. Each holds a few descriptors
/// in wexec and up to 1 MiB of retained output.
pub const DEFAULT_MAX_PROCESSES: usize = 1024;

/// Default `--max-inbound-mib`: bytes of inbound messages held at once across connections
/// (four maximum-size messages; `transport/budget.rs`).
pub const DEFAULT_INBOUND_BYTES: usize = 256 * 1024 * 1024;

/// Default `--closed-retention`: how long a closed process stays readable, and its id taken
/// (docs/protocol.md §8.9): long enough for a client that saw the close to read the exit.
pub const DEFAULT_CLOSED_RETENTION: Duration = Duration::from_secs(30);

/// Plugin calls one connection runs at once; more wait their turn. Each holds an instance of
/// the engine's 1,000 (`wexec_runtime`) until it returns and its reply is queued, so one
/// connection cannot take every instance (64 connections × 8 leave half of them), and a client
/// that stops reading its replies stops its own plugin work.
pub const PLUGIN_CALLS_PER_CONNECTION: usize = 8;

/// Refuses (-32602) a client-chosen id longer than
/// [`MAX_ID_BYTES`](crate::protocol::limits::MAX_ID_BYTES), naming the field.
pub fn check_id(field: &str, id: &str) -> Result<(), crate::rpc::RpcError> {
    use crate::protocol::limits::MAX_ID_BYTES;
    if id.len() > MAX_ID_BYTES {
        return Err(crate::rpc::RpcError::invalid_params(format!(
            "{field} is {} bytes long; the limit is {MAX_ID_BYTES} bytes",
            id.len()
        )));
    }
    Ok(())
}

/// The host-wide limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// WebSocket connections at once.
    pub max_connections: usize,
    /// Live processes per session.
    pub session_processes: usize,
    /// Live processes on this host.
    pub max_processes: usize,
    /// Bytes of inbound messages held at once.
    pub inbound_bytes: usize,
    /// How long a closed process stays readable, and its id taken.
    pub closed_retention: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            session_processes: DEFAULT_SESSION_PROCESSES,
            max_processes: DEFAULT_MAX_PROCESSES,
            inbound_bytes: DEFAULT_INBOUND_BYTES,
            closed_retention: DEFAULT_CLOSED_RETENTION,
        }
    }
}

/// A count with a ceiling, taken and given back by RAII tokens.
#[derive(Debug)]
pub struct Counter {
    limit: usize,
    count: AtomicUsize,
}

/// One unit of a [`Counter`], given back when dropped.
#[derive(Debug)]
pub struct Token(Arc<Counter>);

impl Counter {
    /// A counter of at most `limit`.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            count: AtomicUsize::new(0),
        })
    }

    /// Takes a unit, unless the limit is reached.
    pub fn take(self: &Arc<Self>) -> Option<Token> {
        self.count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                (count < self.limit).then_some(count + 1)
            })
            .ok()
            .map(|_| Token(Arc::clone(self)))
    }

    /// Its limit.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_refuses_past_its_limit_and_recovers() {
        let counter = Counter::new(2);
        let (a, b) = (counter.take().unwrap(), counter.take().unwrap());
        assert!(counter.take().is_none());
        drop(a);
        let c = counter.take();
        assert!(c.is_some());
        drop((b, c));
        assert_eq!(counter.count.load(Ordering::Acquire), 0);
    }
}
