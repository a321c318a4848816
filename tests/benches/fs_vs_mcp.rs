//! A sandboxed 4 KiB `fs/readFile` through wexec's `fs` plugin against
//! `@modelcontextprotocol/server-filesystem`'s `read_text_file` (what agents use today), with
//! the same client (blocking pipes, one JSON line per message, one `write` per line, replies
//! read in large reads and parsed where they lie: [`Lines`]) in the same run: sequential
//! median latency, pipelined throughput, and the peer's no-op `ping`.
//! The servers take turns (blocks of sequential calls, rounds of pipelined batches), so a
//! change in the machine's load touches both sides of each ratio alike.
//!
//! The comparison runs three times, with fresh servers each time: as the kernel places the
//! processes; with the client and the servers on CPU 0; with the client on CPU 0 and the
//! servers on CPU 1. Read the last two for like-for-like figures: on small VMs whose idle CPUs
//! halt, a round trip costs several times more when client and server sit on different CPUs
//! (every wakeup goes through the hypervisor), and in the first setting the kernel need not
//! place both servers alike.
//!
//! Run:
//! ```sh
//! (cd /tmp/mcp && npm install @modelcontextprotocol/server-filesystem)
//! MCP_FS_SERVER=/tmp/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js \
//!   cargo bench -p wexec-tests --bench fs_vs_mcp
//! ```
//!
//! With `WEXEC_BASELINE_BIN=<another wexec binary>` (say, main's, copied aside), that wexec is
//! measured too, taking its turns like the others: a change's cost, side by side in one run.
//!
//! With `CODEX_BIN=<the codex binary of @openai/codex@0.169.0>`, Codex's own exec-server
//! (`codex exec-server --listen stdio://`, a scratch `HOME`) takes its turns too, for every row
//! it serves: the 4 KiB read, a 1 MiB read (also measured for wexec then), `environment/status`.
//!
//! `cat` takes its turns as well, answering each request with itself: the round trip without
//! any server work, below which no server's median can go in that placement.

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

/// Sequential calls per block, and blocks per measure (after one warm-up block).
const BLOCK: usize = 100;
const BLOCKS: usize = 30;
/// Requests per pipelined batch, and batches per server.
const PIPELINED: usize = 10_000;
const ROUNDS: usize = 5;

/// The client's side of a peer's stdout: lines read with large reads into one buffer and
/// parsed where they lie, as a client that cares reads JSON lines. A 1 MiB file's reply is a
/// 1.4 MB line: std's 8 KiB `BufReader` took 175 reads for it, and `read_line` into a `String`
/// then a `serde_json::Value` checked and copied its 1.4 MB twice more, ~200 µs of every such
/// round trip spent in the client alike for every server (2026-12-06), which made every ratio
/// smaller than the servers' own times are apart.
struct Lines {
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
    fn new(stdout: ChildStdout) -> Self {
        Self {
            stdout,
            buffer: vec![0; 1 << 20],
            start: 0,
            scanned: 0,
            end: 0,
        }
    }

    /// The next line, without its line break.
    fn next(&mut self) -> &[u8] {
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

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines,
    next_id: i64,
}

impl Peer {
    fn spawn(mut command: Command) -> Self {
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
    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).expect("write");
    }

