//! `wexec mcp` against the MCP servers agents use today, with the same raw client (one JSON
//! line per message, replies parsed where they lie) in the same run, interleaved:
//!
//! - `read_text_file` of 4 KiB against `@modelcontextprotocol/server-filesystem`: sequential
//!   median and pipelined throughput; and against wexec's own Codex face (`fs/readFile`, the
//!   same plugin): what MCP's framing and the SDK cost;
//! - a short command to completion (`true`, `echo hi`): wexec's `run_command`, sandboxed under
//!   the default workspace-write ceiling (and, for scale, under `danger-full-access`), against
//!   desktop-commander's `start_process` followed by `read_process_output` until it reports the
//!   exit, unsandboxed;
//! - cold start: spawn → `initialize` → the first tool result, for all three.
//!
//! Servers run on CPU 1 and the client on CPU 0 when there are two CPUs (a like-for-like
//! placement, see fs_vs_mcp.rs). Run:
//!
//! ```sh
//! (cd /tmp/mcp && npm install @modelcontextprotocol/server-filesystem && \
//!  PUPPETEER_SKIP_DOWNLOAD=1 npm install @wonderwhy-er/desktop-commander@0.2.52)
//! MCP_FS_SERVER=/tmp/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js \
//! DESKTOP_COMMANDER=/tmp/mcp/node_modules/@wonderwhy-er/desktop-commander/dist/index.js \
//!   cargo bench -p wexec-tests --bench mcp_vs_peers
//! ```

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

#[path = "common/peers.rs"]
mod peers;

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use peers::{
    Measure, PIPELINED, Peer, ROUNDS, micros, pin, pipelined_medians, sized_sequential_medians,
};
use serde_json::{Value, json};

/// Command runs per block, and blocks per measure (after one warm-up block).
const COMMAND_BLOCK: usize = 10;
const COMMAND_BLOCKS: usize = 20;

/// Cold starts per server.
const COLD_STARTS: usize = 15;

fn initialize(peer: &mut Peer) {
    peer.call(
        "initialize",
        &json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}),
    );
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

fn wexec_mcp(root: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(wexec_tests::wexec_bin());
    command
        .args(["mcp", "--fs-root", root])
        .args(extra)
        .env("RUST_LOG", "warn")
        .env("XDG_CACHE_HOME", wexec_tests::plugin_cache());
    command
}

fn node(script: &OsString, args: &[&str], home: &Path) -> Command {
    let mut command = Command::new("node");
    command.arg(script).args(args).env("HOME", home);
    command
}

/// The text of a tool result.
fn text(reply: &Value) -> String {
    (reply["result"]["content"].as_array().into_iter().flatten())
        .filter_map(|block| block["text"].as_str())
        .collect()
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// desktop-commander's short command: `start_process`, then `read_process_output` until it
/// says the process completed.
fn desktop_commander_run(peer: &mut Peer, command: &str) {
    let started = peer.call(
        "tools/call",
        &tool(
            "start_process",
            json!({"command": command, "timeout_ms": 5000}),
        ),
    );
    let started = text(&started);
    let pid: u64 = started
        .split("PID ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no PID in {started}"));
    loop {
        let read = peer.call(
            "tools/call",
            &tool(
                "read_process_output",
                json!({"pid": pid, "timeout_ms": 1000}),
            ),
        );
        if text(&read).contains("Process completed") {
            return;
        }
    }
}

