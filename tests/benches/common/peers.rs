//! What the stdio benchmarks share: a client that writes one JSON line per message and reads
//! replies in large reads, parsed where they lie ([`Lines`]); sequential medians taken in
//! interleaved blocks and pipelined rates in interleaved rounds, so that a change in the
//! machine's load touches every peer of a ratio alike.

#![allow(dead_code, reason = "each benchmark uses part of this module")]

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

/// Sequential calls per block, and blocks per measure (after one warm-up block).
pub const BLOCK: usize = 100;
pub const BLOCKS: usize = 30;
/// Requests per pipelined batch, and batches per server.
pub const PIPELINED: usize = 10_000;
pub const ROUNDS: usize = 5;

/// The client's side of a peer's stdout: lines read with large reads into one buffer and
/// parsed where they lie, as a client that cares reads JSON lines. A large reply is one long
/// line: read through a small `BufReader`, then copied into a `String` and a `Value`, it costs
/// the client as much as the server, alike for every server, and every ratio shrinks toward 1
/// (docs/performance.md, "File reads", has the figures).
pub struct Lines {
    stdout: ChildStdout,
    buffer: Vec<u8>,
    /// The unread bytes are `buffer[start..end]`; none before `scanned` is a line break.
    start: usize,
    scanned: usize,
    end: usize,
}

/// The least room a read is given (else the buffer is compacted or grown first).
const MIN_READ: usize = 64 * 1024;

impl Lines {
    pub fn new(stdout: ChildStdout) -> Self {
        Self {
            stdout,
            buffer: vec![0; 1 << 20],
            start: 0,
            scanned: 0,
            end: 0,
        }
    }

    /// The next line, without its line break.
    pub fn next(&mut self) -> &[u8] {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.buffer[self.scanned..self.end]) {
                let (start, stop) = (self.start, self.scanned + at);
                self.start = stop + 1;
                self.scanned = self.start;
                return &self.buffer[start..stop];
            }
            self.scanned = self.end;
            if self.start == self.end {
                (self.start, self.scanned, self.end) = (0, 0, 0);
            }
            if self.buffer.len() - self.end < MIN_READ {
                self.buffer.copy_within(self.start..self.end, 0);
                (self.scanned, self.end) = (self.scanned - self.start, self.end - self.start);
                self.start = 0;
                if self.buffer.len() - self.end < MIN_READ {
                    self.buffer.resize(self.buffer.len() * 2, 0);
                }
            }
            let read = self
                .stdout
                .read(&mut self.buffer[self.end..])
                .expect("read");
            assert!(read > 0, "peer closed its output");
            self.end += read;
        }
    }
}

/// What a timed call checks of each line: the whole line is parsed (so it must be JSON; the
/// fields not named here are parsed and ignored), and a reply to the call must not be an error.
#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    id: Option<i64>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

pub struct Peer {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: Lines,
    pub next_id: i64,
}

