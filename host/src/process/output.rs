//! A process's event log (docs/protocol.md §8.2, §8.6, §8.9): one seq counter from 1 across output
//! chunks, the exit and the close; the newest chunks retained within a byte and a count cap.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::protocol::OutputStream;

/// Newest chunk bytes kept per process.
pub const RETAINED_BYTES: usize = 1024 * 1024;

/// Most chunks kept per process.
pub const RETAINED_CHUNKS: usize = 50_000;

/// One retained chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Its seq.
    pub seq: u64,
    /// Its stream.
    pub stream: OutputStream,
    /// Its bytes, shared with readers.
    pub data: Bytes,
}

/// The log of one process.
#[derive(Debug)]
pub struct OutputLog {
    /// The seq the next event gets.
    next_seq: u64,
    chunks: VecDeque<Chunk>,
    retained_bytes: usize,
    exit: Option<i32>,
    closed: bool,
}

/// What `process/read` returns, before encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Chunks after the cursor, within the budget.
    pub chunks: Vec<Chunk>,
    /// Where the next read should start.
    pub next_seq: u64,
    /// The exit code, once recorded.
    pub exit: Option<i32>,
    /// Whether the close was recorded.
    pub closed: bool,
}

impl Default for OutputLog {
    fn default() -> Self {
        Self {
            next_seq: 1,
            chunks: VecDeque::new(),
            retained_bytes: 0,
            exit: None,
            closed: false,
        }
    }
}

impl OutputLog {
    /// Records a chunk and returns its seq, evicting the oldest chunks beyond the caps.
    pub fn push_chunk(&mut self, stream: OutputStream, data: Bytes) -> u64 {
        let seq = self.take_seq();
        self.retained_bytes += data.len();
        self.chunks.push_back(Chunk { seq, stream, data });
        while self.chunks.len() > RETAINED_CHUNKS || self.retained_bytes > RETAINED_BYTES {
            let Some(evicted) = self.chunks.pop_front() else {
                break;
            };
            self.retained_bytes -= evicted.data.len();
        }
        seq
    }

    /// Bytes of the retained chunks.
    pub fn retained_bytes(&self) -> usize {
        self.retained_bytes
    }

    /// Drops every retained chunk (their seqs stay used).
    pub fn release_chunks(&mut self) {
        self.chunks = VecDeque::new();
        self.retained_bytes = 0;
    }

    /// Whether the retained output shows a sandbox denial, as Codex looks for one
    /// (case-insensitively; docs/protocol.md §7.3).
    pub fn mentions_denial(&self) -> bool {
        const DENIALS: [&[u8]; 7] = [
            b"operation not permitted",
            b"permission denied",
            b"read-only file system",
            b"seccomp",
            b"sandbox",
            b"landlock",
            b"failed to write file",
        ];
        let text: Vec<u8> = self
            .chunks
            .iter()
            .flat_map(|chunk| chunk.data.iter().map(u8::to_ascii_lowercase))
            .collect();
        DENIALS
            .iter()
            .any(|denial| memchr::memmem::find(&text, denial).is_some())
    }

    /// Records the exit and returns its seq.
    pub fn record_exit(&mut self, code: i32) -> u64 {
        self.exit = Some(code);
        self.take_seq()
    }

