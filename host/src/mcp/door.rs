//! The MCP face's way in: a session and a connection of its own on the server, whose requests
//! go through the same method table, lanes, grants, plugin runtime and process sandbox as a
//! Codex client's ([`crate::server::processor::serve_route`]). A tool is a sequence of such
//! requests; nothing here acts on files, the network or processes by itself, so no MCP tool can
//! do what the Codex face would refuse.
//!
//! Replies come back on the connection's outbound queue as the Codex face encodes them (a
//! plugin may answer early, straight onto it); process events come as data, through the
//! session's [`EventPort::Events`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use crate::process::{EventPort, ProcessEvent};
use crate::rpc::{RequestId, RpcError};
use crate::server::ServerState;
use crate::server::context::ConnectionContext;
use crate::server::dispatch::Dispatcher;
use crate::server::methods::{self, Method};
use crate::server::processor::{Served, serve_route};
use crate::server::session::SessionHandle;
use crate::transport::{DirectSink, OUTBOUND_QUEUE_MESSAGES, Outbound, OutboundMessage};

/// Process events queued for the face before the pump waits (as it waits for a slow client).
const EVENT_QUEUE: usize = 256;

/// What the process ids tools make start with.
const PROCESS_ID_PREFIX: &str = "mcp-";

/// Processes a door remembers for `list_processes`.
const REMEMBERED_PROCESSES: usize = 4_096;

/// The number of a process id a tool made.
fn process_number(id: &str) -> Option<u64> {
    id.strip_prefix(PROCESS_ID_PREFIX)?.parse().ok()
}

/// Notifications of one line queued before later ones are dropped.
const NOTIFICATION_QUEUE: usize = 16;

/// Events queued for one watcher of a process before the router waits for it.
const WATCHER_QUEUE: usize = 64;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only insert and remove map entries.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

type Pending = Arc<Mutex<HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>>>;
type Watchers = Arc<Mutex<HashMap<String, mpsc::Sender<ProcessEvent>>>>;

/// One connection of a door's session, with its own outbound queue: replies are matched to
/// their calls by id, notifications (`fs/missingChanged`) handed to whoever listens. A watch
/// belongs to its connection (one each, docs/protocol.md §9.6), so each subscription has a
/// line of its own.
pub struct Line {
    connection: Arc<ConnectionContext>,
    dispatcher: Dispatcher,
    pending: Pending,
    next_id: AtomicI64,
    closing: watch::Sender<bool>,
    notifications: tokio::sync::Mutex<mpsc::Receiver<Value>>,
}

impl Line {
    fn new(peer: String) -> Self {
        let pending: Pending = Arc::default();
        let (outbound, replies) = Outbound::channel();
        // Replies reach their callers on the thread that sends them; only notifications queue.
        let outbound = outbound.with_direct(Arc::new(Router(Arc::clone(&pending))));
        let (closing, closed) = watch::channel(false);
        let (notify, notifications) = mpsc::channel(NOTIFICATION_QUEUE);
        let line = Self {
            connection: Arc::new(ConnectionContext::new(peer, outbound, closed)),
            dispatcher: Dispatcher::new(),
            pending,
            next_id: AtomicI64::new(1),
            closing,
            notifications: tokio::sync::Mutex::new(notifications),
        };
        tokio::spawn(route_replies(replies, Arc::clone(&line.pending), notify));
        line
    }

    /// The next notification sent on this line; `None` once it is closed.
    pub async fn next_notification(&self) -> Option<Value> {
        self.notifications.lock().await.recv().await
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        // Ends what waits on the connection (a long poll, its watch).
        let _ = self.closing.send(true);
    }
}

/// One MCP client's session on the server.
pub struct Door {
    server: Arc<ServerState>,
    session: SessionHandle,
    main: Line,
    watchers: Watchers,
    /// Processes started through the door, by the number in their id: (command as shown, cwd).
    started: Mutex<BTreeMap<u64, (String, String)>>,
    next_process: AtomicU64,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Door")
            .field("peer", &self.main.connection.peer)
            .finish_non_exhaustive()
    }
}

