//! The pump: one task per process that reads its output and its helper's reports, and records
//! and notifies every event. Being the only producer of a process's events, it emits them in
//! seq order without further coordination.

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use super::pty::PtyMaster;
use super::supervisor::Reports;
use super::supervisor::wire::Report;
use super::{EventPort, Process, ProcessEvent, ProcessTable, lock};
use crate::protocol::{
    OutputStream, PROCESS_CLOSED, PROCESS_EXITED, PROCESS_OUTPUT, ProcessClosedNotification,
    ProcessExitedNotification,
};
use crate::rpc::encode_notification;

/// Largest read from a child stream: the largest output chunk.
pub const MAX_CHUNK_BYTES: usize = 64 * 1024;

/// Where a pipe's reads land. A chunk of at least half the buffer keeps the buffer's
/// allocation, handed to the log and the notification as it is (copying each 64 KiB out cost
/// as much as a tenth of a stream's time); a smaller one is copied out, so that a retained
/// chunk never holds more than twice its bytes.
struct Reads {
    buffer: Vec<u8>,
}

impl Reads {
    fn new() -> Self {
        Self {
            buffer: Vec::with_capacity(MAX_CHUNK_BYTES),
        }
    }

    /// What the last read left in the buffer, which is empty again after.
    fn take(&mut self) -> Bytes {
        if self.buffer.len() >= MAX_CHUNK_BYTES / 2 {
            std::mem::replace(&mut self.buffer, Vec::with_capacity(MAX_CHUNK_BYTES)).into()
        } else {
            let chunk = Bytes::copy_from_slice(&self.buffer);
            self.buffer.clear();
            chunk
        }
    }
}

/// The exit code recorded when a helper ends without reporting one: it died, and its death
/// SIGKILLed the program.
const HELPER_LOST_EXIT_CODE: i32 = 128 + 9;

/// The parent's reading ends.
pub enum Output {
    /// stdout and stderr pipes.
    Pipes {
        /// stdout.
        stdout: pipe::Receiver,
        /// stderr.
        stderr: pipe::Receiver,
    },
    /// The pty master.
    Pty(Arc<PtyMaster>),
}

/// Runs until the process has exited and every stream reached end of file, then schedules the
/// process's eviction; meanwhile, and after, watches for the helper's end (everything the
/// process forked is gone).
pub async fn run(
    process: Arc<Process>,
    table: Arc<ProcessTable>,
    mut reports: Reports,
    output: Output,
) {
    let mut exited = false;
    let mut gone = false;
    match output {
        Output::Pipes {
            mut stdout,
            mut stderr,
        } => {
            let (mut stdout_reads, mut stderr_reads) = (Reads::new(), Reads::new());
            let (mut stdout_open, mut stderr_open) = (true, true);
            while stdout_open || stderr_open || !exited {
                tokio::select! {
                    read = stdout.read_buf(&mut stdout_reads.buffer), if stdout_open => match read {
                        Ok(n) if n > 0 => emit_chunk(&process, &table, OutputStream::Stdout, stdout_reads.take()).await,
                        _ => stdout_open = false,
                    },
                    read = stderr.read_buf(&mut stderr_reads.buffer), if stderr_open => match read {
                        Ok(n) if n > 0 => emit_chunk(&process, &table, OutputStream::Stderr, stderr_reads.take()).await,
                        _ => stderr_open = false,
                    },
                    report = reports.next(), if !exited => {
                        exited = true;
                        // What the program wrote before it exited comes first (Codex judges
                        // `sandboxDenied` on it).
                        if stdout_open {
                            stdout_open = drain(&process, &table, OutputStream::Stdout, &stdout, &mut stdout_reads).await;
                        }
                        if stderr_open {
                            stderr_open = drain(&process, &table, OutputStream::Stderr, &stderr, &mut stderr_reads).await;
                        }
                        gone = exit(&process, &table, report).await;
                    }
                }
            }
        }
        Output::Pty(master) => {
            let mut buffer = vec![0u8; MAX_CHUNK_BYTES];
            let mut open = true;
            while open || !exited {
                tokio::select! {
                    read = master.read(&mut buffer), if open => match read {
                        Ok(n) if n > 0 => emit_chunk(&process, &table, OutputStream::Pty, Bytes::copy_from_slice(&buffer[..n])).await,
                        _ => open = false,
                    },
                    report = reports.next(), if !exited => {
                        exited = true;
                        gone = exit(&process, &table, report).await;
                    }
                }
            }
        }
    }
    if let Some(held) = process.take_placeholders() {
        // A confined process: everything it forked dies with it, which its helper reports at
        // once. Its placeholders go before the close is told, so that a client that looks at
        // the directory then finds nothing of the sandbox (not before: a process still in the
        // namespace could create what they hold once they are gone); removing them is disk
        // work, done off the runtime's threads.
        if !gone {
            loop {
                match reports.next().await {
                    Some(Report::Emptied) => break,
                    Some(_) => {}
                    None => {
                        gone = true;
                        break;
                    }
                }
            }
        }
        let _ = tokio::task::spawn_blocking(move || drop(held)).await;
    }
    let seq = lock(&process.log).record_close();
    process.events.send_modify(|events| *events += 1);
    let closed = ProcessClosedNotification {
        process_id: process.id.as_str().into(),
        seq,
    };
    let event = || ProcessEvent::Closed {
        process_id: process.id.clone(),
    };
    notify(&table, PROCESS_CLOSED, &closed, event).await;
    tracing::debug!(process = process.id, "closed");
    super::retention::closed(&process);
    let watcher = Arc::clone(&process);
    tokio::spawn(async move {
        // Descendants may run on (a daemon that closed its output); their helper's socket
        // closes once the last is gone.
        while !gone && reports.next().await.is_some() {}
        watcher.set_gone();
    });
    tokio::time::sleep(table.closed_retention).await;
    table.remove(&process);
}

