//! Round trip of `environment/status` over stdio: 10,000 sequential requests through the real
//! binary, measured by the test harness client (tokio pipes, one JSON line per message).
//!
//! Run: `cargo bench -p wexec-tests --bench status_rtt`

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::time::{Duration, Instant};

use serde_json::json;

const WARMUP: usize = 1_000;
const REQUESTS: usize = 10_000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

#[tokio::main]
async fn main() {
    let (_server, mut client) = wexec_tests::spawn_stdio_with({
        let mut command = wexec_tests::command(&[]);
        command.env("RUST_LOG", "warn");
        command
    });
    client.handshake().await;
    for _ in 0..WARMUP {
        client.call("environment/status", json!(null)).await;
    }
    let mut samples = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let began = Instant::now();
        let result = client.call("environment/status", json!(null)).await;
        samples.push(began.elapsed());
        assert_eq!(result["status"], "ready");
    }
    samples.sort_unstable();
    println!(
        "environment/status over stdio, {REQUESTS} sequential requests: median {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, min {:.1} µs",
        percentile(&samples, 0.5).as_secs_f64() * 1e6,
        percentile(&samples, 0.9).as_secs_f64() * 1e6,
        percentile(&samples, 0.99).as_secs_f64() * 1e6,
        samples.first().expect("samples").as_secs_f64() * 1e6,
    );
}
