//! The MCP face (docs/mcp.md): `wexec mcp` serves the Model Context Protocol on stdio or on
//! Streamable HTTP, as a second front door over the same server as the Codex face. Its tools are
//! requests through a [`door::Door`]; the protocol itself is the `rmcp` SDK's.

pub mod catalog;
pub mod door;
pub mod face;
mod http;
pub mod progress;
pub mod resources;
pub mod subscriptions;
pub mod tools;

use std::future::Future;
use std::sync::Arc;

use rmcp::ServiceExt;

use self::door::Door;
use self::face::Face;
use crate::server::ServerState;

pub use self::http::serve_http;

/// Serves one MCP client on stdin/stdout until end of input or `shutdown`, then ends its
/// session (terminating its processes) and every other.
pub async fn serve_stdio(
    server: Arc<ServerState>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), std::io::Error> {
    let door = Door::open(Arc::clone(&server), "wexec mcp stdio".to_owned())
        .map_err(|error| std::io::Error::other(error.message))?;
    let face = Face::new(Arc::clone(&door));
    let serving = async {
        // Non-blocking pipes when the client gave pipes (as MCP clients do): no hand-off to a
        // blocking thread per read and per write.
        match face.serve(rmcp::transport::stdio_pipes()).await {
            Ok(running) => {
                // A reload that changed the plugins may have changed the tool list.
                let peer = running.peer().clone();
                let mut changed = server.plugins_changed.subscribe();
                let notifier = tokio::spawn(async move {
                    while changed.changed().await.is_ok() {
                        if peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                    }
                });
                let waited = running.waiting().await;
                notifier.abort();
                if let Err(err) = waited {
                    tracing::warn!("the MCP session ended abnormally: {err}");
                }
            }
            Err(err) => tracing::warn!("the MCP client did not complete its handshake: {err}"),
        }
    };
    tokio::select! {
        () = serving => tracing::info!("end of input"),
        () = shutdown => {}
    }
    door.close().await;
    server.shutdown().await;
    Ok(())
}
