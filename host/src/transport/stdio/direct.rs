//! Direct replies, the answering part of the stdio fast path ([`crate::fast_path`]). A reply made on stdio's processor thread (the thread
//! that reads stdin and runs the connection's requests inline) is written to stdout by that
//! thread itself, instead of going through the outbound queue to the writer thread: one switch
//! between threads fewer per request, which on a small machine costs more than the request.
//! Everything that makes this safe is in this module; [`super`] only wires it up.
//!
//! Invariants, each tested below:
//!
//! 1. **Order.** Replies reach stdout in the order they were accepted. A direct write happens
//!    only while no queued message is unwritten ([`DirectOutput::queued`] counts a message
//!    before it enters the queue, the writer thread uncounts it only after it is flushed), and
//!    under the writer's lock, so it can neither overtake a queued message nor interleave with
//!    one.
//! 2. **Backpressure.** A direct write never blocks on the client: it is made only when stdout
//!    is a pipe with room for the whole line ([`PipeRoom`], `FIONREAD` bounded), else the
//!    message is queued and waits there like any other, under the queue's byte budget.
//! 3. **The processor never waits.** The writer's lock is only tried; when the writer thread
//!    holds it, the message is queued. Held-back direct replies (batched while more input is
//!    already read, at most [`HELD_BYTES`]) are flushed before the reader waits for input.
//! 4. **Only the processor thread.** Other threads (runtime workers, plugin threads) always
//!    queue: only the thread [`crate::fast_path::claim_thread`] claimed writes around the queue.
//! 5. **A broken stdout loses nothing silently.** After a failed write every later message is
//!    discarded (and said so once); queued senders never block on a dead stdout.

mod room;

