//! Streams 256 MiB (`head -c 268435456 /dev/zero`) through `process/output` notifications to a
//! client that decodes and counts every byte, and the same bytes through a plain pipe, in the
//! same run (alternating, 9 rounds each). Reports MB/s medians and their ratio, and the client
//! alone decoding a recorded session from memory: what no server can exceed here.
//!
//! Run: `cargo bench -p wexec-tests --bench process_stream`; with
//! `WEXEC_BASELINE_BIN=<another wexec binary>` that wexec takes its turns too, for a change's
//! cost side by side. `PROCESS_STREAM_PROFILE=1` runs only wexec's turns, printing each
//! round's rate: for a profiler attached to wexec (`perf record -a`), with no pipe or client-only
//! turns in the samples.

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

const BYTES: u64 = 256 * 1024 * 1024;
const ROUNDS: usize = 9;

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    method: Option<&'a str>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    chunk: Option<&'a str>,
}

/// Reads messages until `process/closed`, decoding every `process/output` chunk as a client
/// would (with a SIMD base64 decoder, as a client that cares would: with the `base64` crate's
/// this client alone decoded at ~550 MB/s, below what wexec sends); the bytes decoded.
/// `record` keeps what was read.
fn decode_output(stdout: &mut impl BufRead, mut record: Option<&mut Vec<u8>>) -> u64 {
    let mut line = Vec::new();
    let mut decoded = Vec::with_capacity(128 * 1024);
    let mut total: u64 = 0;
    loop {
        line.clear();
        if stdout.read_until(b'\n', &mut line).expect("read stdout") == 0 {
            panic!("wexec closed stdout early after {total} bytes");
        }
        if let Some(record) = record.as_deref_mut() {
            record.extend_from_slice(&line);
        }
        let message: Message<'_> = serde_json::from_slice(&line).expect("JSON line");
        match message.method {
            Some("process/output") => {
                let chunk = message.params.and_then(|p| p.chunk).expect("chunk");
                decoded.clear();
                base64_simd::STANDARD
                    .decode_append(chunk, &mut decoded)
                    .expect("base64");
                total += decoded.len() as u64;
            }
            Some("process/closed") => return total,
            _ => {}
        }
    }
}

/// Bytes/second through wexec (`binary`): decoded `process/output` bytes until
/// `process/closed`.
fn through_wexec(binary: &std::path::Path) -> f64 {
    through_wexec_recording(binary, None)
}

fn through_wexec_recording(binary: &std::path::Path, record: Option<&mut Vec<u8>>) -> f64 {
    let mut child = Command::new(binary)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn wexec");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
    let start = format!(
        concat!(
            r#"{{"id":1,"method":"initialize","params":{{"clientName":"bench"}}}}"#,
            "\n",
            r#"{{"method":"initialized","params":{{}}}}"#,
            "\n",
            r#"{{"id":2,"method":"process/start","params":{{"processId":"z","argv":["head","-c","{}","/dev/zero"],"cwd":"/","env":{{"PATH":"/usr/bin:/bin"}},"tty":false,"arg0":null}}}}"#,
            "\n",
        ),
        BYTES
    );
    let began = Instant::now();
    stdin.write_all(start.as_bytes()).expect("write requests");
    stdin.flush().expect("flush");
    let total = decode_output(&mut stdout, record);
    let elapsed = began.elapsed();
    assert_eq!(total, BYTES, "every byte arrives");
    drop(stdin);
    child.wait().expect("wexec exits");
    BYTES as f64 / elapsed.as_secs_f64()
}

/// Bytes/second through a plain pipe from the same producer.
fn through_pipe() -> f64 {
    let began = Instant::now();
    let mut child = Command::new("head")
        .args(["-c", &BYTES.to_string(), "/dev/zero"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn head");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut buffer = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let read = stdout.read(&mut buffer).expect("read pipe");
        if read == 0 {
            break;
        }
        total += read as u64;
    }
    child.wait().expect("head exits");
    let elapsed: Duration = began.elapsed();
    assert_eq!(total, BYTES);
    BYTES as f64 / elapsed.as_secs_f64()
}

/// Bytes/second of the client alone, decoding a recorded session from memory: the most this
/// bench can show for any server.
fn client_alone(recorded: &[u8]) -> f64 {
    let began = Instant::now();
    let total = decode_output(&mut BufReader::with_capacity(1 << 20, recorded), None);
    assert_eq!(total, BYTES);
    BYTES as f64 / began.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let binary = wexec_tests::wexec_bin();
    if std::env::var_os("PROCESS_STREAM_PROFILE").is_some() {
        for _ in 0..ROUNDS {
            println!("{:.0} MB/s", through_wexec(&binary) / 1e6);
        }
        return;
    }
    let baseline = std::env::var_os("WEXEC_BASELINE_BIN").map(std::path::PathBuf::from);
    let mut wexec = Vec::new();
    let mut pipe = Vec::new();
    let mut before = Vec::new();
    let mut recorded = Vec::new();
    through_wexec_recording(&binary, Some(&mut recorded));
    let mut alone = Vec::new();
    for _ in 0..ROUNDS {
        alone.push(client_alone(&recorded));
        pipe.push(through_pipe());
        wexec.push(through_wexec(&binary));
        if let Some(baseline) = &baseline {
            before.push(through_wexec(baseline));
        }
    }
    let (wexec, pipe, alone) = (median(wexec) / 1e6, median(pipe) / 1e6, median(alone) / 1e6);
    println!(
        "256 MiB of process output: wexec {wexec:.0} MB/s, plain pipe {pipe:.0} MB/s, ratio {:.0}% (median of {ROUNDS} alternating rounds)",
        100.0 * wexec / pipe
    );
    println!(
        "  the client alone, decoding the recorded session from memory: {alone:.0} MB/s ({:.0}% of the pipe): this bench's ceiling; wexec reaches {:.0}% of it",
        100.0 * alone / pipe,
        100.0 * wexec / alone
    );
    if !before.is_empty() {
        let before = median(before) / 1e6;
        println!(
            "  baseline wexec {before:.0} MB/s: this wexec / baseline {:.3}x",
            wexec / before
        );
    }
}
