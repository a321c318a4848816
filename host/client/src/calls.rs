//! Typed calls for every method of the protocol.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde_json::json;

use super::client::Client;
use super::error::ClientError;
use super::http::{HttpBody, HttpReply};
use super::process::{ProcessHandle, closed_read};
use super::watch::MissingWatch;
use crate::protocol::*;

/// An empty result (`{}`).
#[derive(serde::Deserialize)]
struct Empty {}

impl Client {
    /// `environment/info`.
    pub async fn environment_info(&self) -> Result<EnvironmentInfo, ClientError> {
        self.call(ENVIRONMENT_INFO, &json!({})).await
    }

    /// `environment/status`.
    pub async fn environment_status(&self) -> Result<EnvironmentStatus, ClientError> {
        self.call(ENVIRONMENT_STATUS, &json!({})).await
    }

    /// `environmentConfig/read`: the executor's Codex config layers, filtered to the key paths
    /// asked for.
    pub async fn environment_config_read(
        &self,
        params: EnvironmentConfigReadParams,
    ) -> Result<EnvironmentConfigReadResponse, ClientError> {
        self.call(ENVIRONMENT_CONFIG_READ, &params).await
    }

    /// `capabilityRoots/discoverV1`: the raw plugin and skill files of the roots named.
    pub async fn discover_capability_roots(
        &self,
        params: CapabilityRootsDiscoverParams,
    ) -> Result<CapabilityRootsDiscoverResponse, ClientError> {
        self.call(CAPABILITY_ROOTS_DISCOVER_V1, &params).await
    }

    /// `capabilities/discoverV2`: the executor's own skills and installed plugins, parsed.
    pub async fn discover_capabilities(
        &self,
        params: CapabilitiesDiscoverParams,
    ) -> Result<CapabilitiesDiscoverResponse, ClientError> {
        self.call(CAPABILITIES_DISCOVER_V2, &params).await
    }

    /// `plugin/list`.
    pub async fn plugin_list(&self) -> Result<PluginList, ClientError> {
        self.call(PLUGIN_LIST, &json!({})).await
    }

    /// `process/start`, returning a handle that receives the process's events. The handle is
    /// registered before the request goes out (events may precede the response); a client
    /// that lost its connection refuses with [`ClientError::Disconnected`].
    pub async fn start_process(
        &self,
        params: ProcessStartParams,
    ) -> Result<ProcessHandle, ClientError> {
        let link = self.link().await?;
        let route = self.inner.router.add_process(&params.process_id)?;
        let handle = ProcessHandle {
            route,
            client: self.clone(),
        };
        let result = link.request(PROCESS_START, &params).await?;
        let _: ProcessStartResponse = super::router::decode_result(PROCESS_START, &result)?;
        Ok(handle)
    }

    /// `process/read`. Once the connection is gone for good, answers with a closed response
    /// whose `failure` says why, so a polling loop ends.
    pub async fn process_read(
        &self,
        params: ProcessReadParams,
    ) -> Result<ProcessReadResponse, ClientError> {
        match self.call(PROCESS_READ, &params).await {
            Err(err) if err.is_disconnect() => Ok(closed_read(params.after_seq, &err)),
            other => other,
        }
    }

    /// `fs/readFile`: the file's bytes.
    pub async fn read_file(&self, params: FsPathParams) -> Result<Vec<u8>, ClientError> {
        let response: FsReadFileResponse = self.call(FS_READ_FILE, &params).await?;
        decode_base64(FS_READ_FILE, &response.data_base64)
    }

    /// `fs/writeFile` (create or truncate) with `data`.
    pub async fn write_file(
        &self,
        path: impl Into<String>,
        data: &[u8],
    ) -> Result<(), ClientError> {
        self.write_file_with(FsWriteFileParams {
            path: path.into(),
            data_base64: BASE64.encode(data),
            follow_symlinks: None,
            sandbox: None,
        })
        .await
    }

    /// `fs/writeFile` with every param.
    pub async fn write_file_with(&self, params: FsWriteFileParams) -> Result<(), ClientError> {
        let Empty {} = self.call(FS_WRITE_FILE, &params).await?;
        Ok(())
    }

    /// `fs/createDirectory`.
    pub async fn create_directory(
        &self,
        params: FsCreateDirectoryParams,
    ) -> Result<(), ClientError> {
        let Empty {} = self.call(FS_CREATE_DIRECTORY, &params).await?;
        Ok(())
    }

    /// `fs/getMetadata`.
    pub async fn get_metadata(&self, params: FsPathParams) -> Result<FsMetadata, ClientError> {
        self.call(FS_GET_METADATA, &params).await
    }

    /// `fs/canonicalize`: the canonical PathUri.
    pub async fn canonicalize(&self, params: FsPathParams) -> Result<String, ClientError> {
        let response: FsCanonicalizeResponse = self.call(FS_CANONICALIZE, &params).await?;
        Ok(response.path)
    }

