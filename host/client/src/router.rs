//! Routes notifications to the process handles and HTTP body streams waiting for them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use super::error::ClientError;
use super::event::ProcessEvent;
use super::route::ProcessRoute;
use super::sync::lock;
use crate::protocol::{
    FS_MISSING_CHANGED, FsMissingChangedParams, HTTP_BODY_DELTA, HttpBodyDelta, PROCESS_CLOSED,
    PROCESS_EXITED, PROCESS_OUTPUT, ProcessClosedNotification, ProcessExitedNotification,
    ProcessOutputNotification,
};

pub(crate) type BodyItem = Result<Bytes, ClientError>;

/// What ends an `fs/watchMissing` watch: its notification (`Ok`), or why it never will come.
pub(crate) type WatchEnd = Result<(), ClientError>;

/// Live process routes (owned by the client, they survive a reconnect), HTTP body streams and
/// `fs/watchMissing` watches (both owned by one connection).
#[derive(Default)]
pub(crate) struct Router {
    processes: Mutex<HashMap<String, Arc<ProcessRoute>>>,
    streams: Mutex<HashMap<String, StreamRoute>>,
    watches: Mutex<HashMap<u64, oneshot::Sender<WatchEnd>>>,
}

struct StreamRoute {
    sender: mpsc::UnboundedSender<BodyItem>,
    next_seq: u64,
}

impl Router {
    /// Registers a process before its start is sent (its events may precede the response).
    /// Fails if a handle for this id is live.
    pub(crate) fn add_process(&self, id: &str) -> Result<Arc<ProcessRoute>, ClientError> {
        let mut processes = lock(&self.processes);
        if processes.contains_key(id) {
            return Err(ClientError::Protocol(format!(
                "a handle for process {id} is already live in this client"
            )));
        }
        let route = ProcessRoute::new(id.to_owned());
        processes.insert(id.to_owned(), Arc::clone(&route));
        Ok(route)
    }

    /// Unregisters `route` (not a newer route with the same id).
    pub(crate) fn remove_process(&self, route: &Arc<ProcessRoute>) {
        let mut processes = lock(&self.processes);
        if processes
            .get(&route.id)
            .is_some_and(|live| Arc::ptr_eq(live, route))
        {
            processes.remove(&route.id);
        }
    }

    /// Every live process route.
    pub(crate) fn processes(&self) -> Vec<Arc<ProcessRoute>> {
        lock(&self.processes).values().cloned().collect()
    }

    /// Fails every process route: nothing more will arrive for them.
    pub(crate) fn fail_processes(&self, error: &ClientError) {
        let routes: Vec<_> = lock(&self.processes)
            .drain()
            .map(|(_, route)| route)
            .collect();
        for route in routes {
            route.fail(error.to_string());
        }
    }

