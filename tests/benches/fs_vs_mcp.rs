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

#[path = "common/peers.rs"]
mod peers;

use std::process::Command;

use peers::{Measure, PIPELINED, Peer, ROUNDS, micros, pin, pipelined_medians, sequential_medians};
use serde_json::json;

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