use std::io::{BufWriter, IoSlice, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::mpsc;

use self::room::Output;
pub use self::room::PipeRoom;
use crate::transport::{DirectSink, OutboundMessage};

/// The most a direct writer holds back for the replies that follow.
pub const HELD_BYTES: usize = 64 * 1024;

/// A line at least this long goes to stdout from where it lies, one `writev` with its line
/// break after what the buffer holds, instead of being copied into the buffer first: for
/// process output, whose chunks are this large, that copy was a large share of the writer's
/// time.
///
/// Not `vmsplice(2)`, although handing the line's own pages to the pipe instead of copying them
/// makes a large `fs/readFile` round trip cheaper (the copy into pipe pages the kernel
/// allocates is the largest cost of writing that reply): the pipe would then hold
/// references to memory wexec frees once `FIONREAD` says the bytes were read, and a reader that
/// splices out of the pipe (`pv`, a proxy moving the bytes into a socket with `splice(2)`) only
/// moves those references on, so what it sends could change after wexec counted it read.
/// Splicing from a buffer unmapped right after would be safe, but its fresh zeroed pages cost
/// what the copy saves.
const UNBUFFERED_BYTES: usize = 16 * 1024;

/// Writes `text` and its line break: a long line from where it lies, a short one through the
/// buffer (batched with its neighbours into one `write`).
fn write_line(writer: &mut BufWriter<Output>, text: &str) -> std::io::Result<()> {
    if text.len() < UNBUFFERED_BYTES {
        writer.write_all(text.as_bytes())?;
        return writer.write_all(b"\n");
    }
    writer.flush()?;
    let output = writer.get_mut();
    let mut parts = [IoSlice::new(text.as_bytes()), IoSlice::new(b"\n")];
    let mut parts = &mut parts[..];
    while !parts.is_empty() {
        match output.write_vectored(parts) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => IoSlice::advance_slices(&mut parts, written),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// stdout, shared by the writer thread and (when it cannot block) the processor thread.
pub struct DirectOutput {
    writer: Mutex<BufWriter<Output>>,
    /// Messages queued for the writer thread and not yet flushed: while any is, nothing may be
    /// written around the queue (invariant 1).
    pending: AtomicUsize,
    /// Another request is already read: a direct reply may wait in the buffer for the ones
    /// that follow (flushed before the reader waits for input, or at [`HELD_BYTES`]).
    more_input: AtomicBool,
    broken: AtomicBool,
}

impl DirectOutput {
    /// stdout as `writer`; `room` when it is a pipe (else nothing is ever written directly).
    pub fn new(writer: Box<dyn Write + Send>, room: Option<PipeRoom>, buffer: usize) -> Self {
        Self {
            writer: Mutex::new(BufWriter::with_capacity(buffer, Output::new(writer, room))),
            pending: AtomicUsize::new(0),
            more_input: AtomicBool::new(false),
            broken: AtomicBool::new(false),
        }
    }

    /// The reader has read a request; `more` says whether another is already buffered.
    pub fn read_request(&self, more: bool) {
        self.more_input.store(more, Ordering::SeqCst);
    }

    /// The reader is about to wait for input: what direct writes held back goes out now. If
    /// the writer thread holds the lock, it flushes everything before it lets go of its queue,
    /// so nothing waits for the lock here (invariant 3).
    pub fn input_drained(&self) {
        self.more_input.store(false, Ordering::SeqCst);
        if let Ok(mut writer) = self.writer.try_lock()
            && !writer.buffer().is_empty()
            && let Err(err) = writer.flush()
        {
            self.failed(&err);
        }
    }

    /// stdout is broken: every later message is discarded instead of written.
    fn failed(&self, err: &std::io::Error) {
        tracing::warn!("stdout write failed; further output is discarded: {err}");
        self.broken.store(true, Ordering::SeqCst);
    }

    /// The writer thread: writes queued messages in order, batching whatever is already queued
    /// into one flush, and uncounts them once flushed (invariant 1).
    pub fn write_queued(&self, mut queue: mpsc::Receiver<OutboundMessage>) {
        let mut unflushed = 0;
        while let Some(message) = queue.blocking_recv() {
            if message.end {
                break;
            }
            let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
            unflushed += 1;
            let written = write_line(&mut writer, &message.text)
                // Never hold a queued message back.
                .and_then(|()| {
                    if queue.is_empty() {
                        writer.flush()?;
                        self.pending.fetch_sub(unflushed, Ordering::SeqCst);
                        unflushed = 0;
                    }
                    Ok(())
                });
            drop(writer);
            drop(message);
            if let Err(err) = written {
                self.failed(&err);
                // Keep draining so senders never block on a dead stdout (invariant 5).
                while queue.blocking_recv().is_some() {}
                return;
            }
        }
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(err) = writer.flush() {
            tracing::warn!("stdout flush failed: {err}");
        }
    }
}

impl DirectSink for DirectOutput {
    fn try_write(&self, text: &str) -> bool {
        if !crate::fast_path::on_claimed_thread()
            || self.pending.load(Ordering::SeqCst) != 0
            || self.broken.load(Ordering::SeqCst)
        {
            return false;
        }
        let Ok(mut writer) = self.writer.try_lock() else {
            return false;
        };
        // Under the lock the writer thread can neither be writing nor have anything buffered.
        if self.pending.load(Ordering::SeqCst) != 0 {
            return false;
        }
        let held = writer.buffer().len();
        // The writes `write_line` makes: one, or what is held and then the line.
        let writes = if text.len() < UNBUFFERED_BYTES {
            [held + text.len() + 1, 0]
        } else {
            [held, text.len() + 1]
        };
        if !(writer.get_mut().room.as_mut()).is_some_and(|room| room.fits_writes(&writes)) {
            return false;
        }
        let hold = self.more_input.load(Ordering::SeqCst);
        let written = write_line(&mut writer, text).and_then(|()| {
            if hold && writer.buffer().len() < HELD_BYTES {
                Ok(())
            } else {
                writer.flush()
            }
        });
        if let Err(err) = written {
            self.failed(&err);
        }
        true
    }

    fn queued(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    fn dropped(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::sync::Arc;

    use super::*;
    use crate::transport::Outbound;

    /// stdout as a pipe, and its read end.
    fn piped() -> (std::fs::File, Arc<DirectOutput>) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        // Room for more than HELD_BYTES (the default is 64 KiB; 1 MiB is any user's limit).
        rustix::pipe::fcntl_setpipe_size(&write, 256 * 1024).unwrap();
        let write = std::fs::File::from(write);
        let room = PipeRoom::new(&write);
        assert!(room.is_some(), "a pipe's room is tracked");
        let output = DirectOutput::new(Box::new(write), room, 256 * 1024);
        (std::fs::File::from(read), Arc::new(output))
    }

    fn unread(read: &std::fs::File) -> usize {
        rustix::io::ioctl_fionread(read).unwrap() as usize
    }

    fn read_text(read: &mut std::fs::File) -> String {
        let mut text = vec![0; unread(read)];
        read.read_exact(&mut text).unwrap();
        String::from_utf8(text).unwrap()
    }

    #[tokio::test]
    async fn a_direct_write_never_overtakes_a_queued_message() {
        crate::fast_path::claim_thread();
        let (mut read, output) = piped();
        let (outbound, queue) = Outbound::channel();
        let outbound = outbound.with_direct(Arc::clone(&output) as Arc<dyn DirectSink>);
        // A runtime worker's message waits in the queue: the writer thread is not running yet.
        let worker = outbound.clone();
        tokio::task::spawn_blocking(move || {
            tokio::runtime::Handle::current().block_on(worker.send("1".into()))
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(unread(&read), 0);
        // This thread may write directly, but not around the queued message.
        outbound.send("2".into()).await.unwrap();
        assert_eq!(unread(&read), 0, "queued behind 1");
        let writer = Arc::clone(&output);
        let writing = tokio::task::spawn_blocking(move || writer.write_queued(queue));
        while output.pending.load(Ordering::SeqCst) != 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        // The queue is written: direct again.
        assert!(output.try_write("3"));
        assert_eq!(read_text(&mut read), "1\n2\n3\n");
        drop(outbound);
        writing.await.unwrap();
    }

    #[test]
    fn a_full_pipe_takes_no_direct_write() {
        crate::fast_path::claim_thread();
        let (mut read, output) = piped();
        let line = "x".repeat(16 * 1024);
        let mut written = 0;
        while output.try_write(&line) {
            written += 1;
            assert!(written < 64, "the pipe's room must run out");
        }
        // Refused without waiting for the reader; once it has read, there is room again.
        assert_eq!(read_text(&mut read).len(), written * (line.len() + 1));
        assert!(output.try_write(&line));
    }

    #[test]
    fn a_long_line_goes_out_whole_after_what_was_held() {
        crate::fast_path::claim_thread();
        let (mut read, output) = piped();
        output.read_request(true);
        assert!(output.try_write("a"));
        let long = "z".repeat(UNBUFFERED_BYTES * 3);
        assert!(output.try_write(&long));
        assert_eq!(read_text(&mut read), format!("a\n{long}\n"));
    }

    #[test]
    fn the_processor_never_waits_for_the_writer() {
        crate::fast_path::claim_thread();
        let (read, output) = piped();
        let held = output.writer.lock().unwrap();
        assert!(
            !output.try_write("x"),
            "queued while the writer thread writes"
        );
        output.input_drained();
        drop(held);
        assert_eq!(unread(&read), 0);
    }

    #[test]
    fn only_the_processor_thread_writes_directly() {
        let (read, output) = piped();
        let elsewhere = Arc::clone(&output);
        assert!(
            !std::thread::spawn(move || elsewhere.try_write("x"))
                .join()
                .unwrap()
        );
        crate::fast_path::claim_thread();
        assert!(output.try_write("x"));
        assert_eq!(unread(&read), 2);
    }

    #[test]
    fn held_replies_go_out_before_the_reader_waits() {
        crate::fast_path::claim_thread();
        let (mut read, output) = piped();
        output.read_request(true);
        assert!(output.try_write("a"));
        assert!(output.try_write("b"));
        assert_eq!(unread(&read), 0, "batched while more requests are read");
        output.input_drained();
        assert_eq!(read_text(&mut read), "a\nb\n");
        // Never more than HELD_BYTES held.
        output.read_request(true);
        assert!(output.try_write(&"y".repeat(HELD_BYTES)));
        assert_eq!(unread(&read), HELD_BYTES + 1);
    }

    #[test]
    fn a_broken_stdout_discards_and_queues_nothing_directly() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            }
        }
        crate::fast_path::claim_thread();
        let (_read, write) = rustix::pipe::pipe().unwrap();
        let room = PipeRoom::new(&std::fs::File::from(write));
        let output = DirectOutput::new(Box::new(Broken), room, 1024);
        assert!(output.try_write("lost"), "taken, and the failure noted");
        assert!(!output.try_write("next"), "later messages go to the queue");
        let (outbound, queue) = Outbound::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            outbound.send("queued".into()).await.unwrap();
            drop(outbound);
        });
        // The writer drains a dead stdout and returns.
        output.write_queued(queue);
    }
}
