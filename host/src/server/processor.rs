//! The per-connection loop: reads messages, runs the handshake, and hands requests to the
//! dispatcher. Until `initialized` is processed, messages are handled one at a time in arrival
//! order, so gating errors keep wire order (docs/protocol.md §5.2, §6).

use std::sync::Arc;

use tokio::sync::watch;

use super::ServerState;
use super::context::{ConnectionContext, RequestContext};
use super::dispatch::Dispatcher;
use super::methods::{self, Method, Notification};
use super::reply::Reply;
use super::session::SessionHandle;
use crate::protocol::{InitializeParams, InitializeResponse};
use crate::rpc::parse::{Incoming, Request, parse_message};
use crate::rpc::{RequestId, RpcError, RpcResult, encode_reply, to_result};
use crate::transport::budget::Held;
use crate::transport::{Connection, Received};

enum Phase {
    AwaitingInitialize,
    AwaitingInitialized(SessionHandle),
    Ready(SessionHandle),
}

impl Phase {
    fn session(&self) -> Option<&SessionHandle> {
        match self {
            Self::AwaitingInitialize => None,
            Self::AwaitingInitialized(session) | Self::Ready(session) => Some(session),
        }
    }
}

enum Flow {
    Continue,
    Close,
}

struct Processor {
    server: Arc<ServerState>,
    connection: Arc<ConnectionContext>,
    phase: Phase,
    dispatcher: Dispatcher,
    /// Run this message's job inline if it can: no other message was waiting when it was read,
    /// or the machine has one CPU.
    inline: bool,
    /// The message being handled is a request for a method wexec serves: work, which may keep
    /// stdio's spin going (`transport/stdio/spin.rs`); blank, malformed and unknown ones may not.
    work: bool,
}

/// Serves one connection until the client leaves or breaks the protocol. A detachable
/// (WebSocket) session is then detached; a stdio session ends once its requests have finished.
pub async fn serve(connection: Connection, server: Arc<ServerState>) {
    let Connection {
        peer,
        mut inbound,
        outbound,
        detachable,
    } = connection;
    let (closing_tx, closing) = watch::channel(false);
    let mut processor = Processor {
        server,
        connection: Arc::new(ConnectionContext::new(peer, outbound, closing)),
        phase: Phase::AwaitingInitialize,
        dispatcher: Dispatcher::new(),
        inline: false,
        work: false,
    };
    let one_cpu = crate::fast_path::one_cpu();
    loop {
        let session = processor.phase.session().cloned();
        let taken_over = async {
            match &session {
                Some(session) => session.taken_over().await,
                None => std::future::pending().await,
            }
        };
        let message = tokio::select! {
            message = inbound.recv() => message,
            () = taken_over => {
                tracing::info!(peer = processor.connection.peer, "connection evicted: its session was resumed elsewhere");
                None
            }
        };
        let Some(message) = message else { break };
        processor.inline = one_cpu || inbound.is_empty();
        processor.work = false;
        let flow = match message {
            Received::Message(bytes, held) => processor.handle(&bytes, held).await,
            Received::Refused(id, reason) => {
                let id = id.unwrap_or(RequestId::Integer(-1));
                processor
                    .reply(&id, Err(RpcError::internal_error(reason)))
                    .await
            }
        };
        if !processor.work {
            inbound.not_work();
        }
        // The first answer is out: what startup left for later may have the CPU now.
        crate::startup::settle();
        if let Flow::Close = flow {
            break;
        }
    }
    let _ = closing_tx.send(true);
    let Processor {
        phase, dispatcher, ..
    } = processor;
    match phase.session() {
        Some(session) if detachable => {
            // Requests already running finish on their own; their replies have nowhere to go.
            dispatcher.abandon();
            session.detach();
        }
        session => {
            dispatcher.drain().await;
            if let Some(session) = session {
                session.close().await;
            }
        }
    }
}

/// A request on its way to its handler.
pub struct Served {
    /// Its id.
    pub id: RequestId,
    /// The method called.
    pub method: String,
    /// Its params (`null` if absent).
    pub params: serde_json::Value,
    /// Its share of the inbound budget, held until it is answered.
    pub held: Option<Held>,
}

/// Serves `request` of `session` by `route`: takes what it reserves on arrival (answering a
/// refusal at once), then hands its job to `dispatcher`, which orders it in its lane and runs
/// it; the handler's outcome is the reply on `connection`. Every face's requests pass here,
/// so a request is served the same way whichever door it came in by.
pub async fn serve_route(
    dispatcher: &Dispatcher,
    server: &Arc<ServerState>,
    connection: &Arc<ConnectionContext>,
    session: SessionHandle,
    route: methods::Route,
    request: Served,
    inline: bool,
) {
    let Served {
        id,
        method,
        params,
        held,
    } = request;
    let admission = match route.admit.map(|admit| admit(connection, &params)) {
        None | Some(Ok(None)) => None,
        Some(Ok(Some(admission))) => Some(admission),
        Some(Err(error)) => {
            // A closed connection has nobody left to answer.
            let _ = connection
                .outbound
                .send(encode_reply(&id, &Err(error)))
                .await;
            return;
        }
    };
    let reply = Arc::new(Reply::new(id, connection.outbound.clone()));
    let ctx = RequestContext {
        server: Arc::clone(server),
        session,
        connection: Arc::clone(connection),
        method,
        reply: Arc::clone(&reply),
    };
    let lane = route.lane.key(&params);
    let job = async move {
        // Held until the call (and so, say, its stream) ends.
        let _admission = admission;
        let _held = held;
        let outcome = (route.handler)(ctx, params).await;
        // Unless a plugin already answered early.
        reply.send(&outcome).await;
    };
    dispatcher
        .dispatch_with(lane, route.exempt, job, inline, route.runs)
        .await;
}