    /// `fs/readDirectory`.
    pub async fn read_directory(
        &self,
        params: FsPathParams,
    ) -> Result<Vec<FsDirectoryEntry>, ClientError> {
        let response: FsReadDirectoryResponse = self.call(FS_READ_DIRECTORY, &params).await?;
        Ok(response.entries)
    }

    /// `fs/walk`.
    pub async fn walk(&self, params: FsWalkParams) -> Result<FsWalkResponse, ClientError> {
        self.call(FS_WALK, &params).await
    }

    /// `fs/remove`.
    pub async fn remove(&self, params: FsRemoveParams) -> Result<(), ClientError> {
        let Empty {} = self.call(FS_REMOVE, &params).await?;
        Ok(())
    }

    /// `fs/copy`.
    pub async fn copy(&self, params: FsCopyParams) -> Result<(), ClientError> {
        let Empty {} = self.call(FS_COPY, &params).await?;
        Ok(())
    }

    /// `fs/open`: handles belong to the connection and close with it.
    pub async fn open(&self, params: FsOpenParams) -> Result<String, ClientError> {
        let response: FsHandleParams = self.call(FS_OPEN, &params).await?;
        Ok(response.handle_id)
    }

    /// `fs/readBlock`: `(bytes, eof)`.
    pub async fn read_block(
        &self,
        handle_id: impl Into<String>,
        offset: u64,
        len: u64,
    ) -> Result<(Vec<u8>, bool), ClientError> {
        let params = FsReadBlockParams {
            handle_id: handle_id.into(),
            offset,
            len,
        };
        let response: FsReadBlockResponse = self.call(FS_READ_BLOCK, &params).await?;
        Ok((decode_base64(FS_READ_BLOCK, &response.chunk)?, response.eof))
    }

    /// `fs/writeBlock`.
    pub async fn write_block(
        &self,
        handle_id: impl Into<String>,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ClientError> {
        let params = FsWriteBlockParams {
            handle_id: handle_id.into(),
            offset,
            chunk: BASE64.encode(data),
        };
        let Empty {} = self.call(FS_WRITE_BLOCK, &params).await?;
        Ok(())
    }

    /// `fs/watchMissing`: the watch, if the server started it (`{"watching": true}`); `None`
    /// when it did not (nothing to watch, limits, or an id not above every id this connection
    /// used). A watch with a new id replaces the connection's current one either way.
    pub async fn watch_missing(
        &self,
        params: FsWatchMissingParams,
    ) -> Result<Option<MissingWatch>, ClientError> {
        let link = self.link().await?;
        let receiver = self.inner.router.add_watch(params.watch_id)?;
        let watch = MissingWatch {
            watch_id: params.watch_id,
            receiver,
            router: Arc::clone(&self.inner.router),
        };
        let result = link.request(FS_WATCH_MISSING, &params).await?;
        self.inner.router.end_watches_below(params.watch_id);
        let response: FsWatchMissingResponse =
            super::router::decode_result(FS_WATCH_MISSING, &result)?;
        Ok(response.watching.then_some(watch))
    }

    /// `fs/close` (idempotent).
    pub async fn close(&self, handle_id: impl Into<String>) -> Result<(), ClientError> {
        let params = FsHandleParams {
            handle_id: handle_id.into(),
        };
        let Empty {} = self.call(FS_CLOSE, &params).await?;
        Ok(())
    }

    /// `http/request`, buffered (`streamResponse` is forced off).
    pub async fn http_request(
        &self,
        mut params: HttpRequestParams,
    ) -> Result<HttpReply, ClientError> {
        params.stream_response = false;
        let response: HttpResponse = self.call(HTTP_REQUEST, &params).await?;
        let body = decode_base64(HTTP_REQUEST, &response.body_base64)?;
        Ok(HttpReply {
            status: response.status,
            headers: response.headers,
            body: Bytes::from(body),
        })
    }

    /// `http/request` with a streamed body. Without a `requestId` one is generated. The body
    /// ends with an error if the server reports a failure or the connection drops.
    pub async fn http_request_streamed(
        &self,
        mut params: HttpRequestParams,
    ) -> Result<(HttpReply, HttpBody), ClientError> {
        params.stream_response = true;
        let request_id = params
            .request_id
            .get_or_insert_with(|| uuid::Uuid::new_v4().to_string())
            .clone();
        let link = self.link().await?;
        let receiver = self.inner.router.add_stream(&request_id)?;
        let body = HttpBody {
            request_id,
            receiver,
            router: Arc::clone(&self.inner.router),
        };
        let result = link.request(HTTP_REQUEST, &params).await?;
        let response: HttpResponse = super::router::decode_result(HTTP_REQUEST, &result)?;
        let reply = HttpReply {
            status: response.status,
            headers: response.headers,
            body: Bytes::new(),
        };
        Ok((reply, body))
    }
}

fn decode_base64(method: &str, text: &str) -> Result<Vec<u8>, ClientError> {
    BASE64
        .decode(text)
        .map_err(|err| ClientError::Protocol(format!("{method}: result is not base64: {err}")))
}
