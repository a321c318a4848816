//! stdio: one UTF-8 JSON message per line (docs/protocol.md §3.2). `\n` or `\r\n` ends a line;
//! blank lines are skipped; a line over 64 MiB ends the connection without a reply. Output is one
//! compact JSON message per line, flushed whenever the queue runs dry.
//!
//! Both directions use std I/O on dedicated threads: input is read by the thread that runs the
//! connection's processor (so a request reaches its handler without a switch between threads,
//! which on small machines costs more than the work), output by a writer thread, or by the
//! processor thread itself when that keeps order and cannot block ([`direct`], the fast path
//! and its invariants). tokio's `Stdin`/`Stdout` hop to the blocking pool and copy through an
//! extra buffer on every call.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinHandle;

use super::budget::ConnectionBudget;
use super::{Connection, DirectSink, Inbound, Outbound, Received};
use crate::rpc::MAX_MESSAGE_BYTES;

pub mod direct;
pub mod spin;
use direct::DirectOutput;
pub use direct::PipeRoom;
pub use spin::InputSpin;

/// The peer name used in error texts.
pub const PEER: &str = "wexec stdio";

/// Buffer size for both directions.
const IO_BUFFER_BYTES: usize = 256 * 1024;

/// Serves a connection over a reader and a writer (stdin and stdout in production, in-memory
/// streams in tests). The lines are read by whoever drives the connection: production runs
/// `processor::serve` on a thread of its own (not a runtime worker), so a request travels from
/// stdin to its handler without a switch between threads. The returned task ends once every
/// [`Outbound`] is dropped and the output is flushed.
pub fn connect<R, W>(
    reader: R,
    writer: W,
    room: Option<PipeRoom>,
    spin: Option<InputSpin>,
    budget: ConnectionBudget,
) -> (Connection, JoinHandle<()>)
where
    R: Read + Send + 'static,
    W: Write + Send + 'static,
{
    let (outbound, outbound_rx) = Outbound::channel();
    let output = Arc::new(DirectOutput::new(Box::new(writer), room, IO_BUFFER_BYTES));
    let inbound = Inbound::Lines(LineReader::new(reader, spin, Arc::clone(&output), budget));
    let outbound = outbound.with_direct(Arc::clone(&output) as Arc<dyn DirectSink>);
    let writer = tokio::task::spawn_blocking(move || output.write_queued(outbound_rx));
    let connection = Connection {
        peer: PEER.to_owned(),
        inbound,
        outbound,
        detachable: false,
    };
    (connection, writer)
}

/// stdin split into messages: `\n` or `\r\n` ends a line, blank lines are skipped, and a line
/// over the limit ends the input.
pub struct LineReader {
    reader: BufReader<Box<dyn Read + Send>>,
    ended: bool,
    /// Set while waiting for input (spinning a moment, then parked in a read): the owner may
    /// then exit without waiting for this thread.
    waiting: Arc<AtomicBool>,
    /// Spins a little before the read parks, while the client is quick ([`spin`]).
    spin: Option<InputSpin>,
    /// Told whether more input is already read, and flushed before waiting for more.
    output: Arc<DirectOutput>,
    budget: ConnectionBudget,
}

