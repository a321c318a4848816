//! The server: process-wide state, and the two ways of serving it (stdio, WebSocket).

pub mod context;
pub mod dispatch;
mod environment;
pub mod handlers;
pub mod methods;
pub mod processor;
pub mod reload;
pub mod reply;
pub mod session;

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use self::session::SessionRegistry;
use crate::environment::EnvironmentFacts;
use crate::limits::Counter;
use crate::settings::Settings;
use crate::transport::budget::InboundBudget;
use serde_json::value::RawValue;

use crate::runtime::{LoadError, Runtime};
use crate::transport::websocket::credential::Credential;
use crate::transport::{stdio, websocket};

/// How long wexec waits for stdout to drain when it exits.
const STDOUT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Back-off after a failed `accept` (for example, out of file descriptors).
pub(crate) const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Process-wide state shared by every connection.
#[derive(Debug)]
pub struct ServerState {
    /// All sessions.
    pub sessions: Arc<SessionRegistry>,
    /// The bytes of inbound messages held, across connections.
    pub inbound: Arc<InboundBudget>,
    /// WebSocket connections served.
    pub(crate) connections: Arc<Counter>,
    /// The plugins and their runtime.
    pub runtime: Runtime,
    /// How processes run: the sandbox ceiling and the kernel limits.
    pub processes: ProcessSettings,
    /// Bumped after every reload that changed the plugins: the MCP face tells its clients
    /// their tool list changed.
    pub plugins_changed: tokio::sync::watch::Sender<u64>,
    /// `environmentInfo` as the `env` plugin reports it, embedded in the `initialize` result
    /// of new sessions; refreshed after a plugin reload.
    environment_info: std::sync::RwLock<Box<RawValue>>,
}

/// What the operator set for processes.
#[derive(Debug, Clone)]
pub struct ProcessSettings {
    /// The sandbox ceiling (and whether processes are enabled at all).
    pub ceiling: crate::sandbox::Ceiling,
    /// Kernel limits for every process.
    pub limits: crate::process::supervisor::wire::Rlimits,
    /// Tasks per session's pids cgroup, when the operator set `--session-processes`.
    pub session_tasks: Option<usize>,
}

impl ServerState {
    /// State for a server started with `settings`: gathers the host facts and loads every
    /// plugin (a plugin that cannot be loaded stops wexec before it serves anyone). With
    /// `--config`, starts watching for plugin reloads.
    pub async fn new(settings: Settings) -> Result<Arc<Self>, LoadError> {
        let environment = Arc::new(EnvironmentFacts::gather());
        let ceiling = &settings.ceiling;
        let writable = match (ceiling.processes, ceiling.mode) {
            (true, crate::sandbox::Mode::WorkspaceWrite) => ceiling.writable.clone(),
            _ => Vec::new(),
        };
        // No plugin reaches wexec's own files either.
        let own: Vec<_> = ceiling
            .protected
            .iter()
            .chain(&ceiling.secrets)
            .cloned()
            .collect();
        let cache_key = settings.state.as_ref().and_then(|state| state.key());
        if let Some(logs) = settings
            .state
            .as_ref()
            .and_then(|state| crate::sandbox::log_placeholders(state))
        {
            tokio::spawn(async move {
                crate::startup::settled().await;
                let sweep = move || crate::sandbox::sweep_placeholders(&logs);
                let _ = tokio::task::spawn_blocking(sweep).await;
            });
        }
        let runtime =
            Runtime::load(settings.plugins, environment, &writable, &own, cache_key).await?;
        let environment_info = Self::query_environment_info(&runtime).await?;
        let limits = settings.limits;
        let mut protected = settings.ceiling.protected.clone();
        protected.extend(runtime.cache_dir().map(std::path::Path::to_path_buf));
        let server = Arc::new(Self {
            sessions: SessionRegistry::new(settings.detach_ttl, limits),
            inbound: InboundBudget::new(limits.inbound_bytes),
            connections: Counter::new(limits.max_connections),
            runtime,
            processes: ProcessSettings {
                ceiling: crate::sandbox::Ceiling {
                    protected,
                    ..settings.ceiling
                },
                limits: settings.process_limits,
                session_tasks: settings.session_tasks,
            },
            environment_info: std::sync::RwLock::new(environment_info),
            plugins_changed: tokio::sync::watch::Sender::new(0),
        });
        if let Some(source) = settings.reload {
            reload::spawn_watcher(Arc::clone(&server), source);
        }
        Ok(server)
    }

    async fn query_environment_info(runtime: &Runtime) -> Result<Box<RawValue>, LoadError> {
        environment::environment_info(runtime)
            .await
            .map_err(|err| LoadError::Invalid {
                origin: "built-in env".into(),
                reason: format!(
                    "environment/info failed: {}",
                    crate::rpc::call_error(err).message
                ),
            })
    }

