//! What a network listener's clients must present: `--token` (or `WEXEC_TOKEN`), or Codex's
//! `--ws-auth capability-token` with a token file or digest (docs/protocol.md §3.1).

use super::{Listen, StartupError};
use crate::cli::{ServeOptions, WsAuth};
use crate::transport::websocket::credential::Credential;

impl ServeOptions {
    /// The WebSocket credential: `--token`, or `--ws-auth capability-token` with a token file
    /// or digest (docs/protocol.md §3.1).
    pub(super) fn credential(&self, listen: &Listen) -> Result<Option<Credential>, StartupError> {
        let refuse = |text: &str| Err(StartupError::WsAuth(text.to_owned()));
        let codex_flags = self.ws_token_file.is_some() || self.ws_token_sha256.is_some();
        let Some(mode) = self.ws_auth else {
            if codex_flags {
                return refuse("websocket auth flags require `--ws-auth capability-token`");
            }
            return match self.token.as_deref() {
                Some("") => Err(StartupError::EmptyToken),
                token => Ok(token.map(|token| Credential::Token(token.to_owned()))),
            };
        };
        if mode == WsAuth::SignedBearerToken {
            return refuse(
                "--ws-auth signed-bearer-token is not supported by wexec; use --ws-auth capability-token",
            );
        }
        if self.token.is_some() {
            return refuse("--token (or WEXEC_TOKEN) and --ws-auth are mutually exclusive");
        }
        if *listen == Listen::Stdio {
            return refuse("WebSocket auth requires a WebSocket listener, not stdio");
        }
        match (&self.ws_token_file, &self.ws_token_sha256) {
            (Some(_), Some(_)) => {
                refuse("`--ws-token-file` and `--ws-token-sha256` are mutually exclusive")
            }
            (None, None) => refuse(
                "`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` is set",
            ),
            (None, Some(hex)) => match Credential::from_hex_digest(hex) {
                Some(credential) => Ok(Some(credential)),
                None => refuse("--ws-token-sha256 must be a 64-character hex SHA-256 digest"),
            },
            (Some(file), None) => {
                let text = std::fs::read_to_string(file).map_err(|err| {
                    StartupError::WsAuth(format!(
                        "failed to read websocket auth secret {}: {err}",
                        file.display()
                    ))
                })?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(StartupError::WsAuth(format!(
                        "websocket auth secret {} must not be empty",
                        file.display()
                    )));
                }
                Ok(Some(Credential::Token(token.to_owned())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::options;
    use crate::settings::Face;
    use pretty_assertions::assert_eq;

    #[test]
    fn non_loopback_needs_a_token() {
        for url in ["ws://0.0.0.0:80", "ws://192.0.2.1:80", "ws://[::]:80"] {
            let err = options(&["--listen", url])
                .settings(Face::Codex)
                .unwrap_err();
            assert_eq!(err, StartupError::TokenRequired(url.to_owned()));
            assert_eq!(
                err.to_string(),
                format!("refusing to listen on {url} without a token; set --token or WEXEC_TOKEN")
            );
            assert!(
                options(&["--listen", url, "--token", "t"])
                    .settings(Face::Codex)
                    .is_ok()
            );
        }
        for url in ["ws://127.0.0.1:0", "ws://127.8.9.10:0", "ws://[::1]:0"] {
            assert!(
                options(&["--listen", url]).settings(Face::Codex).is_ok(),
                "{url}"
            );
        }
        assert_eq!(
            options(&["--token", ""]).settings(Face::Codex).unwrap_err(),
            StartupError::EmptyToken
        );
    }
}
