//! `--listen`: where wexec serves, and which face speaks there.

use std::net::{IpAddr, SocketAddr};

use super::StartupError;

/// Which protocol wexec speaks to its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// The Codex exec-server protocol (docs/protocol.md).
    Codex,
    /// The Model Context Protocol (docs/mcp.md).
    Mcp,
}

/// Where wexec serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// One connection on stdin/stdout.
    Stdio,
    /// A WebSocket server on this address (the Codex face).
    WebSocket(SocketAddr),
    /// A Streamable HTTP endpoint: this address, this path (the MCP face).
    Http(SocketAddr, String),
}

impl Listen {
    /// The address a network listener binds, if any.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            Self::Stdio => None,
            Self::WebSocket(addr) | Self::Http(addr, _) => Some(*addr),
        }
    }
}

/// Parses `--listen` for `face`: `stdio://` or `stdio`; for the Codex face `ws://IP:PORT`, for
/// the MCP face `http://IP:PORT/PATH` (default path `/mcp`); each with a literal IP (IPv6
/// bracketed).
pub fn parse_listen(url: &str, face: Face) -> Result<Listen, StartupError> {
    if url == "stdio" || url == "stdio://" {
        return Ok(Listen::Stdio);
    }
    let (scheme, unsupported): (_, fn(String) -> StartupError) = match face {
        Face::Codex => ("ws://", StartupError::UnsupportedListenUrl),
        Face::Mcp => ("http://", StartupError::UnsupportedMcpListenUrl),
    };
    let Some(rest) = url.strip_prefix(scheme) else {
        return Err(unsupported(url.to_owned()));
    };
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let invalid = || match face {
        Face::Codex => StartupError::InvalidWebSocketUrl(url.to_owned()),
        Face::Mcp => StartupError::InvalidHttpUrl(url.to_owned()),
    };
    let addr: SocketAddr = authority.parse().map_err(|_| invalid())?;
    // `SocketAddr` also parses forms like `[::1%eth0]:80`; insist on a plain literal IP.
    let host = authority.rsplit_once(':').map_or("", |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<IpAddr>().ok() != Some(addr.ip()) {
        return Err(invalid());
    }
    match face {
        Face::Codex if path.is_empty() || path == "/" => Ok(Listen::WebSocket(addr)),
        Face::Codex => Err(invalid()),
        Face::Mcp => {
            let path = if path.is_empty() || path == "/" {
                "/mcp"
            } else {
                path
            };
            if path.contains(['?', '#']) {
                return Err(unsupported(url.to_owned()));
            }
            Ok(Listen::Http(addr, path.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, Options};
    use clap::Parser;
    use pretty_assertions::assert_eq;

    #[test]
    fn listen_urls() {
        let ok = [
            ("stdio", Listen::Stdio),
            ("stdio://", Listen::Stdio),
            (
                "ws://127.0.0.1:0",
                Listen::WebSocket("127.0.0.1:0".parse().unwrap()),
            ),
            (
                "ws://[::1]:80",
                Listen::WebSocket("[::1]:80".parse().unwrap()),
            ),
            (
                "ws://0.0.0.0:8080/",
                Listen::WebSocket("0.0.0.0:8080".parse().unwrap()),
            ),
        ];
        for (url, listen) in ok {
            assert_eq!(parse_listen(url, Face::Codex), Ok(listen), "{url}");
        }
        for url in [
            "ws://localhost:80",
            "ws://127.0.0.1",
            "ws://127.0.0.1:99999",
            "ws://::1:80",
            "ws://",
        ] {
            assert_eq!(
                parse_listen(url, Face::Codex),
                Err(StartupError::InvalidWebSocketUrl(url.to_owned())),
                "{url}"
            );
        }
        for url in ["http://127.0.0.1:80", "wss://127.0.0.1:1", "", "stdio:/"] {
            assert_eq!(
                parse_listen(url, Face::Codex),
                Err(StartupError::UnsupportedListenUrl(url.to_owned())),
                "{url}"
            );
        }
    }

    #[test]
    fn mcp_listen_urls() {
        let http = |addr: &str, path: &str| Listen::Http(addr.parse().unwrap(), path.to_owned());
        for (url, listen) in [
            ("stdio://", Listen::Stdio),
            ("http://127.0.0.1:0", http("127.0.0.1:0", "/mcp")),
            ("http://127.0.0.1:0/", http("127.0.0.1:0", "/mcp")),
            (
                "http://[::1]:8080/tools/mcp",
                http("[::1]:8080", "/tools/mcp"),
            ),
        ] {
            assert_eq!(parse_listen(url, Face::Mcp), Ok(listen), "{url}");
        }
        for url in [
            "ws://127.0.0.1:0",
            "https://127.0.0.1:1/mcp",
            "http://127.0.0.1:0/a?b",
        ] {
            assert_eq!(
                parse_listen(url, Face::Mcp),
                Err(StartupError::UnsupportedMcpListenUrl(url.to_owned())),
                "{url}"
            );
        }
        assert_eq!(
            parse_listen("http://localhost:80/mcp", Face::Mcp),
            Err(StartupError::InvalidHttpUrl(
                "http://localhost:80/mcp".to_owned()
            ))
        );
        assert!(parse_listen("ws://127.0.0.1:80/path", Face::Codex).is_err());
        let mcp = Options::try_parse_from(["wexec", "mcp", "--fs-root", "/tmp", "--no-processes"]);
        match mcp.unwrap().command {
            Some(Command::Mcp(serve)) => assert!(serve.no_processes),
            other => panic!("{other:?}"),
        }
        assert!(Options::try_parse_from(["wexec", "--no-processes", "mcp"]).is_err());
    }
}