/// Medians of desktop-commander's short commands, in blocks taken between `others`' blocks.
fn desktop_commander_median(peer: &mut Peer, command: &str) -> Duration {
    let mut samples = Vec::new();
    for block in 0..=COMMAND_BLOCKS {
        for _ in 0..COMMAND_BLOCK {
            let began = Instant::now();
            desktop_commander_run(peer, command);
            if block > 0 {
                samples.push(began.elapsed());
            }
        }
    }
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Median time from spawn to the first tool result of `call` (each server started
/// `COLD_STARTS` times, the servers taking turns).
type Start<'a> = (&'a str, Box<dyn FnMut() -> Command>, Value);

fn cold_starts(starts: &mut [Start<'_>]) -> Vec<Duration> {
    let mut samples = vec![Vec::new(); starts.len()];
    for _ in 0..COLD_STARTS {
        for ((_, command, call), samples) in starts.iter_mut().zip(&mut samples) {
            let began = Instant::now();
            let mut peer = Peer::spawn(command());
            initialize(&mut peer);
            let reply = peer.call("tools/call", call);
            samples.push(began.elapsed());
            assert_ne!(reply["result"]["isError"], true, "{reply}");
            drop(peer);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    samples
        .into_iter()
        .map(|mut samples| {
            samples.sort_unstable();
            samples[samples.len() / 2]
        })
        .collect()
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let dir = wexec_tests::TempDir::new();
    let root_path = dir.path().join("root");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&root_path).expect("mkdir");
    std::fs::create_dir_all(&home).expect("mkdir");
    let file = root_path.join("note.txt");
    std::fs::write(&file, "x".repeat(4096)).expect("write 4 KiB file");
    let root = root_path.display().to_string();
    let path = file.display().to_string();
    let filesystem = std::env::var_os("MCP_FS_SERVER");
    let commander = std::env::var_os("DESKTOP_COMMANDER");
    if filesystem.is_none() || commander.is_none() {
        println!(
            "set MCP_FS_SERVER and DESKTOP_COMMANDER (see this file's header) to compare with the peers"
        );
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let (servers_on, client_on) = if cpus > 1 { (1, 0) } else { (0, 0) };
    pin(servers_on);

    // Warm: the bundled plugins compiled into the cache before anything is timed.
    drop(Peer::spawn(wexec_mcp(&root, &[])));

    let read = tool("read_text_file", json!({"path": path}));
    let mut peers = Vec::new();
    let mut measures = Vec::new();
    let mut pipelined = Vec::new();

    let mut mcp = Peer::spawn(wexec_mcp(&root, &[]));
    initialize(&mut mcp);
    assert!(text(&mcp.call("tools/call", &read)).starts_with("xxxx"));
    peers.push(mcp);
    let mut codex_face = Peer::spawn({
        let mut command = Command::new(wexec_tests::wexec_bin());
        command
            .args(["--fs-root", &root])
            .env("RUST_LOG", "warn")
            .env("XDG_CACHE_HOME", wexec_tests::plugin_cache());
        command
    });
    codex_face.call("initialize", &json!({"clientName": "bench"}));
    codex_face.send(&json!({"method": "initialized", "params": {}}));
    peers.push(codex_face);
    let mut unconfined = Peer::spawn(wexec_mcp(&root, &["--sandbox", "danger-full-access"]));
    initialize(&mut unconfined);
    peers.push(unconfined);
    let codex_read = json!({"path": path});
    let run_true = tool("run_command", json!({"argv": ["true"]}));
    let run_echo = tool("run_command", json!({"command": "echo hi"}));
    for (peer, method, params) in [
        (0, "tools/call", read.clone()),
        (1, "fs/readFile", codex_read.clone()),
        (0, "ping", json!({})),
        (1, "environment/status", json!({})),
    ] {
        measures.push(Measure {
            peer,
            method,
            params,
            samples: Vec::new(),
        });
    }
    pipelined.push(("tools/call", read.clone()));
    pipelined.push(("fs/readFile", codex_read));
    pipelined.push(("ping", json!({})));
    let files_at = filesystem.as_ref().map(|server| {
        let mut peer = Peer::spawn(node(server, &[&root], &home));
        initialize(&mut peer);
        assert!(text(&peer.call("tools/call", &read)).starts_with("xxxx"));
        peers.push(peer);
        let index = peers.len() - 1;
        measures.push(Measure {
            peer: index,
            method: "tools/call",
            params: read.clone(),
            samples: Vec::new(),
        });
        pipelined.push(("tools/call", read.clone()));
        (measures.len() - 1, pipelined.len() - 1)
    });

    pin(client_on);
    let medians = sized_sequential_medians(&mut peers, &mut measures, 30, 100);
    let rates = pipelined_medians(&mut peers, &pipelined);
    println!("client on CPU {client_on}, servers on CPU {servers_on}:");
    println!(
        "  wexec mcp read_text_file 4 KiB: median {:.1} µs, {:.0} req/s pipelined (median of {ROUNDS} batches of {PIPELINED}); ping {:.1} µs",
        micros(medians[0]),
        rates[0],
        micros(medians[2])
    );
    println!(
        "  wexec Codex face fs/readFile 4 KiB: median {:.1} µs, {:.0} req/s pipelined; environment/status {:.1} µs; MCP face / Codex face: {:.2}x the read median, {:.2}x the pipelined rate",
        micros(medians[1]),
        rates[1],
        micros(medians[3]),
        medians[0].as_secs_f64() / medians[1].as_secs_f64(),
        rates[0] / rates[1],
    );
    if let Some((at, rate_at)) = files_at {
        println!(
            "  server-filesystem read_text_file 4 KiB: median {:.1} µs, {:.0} req/s pipelined; wexec mcp is {:.1}x faster at the median, {:.1}x the pipelined throughput",
            micros(medians[at]),
            rates[rate_at],
            medians[at].as_secs_f64() / medians[0].as_secs_f64(),
            rates[0] / rates[rate_at],
        );
    }

    // Short commands: wexec confined, wexec unconfined, desktop-commander, block by block.
    let mut command_measures = vec![
        Measure {
            peer: 0,
            method: "tools/call",
            params: run_true.clone(),
            samples: Vec::new(),
        },
        Measure {
            peer: 0,
            method: "tools/call",
            params: run_echo.clone(),
            samples: Vec::new(),
        },
        Measure {
            peer: 2,
            method: "tools/call",
            params: run_true,
            samples: Vec::new(),
        },
        Measure {
            peer: 2,
            method: "tools/call",
            params: run_echo,
            samples: Vec::new(),
        },
    ];
    let commands = sized_sequential_medians(
        &mut peers,
        &mut command_measures,
        COMMAND_BLOCKS,
        COMMAND_BLOCK,
    );
    println!(
        "  wexec mcp run_command (workspace-write sandbox): true {:.2} ms, echo hi {:.2} ms; unconfined: true {:.2} ms, echo hi {:.2} ms",
        ms(commands[0]),
        ms(commands[1]),
        ms(commands[2]),
        ms(commands[3]),
    );
    if let Some(server) = &commander {
        pin(servers_on);
        let mut peer = Peer::spawn(node(server, &[], &home));
        initialize(&mut peer);
        pin(client_on);
        desktop_commander_run(&mut peer, "true");
        let (run_true, run_echo) = (
            desktop_commander_median(&mut peer, "true"),
            desktop_commander_median(&mut peer, "echo hi"),
        );
        println!(
            "  desktop-commander start_process + read_process_output (no sandbox): true {:.2} ms, echo hi {:.2} ms; wexec sandboxed is {:.1}x / {:.1}x faster, unconfined {:.1}x / {:.1}x",
            ms(run_true),
            ms(run_echo),
            run_true.as_secs_f64() / commands[0].as_secs_f64(),
            run_echo.as_secs_f64() / commands[1].as_secs_f64(),
            run_true.as_secs_f64() / commands[2].as_secs_f64(),
            run_echo.as_secs_f64() / commands[3].as_secs_f64(),
        );
    }
    drop(peers);

    // Cold starts: spawn → initialize → first tool result.
    pin(servers_on);
    let wexec_root = root.clone();
    let mut starts: Vec<Start<'_>> = vec![(
        "wexec mcp read_text_file",
        Box::new(move || wexec_mcp(&wexec_root, &[])),
        read.clone(),
    )];
    if let Some(server) = &filesystem {
        let (server, root, home) = (server.clone(), root.clone(), home.clone());
        starts.push((
            "server-filesystem read_text_file",
            Box::new(move || node(&server, &[&root], &home)),
            read.clone(),
        ));
    }
    if let Some(server) = &commander {
        let (server, home) = (server.clone(), home.clone());
        starts.push((
            "desktop-commander start_process true",
            Box::new(move || node(&server, &[], &home)),
            tool(
                "start_process",
                json!({"command": "true", "timeout_ms": 5000}),
            ),
        ));
    }
    let colds = cold_starts(&mut starts);
    for ((name, _, _), cold) in starts.iter().zip(&colds) {
        println!(
            "  cold start, spawn → first tool result, {name}: median {:.1} ms ({:.1}x wexec's)",
            ms(*cold),
            cold.as_secs_f64() / colds[0].as_secs_f64()
        );
    }
}