impl Processor {
    /// Handles one message; `held`, its share of the inbound budget, is kept until its request
    /// has been answered.
    async fn handle(&mut self, bytes: &[u8], held: Held) -> Flow {
        let message = match parse_message(bytes) {
            Ok(message) => message,
            Err(malformed) => {
                let error = RpcError::invalid_request(format!(
                    "failed to parse JSON-RPC message from {}: {malformed}",
                    self.connection.peer
                ));
                return self.reply(&RequestId::Integer(-1), Err(error)).await;
            }
        };
        match message {
            Incoming::Request(request) => self.request(request, held).await,
            Incoming::Notification { method, .. }
                if methods::notification(&method) == Some(Notification::Initialized) =>
            {
                self.initialized()
            }
            Incoming::Notification { method, .. } => {
                tracing::warn!(
                    peer = self.connection.peer,
                    method,
                    "closing connection: unexpected notification"
                );
                Flow::Close
            }
            Incoming::Response { id } => {
                tracing::warn!(peer = self.connection.peer, %id, "closing connection: clients may not send responses");
                Flow::Close
            }
        }
    }

    fn initialized(&mut self) -> Flow {
        match std::mem::replace(&mut self.phase, Phase::AwaitingInitialize) {
            Phase::AwaitingInitialized(session) | Phase::Ready(session) if session.is_current() => {
                self.phase = Phase::Ready(session);
                Flow::Continue
            }
            _ => {
                tracing::warn!(
                    peer = self.connection.peer,
                    "closing connection: `initialized` without a live session"
                );
                Flow::Close
            }
        }
    }

    async fn request(&mut self, request: Request, held: Held) -> Flow {
        let Request {
            id,
            method,
            params,
            trace,
        } = request;
        if let Some(trace) = &trace {
            tracing::debug!(%id, method, %trace, "request");
        }
        let found = methods::lookup(&method, &self.server);
        self.work = found.is_some();
        let route = match found {
            None => {
                let error = RpcError::method_not_found(&method);
                return self.reply(&id, Err(error)).await;
            }
            Some(Method::Initialize) => {
                let outcome = self.initialize(params);
                return self.reply(&id, outcome).await;
            }
            Some(Method::Serve(route)) => route,
        };
        let family = route.family.name();
        let session = match &self.phase {
            Phase::AwaitingInitialize => {
                let error = RpcError::invalid_request(format!(
                    "client must call initialize before using {family} methods"
                ));
                return self.reply(&id, Err(error)).await;
            }
            Phase::AwaitingInitialized(_) => {
                let error = RpcError::invalid_request(format!(
                    "client must send initialized before using {family} methods"
                ));
                return self.reply(&id, Err(error)).await;
            }
            Phase::Ready(session) if !session.is_current() => {
                let error =
                    RpcError::invalid_request("session has been resumed by another connection");
                return self.reply(&id, Err(error)).await;
            }
            Phase::Ready(session) => session.clone(),
        };
        let served = Served {
            id,
            method,
            params,
            held: Some(held),
        };
        let inline = self.inline;
        serve_route(
            &self.dispatcher,
            &self.server,
            &self.connection,
            session,
            route,
            served,
            inline,
        )
        .await;
        Flow::Continue
    }

    fn initialize(&mut self, params: serde_json::Value) -> RpcResult {
        if !matches!(self.phase, Phase::AwaitingInitialize) {
            return Err(RpcError::invalid_request(
                "initialize may only be sent once per connection",
            ));
        }
        let params: InitializeParams = methods::decode(params)?;
        let sessions = &self.server.sessions;
        let connection = &self.connection;
        let session = match params.resume_session_id {
            Some(id) => sessions.resume(&id, connection.id, connection.port())?,
            None => sessions.open(connection.id, connection.port(), |session_id| {
                to_result(&InitializeResponse {
                    session_id: session_id.to_owned(),
                    environment_info: self.server.environment_info(),
                })
            })?,
        };
        tracing::info!(
            peer = connection.peer,
            client = params.client_name,
            session = session.session().id(),
            "initialized"
        );
        let result = session.initialize_result().to_owned();
        self.phase = Phase::AwaitingInitialized(session);
        Ok(result)
    }

    async fn reply(&self, id: &RequestId, outcome: RpcResult) -> Flow {
        match self
            .connection
            .outbound
            .send(encode_reply(id, &outcome))
            .await
        {
            Ok(()) => Flow::Continue,
            Err(_) => Flow::Close,
        }
    }
}