/// Most reads [`drain`] makes before the exit is recorded: a writer that never pauses must
/// not hold the exit back.
const DRAIN_READS: usize = 16;

/// Emits what `stream` holds now, without waiting; `false` at end of file.
async fn drain(
    process: &Process,
    table: &ProcessTable,
    stream: OutputStream,
    pipe: &pipe::Receiver,
    reads: &mut Reads,
) -> bool {
    for _ in 0..DRAIN_READS {
        match pipe.try_read_buf(&mut reads.buffer) {
            Ok(0) => return false,
            Ok(_) => emit_chunk(process, table, stream, reads.take()).await,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
    true
}

/// Records the exit the helper reported; `true` if the helper is already gone.
async fn exit(process: &Process, table: &ProcessTable, report: Option<Report>) -> bool {
    match report {
        Some(Report::Exited { code }) => {
            emit_exit(process, table, code).await;
            false
        }
        other => {
            tracing::warn!(
                process = process.id,
                "the process's helper ended without reporting its exit ({other:?})"
            );
            emit_exit(process, table, HELPER_LOST_EXIT_CODE).await;
            true
        }
    }
}

async fn emit_chunk(process: &Process, table: &ProcessTable, stream: OutputStream, data: Bytes) {
    let seq = lock(&process.log).push_chunk(stream, data.clone());
    process.events.send_modify(|events| *events += 1);
    // A closed port means the session is detaching; nothing to do.
    match table.sink.current() {
        Some(EventPort::Wire(outbound)) => {
            let text = output_notification(&process.id_json, seq, stream, &data);
            let _ = outbound.send(text).await;
        }
        Some(EventPort::Events(events)) => {
            let event = ProcessEvent::Output {
                process_id: process.id.clone(),
                stream,
                chunk: data,
            };
            let _ = events.send(event).await;
        }
        None => {}
    }
}

/// Encodes `process/output` by hand, base64-encoding the chunk straight into the line: this is
/// the one message sent per 64 KiB of output, and serde would copy and escape-scan the ~87 KiB
/// of base64 once more. `process_id_json` is the id already encoded as a JSON string.
fn output_notification(
    process_id_json: &str,
    seq: u64,
    stream: OutputStream,
    data: &[u8],
) -> String {
    let stream = match stream {
        OutputStream::Stdout => "stdout",
        OutputStream::Stderr => "stderr",
        OutputStream::Pty => "pty",
    };
    let mut text =
        String::with_capacity(wexec_base64::encoded_len(data.len()) + process_id_json.len() + 128);
    text.push_str(r#"{"jsonrpc":"2.0","method":""#);
    text.push_str(PROCESS_OUTPUT);
    text.push_str(r#"","params":{"processId":"#);
    text.push_str(process_id_json);
    text.push_str(r#","seq":"#);
    text.push_str(&seq.to_string());
    text.push_str(r#","stream":""#);
    text.push_str(stream);
    text.push_str(r#"","chunk":""#);
    wexec_base64::encode_append(data, &mut text);
    text.push_str(r#""}}"#);
    text
}

async fn emit_exit(process: &Process, table: &ProcessTable, exit_code: i32) {
    process.set_exited();
    // Wake a write blocked on a child that stopped reading (it gives up once exited), then
    // release stdin now rather than at eviction.
    process.events.send_modify(|events| *events += 1);
    *process.stdin.lock().await = None;
    let (sandbox_denied, failure) = process.judge_exit(exit_code);
    let seq = lock(&process.log).record_exit(exit_code);
    process.events.send_modify(|events| *events += 1);
    tracing::debug!(process = process.id, exit_code, "exited");
    let notification = ProcessExitedNotification {
        process_id: process.id.as_str().into(),
        seq,
        exit_code,
        sandbox_denied,
        failure: failure.clone(),
    };
    let event = || ProcessEvent::Exited {
        process_id: process.id.clone(),
        exit_code,
        sandbox_denied,
        failure,
    };
    notify(table, PROCESS_EXITED, &notification, event).await;
}

/// Sends an event to the session's port, waiting for room in its queue: a slow client slows
/// the child (as a terminal would) instead of losing output or growing memory. Detached
/// sessions drop events; they stay readable with `process/read`.
async fn notify<P: serde::Serialize>(
    table: &ProcessTable,
    method: &str,
    params: &P,
    event: impl FnOnce() -> ProcessEvent,
) {
    // A closed port means the session is detaching; nothing to do.
    match table.sink.current() {
        Some(EventPort::Wire(outbound)) => match encode_notification(method, params) {
            Ok(text) => {
                let _ = outbound.send(text).await;
            }
            Err(err) => tracing::warn!("{err}"),
        },
        Some(EventPort::Events(events)) => {
            let _ = events.send(event()).await;
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn hand_encoded_output_is_the_specified_notification() {
        let id = "job \"1\"\n";
        let id_json = serde_json::to_string(id).unwrap();
        let text = output_notification(&id_json, 42, OutputStream::Stderr, b"hi\xff");
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "jsonrpc": "2.0",
                "method": "process/output",
                "params": {"processId": id, "seq": 42, "stream": "stderr", "chunk": "aGn/"},
            })
        );
    }
}
