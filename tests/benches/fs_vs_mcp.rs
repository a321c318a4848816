//! A sandboxed 4 KiB `fs/readFile` through wexec's `fs` plugin against
//! `@modelcontextprotocol/server-filesystem`'s `read_text_file` (what agents use today), with
//! the same client (blocking pipes, one JSON line per message) in the same run:
//! sequential median latency, pipelined throughput, and the peer's no-op `ping`.
//!
//! Run:
//! ```sh
//! (cd /tmp/mcp && npm install @modelcontextprotocol/server-filesystem)
//! MCP_FS_SERVER=/tmp/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js \
//!   cargo bench -p wexec-tests --bench fs_vs_mcp
//! ```

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SEQUENTIAL: usize = 2_000;
const PIPELINED: usize = 10_000;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
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
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Reads lines until the reply to `id`.
    fn reply(&mut self, id: i64) -> Value {
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).expect("read") > 0,
                "peer closed its output"
            );
            let message: Value = serde_json::from_str(&line).expect("JSON line");
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

    fn sequential(&mut self, method: &str, params: &Value) -> Duration {
        for _ in 0..200 {
            self.call(method, params);
        }
        let mut samples: Vec<Duration> = (0..SEQUENTIAL)
            .map(|_| {
                let began = Instant::now();
                self.call(method, params);
                began.elapsed()
            })
            .collect();
        samples.sort_unstable();
        samples[samples.len() / 2]
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
        let mut line = String::new();
        let mut replies = 0;
        while replies < PIPELINED {
            line.clear();
            assert!(self.stdout.read_line(&mut line).expect("read") > 0);
            if line.contains("\"id\"") {
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

fn main() {
    let dir = wexec_tests::TempDir::new();
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "x".repeat(4096)).expect("write 4 KiB file");
    let path = file.display().to_string();
    let root = dir.path().display().to_string();

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
    let wexec_median = wexec.sequential("fs/readFile", &read);
    let wexec_status = wexec.sequential("environment/status", &json!({}));
    let wexec_rate = wexec.pipelined("fs/readFile", &read);
    // The floor of this client and this machine: `cat` echoes each request line, and the
    // echoed request passes for its reply.
    let floor = Peer::spawn(Command::new("cat")).sequential("ping", &json!({}));
    println!(
        "wexec fs/readFile 4 KiB: median {:.1} µs sequential, {:.0} req/s pipelined ({PIPELINED} requests); environment/status (native) median {:.1} µs; pipe round trip through `cat` median {:.1} µs",
        micros(wexec_median),
        wexec_rate,
        micros(wexec_status),
        micros(floor)
    );

    let Some(server) = std::env::var_os("MCP_FS_SERVER") else {
        println!(
            "MCP_FS_SERVER is not set: install @modelcontextprotocol/server-filesystem with npm and point it at dist/index.js to compare"
        );
        return;
    };
    let mut command = Command::new("node");
    command.arg(server).arg(&root);
    let mut mcp = Peer::spawn(command);
    mcp.call(
        "initialize",
        &json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
    );
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let tool = json!({"name": "read_text_file", "arguments": {"path": path}});
    let text = mcp.call("tools/call", &tool);
    assert!(
        text.to_string().contains(&"x".repeat(100)),
        "read_text_file works: {text}"
    );
    let mcp_median = mcp.sequential("tools/call", &tool);
    let mcp_ping = mcp.sequential("ping", &json!({}));
    let mcp_rate = mcp.pipelined("tools/call", &tool);
    println!(
        "server-filesystem read_text_file 4 KiB: median {:.1} µs sequential, {:.0} req/s pipelined; ping median {:.1} µs",
        micros(mcp_median),
        mcp_rate,
        micros(mcp_ping)
    );
    println!(
        "ratios: wexec {:.1}x faster at the median, {:.1}x the pipelined throughput; wexec's sandboxed read vs the peer's no-op ping: {:.1} µs vs {:.1} µs",
        mcp_median.as_secs_f64() / wexec_median.as_secs_f64(),
        wexec_rate / mcp_rate,
        micros(wexec_median),
        micros(mcp_ping)
    );
}
