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

/// CPUs to place the client and wexec apart on; `None` (the test says it is skipped) on one.
fn two_cpus() -> Option<(usize, usize)> {
    match wexec_tests::allowed_cpus()[..] {
        [first, second, ..] => Some((first, second)),
        _ => {
            eprintln!("skipped: needs two CPUs to place the client and wexec apart");
            None
        }
    }
}

/// Moves this thread (the test's runtime is this thread's alone) to `cpu`; returns what it was
/// allowed before.
#[expect(
    clippy::expect_used,
    reason = "a test's helper fails the test on any error"
)]
fn run_on(cpu: usize) -> rustix::thread::CpuSet {
    let allowed = rustix::thread::sched_getaffinity(None).expect("CPU affinity");
    let mut one = rustix::thread::CpuSet::new();
    one.set(cpu);
    rustix::thread::sched_setaffinity(None, &one).expect("move this thread");
    allowed
}

/// Lines that are no work cannot buy a spinning thread: a client on another CPU that sent a
/// blank line every 30 µs kept the stdio thread at 99% of a CPU while it used 34% itself, and a
/// stream of malformed lines or unknown methods, each answered at once, would do the same.
/// Such lines never make a client quick, so each one finds wexec asleep in `read`, as every
/// line does without the spin.
#[tokio::test]
async fn lines_that_are_no_work_never_keep_wexec_spinning() {
    let Some((client_cpu, wexec_cpu)) = two_cpus() else {
        return;
    };
    let (server, mut client) = wexec_tests::spawn_stdio_on(wexec_cpu, wexec_tests::command(&[]));
    let allowed = run_on(client_cpu);
    client.handshake().await;
    // Blank lines, 30 µs apart for half a second (no reply comes): the thread's CPU time.
    let (cpu_before, _) = stdio_thread(server.pid());
    let began = std::time::Instant::now();
    while began.elapsed() < std::time::Duration::from_millis(500) {
        let sent = std::time::Instant::now();
        client.send_raw(b"\n").await;
        while sent.elapsed() < std::time::Duration::from_micros(30) {}
    }
    // A request after them, so that all were read before the count is taken.
    assert_eq!(
        client.call("environment/status", json!({})).await,
        json!({"status": "ready"})
    );
    let (cpu_after, _) = stdio_thread(server.pid());
    let busy = (cpu_after - cpu_before) as f64 / began.elapsed().as_nanos() as f64;
    // Malformed lines and unknown methods, each sent as soon as the last was answered.
    const LINES: u64 = 1000;
    let mut answered = Vec::new();
    for line in [&b"{\n"[..], &b"{\"id\":1,\"method\":\"no/such\"}\n"[..]] {
        let (_, before) = stdio_thread(server.pid());
        for _ in 0..LINES {
            client.send_raw(line).await;
            let reply = client.recv().await;
            assert!(reply.get("error").is_some(), "{reply}");
        }
        let (_, after) = stdio_thread(server.pid());
        answered.push(after - before);
    }
    // Spinning, the thread used 99% of its CPU on the blank lines and hardly slept on the
    // answered ones; without it, it reads what came when it wakes and sleeps again: every
    // answered line wakes it.
    assert!(
        busy < 0.3 && answered.iter().all(|&sleeps| sleeps > LINES * 9 / 10),
        "wexec's thread was busy {busy:.2} of the time over blank lines and slept {answered:?} times over {LINES} answered junk lines"
    );
    rustix::thread::sched_setaffinity(None, &allowed).expect("unpin this thread");
}

/// `--no-stdio-spin` turns the spin off: a quick client's every request wakes wexec from
/// `read`.
#[tokio::test]
async fn the_operator_can_turn_the_spin_off() {
    let Some((client_cpu, wexec_cpu)) = two_cpus() else {
        return;
    };
    let (server, mut client) =
        wexec_tests::spawn_stdio_on(wexec_cpu, wexec_tests::command(&["--no-stdio-spin"]));
    let allowed = run_on(client_cpu);
    client.handshake().await;
    const CALLS: u64 = 500;
    let (_, before) = stdio_thread(server.pid());
    for _ in 0..CALLS {
        assert_eq!(
            client.call("environment/status", json!({})).await,
            json!({"status": "ready"})
        );
    }
    let (_, after) = stdio_thread(server.pid());
    let sleeps = after - before;
    assert!(
        sleeps >= CALLS * 9 / 10,
        "wexec slept {sleeps} times in {CALLS} requests"
    );
    rustix::thread::sched_setaffinity(None, &allowed).expect("unpin this thread");
}
