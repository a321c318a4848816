//! The client handle: one connection (or, remote, one that is re-established), its session
//! and the calls in flight.

mod resume;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::error::ClientError;
use super::link::{Link, LinkOwner};
use super::router::Router;
use super::sync::lock;
use super::transport::Transport;
use super::transport::{StdioCommand, WebSocketTarget};

use crate::protocol::{EnvironmentInfo, InitializeResponse};

/// Settings shared by every way of connecting.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Sent as `clientName`.
    pub client_name: String,
    /// How long `initialize` may take.
    pub initialize_timeout: Duration,
    /// Resume this session instead of opening a new one.
    pub resume_session_id: Option<String>,
    /// How long a remote client keeps trying to resume after a drop (the server keeps a
    /// detached session for 30 s).
    pub resume_window: Duration,
}

impl ClientOptions {
    /// Defaults: 10 s initialize timeout, a new session, a 25 s resume window.
    pub fn new(client_name: impl Into<String>) -> Self {
        Self {
            client_name: client_name.into(),
            initialize_timeout: Duration::from_secs(10),
            resume_session_id: None,
            resume_window: Duration::from_secs(25),
        }
    }
}

/// A connection to an exec server. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session_id", &self.session_id())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) router: Arc<Router>,
    state: watch::Sender<State>,
    session: Mutex<Option<InitializeResponse>>,
    options: ClientOptions,
    /// Set for a remote client: where to reconnect.
    remote: Option<WebSocketTarget>,
    me: Weak<Inner>,
}

#[derive(Clone)]
pub(crate) enum State {
    /// A lazy remote client that has not connected yet (or whose first connect failed).
    Idle(Option<ClientError>),
    /// Connecting or resuming; calls wait.
    Connecting,
    Connected(Arc<Link>),
    /// Gone for good.
    Lost(ClientError),
}

impl Client {
    /// Spawns `command` and runs the handshake over its stdio. A server that exits, prints
    /// something that is not a protocol message, or does not answer in time fails the connect
    /// and is terminated.
    pub async fn connect_stdio(
        command: StdioCommand,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let client = Client::new(options, None);
        let transport = Transport::spawn(&command)?;
        let resume = client.inner.options.resume_session_id.clone();
        let link = client.inner.open(transport, resume.as_deref()).await?;
        client.inner.install(link);
        Ok(client)
    }

    /// Connects over WebSocket and runs the handshake. The client does not reconnect; see
    /// [`Client::remote`] for one that does.
    pub async fn connect_websocket(
        target: WebSocketTarget,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let client = Client::new(options, None);
        let transport = Transport::connect(&target).await?;
        let resume = client.inner.options.resume_session_id.clone();
        let link = client.inner.open(transport, resume.as_deref()).await?;
        client.inner.install(link);
        Ok(client)
    }

    /// A WebSocket client that connects on first use and, when the connection drops, reconnects
    /// and resumes its session (retrying -32010 within [`ClientOptions::resume_window`]), then
    /// recovers the events its process handles missed with `process/read`. Calls that were in
    /// flight are retried only when they are idempotent; others fail with
    /// [`ClientError::Disconnected`].
    pub fn remote(target: WebSocketTarget, options: ClientOptions) -> Client {
        let client = Client::new(options, Some(target));
        client.inner.state.send_replace(State::Idle(None));
        client
    }

    fn new(options: ClientOptions, remote: Option<WebSocketTarget>) -> Client {
        let inner = Arc::new_cyclic(|me| Inner {
            router: Arc::default(),
            state: watch::Sender::new(State::Connecting),
            session: Mutex::new(None),
            options,
            remote,
            me: me.clone(),
        });
        Client { inner }
    }

    /// The session id, once connected.
    pub fn session_id(&self) -> Option<String> {
        lock(&self.inner.session)
            .as_ref()
            .map(|session| session.session_id.clone())
    }

    /// The `environmentInfo` of the `initialize` result, once connected.
    pub fn initialize_environment(&self) -> Option<Result<EnvironmentInfo, ClientError>> {
        lock(&self.inner.session).as_ref().map(|session| {
            serde_json::from_str(session.environment_info.get()).map_err(ClientError::from)
        })
    }

    /// Whether the client is connected right now.
    pub fn is_connected(&self) -> bool {
        matches!(&*self.inner.state.borrow(), State::Connected(link) if !link.is_lost())
    }

