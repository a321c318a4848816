//! Round trip of `environment/status` over stdio through the real binary: 10,000 sequential
//! requests each from the raw test-harness client (one JSON line per message, tokio pipes) and
//! from `wexec_client::Client` (what Rust agents embed), interleaved in blocks of 500 so both
//! see the same machine noise.
//!
//! Run: `cargo bench -p wexec-tests --bench status_rtt`

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::time::{Duration, Instant};

use serde_json::json;
use wexec_client::{Client, ClientOptions};

const WARMUP: usize = 1_000;
const REQUESTS: usize = 10_000;
const BLOCK: usize = 500;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn report(name: &str, samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    let median = percentile(samples, 0.5);
    println!(
        "environment/status over stdio, {name}, {REQUESTS} sequential requests: median {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, min {:.1} µs",
        median.as_secs_f64() * 1e6,
        percentile(samples, 0.9).as_secs_f64() * 1e6,
        percentile(samples, 0.99).as_secs_f64() * 1e6,
        samples.first().expect("samples").as_secs_f64() * 1e6,
    );
    median
}

#[tokio::main]
async fn main() {
    let (_server, mut raw) = wexec_tests::spawn_stdio_with({
        let mut command = wexec_tests::command(&[]);
        command.env("RUST_LOG", "warn");
        command
    });
    raw.handshake().await;
    let command = wexec_tests::client_command(&[]);
    let client = Client::connect_stdio(command, ClientOptions::new("status_rtt"))
        .await
        .expect("connect");
    for _ in 0..WARMUP {
        raw.call("environment/status", json!(null)).await;
        client.environment_status().await.expect("status");
    }
    let (mut raw_samples, mut client_samples) = (Vec::new(), Vec::new());
    for _ in 0..REQUESTS / BLOCK {
        for _ in 0..BLOCK {
            let began = Instant::now();
            let result = raw.call("environment/status", json!(null)).await;
            raw_samples.push(began.elapsed());
            assert_eq!(result["status"], "ready");
        }
        for _ in 0..BLOCK {
            let began = Instant::now();
            let result = client.environment_status().await.expect("status");
            client_samples.push(began.elapsed());
            assert_eq!(result.status, "ready");
        }
    }
    let raw_median = report("harness client", &mut raw_samples);
    let client_median = report("wexec_client", &mut client_samples);
    println!(
        "wexec_client / harness client median: {:.2}",
        client_median.as_secs_f64() / raw_median.as_secs_f64()
    );
}