impl LineReader {
    fn new<R: Read + Send + 'static>(
        reader: R,
        spin: Option<InputSpin>,
        output: Arc<DirectOutput>,
        budget: ConnectionBudget,
    ) -> Self {
        Self {
            reader: BufReader::with_capacity(IO_BUFFER_BYTES, Box::new(reader)),
            ended: false,
            waiting: Arc::default(),
            spin,
            output,
            budget,
        }
    }

    /// The next message, admitted against the inbound budget (see [`LineReader::next_line`]).
    pub fn next_message(&mut self) -> Option<Received> {
        let line = self.next_line()?;
        Some(Received::admit(line, &self.budget))
    }

    /// The line last returned was no work wexec serves (malformed, a notification, an
    /// unknown method): it must not keep the spin going ([`spin`], bound 1).
    pub fn not_work(&mut self) {
        if let Some(spin) = &mut self.spin {
            spin.not_work();
        }
    }

    /// True while the reader is parked waiting for input.
    pub fn waiting_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.waiting)
    }

    /// Whether a whole line is already buffered.
    pub fn has_buffered_line(&self) -> bool {
        self.reader.buffer().contains(&b'\n')
    }

    /// The next non-blank line without its terminator, blocking until it is read; `None` at
    /// the end of input, after a read error, or after an oversized line.
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        // The longest acceptable raw line: the message, `\r` and `\n`.
        let read_limit = (MAX_MESSAGE_BYTES + 2) as u64;
        while !self.ended {
            let mut line = Vec::new();
            let would_block = !self.has_buffered_line();
            if would_block {
                self.output.input_drained();
            }
            self.waiting.store(would_block, Ordering::SeqCst);
            let mut spin = self.spin.as_mut().filter(|_| would_block);
            if let Some(spin) = spin.as_mut() {
                spin.before_wait();
            }
            let read = (&mut self.reader)
                .take(read_limit)
                .read_until(b'\n', &mut line);
            self.waiting.store(false, Ordering::SeqCst);
            if let Some(spin) = spin {
                spin.after_wait();
            }
            match read {
                Ok(0) => self.ended = true,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                    }
                    if line.len() > MAX_MESSAGE_BYTES {
                        tracing::warn!(
                            "stdin line exceeds {MAX_MESSAGE_BYTES} bytes; closing the connection without reply"
                        );
                        self.ended = true;
                    } else if !line.iter().all(u8::is_ascii_whitespace) {
                        self.output.read_request(self.has_buffered_line());
                        return Some(line);
                    } else {
                        self.not_work();
                    }
                }
                Err(err) => {
                    tracing::warn!("stdin read failed, closing the connection: {err}");
                    self.ended = true;
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::sync::{Arc, Mutex};

    fn budget() -> ConnectionBudget {
        super::super::budget::InboundBudget::new(usize::MAX >> 4).connection()
    }

    async fn lines_of(input: Vec<u8>) -> Vec<Vec<u8>> {
        let (mut connection, _writer) =
            connect(Cursor::new(input), std::io::sink(), None, None, budget());
        let mut lines = Vec::new();
        while let Some(received) = connection.inbound.recv().await {
            if let Received::Message(line, _) = received {
                lines.push(line);
            }
        }
        lines
    }

    #[tokio::test]
    async fn splits_on_lf_and_crlf_and_skips_blank_lines() {
        let lines = lines_of(b"a\r\n\n  \r\n\tb\n\r\nc".to_vec()).await;
        assert_eq!(lines, vec![b"a".to_vec(), b"\tb".to_vec(), b"c".to_vec()]);
    }

    #[tokio::test]
    async fn exactly_the_limit_is_accepted_and_one_more_byte_closes() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES];
        input.extend_from_slice(b"\r\nnext\n");
        input.extend(vec![b'y'; MAX_MESSAGE_BYTES + 1]);
        input.extend_from_slice(b"\nnever\n");
        let lines = lines_of(input).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), MAX_MESSAGE_BYTES);
        assert_eq!(lines[1], b"next");
    }

    #[tokio::test]
    async fn an_unterminated_oversized_line_closes() {
        let lines = lines_of(vec![b'z'; MAX_MESSAGE_BYTES + 1]).await;
        assert!(lines.is_empty());
    }

    /// A writer tests can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(data);
            Ok(data.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn writes_one_message_per_line() {
        let output = Shared::default();
        let (connection, writer) = connect(
            Cursor::new(Vec::new()),
            output.clone(),
            None,
            None,
            budget(),
        );
        connection.outbound.send("{\"a\":1}".into()).await.unwrap();
        connection.outbound.send("{}".into()).await.unwrap();
        drop(connection);
        writer.await.unwrap();
        assert_eq!(output.0.lock().unwrap().as_slice(), b"{\"a\":1}\n{}\n");
    }
}
