//! A Rust client for wexec (or any Codex exec-server): connect over a spawned command's stdio or
//! a WebSocket, call every method with typed params and results, follow processes through
//! handles whose events arrive strictly in `seq` order, stream HTTP bodies, and — for a remote
//! client — reconnect and resume the session after the connection drops.
//!
//! ```no_run
//! use wexec_client::protocol::ProcessStartParams;
//! use wexec_client::{Client, ClientOptions, StdioCommand};
//!
//! # async fn example() -> Result<(), wexec_client::ClientError> {
//! let client = Client::connect_stdio(
//!     StdioCommand::new("wexec").args(["--fs-root", "/tmp"]),
//!     ClientOptions::new("my-agent"),
//! )
//! .await?;
//! let argv = vec!["echo".to_owned(), "hello".to_owned()];
//! let process = client
//!     .start_process(ProcessStartParams::new("p1", argv, "/tmp"))
//!     .await?;
//! let output = process.wait().await?;
//! assert_eq!(output.stdout, b"hello\n");
//! assert_eq!(output.exit_code, Some(0));
//! # Ok(())
//! # }
//! ```
//!
//! Ownership: the last clone of a stdio [`Client`] to go away closes the server's stdin and asks
//! its process group to stop (SIGTERM, then SIGKILL after a grace period); a [`ProcessHandle`]
//! keeps its client alive.

pub use wexec_protocol as protocol;

mod calls;
mod client;
mod error;
mod event;
mod http;
mod link;
mod process;
mod reorder;
mod route;
mod router;
mod sync;
mod transport;
mod watch;

pub use client::{Client, ClientOptions};
pub use error::ClientError;
pub use event::ProcessEvent;
pub use http::{HttpBody, HttpReply};
pub use process::{ProcessHandle, ProcessOutput};
pub use transport::{StdioCommand, WebSocketTarget};
pub use watch::MissingWatch;
