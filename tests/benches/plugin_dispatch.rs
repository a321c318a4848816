//! Plugin dispatch overhead and instantiation cost, through the real binary and the `probe`
//! guest, measured by the test harness client.
//!
//! 1. Over stdio, 10,000 interleaved pairs of `environment/status` (native) and `probe/noop`
//!    (a plugin call that does nothing): the difference of the medians is what routing a call
//!    into a live instance costs.
//! 2. Over WebSocket, 300 fresh sessions each calling `probe/noop` twice: the first call
//!    instantiates the plugin for the session, the second reuses it; the difference of the
//!    medians is the instantiation cost a fresh-instance-per-call policy would pay every time.
//!
//! Run: `cargo bench -p wexec-tests --bench plugin_dispatch`

#![expect(clippy::print_stdout, reason = "benchmark binary")]

use std::time::{Duration, Instant};

use serde_json::json;
use wexec_tests::{Client, PROBE_WASM};

const PAIRS: usize = 10_000;
const SESSIONS: usize = 300;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

async fn timed(client: &mut Client, method: &str) -> Duration {
    let began = Instant::now();
    client.call(method, json!(null)).await;
    began.elapsed()
}

#[tokio::main]
async fn main() {
    let quiet = |args: &[&str]| {
        let mut command = wexec_tests::command(args);
        command.env("RUST_LOG", "warn");
        command
    };

    let (_server, mut client) = wexec_tests::spawn_stdio_with(quiet(&["--plugin", PROBE_WASM]));
    client.handshake().await;
    for _ in 0..1_000 {
        timed(&mut client, "environment/status").await;
        timed(&mut client, "probe/noop").await;
    }
    let (mut native, mut plugin) = (Vec::with_capacity(PAIRS), Vec::with_capacity(PAIRS));
    for _ in 0..PAIRS {
        native.push(timed(&mut client, "environment/status").await);
        plugin.push(timed(&mut client, "probe/noop").await);
    }
    let (native, plugin) = (median(native), median(plugin));
    println!(
        "stdio, {PAIRS} interleaved pairs: environment/status median {:.1} µs, probe/noop median {:.1} µs, plugin dispatch overhead {:.1} µs",
        micros(native),
        micros(plugin),
        micros(plugin.saturating_sub(native))
    );

    let server = wexec_tests::spawn_websocket_with({
        let mut command = quiet(&["--listen", "ws://127.0.0.1:0", "--plugin", PROBE_WASM]);
        command.env("RUST_LOG", "warn");
        command
    })
    .await;
    let (mut first, mut second) = (Vec::with_capacity(SESSIONS), Vec::with_capacity(SESSIONS));
    for _ in 0..SESSIONS {
        let mut session = server.connect().await;
        session.handshake().await;
        first.push(timed(&mut session, "probe/noop").await);
        second.push(timed(&mut session, "probe/noop").await);
        session.close().await;
    }
    let (first, second) = (median(first), median(second));
    println!(
        "websocket, {SESSIONS} fresh sessions: first probe/noop (instantiates) median {:.1} µs, second (reuses) median {:.1} µs, instantiation cost {:.1} µs",
        micros(first),
        micros(second),
        micros(first.saturating_sub(second))
    );
}
