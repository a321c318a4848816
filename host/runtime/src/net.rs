//! The network a plugin reaches through the `http` interface: one shared client.

/// The shared HTTP client: connection pooling, no automatic redirects, no proxies. Built on
/// the first request, not at startup: loading the system's root certificates reads and parses
/// every file of the certificate directory (a large part of wexec's start before it was
/// deferred), which a session that never reaches the network should not wait for.
#[derive(Debug, Default)]
pub struct Client(tokio::sync::OnceCell<reqwest::Client>);

impl Client {
    /// The client, built on first use (on the blocking pool: it reads files); a failure is
    /// reported to this request and retried by the next.
    pub async fn get(&self) -> Result<&reqwest::Client, String> {
        self.0
            .get_or_try_init(|| async {
                tokio::task::spawn_blocking(|| {
                    // Several callers may race to install the process-wide provider; one wins,
                    // the rest find it installed.
                    let _ = rustls::crypto::ring::default_provider().install_default();
                    reqwest::Client::builder()
                        .redirect(reqwest::redirect::Policy::none())
                        .no_proxy()
                        .build()
                        .map_err(|err| format!("cannot set up the HTTP client: {err}"))
                })
                .await
                .map_err(|err| format!("cannot set up the HTTP client: {err}"))?
            })
            .await
    }
}