    /// Reads lines until the reply to `id`.
    fn reply(&mut self, id: i64) -> Value {
        loop {
            let message: Value = serde_json::from_slice(self.stdout.next()).expect("JSON line");
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{message}");
                return message;
            }
        }
    }

    fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.reply(id)
    }

    /// One block of sequential calls, each timed: the request written from its text made
    /// once, the reply parsed as [`Reply`].
    fn block(&mut self, method: &str, params: &Value, samples: &mut Vec<Duration>) {
        let (method, params) = (Value::from(method).to_string(), params.to_string());
        for _ in 0..BLOCK {
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
    fn pipelined(&mut self, method: &str, params: &Value) -> f64 {
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

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// One measured call: which server, which method.
struct Measure<'a> {
    peer: usize,
    method: &'a str,
    params: Value,
    samples: Vec<Duration>,
}

/// Sequential medians, every measure taking its turn block by block.
fn sequential_medians(peers: &mut [Peer], measures: &mut [Measure<'_>]) -> Vec<Duration> {
    for block in 0..=BLOCKS {
        for measure in measures.iter_mut() {
            let mut samples = Vec::with_capacity(BLOCK);
            peers[measure.peer].block(measure.method, &measure.params, &mut samples);
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
fn pipelined_medians(peers: &mut [Peer], calls: &[(&str, Value)]) -> Vec<f64> {
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

fn main() {
    let dir = wexec_tests::TempDir::new();
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "x".repeat(4096)).expect("write 4 KiB file");
    std::fs::write(dir.path().join("big.bin"), vec![7u8; 1 << 20]).expect("write 1 MiB file");
    let server = std::env::var_os("MCP_FS_SERVER");
    if server.is_none() {
        println!(
            "MCP_FS_SERVER is not set: install @modelcontextprotocol/server-filesystem with npm and point it at dist/index.js to compare"
        );
    }
    // Asked before any pinning narrows it.
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let run = |setting: &str, servers_on: Option<usize>, client_on: Option<usize>| {
        compare(
            setting,
            dir.path(),
            &file,
            server.as_deref(),
            servers_on,
            client_on,
        );
    };
    run("as the kernel places them", None, None);
    // On a small VM where idle CPUs halt, which CPU a server wakes on decides a round trip more
    // than the server does (tens of µs for a wakeup through the hypervisor). Both servers are
    // therefore also measured placed alike: all on one CPU, where what is left is each
    // server's own work, and servers on another CPU than the client, where every round trip
    // pays two wakeups across CPUs.
    run("client and servers on one CPU", Some(0), Some(0));
    if cpus > 1 {
        run("client on CPU 0, servers on CPU 1", Some(1), Some(0));
    }
}

/// Pins the calling thread (and what it spawns from then on) to `cpu`.
fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).expect("pin to a CPU");
}

/// Runs the comparison with fresh servers, spawned on `servers_on` (they inherit the
/// spawning thread's affinity), then measured from `client_on`.
fn compare(
    setting: &str,
    root: &std::path::Path,
    file: &std::path::Path,
    server: Option<&std::ffi::OsStr>,
    servers_on: Option<usize>,
    client_on: Option<usize>,
) {
    if let Some(cpu) = servers_on {
        pin(cpu);
    }
    let path = file.display().to_string();
    let root = root.display().to_string();

    let mut command = Command::new(wexec_tests::wexec_bin());
    command.args(["--fs-root", &root]).env("RUST_LOG", "warn");
    let mut wexec = Peer::spawn(command);
    wexec.call("initialize", &json!({"clientName": "bench"}));
    wexec.send(&json!({"method": "initialized", "params": {}}));
    let read = json!({"path": path});
    assert_eq!(
        wexec.call("fs/readFile", &read)["result"]["dataBase64"]
            .as_str()
            .map(str::len),
        Some(5464)
    );
    let mut peers = vec![wexec];
    let mut measures = vec![
        Measure {
            peer: 0,
            method: "fs/readFile",
            params: read.clone(),
            samples: Vec::new(),
        },
        Measure {
            peer: 0,
            method: "environment/status",
            params: json!({}),
            samples: Vec::new(),
        },
    ];
    let mut pipelined = vec![("fs/readFile", read.clone())];

    if let Some(baseline) = std::env::var_os("WEXEC_BASELINE_BIN") {
        let mut command = Command::new(baseline);
        command.args(["--fs-root", &root]).env("RUST_LOG", "warn");
        let mut peer = Peer::spawn(command);
        peer.call("initialize", &json!({"clientName": "bench"}));
        peer.send(&json!({"method": "initialized", "params": {}}));
        let index = peers.len();
        peers.push(peer);
        for (method, params) in [
            ("fs/readFile", read.clone()),
            ("environment/status", json!({})),
        ] {
            measures.push(Measure {
                peer: index,
                method,
                params,
                samples: Vec::new(),
            });
        }
        pipelined.push(("fs/readFile", read.clone()));
    }
    let baseline = peers.len() > 1;
    let tool = json!({"name": "read_text_file", "arguments": {"path": path}});
    if let Some(server) = server {
        let mut command = Command::new("node");
        command.arg(server).arg(&root);
        let mut mcp = Peer::spawn(command);
        mcp.call(
            "initialize",
            &json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let text = mcp.call("tools/call", &tool);
        assert!(
            text.to_string().contains(&"x".repeat(100)),
            "read_text_file works: {text}"
        );
        let index = peers.len();
        peers.push(mcp);
        for (method, params) in [("tools/call", tool.clone()), ("ping", json!({}))] {
            measures.push(Measure {
                peer: index,
                method,
                params,
                samples: Vec::new(),
            });
        }
        pipelined.push(("tools/call", tool));
    }

    // Codex's exec-server: the same protocol, but paths must be `file://` URIs.
    let codex = std::env::var_os("CODEX_BIN").map(|bin| {
        let home = file.with_file_name("codex-home");
        std::fs::create_dir_all(&home).expect("codex home");
        let mut command = Command::new(bin);
        command
            .args(["exec-server", "--listen", "stdio://"])
            .env("HOME", &home)
            .env("CODEX_HOME", &home);
        let mut codex = Peer::spawn(command);
        codex.call("initialize", &json!({"clientName": "bench"}));
        codex.send(&json!({"method": "initialized", "params": {}}));
        let (at, rate_at) = (measures.len(), pipelined.len());
        let read = json!({"path": format!("file://{path}")});
        let big = json!({"path": format!("file://{}", file.with_file_name("big.bin").display())});
        for (method, params) in [
            ("fs/readFile", read.clone()),
            ("environment/status", json!({})),
            ("fs/readFile", big),
        ] {
            measures.push(Measure {
                peer: peers.len(),
                method,
                params,
                samples: Vec::new(),
            });
        }
        pipelined.push(("fs/readFile", read));
        peers.push(codex);
        // wexec's 1 MiB read, for the same row.
        measures.push(Measure {
            peer: 0,
            method: "fs/readFile",
            params: json!({"path": file.with_file_name("big.bin").display().to_string()}),
            samples: Vec::new(),
        });
        (at, rate_at)
    });

    // The floor: `cat`, which answers every request with the request itself at once. What a
    // round trip costs in this placement without any server work: no server's median is below
    // it, so no server can lead a peer by more than the peer's median over it.
    let floor = {
        peers.push(Peer::spawn(Command::new("cat")));
        measures.push(Measure {
            peer: peers.len() - 1,
            method: "environment/status",
            params: json!({}),
            samples: Vec::new(),
        });
        pipelined.push(("environment/status", json!({})));
        (measures.len() - 1, pipelined.len() - 1)
    };

    if let Some(cpu) = client_on {
        pin(cpu);
    }
    let medians = sequential_medians(&mut peers, &mut measures);
    let rates = pipelined_medians(&mut peers, &pipelined);
    println!("{setting}:");
    println!(
        "  wexec fs/readFile 4 KiB: median {:.1} µs sequential, {:.0} req/s pipelined (median of {ROUNDS} batches of {PIPELINED}); environment/status (native) median {:.1} µs",
        micros(medians[0]),
        rates[0],
        micros(medians[1])
    );
    if baseline {
        println!(
            "  baseline wexec fs/readFile 4 KiB: median {:.1} µs sequential, {:.0} req/s pipelined; environment/status median {:.1} µs; this wexec / baseline: {:.3}x the read median, {:.3}x the pipelined rate",
            micros(medians[2]),
            rates[1],
            micros(medians[3]),
            medians[0].as_secs_f64() / medians[2].as_secs_f64(),
            rates[0] / rates[1],
        );
    }
    if let Some((at, rate_at)) = codex {
        let (read, status, big, our_big) = (
            medians[at],
            medians[at + 1],
            medians[at + 2],
            medians[at + 3],
        );
        println!(
            "  codex exec-server fs/readFile 4 KiB: median {:.1} µs sequential, {:.0} req/s pipelined; environment/status median {:.1} µs; fs/readFile 1 MiB median {:.0} µs (wexec {:.0} µs)",
            micros(read),
            rates[rate_at],
            micros(status),
            micros(big),
            micros(our_big),
        );
        println!(
            "  wexec vs codex: {:.1}x faster at the 4 KiB median, {:.1}x the pipelined throughput, {:.1}x at environment/status, {:.1}x at the 1 MiB read",
            read.as_secs_f64() / medians[0].as_secs_f64(),
            rates[0] / rates[rate_at],
            status.as_secs_f64() / medians[1].as_secs_f64(),
            big.as_secs_f64() / our_big.as_secs_f64(),
        );
    }
    let floor = (medians[floor.0], rates[floor.1]);
    println!(
        "  the round-trip floor (`cat` echoing each request): median {:.1} µs sequential, {:.0} req/s pipelined",
        micros(floor.0),
        floor.1
    );
    if let Some((at, _)) = codex {
        println!(
            "  so here no server can lead codex by more than {:.1}x at the 4 KiB median or {:.1}x at environment/status",
            medians[at].as_secs_f64() / floor.0.as_secs_f64(),
            medians[at + 1].as_secs_f64() / floor.0.as_secs_f64(),
        );
    }
    let mcp = if baseline { 4 } else { 2 };
    let (true, Some(&mcp_read), Some(&mcp_ping), Some(&mcp_rate)) = (
        server.is_some(),
        medians.get(mcp),
        medians.get(mcp + 1),
        rates.get(if baseline { 2 } else { 1 }),
    ) else {
        return;
    };
    println!(
        "  server-filesystem read_text_file 4 KiB: median {:.1} µs sequential, {:.0} req/s pipelined; ping median {:.1} µs",
        micros(mcp_read),
        mcp_rate,
        micros(mcp_ping)
    );
    println!(
        "  ratios: wexec {:.1}x faster at the median, {:.1}x the pipelined throughput; wexec's sandboxed read vs the peer's no-op ping: {:.1} µs vs {:.1} µs",
        mcp_read.as_secs_f64() / medians[0].as_secs_f64(),
        rates[0] / mcp_rate,
        micros(medians[0]),
        micros(mcp_ping)
    );
}
