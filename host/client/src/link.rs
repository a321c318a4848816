//! One connection to a server: a writer task, a reader task that routes every inbound message
//! as it arrives, and the table of requests awaiting their response.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use super::error::ClientError;
use super::router::Router;
use super::sync::lock;
use super::transport::{Inbound, ServerChild, Transport};
use crate::protocol::{INITIALIZE, INITIALIZED, InitializeParams, InitializeResponse};

/// Lines waiting for the writer; small, so a caller feels the server's backpressure.
const OUTBOUND_QUEUE: usize = 256;

type Reply = Result<Box<RawValue>, ClientError>;

/// Told when a link is lost, so the owner can fail or recover what depended on it.
pub(crate) trait LinkOwner: Send + Sync + 'static {
    /// The link ended with `error` (it was not shut down by its owner).
    fn link_lost(&self, link: &Arc<Link>, error: ClientError);
}

/// A live connection.
pub(crate) struct Link {
    outbound: mpsc::Sender<String>,
    calls: Mutex<Calls>,
    next_id: AtomicI64,
    tasks: Mutex<Vec<AbortHandle>>,
    child: Mutex<Option<ServerChild>>,
}

#[derive(Default)]
struct Calls {
    pending: HashMap<i64, oneshot::Sender<Reply>>,
    lost: Option<ClientError>,
}

impl Link {
    /// Starts the reader and writer tasks over `transport`. Inbound messages are routed from
    /// now on, so notifications that precede the initialize response never block it.
    pub(crate) fn start(
        transport: Transport,
        router: Arc<Router>,
        owner: Weak<dyn LinkOwner>,
    ) -> Arc<Link> {
        let (outbound, queue) = mpsc::channel(OUTBOUND_QUEUE);
        let Transport {
            reader,
            writer,
            child,
        } = transport;
        let link = Arc::new(Link {
            outbound,
            calls: Mutex::new(Calls::default()),
            next_id: AtomicI64::new(1),
            tasks: Mutex::new(Vec::new()),
            child: Mutex::new(child),
        });
        let write_task = tokio::spawn(writer.run(queue));
        let weak = Arc::downgrade(&link);
        let read_task = tokio::spawn(async move {
            let error = reader
                .run(|message| Link::dispatch(&weak, &router, message))
                .await;
            if let Some(link) = weak.upgrade() {
                link.fail(error.clone());
                router.fail_streams(&error);
                router.fail_watches(&error);
                if let Some(owner) = owner.upgrade() {
                    owner.link_lost(&link, error);
                }
            }
        });
        lock(&link.tasks).extend([write_task.abort_handle(), read_task.abort_handle()]);
        link
    }

    /// Sends `initialize` (resuming `resume` if given) and then `initialized`.
    pub(crate) async fn initialize(
        &self,
        client_name: &str,
        resume: Option<&str>,
        timeout: Duration,
    ) -> Result<InitializeResponse, ClientError> {
        let params = InitializeParams {
            client_name: client_name.to_owned(),
            resume_session_id: resume.map(str::to_owned),
        };
        let result = tokio::time::timeout(timeout, self.request(INITIALIZE, &params))
            .await
            .map_err(|_| ClientError::InitializeTimeout(timeout))??;
        let response: InitializeResponse = serde_json::from_str(result.get())
            .map_err(|err| ClientError::Protocol(format!("bad initialize result: {err}")))?;
        self.notify(INITIALIZED, &serde_json::json!({})).await?;
        Ok(response)
    }