    /// Calls `method` with `params` and decodes the result: the way to reach methods of
    /// operator-deployed plugins. Not retried across a reconnect.
    pub async fn call<P, R>(&self, method: &str, params: &P) -> Result<R, ClientError>
    where
        P: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        self.call_with(method, params, idempotent(method)).await
    }

    /// Like [`Client::call`]; `retry` says whether the call may be sent again after a reconnect
    /// when it is not known to have been answered.
    async fn call_with<P, R>(&self, method: &str, params: &P, retry: bool) -> Result<R, ClientError>
    where
        P: Serialize + ?Sized,
        R: DeserializeOwned,
    {
        loop {
            let link = self.link().await?;
            match link.request(method, params).await {
                Ok(result) => return super::router::decode_result(method, &result),
                Err(err @ ClientError::Disconnected(_)) if retry && self.inner.remote.is_some() => {
                    tracing::debug!(method, "retrying after the connection dropped: {err}");
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// The live connection, connecting (lazy remote) or waiting for a reconnect as needed.
    pub(crate) async fn link(&self) -> Result<Arc<Link>, ClientError> {
        let mut state = self.inner.state.subscribe();
        let mut started = false;
        loop {
            let current = state.borrow_and_update().clone();
            match current {
                State::Connected(link) if !link.is_lost() => return Ok(link),
                State::Connected(_) | State::Connecting => {}
                State::Lost(err) => return Err(err),
                State::Idle(Some(err)) if started => return Err(err),
                State::Idle(_) => {
                    started = true;
                    self.inner.connect_lazily();
                    continue;
                }
            }
            if state.changed().await.is_err() {
                return Err(ClientError::Closed);
            }
        }
    }
}

impl Inner {
    /// Starts a link over `transport` and runs the handshake; on failure the link is shut
    /// down (a spawned server is terminated).
    async fn open(
        &self,
        transport: Transport,
        resume: Option<&str>,
    ) -> Result<Arc<Link>, ClientError> {
        let owner: Weak<dyn LinkOwner> = self.me.clone();
        let link = Link::start(transport, Arc::clone(&self.router), owner);
        let timeout = self.options.initialize_timeout;
        match link
            .initialize(&self.options.client_name, resume, timeout)
            .await
            .and_then(|response| self.remember(response))
        {
            Ok(()) => Ok(link),
            Err(err) => {
                link.shutdown(err.clone());
                Err(err)
            }
        }
    }

    /// Keeps the first `initialize` result; a later one must name the same session.
    fn remember(&self, response: InitializeResponse) -> Result<(), ClientError> {
        let mut session = lock(&self.session);
        match &*session {
            Some(first) if first.session_id != response.session_id => {
                Err(ClientError::Protocol(format!(
                    "initialize answered session {}, but this client's session is {}",
                    response.session_id, first.session_id
                )))
            }
            Some(_) => Ok(()),
            None => {
                *session = Some(response);
                Ok(())
            }
        }
    }

    /// Makes `link` the live connection. A link lost before this point was ignored by
    /// `link_lost` (it was not live yet), so that case is handled here.
    fn install(&self, link: Arc<Link>) {
        self.state.send_replace(State::Connected(Arc::clone(&link)));
        if let Some(error) = link.lost() {
            self.link_lost(&link, error);
        }
    }

    fn session_id(&self) -> Option<String> {
        lock(&self.session)
            .as_ref()
            .map(|session| session.session_id.clone())
    }

    /// Idle → Connecting, and connect in the background (a lazy remote client's first use).
    fn connect_lazily(&self) {
        let claimed = self.state.send_if_modified(|state| {
            if matches!(state, State::Idle(_)) {
                *state = State::Connecting;
                true
            } else {
                false
            }
        });
        let (true, Some(target)) = (claimed, self.remote.clone()) else {
            return;
        };
        let me = self.me.clone();
        tokio::spawn(async move {
            let Some(inner) = me.upgrade() else {
                return;
            };
            let resume = inner
                .session_id()
                .or_else(|| inner.options.resume_session_id.clone());
            let opened = match Transport::connect(&target).await {
                Ok(transport) => inner.open(transport, resume.as_deref()).await,
                Err(err) => Err(err),
            };
            match opened {
                Ok(link) => inner.install(link),
                Err(err) => {
                    inner.state.send_replace(State::Idle(Some(err)));
                }
            }
        });
    }
}

impl LinkOwner for Inner {
    fn link_lost(&self, link: &Arc<Link>, error: ClientError) {
        let reconnect = self.remote.is_some() && self.session_id().is_some();
        let ours = self.state.send_if_modified(|state| match state {
            State::Connected(current) if Arc::ptr_eq(current, link) => {
                *state = if reconnect {
                    State::Connecting
                } else {
                    State::Lost(disconnected(&error))
                };
                true
            }
            _ => false,
        });
        if !ours {
            return;
        }
        tracing::debug!("connection lost: {error}");
        if reconnect {
            tokio::spawn(resume::reconnect(self.me.clone(), error));
        } else {
            self.router.fail_processes(&disconnected(&error));
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let State::Connected(link) = &*self.state.borrow() {
            link.shutdown(ClientError::Closed);
        }
        self.router.fail_processes(&ClientError::Closed);
        self.router.fail_streams(&ClientError::Closed);
        self.router.fail_watches(&ClientError::Closed);
    }
}

/// The error a lost connection leaves behind: always [`ClientError::Disconnected`].
fn disconnected(error: &ClientError) -> ClientError {
    match error {
        ClientError::Disconnected(_) => error.clone(),
        other => ClientError::Disconnected(other.to_string()),
    }
}

/// Methods that may safely be sent again when their answer was lost with the connection.
fn idempotent(method: &str) -> bool {
    use crate::protocol::*;
    matches!(
        method,
        ENVIRONMENT_INFO
            | ENVIRONMENT_STATUS
            | PLUGIN_LIST
            | PROCESS_READ
            | FS_READ_FILE
            | FS_GET_METADATA
            | FS_CANONICALIZE
            | FS_READ_DIRECTORY
            | FS_WALK
    )
}
