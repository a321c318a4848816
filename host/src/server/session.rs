//! Sessions (docs/protocol.md §5): a session outlives its WebSocket connection for the detach TTL
//! and can be resumed by a new connection. The registry is the only place that attaches, detaches,
//! resumes and expires sessions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::limits::{Counter, ServerLimits};
use crate::process::EventPort;
use crate::process::ProcessTable;
use crate::rpc::RpcError;
use crate::runtime::InstancePool;

/// Identifies one connection for the lifetime of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId(u64);

impl ConnectionId {
    /// A fresh id.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// All sessions of this wexec.
#[derive(Debug)]
pub struct SessionRegistry {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    detach_ttl: Duration,
    /// Live processes per session.
    session_processes: usize,
    /// Live processes across sessions.
    host_processes: Arc<Counter>,
    /// How long each session keeps a closed process.
    closed_retention: Duration,
}

/// One session: what survives a dropped connection.
#[derive(Debug)]
pub struct Session {
    id: String,
    /// The first `initialize` result, returned unchanged on every resume.
    initialize_result: Box<RawValue>,
    attachment: Mutex<Attachment>,
    /// Bumped on every attach; connections watch it to learn of a takeover.
    epoch: watch::Sender<u64>,
    /// The session's processes; their notifications go to the attached connection.
    processes: Arc<ProcessTable>,
    /// The session's plugin instances: reused across its calls, never shared with another
    /// session.
    instances: InstancePool,
}

#[derive(Debug)]
struct Attachment {
    /// The connection that holds the session, if any.
    connection: Option<ConnectionId>,
    /// When a detached session stops being resumable.
    expires_at: Option<Instant>,
}

/// A connection's hold on a session.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    registry: Arc<SessionRegistry>,
    session: Arc<Session>,
    connection: ConnectionId,
    epoch: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a few assignments that cannot leave the state half-done,
    // so a panic elsewhere while holding the lock does not make the state unusable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SessionRegistry {
    /// An empty registry whose detached sessions live for `detach_ttl`.
    pub fn new(detach_ttl: Duration, limits: ServerLimits) -> Arc<Self> {
        Arc::new(Self {
            sessions: Mutex::new(HashMap::new()),
            detach_ttl,
            session_processes: limits.session_processes,
            host_processes: Counter::new(limits.max_processes),
            closed_retention: limits.closed_retention,
        })
    }

    /// Opens a new session attached to `connection`. `initialize_result` builds the result from
    /// the new session id.
    pub fn open(
        self: &Arc<Self>,
        connection: ConnectionId,
        sink: EventPort,
        initialize_result: impl FnOnce(&str) -> Result<Box<RawValue>, RpcError>,
    ) -> Result<SessionHandle, RpcError> {
        let id = uuid::Uuid::new_v4().to_string();
        let processes = Arc::new(ProcessTable::new(
            Counter::new(self.session_processes),
            Arc::clone(&self.host_processes),
            self.closed_retention,
        ));
        processes.sink().set(Some(sink));
        let session = Arc::new(Session {
            initialize_result: initialize_result(&id)?,
            id: id.clone(),
            attachment: Mutex::new(Attachment {
                connection: Some(connection),
                expires_at: None,
            }),
            epoch: watch::Sender::new(0),
            processes,
            instances: InstancePool::default(),
        });
        lock(&self.sessions).insert(id, Arc::clone(&session));
        Ok(self.handle(session, connection))
    }

    /// Attaches a detached session to `connection`. Unknown and expired ids are -32600; a
    /// session still attached elsewhere is -32010 (the client retries).
    pub fn resume(
        self: &Arc<Self>,
        id: &str,
        connection: ConnectionId,
        sink: EventPort,
    ) -> Result<SessionHandle, RpcError> {
        let unknown = || RpcError::invalid_request(format!("unknown session id {id}"));
        let session = lock(&self.sessions).get(id).cloned().ok_or_else(unknown)?;
        {
            let mut attachment = lock(&session.attachment);
            if attachment.connection.is_some() {
                return Err(RpcError::session_already_attached(id));
            }
            if attachment.expires_at.is_some_and(|at| Instant::now() >= at) {
                drop(attachment);
                if self.remove(&session) {
                    tokio::spawn(async move { session.end().await });
                }
                return Err(unknown());
            }
            *attachment = Attachment {
                connection: Some(connection),
                expires_at: None,
            };
            session.processes.sink().set(Some(sink));
            // Under the attachment lock, so the epoch order matches the attach order.
            session.epoch.send_modify(|epoch| *epoch += 1);
        }
        tracing::info!(session = id, "session resumed");
        Ok(self.handle(session, connection))
    }

    fn handle(self: &Arc<Self>, session: Arc<Session>, connection: ConnectionId) -> SessionHandle {
        let epoch = *session.epoch.borrow();
        SessionHandle {
            registry: Arc::clone(self),
            session,
            connection,
            epoch,
        }
    }

    /// Removes every session, returning them so their processes can be terminated.
    pub fn drain(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions)
            .drain()
            .map(|(_, session)| session)
            .collect()
    }

    fn remove(&self, session: &Arc<Session>) -> bool {
        let mut sessions = lock(&self.sessions);
        match sessions.get(&session.id) {
            Some(current) if Arc::ptr_eq(current, session) => {
                sessions.remove(&session.id);
                true
            }
            _ => false,
        }
    }

    /// Removes `session` if it is still detached and its deadline has passed, terminating its
    /// processes.
    async fn expire(&self, session: &Arc<Session>) {
        let expired = lock(&session.attachment)
            .expires_at
            .is_some_and(|at| Instant::now() >= at);
        if expired && self.remove(session) {
            tracing::info!(session = session.id, "detached session expired");
            session.end().await;
        }
    }
}