    /// Sends a request and waits for its response.
    pub(crate) async fn request<P: Serialize + ?Sized>(&self, method: &str, params: &P) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let line = serde_json::to_string(&Outgoing {
            jsonrpc: "2.0",
            id: Some(id),
            method,
            params,
        })?;
        let (reply, answer) = oneshot::channel();
        {
            let mut calls = lock(&self.calls);
            if let Some(error) = &calls.lost {
                return Err(error.clone());
            }
            calls.pending.insert(id, reply);
        }
        if self.outbound.send(line).await.is_err() {
            lock(&self.calls).pending.remove(&id);
            return Err(self.lost_error());
        }
        match answer.await {
            Ok(reply) => reply,
            Err(_) => Err(self.lost_error()),
        }
    }

    /// Sends a notification.
    pub(crate) async fn notify<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(), ClientError> {
        let line = serde_json::to_string(&Outgoing {
            jsonrpc: "2.0",
            id: None,
            method,
            params,
        })?;
        self.outbound
            .send(line)
            .await
            .map_err(|_| self.lost_error())
    }

    /// Whether the connection is gone.
    pub(crate) fn is_lost(&self) -> bool {
        lock(&self.calls).lost.is_some()
    }

    /// Why the connection is gone, if it is.
    pub(crate) fn lost(&self) -> Option<ClientError> {
        lock(&self.calls).lost.clone()
    }

    /// Ends the connection on the owner's behalf: stops both tasks (closing the server's
    /// stdin or the socket) and terminates a spawned server. Pending calls fail with `error`.
    pub(crate) fn shutdown(&self, error: ClientError) {
        self.fail(error);
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        drop(lock(&self.child).take());
    }

    fn lost_error(&self) -> ClientError {
        lock(&self.calls)
            .lost
            .clone()
            .unwrap_or_else(|| ClientError::Disconnected("connection closed".into()))
    }

    /// Marks the link lost and fails every pending call.
    fn fail(&self, error: ClientError) {
        let pending = {
            let mut calls = lock(&self.calls);
            if calls.lost.is_none() {
                calls.lost = Some(error.clone());
            }
            std::mem::take(&mut calls.pending)
        };
        for (_, reply) in pending {
            let _ = reply.send(Err(error.clone()));
        }
    }

    /// Routes one inbound message. An error ends the connection: the server broke the protocol.
    fn dispatch(link: &Weak<Link>, router: &Router, message: &str) -> Result<(), ClientError> {
        let incoming: Incoming<'_> = serde_json::from_str(message).map_err(|err| {
            ClientError::Protocol(format!(
                "malformed message from server: {err}: {}",
                excerpt(message)
            ))
        })?;
        match (incoming.id, incoming.method) {
            (None, Some(method)) => router.on_notification(&method, incoming.params),
            (Some(id), None) => {
                let Some(link) = link.upgrade() else {
                    return Ok(());
                };
                let reply = match (incoming.result, incoming.error) {
                    (_, Some(error)) => Err(ClientError::Server {
                        code: error.code,
                        message: error.message,
                        data: error.data,
                    }),
                    (Some(result), None) => Ok(result.to_owned()),
                    (None, None) => Err(ClientError::Protocol(format!(
                        "response without result or error: {}",
                        excerpt(message)
                    ))),
                };
                let waiter = id
                    .get()
                    .parse::<i64>()
                    .ok()
                    .and_then(|id| lock(&link.calls).pending.remove(&id));
                match waiter {
                    Some(waiter) => {
                        let _ = waiter.send(reply);
                    }
                    None => tracing::warn!(
                        id = id.get(),
                        "response to no pending request: {}",
                        excerpt(message)
                    ),
                }
                Ok(())
            }
            (Some(_), Some(method)) => Err(ClientError::Protocol(format!(
                "the server sent a request ({method}); exec servers send none"
            ))),
            (None, None) => Err(ClientError::Protocol(format!(
                "message is neither a response nor a notification: {}",
                excerpt(message)
            ))),
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

/// Where inbound messages go; implemented by the transports' readers.
pub(crate) trait Dispatch: FnMut(&str) -> Result<(), ClientError> + Send {}
impl<F: FnMut(&str) -> Result<(), ClientError> + Send> Dispatch for F {}

impl Inbound {
    /// Reads messages until the connection ends or `dispatch` refuses one; returns why it ended.
    async fn run(mut self, mut dispatch: impl Dispatch) -> ClientError {
        loop {
            match self.next().await {
                Ok(message) => {
                    if let Err(error) = dispatch(&message) {
                        return error;
                    }
                }
                Err(error) => return error,
            }
        }
    }
}

#[derive(Serialize)]
struct Outgoing<'a, P: ?Sized> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    method: &'a str,
    params: &'a P,
}

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct WireError {
    code: i64,
    message: String,
    #[serde(default)]
    data: Option<serde_json::Value>,
}

/// A member that is present, even as `null` (a `null` result is still a result).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The start of a message, for error texts.
fn excerpt(message: &str) -> String {
    const MAX: usize = 200;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}