impl Door {
    /// Opens a session for the MCP client named `peer` (as error texts name it).
    pub fn open(server: Arc<ServerState>, peer: String) -> Result<Arc<Self>, RpcError> {
        let main = Line::new(peer);
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let session =
            server
                .sessions
                .open(main.connection.id, EventPort::Events(events_tx), |_| {
                    Ok(serde_json::value::RawValue::NULL.to_owned())
                })?;
        let door = Arc::new(Self {
            server,
            session,
            main,
            watchers: Arc::default(),
            started: Mutex::default(),
            next_process: AtomicU64::new(1),
        });
        tokio::spawn(route_events(events, Arc::clone(&door.watchers)));
        Ok(door)
    }

    /// A new connection of the session, for a watch of its own.
    pub fn line(&self) -> Line {
        Line::new(self.main.connection.peer.clone())
    }

    /// The server behind the door.
    pub fn server(&self) -> &Arc<ServerState> {
        &self.server
    }

    /// Calls `method` with `params` as a Codex client would, and waits for its result.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.call_on(&self.main, method, params).await
    }

    /// [`Door::call`] on `line`.
    pub async fn call_on(
        &self,
        line: &Line,
        method: &str,
        params: Value,
    ) -> Result<Value, RpcError> {
        let route = match methods::lookup(method, &self.server) {
            Some(Method::Serve(route)) => route,
            Some(Method::Initialize) | None => return Err(RpcError::method_not_found(method)),
        };
        let id = line.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&line.pending).insert(id, tx);
        let request = Served {
            id: RequestId::Integer(id),
            method: method.to_owned(),
            params,
            held: None,
        };
        serve_route(
            &line.dispatcher,
            &self.server,
            &line.connection,
            self.session.clone(),
            route,
            request,
            // Polled first where the call is made: on a thread that may run guests (stdio's),
            // a plugin call is answered without a switch between threads.
            true,
        )
        .await;
        rx.await
            .unwrap_or_else(|_| Err(RpcError::internal_error("the session has ended")))
    }

    /// The events of process `id` from now on, until the receiver is dropped. Watch before
    /// starting the process, so that no event is missed.
    pub fn watch_process(&self, id: &str) -> mpsc::Receiver<ProcessEvent> {
        let (tx, rx) = mpsc::channel(WATCHER_QUEUE);
        lock(&self.watchers).insert(id.to_owned(), tx);
        rx
    }

    /// Stops watching process `id`.
    pub fn unwatch_process(&self, id: &str) {
        lock(&self.watchers).remove(id);
    }

    /// The directories the file tools may use: the roots granted to the plugin serving
    /// `fs/readFile`, as it has them now (a reload may change them).
    pub fn roots(&self) -> Vec<String> {
        let plugin = self
            .server
            .runtime
            .plugin_for(crate::protocol::FS_READ_FILE);
        (plugin.iter())
            .flat_map(|plugin| plugin.grants.fs_roots.iter())
            .map(|root| root.path.to_string_lossy().into_owned())
            .collect()
    }

    /// A tool's path argument as an absolute path: absolute as given, relative to the first
    /// root otherwise (as server-filesystem resolves them), or to wexec's working directory
    /// without roots. Whether the path is allowed is the plugin's to say.
    pub fn resolve(&self, path: &str) -> Result<String, String> {
        if path.is_empty() {
            return Err("the path is empty".to_owned());
        }
        if path.starts_with('/') || path.starts_with("file:") {
            return Ok(path.to_owned());
        }
        let base = match self.roots().into_iter().next() {
            Some(root) => root,
            None => std::env::current_dir()
                .map_err(|err| format!("cannot resolve `{path}`: {err}"))?
                .to_string_lossy()
                .into_owned(),
        };
        let relative = path.strip_prefix("./").unwrap_or(path);
        Ok(match relative {
            "." | "" => base,
            relative => format!("{}/{relative}", base.trim_end_matches('/')),
        })
    }

    /// A fresh process id for a tool.
    pub fn new_process_id(&self) -> String {
        format!(
            "{PROCESS_ID_PREFIX}{}",
            self.next_process.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Records a process a tool started, for `list_processes`. Beyond
    /// [`REMEMBERED_PROCESSES`], the oldest is forgotten (long closed: the server keeps a
    /// closed process 30 s and a session's live ones are fewer).
    pub fn remember(&self, id: &str, command: &str, cwd: &str) {
        let Some(number) = process_number(id) else {
            return;
        };
        let mut started = lock(&self.started);
        started.insert(number, (command.to_owned(), cwd.to_owned()));
        while started.len() > REMEMBERED_PROCESSES {
            started.pop_first();
        }
    }

    /// The processes tools started: (id, command, cwd).
    pub fn remembered(&self) -> Vec<(String, String, String)> {
        (lock(&self.started).iter())
            .map(|(number, (command, cwd))| {
                (
                    format!("{PROCESS_ID_PREFIX}{number}"),
                    command.clone(),
                    cwd.clone(),
                )
            })
            .collect()
    }

    /// Forgets a process the server no longer retains.
    pub fn forget(&self, id: &str) {
        if let Some(number) = process_number(id) {
            lock(&self.started).remove(&number);
        }
    }

    /// Terminates process `id` and everything it started; failures are logged (the process
    /// may be gone already).
    pub async fn terminate(&self, id: &str) {
        let params = serde_json::json!({"processId": id});
        if let Err(error) = self.call(crate::protocol::PROCESS_TERMINATE, params).await {
            tracing::debug!(process = id, "terminate: {}", error.message);
        }
    }

    /// Ends the session: waits for its requests, then terminates its processes.
    pub async fn close(&self) {
        let _ = self.main.closing.send(true);
        self.session.close().await;
    }
}

/// Hands a line's replies to their waiters as they are sent, on the sender's thread: a call
/// answered in its first poll (a plugin call on stdio's thread) completes without a hop
/// through a task. Replies carry their id, so they need no order; notifications do, and
/// take the queue ([`route_replies`]).
struct Router(Pending);

impl DirectSink for Router {
    fn try_write(&self, text: &str) -> bool {
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            return false;
        };
        match value.get("id").and_then(Value::as_i64) {
            Some(id) => {
                deliver(&self.0, id, value);
                true
            }
            None => false,
        }
    }

    fn queued(&self) {}

    fn dropped(&self) {}
}