impl Session {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session's processes.
    pub fn processes(&self) -> &Arc<ProcessTable> {
        &self.processes
    }

    /// The session's plugin instances.
    pub fn instances(&self) -> &InstancePool {
        &self.instances
    }

    /// Ends the session: it is no longer attached or resumable, and every process it owns is
    /// terminated and waited for.
    pub async fn end(&self) {
        {
            let mut attachment = lock(&self.attachment);
            attachment.connection = None;
            attachment.expires_at = Some(Instant::now());
        }
        self.processes.sink().set(None);
        self.processes.shutdown().await;
        self.instances.clear();
    }
}

impl SessionHandle {
    /// The session.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The first `initialize` result of the session.
    pub fn initialize_result(&self) -> &RawValue {
        &self.session.initialize_result
    }

    /// Whether this connection still holds the session (no other connection resumed it).
    pub fn is_current(&self) -> bool {
        *self.session.epoch.borrow() == self.epoch
    }

    /// Resolves once another connection has resumed the session.
    pub async fn taken_over(&self) {
        let mut epochs = self.session.epoch.subscribe();
        // The sender lives in the session we hold, so the channel cannot close under us.
        let _ = epochs.wait_for(|epoch| *epoch != self.epoch).await;
    }

    /// The connection ended: the session stays resumable for the TTL, then expires.
    pub fn detach(&self) {
        {
            let mut attachment = lock(&self.session.attachment);
            if attachment.connection != Some(self.connection) {
                return;
            }
            *attachment = Attachment {
                connection: None,
                expires_at: Some(Instant::now() + self.registry.detach_ttl),
            };
            self.session.processes.sink().set(None);
        }
        tracing::info!(session = self.session.id, "session detached");
        let registry = Arc::clone(&self.registry);
        let session = Arc::clone(&self.session);
        let ttl = self.registry.detach_ttl;
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            registry.expire(&session).await;
        });
    }

    /// The connection ended and the session ends with it (stdio).
    pub async fn close(&self) {
        if self.registry.remove(&self.session) {
            self.session.end().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::{INVALID_REQUEST, SESSION_ALREADY_ATTACHED};
    use crate::transport::Outbound;
    use pretty_assertions::assert_eq;

    fn result(id: &str) -> Result<Box<RawValue>, RpcError> {
        Ok(serde_json::value::to_raw_value(&serde_json::json!({"sessionId": id})).unwrap())
    }

    fn sink() -> EventPort {
        EventPort::Wire(Outbound::channel().0)
    }

    /// Short enough for real time (paused time needs tokio's `test-util`, a feature that would
    /// make `cargo test` rebuild tokio and everything above it apart from `cargo build`).
    const TTL: Duration = Duration::from_millis(500);

    /// Waits until `done` holds, as an expiry timer (real time) makes it; fails the test after
    /// a few TTLs.
    async fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + TTL * 10;
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn resume_lifecycle() {
        let registry = SessionRegistry::new(TTL, ServerLimits::default());
        let (a, b, c) = (
            ConnectionId::next(),
            ConnectionId::next(),
            ConnectionId::next(),
        );
        let first = registry.open(a, sink(), result).unwrap();
        let id = first.session().id().to_owned();
        assert_eq!(uuid::Uuid::parse_str(&id).unwrap().get_version_num(), 4);

        let err = registry.resume(&id, b, sink()).unwrap_err();
        assert_eq!(err.code, SESSION_ALREADY_ATTACHED);
        assert_eq!(
            err.message,
            format!("session {id} is already attached to another connection")
        );

        first.detach();
        assert!(first.session().processes().sink().current().is_none());
        let second = registry.resume(&id, b, sink()).unwrap();
        assert_eq!(
            second.initialize_result().get(),
            first.initialize_result().get()
        );
        assert!(!first.is_current());
        assert!(second.is_current());
        first.taken_over().await;

        // A stale detach from the old connection must not detach the new one.
        first.detach();
        assert!(registry.resume(&id, c, sink()).is_err());

        second.detach();
        until("the detached session expires", || {
            registry.sessions.lock().unwrap().is_empty()
        })
        .await;
        let err = registry.resume(&id, c, sink()).unwrap_err();
        assert_eq!(err.code, INVALID_REQUEST);
        assert_eq!(err.message, format!("unknown session id {id}"));
        assert!(registry.sessions.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_resume_within_the_ttl_survives_the_expiry_timer() {
        let registry = SessionRegistry::new(TTL, ServerLimits::default());
        let first = registry.open(ConnectionId::next(), sink(), result).unwrap();
        let id = first.session().id().to_owned();
        let holders = Arc::strong_count(&registry);
        first.detach();
        let second = registry.resume(&id, ConnectionId::next(), sink()).unwrap();
        // The first detach's expiry timer fires meanwhile and must leave the resumed session.
        // Its task holds the registry until it has run; the second handle holds it on.
        until("the expiry timer has run", || {
            Arc::strong_count(&registry) == holders + 1
        })
        .await;
        assert_eq!(registry.sessions.lock().unwrap().len(), 1);
        assert!(second.is_current());
    }

    #[tokio::test]
    async fn closing_removes_the_session_at_once() {
        let registry = SessionRegistry::new(Duration::from_secs(30), ServerLimits::default());
        let handle = registry.open(ConnectionId::next(), sink(), result).unwrap();
        let id = handle.session().id().to_owned();
        handle.close().await;
        assert_eq!(
            registry
                .resume(&id, ConnectionId::next(), sink())
                .unwrap_err()
                .code,
            INVALID_REQUEST
        );
    }
}
