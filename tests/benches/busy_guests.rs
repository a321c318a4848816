//! What busy guests cost everyone else: 8 WebSocket connections each keep a `probe/spin` call
//! running (a guest that never ends until its time limit), while one more connection measures
//! sequential round trips of `environment/status` (native), `fs/readFile` of 4 KiB (the `fs`
//! plugin) and `probe/noop` (another plugin). Reports medians and p99 with and without the
//! spinners; with `WEXEC_BASELINE_BIN=<another wexec binary>` that wexec is measured too, in the
//! same run.
//!
//! Run: `cargo bench -p wexec-tests --bench busy_guests`

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SPINNERS: usize = 8;
const SAMPLES: usize = 200;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Median and p99 of `SAMPLES` sequential round trips of `method`.
async fn measure(client: &mut wexec_tests::Client, method: &str, params: &Value) -> String {
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let began = Instant::now();
        let reply = client.request(method, params.clone()).await;
        samples.push(began.elapsed());
        assert!(reply.get("result").is_some(), "{reply}");
    }
    samples.sort_unstable();
    format!(
        "{method} median {:.2} ms, p99 {:.2} ms",
        percentile(&samples, 0.5).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3
    )
}

async fn run(binary: &std::path::Path, label: &str, root: &std::path::Path) {
    let mut command = tokio::process::Command::new(binary);
    command
        .args(["--listen", "ws://127.0.0.1:0", "--fs-root"])
        .arg(root)
        .args(["--plugin", wexec_tests::PROBE_WASM])
        .args(["--plugin-time-limit-ms", "60000"])
        .env("XDG_CACHE_HOME", wexec_tests::plugin_cache())
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let server = wexec_tests::spawn_websocket_with(command).await;
    let note = json!({"path": root.join("note.txt").display().to_string()});
    let mut watcher = server.connect().await;
    watcher.handshake().await;
    let calls = [
        ("environment/status", json!({})),
        ("fs/readFile", note.clone()),
        ("probe/noop", json!({})),
    ];
    let mut quiet = Vec::new();
    for (method, params) in &calls {
        quiet.push(measure(&mut watcher, method, params).await);
    }
    let mut spinners = Vec::new();
    for _ in 0..SPINNERS {
        let mut client = server.connect().await;
        client.handshake().await;
        client.send_request("probe/spin", json!({})).await;
        spinners.push(client);
    }
    // Let every spinner get going.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut busy = Vec::new();
    for (method, params) in &calls {
        busy.push(measure(&mut watcher, method, params).await);
    }
    println!("{label}:");
    println!("  quiet: {}", quiet.join("; "));
    println!("  beside {SPINNERS} spinning guests: {}", busy.join("; "));
}

#[tokio::main]
async fn main() {
    let root = wexec_tests::TempDir::new();
    std::fs::write(root.path().join("note.txt"), "x".repeat(4096)).expect("write note");
    run(&wexec_tests::wexec_bin(), "this wexec", root.path()).await;
    if let Some(baseline) = std::env::var_os("WEXEC_BASELINE_BIN") {
        run(
            std::path::Path::new(&baseline),
            "baseline wexec",
            root.path(),
        )
        .await;
    }
}
