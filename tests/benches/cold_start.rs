//! Cold start: spawning the server → the `initialize` reply on its stdout, for wexec and (when
//! `CODEX_BIN` names the `codex` binary of `@openai/codex@0.169.0`) `codex exec-server --listen
//! stdio://`, the same blocking client for both, taking turns so both see the same machine
//! noise. wexec runs as a user runs it, with its compile cache warm (the first, untimed, start
//! fills it) and the default sandbox ceiling; Codex with a scratch `HOME` and `CODEX_HOME`.
//! Also in the same rounds, the floor: spawning `true` and waiting for it to exit.
//!
//! With `WEXEC_BASELINE_BIN=<another wexec binary>` (say, main's, copied aside), that wexec
//! takes its turns too: a change's effect, side by side in one run.
//!
//! Run: `CODEX_BIN=.../codex cargo bench -p wexec-tests --bench cold_start`

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wexec_tests::TempDir;

const WARMUP: usize = 3;
const ROUNDS: usize = 31;

const INITIALIZE: &str = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"bench\"}}\n";

/// Spawn → first stdout line, which must be the `initialize` result.
fn once(mut command: Command) -> Duration {
    let began = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the server");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(INITIALIZE.as_bytes()).expect("write");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    let took = began.elapsed();
    assert!(
        line.contains("sessionId"),
        "not an initialize result: {line}"
    );
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

fn main() {
    let home = TempDir::new();
    let wexec_at = |bin: &std::ffi::OsStr| {
        let mut command = Command::new(bin);
        command
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
    let (mut ours, mut theirs, mut floors) = (Vec::new(), Vec::new(), Vec::new());
    let mut before = Vec::new();
    for round in 0..WARMUP + ROUNDS {
        let measured = round >= WARMUP;
        let took = once(wexec());
        if measured {
            ours.push(took);
        }
        if let Some(command) = baseline() {
            let took = once(command);
            if measured {
                before.push(took);
            }
        }
        if let Some(command) = codex() {
            let took = once(command);
            if measured {
                theirs.push(took);
            }
        }
        let took = floor();
        if measured {
            floors.push(took);
        }
    }
    let ours = median(&mut ours);
    println!(
        "spawn → initialize reply, median of {ROUNDS}: wexec {:.2} ms; floor (spawn `true`) {:.2} ms",
        ms(ours),
        ms(median(&mut floors))
    );
    if !before.is_empty() {
        let before = median(&mut before);
        println!(
            "baseline wexec {:.2} ms; this / baseline = {:.2}",
            ms(before),
            ms(ours) / ms(before)
        );
    }
    if !theirs.is_empty() {
        let theirs = median(&mut theirs);
        println!(
            "codex exec-server {:.2} ms; wexec / codex = {:.2}",
            ms(theirs),
            ms(ours) / ms(theirs)
        );
    }
}
