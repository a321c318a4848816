//! The one error type of the client.

use std::time::Duration;

/// What went wrong talking to a wexec (or any exec-server) host.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The server command could not be started.
    #[error("failed to spawn exec server `{program}`: {reason}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        reason: String,
    },
    /// The WebSocket connection could not be opened.
    #[error("failed to connect to {url}: {reason}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The WebSocket connection did not open in time.
    #[error("connecting to {url} timed out after {timeout:?}")]
    ConnectTimeout {
        /// The URL.
        url: String,
        /// The connect timeout.
        timeout: Duration,
    },
    /// `initialize` was not answered in time.
    #[error("initialize was not answered within {0:?}")]
    InitializeTimeout(Duration),
    /// The client was closed (dropped or shut down) by its owner.
    #[error("the client is closed")]
    Closed,
    /// The connection to the server was lost.
    #[error("disconnected from the exec server: {0}")]
    Disconnected(String),
    /// Params could not be encoded or a result could not be decoded.
    #[error("JSON error: {0}")]
    Json(String),
    /// The server answered with an error.
    #[error("server error {code}: {message}")]
    Server {
        /// JSON-RPC error code.
        code: i64,
        /// The server's message.
        message: String,
        /// `error.data`, when a plugin supplied it.
        data: Option<serde_json::Value>,
    },
    /// The server broke the protocol (malformed message, unexpected answer).
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The server's JSON-RPC error code, if this is a server error.
    pub fn code(&self) -> Option<i64> {
        match self {
            Self::Server { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when the connection is gone (the call may or may not have reached the server).
    pub fn is_disconnect(&self) -> bool {
        matches!(self, Self::Disconnected(_) | Self::Closed)
    }
}

impl From<serde_json::Error> for ClientError {
    fn from(err: serde_json::Error) -> Self {
        Self::Json(err.to_string())
    }
}