    /// `environmentInfo` for `initialize`: the same object `environment/info` returns.
    pub fn environment_info(&self) -> Box<RawValue> {
        self.environment_info
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Recomputes what new sessions' `initialize` embeds (the plugin list changed).
    pub async fn refresh_environment_info(&self) -> Result<(), LoadError> {
        let info = Self::query_environment_info(&self.runtime).await?;
        *self
            .environment_info
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = info;
        Ok(())
    }

    /// Ends every session, terminating and waiting for every process (wexec is exiting).
    pub async fn shutdown(&self) {
        let sessions = self.sessions.drain();
        futures_util::future::join_all(sessions.iter().map(|session| session.end())).await;
    }
}

/// Serves one connection on stdin/stdout with `face` (the Codex face's [`processor::serve`],
/// or the MCP face's) until end of input or `shutdown`, then ends every session and flushes
/// stdout. `spin`: look for a quick client's next request before sleeping.
pub async fn serve_stdio<F, Served>(
    server: Arc<ServerState>,
    spin: bool,
    face: F,
    shutdown: impl Future<Output = ()>,
) -> Result<(), std::io::Error>
where
    F: FnOnce(crate::transport::Connection, Arc<ServerState>) -> Served + Send + 'static,
    Served: Future<Output = ()>,
{
    // Duplicates of fds 0 and 1, bypassing std's Stdin buffer and Stdout's LineWriter (which
    // scans every byte for newlines): the transport buffers and frames itself.
    let stdin = std::fs::File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let room = stdio::PipeRoom::new(&stdout);
    let spin = spin.then(|| stdio::InputSpin::new(&stdin)).flatten();
    let (connection, writer) =
        stdio::connect(stdin, stdout, room, spin, server.inbound.connection());
    let outbound = connection.outbound.clone();
    // The face reads stdin itself on a thread of its own, so a request reaches its handler
    // without a switch between threads. At shutdown a read parked on stdin is left behind.
    let (finished, mut serving) = tokio::sync::oneshot::channel();
    let parked = match &connection.inbound {
        crate::transport::Inbound::Lines(lines) => lines.waiting_flag(),
        crate::transport::Inbound::Queue(_) => Arc::default(),
    };
    let runtime = tokio::runtime::Handle::current();
    let processor_server = Arc::clone(&server);
    std::thread::Builder::new()
        .name("wexec-stdio".into())
        .spawn(move || {
            crate::fast_path::claim_thread();
            // Outside tokio's cooperative budget: it is given back only when the future
            // yields to `block_on`, and this one blocks in `read` instead, so once spent every
            // channel and semaphore would report "not ready" and send requests off the thread.
            // The thread serves nothing else, so there is nobody to be fair to.
            runtime.block_on(tokio::task::unconstrained(face(
                connection,
                processor_server,
            )));
            let _ = finished.send(());
        })?;
    tokio::select! {
        _ = &mut serving => {
            tracing::info!("end of input");
        }
        () = shutdown => {}
    }
    server.shutdown().await;
    // Unless the processor thread is parked on stdin (it would wait forever), let it finish
    // what it is doing: the runtime it uses is about to stop.
    let deadline = tokio::time::Instant::now() + STDOUT_DRAIN_TIMEOUT;
    while !parked.load(std::sync::atomic::Ordering::SeqCst)
        && tokio::time::Instant::now() < deadline
        && matches!(
            serving.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty)
        )
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The processor thread may be parked on stdin, holding the connection: end the output
    // explicitly once what is queued is written.
    outbound.finish().await;
    drop(outbound);
    if tokio::time::timeout(STDOUT_DRAIN_TIMEOUT, writer)
        .await
        .is_err()
    {
        tracing::warn!("stdout did not drain in time");
    }
    Ok(())
}

/// A startup failure of the WebSocket listener.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The address cannot be bound.
    #[error("cannot listen on ws://{addr}: {source}")]
    Bind {
        /// The requested address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Listens on `addr` until `shutdown`. The bound URL is the first line on stdout.
pub async fn serve_websocket(
    server: Arc<ServerState>,
    addr: SocketAddr,
    credential: Option<Credential>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ListenError> {
    let (listener, bound) = bind_guarded(addr).await?;
    announce(&format!("ws://{bound}"));
    tracing::info!("listening on ws://{bound}");
    let credential = credential.map(Arc::new);
    tokio::select! {
        () = accept_loop(listener, Arc::clone(&server), credential) => {}
        () = shutdown => {}
    }
    server.shutdown().await;
    Ok(())
}

/// Binds a listener on `addr`, and keeps every confined process off it before anyone can
/// connect; returns it with its bound address.
pub(crate) async fn bind_guarded(
    addr: SocketAddr,
) -> Result<(TcpListener, SocketAddr), ListenError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ListenError::Bind { addr, source })?;
    crate::process::supervisor::guard_listeners(&[bound.port()]);
    Ok((listener, bound))
}

/// Prints the one line wexec writes to stdout outside the protocol.
pub(crate) fn announce(line: &str) {
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        tracing::warn!("cannot print the listen address: {err}");
    }
}

async fn accept_loop(
    listener: TcpListener,
    server: Arc<ServerState>,
    credential: Option<Arc<Credential>>,
) {
    let handshakes = crate::transport::websocket::handshakes::Handshakes::new();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!("accept failed: {err}");
                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                continue;
            }
        };
        // Small JSON-RPC messages must not wait for Nagle's algorithm (a 40 ms stall against
        // delayed ACKs).
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "cannot set TCP_NODELAY: {err}");
        }
        // A socket this one displaces says so itself.
        let handshake = handshakes.admit(peer.ip());
        let server = Arc::clone(&server);
        let credential = credential.clone();
        tokio::spawn(async move {
            let budget = server.inbound.connection();
            let accepted = websocket::accept(
                stream,
                peer,
                credential.as_deref(),
                &server.connections,
                budget,
                handshake,
            )
            .await;
            if let Some((connection, _slot)) = accepted {
                // The slot is held for as long as the connection is served.
                processor::serve(connection, server).await;
            }
        });
    }
}
