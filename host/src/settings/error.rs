//! Why wexec refuses to start with a command line.

use crate::config::ConfigError;
use crate::grants::PatternError;
use crate::runtime::LoadError;

/// A command line wexec refuses to start with. Messages are docs/protocol.md §3.1's texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupError {
    /// `ws://` with something other than a literal IP and port.
    #[error("invalid websocket --listen URL `{0}`; expected `ws://IP:PORT`")]
    InvalidWebSocketUrl(String),
    /// Neither stdio nor ws.
    #[error("unsupported --listen URL `{0}`; expected `ws://IP:PORT` or `stdio`")]
    UnsupportedListenUrl(String),
    /// `wexec mcp` with an `http://` URL that is not `http://IP:PORT/PATH`.
    #[error("invalid --listen URL `{0}`; expected `http://IP:PORT/PATH` with a literal IP")]
    InvalidHttpUrl(String),
    /// `wexec mcp` with something other than stdio or `http://IP:PORT/PATH`.
    #[error(
        "unsupported --listen URL `{0}` for wexec mcp; expected `http://IP:PORT/PATH` or `stdio`"
    )]
    UnsupportedMcpListenUrl(String),
    /// A non-loopback address without a token.
    #[error("refusing to listen on {0} without a token; set --token or WEXEC_TOKEN")]
    TokenRequired(String),
    /// `--token ""`.
    #[error("--token (or WEXEC_TOKEN) must not be empty")]
    EmptyToken,
    /// Inconsistent `--ws-auth` options (Codex's texts where it has them).
    #[error("{0}")]
    WsAuth(String),
    /// An `--fs-root` that does not exist or is not a directory.
    #[error("--fs-root `{path}` is not usable: {reason}")]
    BadFsRoot {
        /// The root as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// A bad `--allow-host` pattern.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// A bad configuration file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A plugin file that cannot be read.
    #[error(transparent)]
    Plugin(#[from] LoadError),
    /// A limit that cannot work.
    #[error("{0}")]
    Limit(String),
    /// A `--writable-root` or `--readable-root` that is not a directory.
    #[error("{option} `{path}` is not usable: {reason}")]
    BadRoot {
        /// The option.
        option: &'static str,
        /// The root as given.
        path: String,
        /// Why.
        reason: String,
    },
}
