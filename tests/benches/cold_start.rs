//! Cold start: spawning the server → the `initialize` reply on its stdout, for wexec and (when
//! `CODEX_BIN` names the `codex` binary of `@openai/codex@0.169.0`) `codex exec-server --listen
//! stdio://`, the same blocking client for both, taking turns so both see the same machine
//! noise. wexec runs as a user runs it, with its compile cache warm (the first, untimed, start
//! fills it) and the default sandbox ceiling; Codex with a scratch `HOME` and `CODEX_HOME`.
//! Also in the same rounds, the floor: spawning `true` and waiting for it to exit.
//!
//! Two more rows time a start up to its first useful answer, since work a server leaves for
//! after `initialize` lands on the first requests: spawn → `initialize` → `initialized` → the
//! reply to a 4 KiB `fs/readFile` (wexec's first plugin call: its engine and the `fs` plugin
//! are not ready before), and spawn → … → `process/closed` of a `process/start` of `/bin/true`
//! with each server's default confinement (wexec confines it, Codex without a `sandbox`
//! object does not).
//!
//! With `WEXEC_BASELINE_BIN=<another wexec binary>` (say, main's, copied aside), that wexec
//! takes its turns too: a change's effect, side by side in one run.
//!
//! Run: `CODEX_BIN=.../codex cargo bench -p wexec-tests --bench cold_start`

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wexec_tests::TempDir;

const WARMUP: usize = 3;
const ROUNDS: usize = 31;

const INITIALIZE: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"bench\"}}\n";

/// How far a start is timed.
#[derive(Clone, Copy)]
enum Until {
    /// The `initialize` reply.
    Initialized,
    /// The reply to a `fs/readFile` sent after the handshake.
    FirstRead,
    /// The `process/closed` of a `process/start` sent after the handshake.
    FirstProcess,
}

impl Until {
    const ALL: [Self; 3] = [Self::Initialized, Self::FirstRead, Self::FirstProcess];

    fn row(self) -> &'static str {
        match self {
            Self::Initialized => "spawn → initialize reply",
            Self::FirstRead => "spawn → first fs/readFile (4 KiB) reply",
            Self::FirstProcess => "spawn → first process/start of /bin/true closed",
        }
    }
}

/// Spawn → the answer `until` names; `dir` holds `file.txt` and is the process's cwd.
fn once(mut command: Command, until: Until, dir: &Path) -> Duration {
    let began = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(INITIALIZE.as_bytes()).expect("write");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || -> Value {
        let line = lines.next().expect("a line").expect("read");
        serde_json::from_str(&line).expect("JSON")
    };
    let reply = next();
    assert!(
        reply["result"]["sessionId"].is_string(),
        "not an initialize result: {reply}"
    );
    let mut send = |message: Value| {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .expect("write");
    };
    let uri = |path: &Path| format!("file://{}", path.display());
    match until {
        Until::Initialized => {}
        Until::FirstRead => {
            send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
            send(json!({"jsonrpc": "2.0", "id": 2, "method": "fs/readFile",
                        "params": {"path": uri(&dir.join("file.txt"))}}));
            let reply = next();
            assert!(reply["result"]["dataBase64"].is_string(), "{reply}");
        }
        Until::FirstProcess => {
            send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
            send(json!({"jsonrpc": "2.0", "id": 2, "method": "process/start",
                        "params": {"processId": "p", "argv": ["/bin/true"], "cwd": uri(dir),
                                   "env": {"PATH": "/usr/bin:/bin"}, "tty": false}}));
            loop {
                let message = next();
                assert!(message.get("error").is_none(), "{message}");
                if message["method"] == "process/closed" {
                    break;
                }
            }
        }
    }
    let took = began.elapsed();
    drop(stdin);
    child.wait().expect("wait");
    took
}

fn floor() -> Duration {
    let began = Instant::now();
    Command::new("true").status().expect("run true");
    began.elapsed()
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The samples of one server, per row.
#[derive(Default)]
struct Samples([Vec<Duration>; 3]);

impl Samples {
    fn median(&mut self, until: Until) -> Duration {
        median(&mut self.0[until as usize])
    }
}

fn main() {
    let home = TempDir::new();
    let dir = home.path().join("work");
    std::fs::create_dir_all(&dir).expect("work dir");
    std::fs::write(dir.join("file.txt"), vec![b'x'; 4096]).expect("file");
    let wexec_at = |bin: &std::ffi::OsStr| {
        let mut command = Command::new(bin);
        command
            .arg("--fs-root")
            .arg(&dir)
            .current_dir(home.path())
            .env("XDG_CACHE_HOME", home.path().join("cache"))
            .env("RUST_LOG", "warn");
        command
    };
    let ours_bin = wexec_tests::wexec_bin();
    let wexec = || wexec_at(ours_bin.as_os_str());
    let baseline_bin = std::env::var_os("WEXEC_BASELINE_BIN");
    let baseline = || baseline_bin.as_deref().map(wexec_at);
    let codex_bin = std::env::var_os("CODEX_BIN");
    let codex = || {
        let mut command = Command::new(codex_bin.as_ref()?);
        command
            .args(["exec-server", "--listen", "stdio://"])
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("CODEX_HOME", home.path());
        Some(command)
    };
    if codex_bin.is_none() {
        println!("CODEX_BIN is not set: measuring wexec alone (see the header)");
    }
    let (mut ours, mut before, mut theirs) =
        (Samples::default(), Samples::default(), Samples::default());
    let mut floors = Vec::new();
    for round in 0..WARMUP + ROUNDS {
        let measured = round >= WARMUP;
        for until in Until::ALL {
            let row = until as usize;
            let took = once(wexec(), until, &dir);
            if measured {
                ours.0[row].push(took);
            }
            if let Some(command) = baseline() {
                let took = once(command, until, &dir);
                if measured {
                    before.0[row].push(took);
                }
            }
            if let Some(command) = codex() {
                let took = once(command, until, &dir);
                if measured {
                    theirs.0[row].push(took);
                }
            }
        }
        let took = floor();
        if measured {
            floors.push(took);
        }
    }
    println!(
        "median of {ROUNDS}; floor (spawn `true`) {:.2} ms",
        ms(median(&mut floors))
    );
    for until in Until::ALL {
        let wexec = ours.median(until);
        let mut line = format!("{}: wexec {:.2} ms", until.row(), ms(wexec));
        if baseline_bin.is_some() {
            let before = before.median(until);
            line += &format!(
                "; baseline wexec {:.2} ms (this / baseline = {:.2})",
                ms(before),
                ms(wexec) / ms(before)
            );
        }
        if codex_bin.is_some() {
            let codex = theirs.median(until);
            line += &format!(
                "; codex exec-server {:.2} ms (wexec / codex = {:.2})",
                ms(codex),
                ms(wexec) / ms(codex)
            );
        }
        println!("{line}");
    }
}
