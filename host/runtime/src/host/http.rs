//! The `http` interface: outbound requests to the granted hosts only. Redirects are followed
//! here, hop by hop, so every target is checked against the grants before it is contacted.
//! Proxy variables are ignored; TLS is verified against the host's trust store.

use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use wasmtime::component::Resource;

use crate::bindings::wexec::plugin::http::{Error, Header, Host, HostBody, Request, Response};
use crate::bindings::wexec::plugin::types::Capability;
use crate::resources::Body;
use crate::state::HostState;

/// Redirect hops followed at most.
pub const MAX_REDIRECTS: usize = 10;

fn invalid(message: String) -> Error {
    Error::Invalid(message)
}

/// `host:port` as the denial names it; IPv6 stays bracketed as in the URL.
fn target(url: &Url) -> (String, u16, u16) {
    let host = url.host_str().unwrap_or_default().to_owned();
    let default_port = if url.scheme() == "https" { 443 } else { 80 };
    (host, url.port().unwrap_or(default_port), default_port)
}

impl HostState {
    /// The grant check for one hop: scheme, then host and port.
    fn admit(&self, url: &Url) -> Result<(), Error> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "http/request only supports http and https URLs, got {}",
                url.scheme()
            )));
        }
        let (host, port, default_port) = target(url);
        if !self.plugin.declared(Capability::Http)
            || !self.plugin.grants.allows_host(&host, port, default_port)
        {
            return Err(Error::Denied(format!(
                "http/request to {host}:{port} is not allowed"
            )));
        }
        Ok(())
    }

    /// Performs `request`; `credentials` names the headers, besides the usual ones, dropped
    /// when a redirect leaves the origin.
    async fn exchange(
        &mut self,
        request: Request,
        credentials: &[String],
    ) -> Result<Response, Error> {
        // Validation first (docs/protocol.md §10.1 order), then the grant, then the network.
        let mut url = Url::parse(&request.url)
            .map_err(|err| invalid(format!("http/request url is invalid: {err}")))?;
        let mut method = Method::from_bytes(request.method.as_bytes())
            .map_err(|err| invalid(format!("http/request method is invalid: {err}")))?;
        let mut headers = HeaderMap::new();
        for header in &request.headers {
            let name = HeaderName::from_bytes(header.name.as_bytes())
                .map_err(|err| invalid(format!("http/request header name is invalid: {err}")))?;
            let value = HeaderValue::from_str(&header.value).map_err(|err| {
                invalid(format!(
                    "http/request header value is invalid for {}: {err}",
                    header.name
                ))
            })?;
            headers.append(name, value);
        }
        self.admit(&url)?;
        let mut body = request.body;
        let deadline = request
            .timeout_ms
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        let client = (self.shared.http.get().await).map_err(Error::Failed)?;
        let mut hops = 0;
        loop {
            let mut builder = client
                .request(method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(body) = &body {
                builder = builder.body(body.clone());
            }
            if let Some(deadline) = deadline {
                builder = builder.timeout(deadline.saturating_duration_since(Instant::now()));
            }
            let response = builder
                .send()
                .await
                .map_err(|err| Error::Failed(describe(&err)))?;
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let follow = request.follow_redirects
                && status.is_redirection()
                && status != StatusCode::NOT_MODIFIED;
            let Some(location) = location.filter(|_| follow) else {
                return Ok(self.respond(response, deadline));
            };
            hops += 1;
            if hops > MAX_REDIRECTS {
                return Err(Error::Failed(format!(
                    "more than {MAX_REDIRECTS} redirects"
                )));
            }
            let next = url.join(&location).map_err(|err| {
                Error::Failed(format!(
                    "redirect to an invalid location `{location}`: {err}"
                ))
            })?;
            self.admit(&next)?;
            if !same_origin(&url, &next) {
                // Credentials are for the origin they were written for (the browser and curl
                // rule): another scheme, host or port gets none of them.
                for sensitive in [
                    reqwest::header::AUTHORIZATION,
                    reqwest::header::COOKIE,
                    reqwest::header::PROXY_AUTHORIZATION,
                ] {
                    headers.remove(sensitive);
                }
                // A name that is no header name named nothing that was sent.
                for name in credentials {
                    if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
                        headers.remove(name);
                    }
                }
            }
            let switch_to_get = status == StatusCode::SEE_OTHER && method != Method::HEAD
                || matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                    && method == Method::POST;
            if switch_to_get {
                method = Method::GET;
                body = None;
                headers.remove(reqwest::header::CONTENT_LENGTH);
                headers.remove(reqwest::header::CONTENT_TYPE);
            }
            url = next;
        }
    }

    fn respond(&mut self, response: reqwest::Response, deadline: Option<Instant>) -> Response {
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some(Header {
                    name: name.as_str().to_owned(),
                    value: value.to_str().ok()?.to_owned(),
                })
            })
            .collect();
        let status = response.status().as_u16();
        let body = Body {
            response,
            pending: bytes::Bytes::new(),
            deadline,
        };
        // The table only refuses when full (millions of entries): a body cannot be lost here
        // in practice, but a failure must not panic.
        let body = match self.table().push(body) {
            Ok(body) => body,
            Err(err) => {
                tracing::error!("resource table full: {err}");
                Resource::new_own(u32::MAX)
            }
        };
        Response {
            status,
            headers,
            body,
        }
    }
}

