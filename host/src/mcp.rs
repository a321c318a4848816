//! The MCP face (docs/mcp.md): `wexec mcp` serves the Model Context Protocol on stdio or on
//! Streamable HTTP, as a second front door over the same server as the Codex face. Its tools are
//! requests through a [`door::Door`]; the protocol itself is the `rmcp` SDK's, with a codec of
//! wexec's own in front of it on stdio for the requests agents send all the time.

pub mod catalog;
pub mod door;
pub mod face;
mod http;
pub mod progress;
pub mod resources;
mod stdio;
pub mod subscriptions;
pub mod tools;

use std::future::Future;
use std::sync::Arc;

use crate::server::ServerState;

pub use self::http::serve_http;

/// Serves one MCP client on stdin/stdout until end of input or `shutdown` ([`stdio`]), then
/// ends its session (terminating its processes) and every other. `spin`: look for a quick
/// client's next request before sleeping, as the Codex face does.
pub async fn serve_stdio(
    server: Arc<ServerState>,
    spin: bool,
    shutdown: impl Future<Output = ()>,
) -> Result<(), std::io::Error> {
    let (failed, handshake_failed) = tokio::sync::oneshot::channel();
    let face = move |connection, server| stdio::serve(connection, server, failed);
    let stop = async {
        tokio::select! {
            () = shutdown => {}
            Ok(()) = handshake_failed => {}
        }
    };
    crate::server::serve_stdio(server, spin, face, stop).await
}