impl Peer {
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn peer");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = Lines::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    /// One `write` per message, as a client should: a line written in pieces (what `writeln!`
    /// on an unbuffered pipe does, one piece per formatted fragment) wakes the server for
    /// every piece.
    pub fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).expect("write");
    }

    /// Reads lines until the reply to `id`.
    pub fn reply(&mut self, id: i64) -> Value {
        loop {
            let message: Value = serde_json::from_slice(self.stdout.next()).expect("JSON line");
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{message}");
                return message;
            }
        }
    }

    pub fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.reply(id)
    }

    /// One block of sequential calls, each timed: the request written from its text made
    /// once, the reply parsed as [`Reply`].
    pub fn block(
        &mut self,
        method: &str,
        params: &Value,
        count: usize,
        samples: &mut Vec<Duration>,
    ) {
        let (method, params) = (Value::from(method).to_string(), params.to_string());
        for _ in 0..count {
            let id = self.next_id;
            self.next_id += 1;
            let began = Instant::now();
            let request = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":{method},\"params\":{params}}}\n"
            );
            self.stdin.write_all(request.as_bytes()).expect("write");
            loop {
                let line = self.stdout.next();
                let reply: Reply = serde_json::from_slice(line).expect("JSON line");
                if reply.id == Some(id) {
                    assert!(reply.error.is_none(), "{}", String::from_utf8_lossy(line));
                    break;
                }
            }
            samples.push(began.elapsed());
        }
    }

    /// Requests per second with every request written before the replies are read.
    pub fn pipelined(&mut self, method: &str, params: &Value) -> f64 {
        let first = self.next_id;
        let lines: String = (0..PIPELINED as i64)
            .map(|i| {
                format!(
                    "{}\n",
                    json!({"jsonrpc": "2.0", "id": first + i, "method": method, "params": params})
                )
            })
            .collect();
        self.next_id += PIPELINED as i64;
        let began = Instant::now();
        let mut stdin = self.stdin.try_clone_for_bench();
        let writer = std::thread::spawn(move || {
            stdin.write_all(lines.as_bytes()).expect("write");
            stdin.flush().expect("flush");
            stdin
        });
        let mut replies = 0;
        while replies < PIPELINED {
            if memchr::memmem::find(self.stdout.next(), br#""id""#).is_some() {
                replies += 1;
            }
        }
        let elapsed = began.elapsed();
        self.stdin = writer.join().expect("writer");
        PIPELINED as f64 / elapsed.as_secs_f64()
    }
}

trait TryCloneForBench {
    fn try_clone_for_bench(&mut self) -> ChildStdin;
}

impl TryCloneForBench for ChildStdin {
    /// Hands the pipe to the writer thread (the placeholder is replaced when it returns).
    fn try_clone_for_bench(&mut self) -> ChildStdin {
        let fd = std::os::fd::AsFd::as_fd(self)
            .try_clone_to_owned()
            .expect("dup stdin");
        ChildStdin::from(fd)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// One measured call: which server, which method.
pub struct Measure<'a> {
    pub peer: usize,
    pub method: &'a str,
    pub params: Value,
    pub samples: Vec<Duration>,
}

/// Sequential medians, every measure taking its turn block by block.
pub fn sequential_medians(peers: &mut [Peer], measures: &mut [Measure<'_>]) -> Vec<Duration> {
    sized_sequential_medians(peers, measures, BLOCKS, BLOCK)
}

/// [`sequential_medians`] with `blocks` blocks of `size` calls (after one warm-up block).
pub fn sized_sequential_medians(
    peers: &mut [Peer],
    measures: &mut [Measure<'_>],
    blocks: usize,
    size: usize,
) -> Vec<Duration> {
    for block in 0..=blocks {
        for measure in measures.iter_mut() {
            let mut samples = Vec::with_capacity(size);
            peers[measure.peer].block(measure.method, &measure.params, size, &mut samples);
            if block > 0 {
                measure.samples.extend(samples);
            }
        }
    }
    measures
        .iter_mut()
        .map(|measure| {
            measure.samples.sort_unstable();
            measure.samples[measure.samples.len() / 2]
        })
        .collect()
}

/// Median pipelined rate per server, the servers taking turns round by round.
pub fn pipelined_medians(peers: &mut [Peer], calls: &[(&str, Value)]) -> Vec<f64> {
    let mut rates = vec![Vec::with_capacity(ROUNDS); peers.len()];
    for _ in 0..ROUNDS {
        for ((peer, (method, params)), rates) in peers.iter_mut().zip(calls).zip(&mut rates) {
            // Lets the previous batch's aftermath (node's garbage collector, say) settle first.
            std::thread::sleep(Duration::from_millis(200));
            rates.push(peer.pipelined(method, params));
        }
    }
    rates
        .into_iter()
        .map(|mut rates| {
            rates.sort_by(f64::total_cmp);
            rates[rates.len() / 2]
        })
        .collect()
}

/// Pins the calling thread (and what it spawns from then on) to `cpu`.
pub fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).expect("pin to a CPU");
}