    /// Records the close (always the last event) and returns its seq.
    pub fn record_close(&mut self) -> u64 {
        self.closed = true;
        self.take_seq()
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Whether a long poll from `after_seq` should answer now: a chunk qualifies, the process
    /// closed, or it exited after the cursor.
    pub fn is_ready(&self, after_seq: u64) -> bool {
        self.closed
            || self
                .chunks
                .back()
                .is_some_and(|chunk| chunk.seq > after_seq)
            || (self.exit.is_some() && after_seq < self.next_seq - 1)
    }

    /// Chunks after `after_seq`, within `max_bytes` decoded bytes (the first always fits).
    pub fn read(&self, after_seq: u64, max_bytes: Option<u64>) -> Snapshot {
        let start = self.chunks.partition_point(|chunk| chunk.seq <= after_seq);
        let mut chunks = Vec::new();
        let mut budget_used: u64 = 0;
        for chunk in self.chunks.range(start..) {
            let size = chunk.data.len() as u64;
            if let Some(max) = max_bytes
                && !chunks.is_empty()
                && budget_used + size > max
            {
                break;
            }
            budget_used += size;
            chunks.push(chunk.clone());
        }
        let next_seq = match (max_bytes, chunks.last()) {
            (Some(_), Some(last)) => last.seq + 1,
            _ => self.next_seq,
        };
        Snapshot {
            chunks,
            next_seq,
            exit: self.exit,
            closed: self.closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn data(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    #[test]
    fn one_counter_numbers_chunks_exit_and_close() {
        let mut log = OutputLog::default();
        assert_eq!(log.push_chunk(OutputStream::Stdout, data("a")), 1);
        assert_eq!(log.push_chunk(OutputStream::Stderr, data("b")), 2);
        assert_eq!(log.record_exit(7), 3);
        assert_eq!(log.push_chunk(OutputStream::Stdout, data("late")), 4);
        assert_eq!(log.record_close(), 5);
        let all = log.read(0, None);
        assert_eq!(
            all.chunks.iter().map(|c| c.seq).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
        assert_eq!((all.next_seq, all.exit, all.closed), (6, Some(7), true));
    }

    #[test]
    fn max_bytes_budgets_whole_chunks_and_moves_next_seq() {
        let mut log = OutputLog::default();
        log.push_chunk(OutputStream::Stdout, data("abc"));
        log.push_chunk(OutputStream::Stdout, data("de"));
        log.push_chunk(OutputStream::Stdout, data("f"));
        log.record_exit(0);
        // The first chunk always fits, even over budget.
        let one = log.read(0, Some(1));
        assert_eq!((one.chunks.len(), one.next_seq), (1, 2));
        let two = log.read(0, Some(5));
        assert_eq!((two.chunks.len(), two.next_seq), (2, 3));
        let rest = log.read(2, Some(100));
        assert_eq!((rest.chunks.len(), rest.next_seq), (1, 4));
        // No chunks returned: next_seq is one past the latest event.
        let none = log.read(3, Some(100));
        assert_eq!((none.chunks.len(), none.next_seq), (0, 5));
    }

    #[test]
    fn retention_keeps_the_newest_within_both_caps() {
        let mut log = OutputLog::default();
        let big = Bytes::from(vec![0u8; 64 * 1024]);
        for _ in 0..20 {
            log.push_chunk(OutputStream::Stdout, big.clone());
        }
        let snapshot = log.read(0, None);
        assert_eq!(snapshot.chunks.len(), 16, "16 × 64 KiB = 1 MiB");
        assert_eq!(snapshot.chunks[0].seq, 5, "the oldest four were evicted");

        let mut log = OutputLog::default();
        for _ in 0..RETAINED_CHUNKS + 10 {
            log.push_chunk(OutputStream::Stdout, data("x"));
        }
        let snapshot = log.read(0, None);
        assert_eq!(snapshot.chunks.len(), RETAINED_CHUNKS);
        assert_eq!(snapshot.chunks[0].seq, 11);
    }

    #[test]
    fn readiness_for_long_polls() {
        let mut log = OutputLog::default();
        assert!(!log.is_ready(0));
        log.push_chunk(OutputStream::Stdout, data("a"));
        assert!(log.is_ready(0));
        assert!(!log.is_ready(1));
        log.record_exit(0);
        assert!(log.is_ready(1), "the exit is after the cursor");
        assert!(!log.is_ready(2), "the exit was already seen");
        log.record_close();
        assert!(log.is_ready(3), "closed always answers");
    }
}
