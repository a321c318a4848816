//! A remote client's recovery after its connection drops: reconnect, resume the session, and
//! fill each process handle's gap from the server's retained output.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::{Client, Inner, State};
use crate::error::ClientError;
use crate::event::ProcessEvent;
use crate::protocol::{PROCESS_READ, ProcessReadParams, ProcessReadResponse};
use crate::route::ProcessRoute;
use crate::transport::Transport;

/// How often a resume refused with -32010 (the old connection is not torn down yet) is retried.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// Reconnects and resumes until it works or the resume window closes; then either recovers
/// every process handle or fails them all.
pub(super) async fn reconnect(me: Weak<Inner>, cause: ClientError) {
    let Some(window) = me.upgrade().map(|inner| inner.options.resume_window) else {
        return;
    };
    let deadline = Instant::now() + window;
    loop {
        let Some(inner) = me.upgrade() else {
            return;
        };
        let (Some(target), Some(session_id)) = (inner.remote.clone(), inner.session_id()) else {
            return;
        };
        let opened = match Transport::connect(&target).await {
            Ok(transport) => inner.open(transport, Some(&session_id)).await,
            Err(err) => Err(err),
        };
        match opened {
            Ok(link) => {
                tracing::info!(session_id, "resumed the session after a reconnect");
                inner.install(link);
                let client = Client { inner };
                for route in client.inner.router.processes() {
                    tokio::spawn(recover(client.clone(), route));
                }
                return;
            }
            Err(err) if worth_retrying(&err) && Instant::now() < deadline => {
                tracing::debug!(session_id, "resume failed, retrying: {err}");
            }
            Err(err) => {
                let error = ClientError::Disconnected(format!(
                    "{cause}; could not resume session {session_id}: {err}"
                ));
                inner.state.send_replace(State::Lost(error.clone()));
                inner.router.fail_processes(&error);
                inner.router.fail_streams(&error);
                return;
            }
        }
        drop(inner);
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

/// -32010 (still attached to the old connection) and transport failures may clear up; an
/// unknown session or a different session id will not.
fn worth_retrying(error: &ClientError) -> bool {
    match error {
        ClientError::Server { code, .. } => *code == -32010,
        ClientError::Connect { .. }
        | ClientError::ConnectTimeout { .. }
        | ClientError::InitializeTimeout(_)
        | ClientError::Disconnected(_) => true,
        _ => false,
    }
}

/// Reads what the handle missed while disconnected and feeds it in order; events that
/// arrive meanwhile as notifications are de-duplicated by seq.
async fn recover(client: Client, route: Arc<ProcessRoute>) {
    let (published, exit_published, ended) = route.progress();
    if ended {
        return;
    }
    let params = ProcessReadParams {
        process_id: route.id.clone(),
        after_seq: Some(published),
        max_bytes: None,
        wait_ms: None,
    };
    let read: ProcessReadResponse = match client.call_with(PROCESS_READ, &params, true).await {
        Ok(read) => read,
        Err(err) if err.is_disconnect() => return, // the next reconnect recovers again
        Err(err) => {
            route.fail(format!(
                "process {} could not be recovered after reconnecting: {err}",
                route.id
            ));
            client.inner.router.remove_process(&route);
            return;
        }
    };
    match missed_events(&route.id, published, exit_published, read) {
        Ok(events) => {
            for event in events {
                if route.accept(event) {
                    client.inner.router.remove_process(&route);
                }
            }
        }
        Err(message) => {
            route.fail(message);
            client.inner.router.remove_process(&route);
        }
    }
}

/// The events after `published` that a `process/read` answer accounts for. The exit and close
/// have seqs but are not chunks: the close is `nextSeq - 1` when closed, and the exit is the one
/// seq no chunk covers. Any other uncovered seq was evicted by retention: an error, never a
/// silent skip.
pub(crate) fn missed_events(
    process_id: &str,
    published: u64,
    exit_published: bool,
    read: ProcessReadResponse,
) -> Result<Vec<ProcessEvent>, String> {
    let last = read.next_seq.saturating_sub(1);
    let close = read.closed.then_some(last);
    let mut events = Vec::with_capacity(read.chunks.len() + 2);
    let mut uncovered = Vec::new();
    let mut chunks = read.chunks.into_iter().peekable();
    for seq in published + 1..=last {
        if Some(seq) == close {
            continue;
        }
        match chunks.next_if(|chunk| chunk.seq == seq) {
            Some(chunk) => {
                let data = BASE64.decode(&chunk.chunk).map_err(|err| {
                    format!("process {process_id}: recovered chunk {seq} is not base64: {err}")
                })?;
                events.push(ProcessEvent::Output {
                    seq,
                    stream: chunk.stream,
                    data,
                });
            }
            None => uncovered.push(seq),
        }
    }
    let exit_pending = read.exited && !exit_published;
    match (uncovered.as_slice(), exit_pending, read.exit_code) {
        ([], false, _) => {}
        ([seq], true, Some(exit_code)) => {
            let at = events.partition_point(|event| event.seq() < Some(*seq));
            events.insert(
                at,
                ProcessEvent::Exited {
                    seq: *seq,
                    exit_code,
                },
            );
        }
        _ => {
            return Err(format!(
                "process {process_id}: events after seq {published} were dropped by the server's \
                 retention while the client was disconnected"
            ));
        }
    }
    if let Some(seq) = close.filter(|seq| *seq > published) {
        events.push(ProcessEvent::Closed { seq });
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{OutputStream, ProcessChunk};

    fn read(chunks: &[u64], next_seq: u64, exit: Option<i32>, closed: bool) -> ProcessReadResponse {
        ProcessReadResponse {
            chunks: (chunks.iter())
                .map(|seq| ProcessChunk {
                    seq: *seq,
                    stream: OutputStream::Stdout,
                    chunk: BASE64.encode([*seq as u8]),
                })
                .collect(),
            next_seq,
            exited: exit.is_some(),
            exit_code: exit,
            closed,
            failure: None,
            sandbox_denied: false,
        }
    }

    fn seqs(events: &[ProcessEvent]) -> Vec<(u64, &'static str)> {
        events
            .iter()
            .map(|event| match event {
                ProcessEvent::Output { seq, .. } => (*seq, "output"),
                ProcessEvent::Exited { seq, .. } => (*seq, "exited"),
                ProcessEvent::Closed { seq } => (*seq, "closed"),
                ProcessEvent::Failed { .. } => (0, "failed"),
            })
            .collect()
    }

    #[test]
    fn the_exit_fills_the_one_seq_no_chunk_covers() {
        let events = missed_events("p", 2, false, read(&[3, 5], 7, Some(0), true)).unwrap();
        assert_eq!(
            seqs(&events),
            [(3, "output"), (4, "exited"), (5, "output"), (6, "closed")]
        );
    }

    #[test]
    fn a_running_process_yields_its_new_chunks() {
        let events = missed_events("p", 1, false, read(&[2, 3], 4, None, false)).unwrap();
        assert_eq!(seqs(&events), [(2, "output"), (3, "output")]);
        let none = missed_events("p", 3, false, read(&[], 4, None, false)).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn an_exit_already_published_is_not_repeated() {
        let events = missed_events("p", 4, true, read(&[5], 7, Some(1), true)).unwrap();
        assert_eq!(seqs(&events), [(5, "output"), (6, "closed")]);
    }

    #[test]
    fn evicted_chunks_fail_instead_of_being_skipped() {
        let error = missed_events("p", 0, false, read(&[3, 4], 5, None, false)).unwrap_err();
        assert!(
            error.contains("dropped by the server's retention"),
            "{error}"
        );
        let error = missed_events("p", 0, false, read(&[3], 6, Some(0), true)).unwrap_err();
        assert!(error.contains("retention"), "{error}");
    }
}