/// Whether two URLs share scheme, host and port (a default port written out counts as the
/// default). Hosts compare as the URL parser normalized them (lowercase, IDNA, IPv6).
fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// reqwest's error with its causes, which carry the useful part ("connection refused").
fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return "timed out".into();
    }
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

impl Host for HostState {
    async fn send(&mut self, request: Request) -> Result<Response, Error> {
        self.send_with_credentials(request, Vec::new()).await
    }

    async fn send_with_credentials(
        &mut self,
        request: Request,
        credentials: Vec<String>,
    ) -> Result<Response, Error> {
        let started = Instant::now();
        let result = self.exchange(request, &credentials).await;
        self.clock.add_host_time(started.elapsed());
        result
    }
}

impl HostBody for HostState {
    async fn read(&mut self, body: Resource<Body>, max: u32) -> Result<Option<Vec<u8>>, Error> {
        let started = Instant::now();
        let max = (max as usize).max(1);
        let result = async {
            let body = self
                .table()
                .get_mut(&body)
                .map_err(|err| Error::Failed(err.to_string()))?;
            if body.pending.is_empty() {
                let next = body.response.chunk();
                let chunk = match body.deadline {
                    Some(deadline) => tokio::time::timeout_at(deadline.into(), next)
                        .await
                        .map_err(|_| Error::Failed("timed out".into()))?,
                    None => next.await,
                };
                match chunk.map_err(|err| Error::Failed(describe(&err)))? {
                    Some(chunk) => body.pending = chunk,
                    None => return Ok(None),
                }
            }
            let take = body.pending.len().min(max);
            Ok(Some(body.pending.split_to(take).to_vec()))
        }
        .await;
        // The guest will hold what it read, and most likely answer with it: room for it in the
        // connection's replies, so that a client not reading them stops the reads.
        if let Ok(Some(chunk)) = &result {
            let room = self.reserve_room(chunk.len() as u64).await;
            self.rooms.push(room);
        }
        self.clock.add_host_time(started.elapsed());
        result
    }

    async fn drop(&mut self, body: Resource<Body>) -> wasmtime::Result<()> {
        self.table().delete(body)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_scheme_host_and_port() {
        let url = |text: &str| Url::parse(text).unwrap();
        let from = url("https://api.example.com/start");
        for (to, same) in [
            ("https://api.example.com/elsewhere?q=1", true),
            ("https://API.example.com:443/x", true),
            ("http://api.example.com/x", false),
            ("https://api.example.com:8443/x", false),
            ("https://other.example.com/x", false),
            ("https://example.com/x", false),
        ] {
            assert_eq!(same_origin(&from, &url(to)), same, "{to}");
        }
        let plain = url("http://127.0.0.1:8080/");
        assert!(same_origin(&plain, &url("http://127.0.0.1:8080/next")));
        assert!(!same_origin(&plain, &url("http://127.0.0.1:8081/next")));
        assert!(!same_origin(&plain, &url("http://localhost:8080/next")));
        assert!(!same_origin(&url("http://h/"), &url("http://h:8080/")));
        assert!(same_origin(&url("http://h/"), &url("http://h:80/")));
    }
}
