//! The stdio connection's short spin before it sleeps (docs/protocol.md §6, "Latency"), against
//! the real binary. A file of its own: cargo runs test binaries one at a time, so no other test
//! shares the CPUs with this one, which needs them quiet enough for a client to be quick.

use pretty_assertions::assert_eq;
use serde_json::json;

/// The thread that reads stdin and runs requests (`wexec-stdio`): its CPU time in nanoseconds,
/// and how often it went to sleep.
#[expect(
    clippy::expect_used,
    reason = "a test's helper fails the test on any error"
)]
fn stdio_thread(pid: u32) -> (u64, u64) {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks");
    for task in tasks {
        let task = task.expect("task").path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if comm.trim() == "wexec-stdio" {
            let schedstat = std::fs::read_to_string(task.join("schedstat")).expect("schedstat");
            let run = schedstat.split_whitespace().next().expect("run time");
            let status = std::fs::read_to_string(task.join("status")).expect("status");
            let sleeps = (status.lines())
                .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
                .expect("voluntary_ctxt_switches");
            return (
                run.parse().expect("nanoseconds"),
                sleeps.trim().parse().expect("a count"),
            );
        }
    }
    panic!("no wexec-stdio thread in {pid}");
}

/// A quick client on another CPU finds wexec awake: wexec looks for its next request a little
/// before it sleeps (docs/protocol.md §6, "Latency"). But only a little: once the client goes
/// quiet the thread sleeps in `read` and uses no CPU at all.
#[tokio::test]
async fn a_quick_client_finds_wexec_awake_and_a_quiet_one_costs_no_cpu() {
    let (client_cpu, wexec_cpu) = match wexec_tests::allowed_cpus()[..] {
        [first, second, ..] => (first, second),
        _ => {
            eprintln!("skipped: needs two CPUs to place the client and wexec apart");
            return;
        }
    };
    let (server, mut client) = wexec_tests::spawn_stdio_on(wexec_cpu, wexec_tests::command(&[]));
    // This thread is the client (the test's runtime is this thread's alone).
    let allowed = rustix::thread::sched_getaffinity(None).expect("CPU affinity");
    let mut on_client = rustix::thread::CpuSet::new();
    on_client.set(client_cpu);
    rustix::thread::sched_setaffinity(None, &on_client).expect("move this thread");
    client.handshake().await;

    // Without the spin every request wakes wexec from its `read` (497–500 of 500 measured); with
    // it, a burst on quiet CPUs wakes it for 50–290 of them, and even beside a busy loop on
    // either CPU (the spin stands down when other threads take its yields) for 255–390. Some
    // burst must stay under nine in ten.
    const CALLS: u64 = 500;
    let awake = |sleeps: u64| sleeps < CALLS * 9 / 10;
    let mut sleeps_per_burst = Vec::new();
    for _ in 0..8 {
        let (_, sleeps_before) = stdio_thread(server.pid());
        for _ in 0..CALLS {
            assert_eq!(
                client.call("environment/status", json!({})).await,
                json!({"status": "ready"})
            );
        }
        let (_, sleeps_after) = stdio_thread(server.pid());
        sleeps_per_burst.push(sleeps_after - sleeps_before);
        if sleeps_per_burst.last().copied().is_some_and(awake) {
            break;
        }
    }
    assert!(
        sleeps_per_burst.iter().copied().any(awake),
        "wexec slept {sleeps_per_burst:?} times in bursts of {CALLS} requests"
    );

    let (before, _) = stdio_thread(server.pid());
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (after, _) = stdio_thread(server.pid());
    let idle = after - before;
    assert!(
        idle < 2_000_000,
        "{idle} ns of CPU in 500 ms without requests"
    );
    assert_eq!(
        client.call("environment/status", json!({})).await,
        json!({"status": "ready"})
    );
    rustix::thread::sched_setaffinity(None, &allowed).expect("unpin this thread");
}
