//! Streamable HTTP for the MCP face (`wexec mcp --listen http://IP:PORT/PATH`), with the
//! WebSocket listener's rules (docs/protocol.md §3.3): a request with `Origin` (a browser) is
//! refused with 403; with a token configured, every request presents it as a bearer token
//! (401 otherwise); without one, the listener is on loopback and admits only connections from
//! wexec's own user or root. The protocol is served by `rmcp`'s `StreamableHttpService`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};

use super::door::Door;
use super::face::Face;
use crate::server::{ListenError, ServerState};
use crate::transport::websocket::credential::Credential;
use crate::transport::websocket::http::bearer_matches;

type Body = BoxBody<Bytes, Infallible>;
type Service = StreamableHttpService<Face, LocalSessionManager>;

/// What every request on the listener shares.
struct Endpoint {
    path: String,
    credential: Option<Credential>,
    service: Service,
}

/// Serves MCP over Streamable HTTP on `addr` at `path` until `shutdown`. The bound URL is the
/// first line on stdout. Every client shares one session: the listener's processes live until
/// they end, are terminated, or wexec stops.
pub async fn serve_http(
    server: Arc<ServerState>,
    addr: SocketAddr,
    path: String,
    credential: Option<Credential>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ListenError> {
    let (listener, bound) = crate::server::bind_guarded(addr).await?;
    let door =
        Door::open(Arc::clone(&server), format!("wexec mcp http {bound}")).map_err(|error| {
            ListenError::Bind {
                addr,
                source: std::io::Error::other(error.message),
            }
        })?;
    let mut config = StreamableHttpServerConfig::default().with_json_response(true);
    if !bound.ip().is_loopback() {
        // Off loopback a token is mandatory and browsers are refused: the Host check guards
        // against DNS rebinding, which neither lets through.
        config = config.disable_allowed_hosts();
    }
    // A handler per SDK session (each with its own subscriptions), all on the listener's door.
    let face_door = Arc::clone(&door);
    let service = StreamableHttpService::new(
        move || Ok(Face::new(Arc::clone(&face_door))),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let endpoint = Arc::new(Endpoint {
        path,
        credential,
        service,
    });
    crate::server::announce(&format!("http://{bound}{}", endpoint.path));
    tracing::info!("serving MCP on http://{bound}{}", endpoint.path);
    tokio::select! {
        () = accept_loop(listener, &server, &endpoint) => {}
        () = shutdown => {}
    }
    door.close().await;
    server.shutdown().await;
    Ok(())
}

async fn accept_loop(listener: TcpListener, server: &Arc<ServerState>, endpoint: &Arc<Endpoint>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!("accept failed: {err}");
                tokio::time::sleep(crate::server::ACCEPT_ERROR_BACKOFF).await;
                continue;
            }
        };
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "cannot set TCP_NODELAY: {err}");
        }
        let Some(slot) = server.connections.take() else {
            tracing::warn!(%peer, "refusing an HTTP connection: wexec serves --max-connections {} already", server.connections.limit());
            continue;
        };
        let endpoint = Arc::clone(endpoint);
        tokio::spawn(async move {
            let _slot = slot;
            serve_connection(stream, peer, endpoint).await;
        });
    }
}

async fn serve_connection(stream: TcpStream, peer: SocketAddr, endpoint: Arc<Endpoint>) {
    // Without a token only wexec's own user (or root) may be on the other end.
    if endpoint.credential.is_none() && !crate::transport::websocket::own_user(&stream, peer).await
    {
        tracing::warn!(%peer, "refusing an HTTP connection from another user on a tokenless listener");
        return;
    }
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let endpoint = Arc::clone(&endpoint);
        async move { Ok::<_, Infallible>(endpoint.handle(request).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(err) = served {
        tracing::debug!(%peer, "HTTP connection ended: {err}");
    }
}

impl Endpoint {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if request.headers().contains_key(http::header::ORIGIN) {
            return status(StatusCode::FORBIDDEN, "browsers may not use wexec");
        }
        if request.uri().path() != self.path {
            return status(StatusCode::NOT_FOUND, "not found");
        }
        if let Some(credential) = &self.credential {
            let presented = request.headers().get(http::header::AUTHORIZATION);
            if !bearer_matches(presented.map(http::HeaderValue::as_bytes), credential) {
                let mut response = status(StatusCode::UNAUTHORIZED, "a bearer token is required");
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer"),
                );
                return response;
            }
        }
        let mut service = self.service.clone();
        match tower_service::Service::call(&mut service, request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = code;
    response
}
