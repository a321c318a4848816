//! Process handles: events in `seq` order from a per-process queue with its own wake signal.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::client::Client;
use super::error::ClientError;
pub use super::event::ProcessEvent;
pub(crate) use super::route::ProcessRoute;
use crate::protocol::{
    OutputStream, PROCESS_SIGNAL, PROCESS_TERMINATE, PROCESS_WRITE, ProcessReadParams,
    ProcessReadResponse, ProcessSignal, ProcessSignalParams, ProcessTerminateParams,
    ProcessTerminateResponse, ProcessWriteParams, ProcessWriteResponse, WriteStatus,
};

/// A started process. Dropping the handle stops routing its events (the process runs on).
pub struct ProcessHandle {
    pub(crate) route: Arc<ProcessRoute>,
    pub(crate) client: Client,
}

/// What [`ProcessHandle::wait`] collects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessOutput {
    /// Everything read from stdout (or the pty).
    pub stdout: Vec<u8>,
    /// Everything read from stderr.
    pub stderr: Vec<u8>,
    /// The exit code.
    pub exit_code: Option<i32>,
}

impl ProcessHandle {
    /// The process id.
    pub fn id(&self) -> &str {
        &self.route.id
    }

    /// The next event in `seq` order, waiting for it; `None` after the last one (closed or
    /// failed) was returned.
    pub async fn next_event(&self) -> Option<ProcessEvent> {
        loop {
            let notified = self.route.wake.notified();
            match self.route.pop() {
                Ok(event) => return Some(event),
                Err(true) => return None,
                Err(false) => notified.await,
            }
        }
    }

    /// The next event if one is ready.
    pub fn try_next_event(&self) -> Option<ProcessEvent> {
        self.route.pop().ok()
    }

    /// Collects output until the process closes. A failure event becomes
    /// [`ClientError::Disconnected`].
    pub async fn wait(self) -> Result<ProcessOutput, ClientError> {
        let mut output = ProcessOutput::default();
        while let Some(event) = self.next_event().await {
            match event {
                ProcessEvent::Output { stream, data, .. } => match stream {
                    OutputStream::Stderr => output.stderr.extend(data),
                    OutputStream::Stdout | OutputStream::Pty => output.stdout.extend(data),
                },
                ProcessEvent::Exited { exit_code, .. } => output.exit_code = Some(exit_code),
                ProcessEvent::Closed { .. } => break,
                ProcessEvent::Failed { message } => return Err(ClientError::Disconnected(message)),
            }
        }
        Ok(output)
    }

    /// `process/read` for this process (see [`Client::process_read`]).
    pub async fn read(
        &self,
        after_seq: Option<u64>,
        max_bytes: Option<u64>,
        wait_ms: Option<u64>,
    ) -> Result<ProcessReadResponse, ClientError> {
        self.client
            .process_read(ProcessReadParams {
                process_id: self.route.id.clone(),
                after_seq,
                max_bytes,
                wait_ms,
            })
            .await
    }

    /// Writes to stdin; every call is written.
    pub async fn write(&self, data: &[u8]) -> Result<WriteStatus, ClientError> {
        self.write_params(data, None).await
    }

    /// Writes to stdin at most once per `write_id`, so it is safe to retry (also across a
    /// reconnect).
    pub async fn write_once(
        &self,
        data: &[u8],
        write_id: impl Into<String>,
    ) -> Result<WriteStatus, ClientError> {
        self.write_params(data, Some(write_id.into())).await
    }

    async fn write_params(
        &self,
        data: &[u8],
        write_id: Option<String>,
    ) -> Result<WriteStatus, ClientError> {
        let params = ProcessWriteParams {
            process_id: self.route.id.clone(),
            chunk: BASE64.encode(data),
            write_id,
            close_stdin: false,
        };
        let response: ProcessWriteResponse = self.client.call(PROCESS_WRITE, &params).await?;
        Ok(response.status)
    }

    /// Sends SIGINT to the process group.
    pub async fn interrupt(&self) -> Result<(), ClientError> {
        let params = ProcessSignalParams {
            process_id: self.route.id.clone(),
            signal: ProcessSignal::Interrupt,
        };
        let _: serde_json::Value = self.client.call(PROCESS_SIGNAL, &params).await?;
        Ok(())
    }

    /// Starts termination (TERM, grace, KILL); returns whether the process was running.
    pub async fn terminate(&self) -> Result<bool, ClientError> {
        let params = ProcessTerminateParams {
            process_id: self.route.id.clone(),
        };
        let response: ProcessTerminateResponse =
            self.client.call(PROCESS_TERMINATE, &params).await?;
        Ok(response.running)
    }
}

impl Drop for ProcessHandle {
    fn drop(&mut self) {
        self.client.inner.router.remove_process(&self.route);
    }
}

impl std::fmt::Debug for ProcessHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessHandle")
            .field("id", &self.route.id)
            .finish_non_exhaustive()
    }
}

/// A `process/read` answer standing for a connection that is gone: closed, carrying why.
pub(crate) fn closed_read(after_seq: Option<u64>, error: &ClientError) -> ProcessReadResponse {
    ProcessReadResponse {
        chunks: Vec::new(),
        next_seq: after_seq.unwrap_or(0) + 1,
        exited: false,
        exit_code: None,
        closed: true,
        failure: Some(error.to_string()),
        sandbox_denied: false,
    }
}