/// Resolves the waiter of reply `id` (gone if its caller stopped waiting).
fn deliver(pending: &Pending, id: i64, mut reply: Value) {
    let outcome = if let Some(result) = reply.get_mut("result") {
        Ok(result.take())
    } else if let Some(error) = reply.get_mut("error") {
        Err(serde_json::from_value(error.take())
            .unwrap_or_else(|err| RpcError::internal_error(err.to_string())))
    } else {
        Err(RpcError::internal_error("a reply without a result"))
    };
    if let Some(waiter) = lock(pending).remove(&id) {
        let _ = waiter.send(outcome);
    }
}

/// Resolves the waiters of replies that were queued after all, and hands notifications on
/// (dropped when nobody keeps up: a watch's one notification is all that matters). Ends when
/// the connection's queue does.
async fn route_replies(
    mut replies: mpsc::Receiver<OutboundMessage>,
    pending: Pending,
    notifications: mpsc::Sender<Value>,
) {
    let mut batch = Vec::with_capacity(OUTBOUND_QUEUE_MESSAGES.min(64));
    while replies.recv_many(&mut batch, 64).await > 0 {
        for message in batch.drain(..) {
            if message.end {
                continue;
            }
            let Ok(value) = serde_json::from_str::<Value>(&message.text) else {
                tracing::warn!("the MCP face got a reply it cannot read");
                continue;
            };
            match value.get("id").and_then(Value::as_i64) {
                Some(id) => deliver(&pending, id, value),
                None => {
                    let _ = notifications.try_send(value);
                }
            }
        }
    }
}

/// Hands each process event to its process's watcher, if any; the rest stay readable with
/// `process/read`.
async fn route_events(mut events: mpsc::Receiver<ProcessEvent>, watchers: Watchers) {
    while let Some(event) = events.recv().await {
        let id = match &event {
            ProcessEvent::Output { process_id, .. }
            | ProcessEvent::Exited { process_id, .. }
            | ProcessEvent::Closed { process_id, .. } => process_id.clone(),
        };
        let closed = matches!(event, ProcessEvent::Closed { .. });
        let watcher = lock(&watchers).get(&id).cloned();
        if let Some(watcher) = watcher
            && watcher.send(event).await.is_err()
        {
            lock(&watchers).remove(&id);
        }
        if closed {
            lock(&watchers).remove(&id);
        }
    }
}
