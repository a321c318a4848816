//! `http/request` results: a buffered reply, or a streamed body assembled from
//! `http/request/bodyDelta` notifications.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use super::error::ClientError;
use super::router::{BodyItem, Router};
use crate::protocol::HttpHeader;

/// A response with its body decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// Status code.
    pub status: u16,
    /// Headers in the server's order.
    pub headers: Vec<HttpHeader>,
    /// The body (empty for a streamed response: read the [`HttpBody`]).
    pub body: Bytes,
}

impl HttpReply {
    /// The first header named `name` (case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| header.value.as_str())
    }
}

/// A streamed response body: the bytes of each delta in order, then the end — or an error
/// when the server reports a failure or the connection drops. Also a [`futures_util::Stream`].
pub struct HttpBody {
    pub(crate) request_id: String,
    pub(crate) receiver: mpsc::UnboundedReceiver<BodyItem>,
    pub(crate) router: Arc<Router>,
}

impl HttpBody {
    /// The stream's `requestId`.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The next piece of the body; `None` at the clean end.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, ClientError>> {
        self.receiver.recv().await
    }

    /// Reads the whole body.
    pub async fn collect(mut self) -> Result<Bytes, ClientError> {
        let mut body = BytesMut::new();
        while let Some(chunk) = self.chunk().await {
            body.extend_from_slice(&chunk?);
        }
        Ok(body.freeze())
    }
}

impl futures_util::Stream for HttpBody {
    type Item = Result<Bytes, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}

impl Drop for HttpBody {
    fn drop(&mut self) {
        self.router.remove_stream(&self.request_id);
    }
}

impl std::fmt::Debug for HttpBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpBody")
            .field("request_id", &self.request_id)
            .finish_non_exhaustive()
    }
}