    /// Registers a body stream before the request is sent.
    pub(crate) fn add_stream(
        &self,
        request_id: &str,
    ) -> Result<mpsc::UnboundedReceiver<BodyItem>, ClientError> {
        let mut streams = lock(&self.streams);
        if streams.contains_key(request_id) {
            return Err(ClientError::Protocol(format!(
                "http/request stream {request_id} is already open in this client"
            )));
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        streams.insert(
            request_id.to_owned(),
            StreamRoute {
                sender,
                next_seq: 1,
            },
        );
        Ok(receiver)
    }

    pub(crate) fn remove_stream(&self, request_id: &str) {
        lock(&self.streams).remove(request_id);
    }

    /// Ends every open body stream with `error` (streams do not survive their connection).
    pub(crate) fn fail_streams(&self, error: &ClientError) {
        for (_, stream) in lock(&self.streams).drain() {
            let _ = stream.sender.send(Err(error.clone()));
        }
    }

    /// Registers a watch before its request is sent (its notification may follow the response
    /// at once). Fails if a watch with this id is live.
    pub(crate) fn add_watch(
        &self,
        watch_id: u64,
    ) -> Result<oneshot::Receiver<WatchEnd>, ClientError> {
        let mut watches = lock(&self.watches);
        if watches.contains_key(&watch_id) {
            return Err(ClientError::Protocol(format!(
                "fs/watchMissing watch {watch_id} is already live in this client"
            )));
        }
        let (sender, receiver) = oneshot::channel();
        watches.insert(watch_id, sender);
        Ok(receiver)
    }

    pub(crate) fn remove_watch(&self, watch_id: u64) {
        lock(&self.watches).remove(&watch_id);
    }

    /// Forgets the watches below `watch_id`: the server cancelled them when it saw that id, or
    /// earlier, when it saw a higher one (§9.6).
    pub(crate) fn end_watches_below(&self, watch_id: u64) {
        lock(&self.watches).retain(|id, _| *id >= watch_id);
    }

    /// Ends every watch with `error` (watches do not survive their connection).
    pub(crate) fn fail_watches(&self, error: &ClientError) {
        for (_, watch) in lock(&self.watches).drain() {
            let _ = watch.send(Err(error.clone()));
        }
    }

    /// Routes a notification. Never blocks: each handle has its own queue and wake signal.
    pub(crate) fn on_notification(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<(), ClientError> {
        match method {
            PROCESS_OUTPUT => {
                let note: ProcessOutputNotification = decode(method, params)?;
                let data = BASE64.decode(&note.chunk).map_err(|err| {
                    ClientError::Protocol(format!("{method}: chunk is not base64: {err}"))
                })?;
                let event = ProcessEvent::Output {
                    seq: note.seq,
                    stream: note.stream,
                    data,
                };
                self.deliver(&note.process_id, event);
            }
            PROCESS_EXITED => {
                let note: ProcessExitedNotification<'_> = decode(method, params)?;
                let event = ProcessEvent::Exited {
                    seq: note.seq,
                    exit_code: note.exit_code,
                };
                self.deliver(&note.process_id, event);
            }
            PROCESS_CLOSED => {
                let note: ProcessClosedNotification<'_> = decode(method, params)?;
                self.deliver(&note.process_id, ProcessEvent::Closed { seq: note.seq });
            }
            HTTP_BODY_DELTA => self.on_body_delta(decode(method, params)?),
            FS_MISSING_CHANGED => {
                let note: FsMissingChangedParams = decode(method, params)?;
                if let Some(watch) = lock(&self.watches).remove(&note.watch_id) {
                    let _ = watch.send(Ok(()));
                }
            }
            _ => tracing::debug!(method, "ignoring an unknown notification"),
        }
        Ok(())
    }

    /// Feeds an event to the process's route, if a handle follows it.
    pub(crate) fn deliver(&self, process_id: &str, event: ProcessEvent) {
        let Some(route) = lock(&self.processes).get(process_id).cloned() else {
            return;
        };
        if route.accept(event) {
            self.remove_process(&route);
        }
    }

    fn on_body_delta(&self, delta: HttpBodyDelta) {
        let mut streams = lock(&self.streams);
        let Some(stream) = streams.get_mut(&delta.request_id) else {
            return;
        };
        let item = if delta.seq != stream.next_seq {
            Some(Err(ClientError::Protocol(format!(
                "http/request/bodyDelta for {} has seq {}, expected {}",
                delta.request_id, delta.seq, stream.next_seq
            ))))
        } else {
            match BASE64.decode(&delta.delta_base64) {
                Err(err) => Some(Err(ClientError::Protocol(format!(
                    "http/request/bodyDelta for {}: deltaBase64 is not base64: {err}",
                    delta.request_id
                )))),
                Ok(data) if delta.done => match delta.error {
                    Some(message) => Some(Err(ClientError::Server {
                        code: -32603,
                        message,
                        data: None,
                    })),
                    None => (!data.is_empty()).then(|| Ok(Bytes::from(data))),
                },
                Ok(data) => (!data.is_empty()).then(|| Ok(Bytes::from(data))),
            }
        };
        stream.next_seq += 1;
        let ends = delta.done || matches!(item, Some(Err(_)));
        if let Some(item) = item {
            let _ = stream.sender.send(item);
        }
        if ends {
            streams.remove(&delta.request_id);
        }
    }
}

fn decode<'a, T: serde::Deserialize<'a>>(
    method: &str,
    params: Option<&'a RawValue>,
) -> Result<T, ClientError> {
    let text = params.map_or("null", RawValue::get);
    serde_json::from_str(text)
        .map_err(|err| ClientError::Protocol(format!("bad {method} params: {err}")))
}

/// Decodes a result into `T`, naming the method on failure.
pub(crate) fn decode_result<T: DeserializeOwned>(
    method: &str,
    result: &RawValue,
) -> Result<T, ClientError> {
    serde_json::from_str(result.get())
        .map_err(|err| ClientError::Json(format!("decoding the {method} result: {err}")))
}
