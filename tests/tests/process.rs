//! `process/*` against the real binary (docs/protocol.md §8).

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{
    Client, Received, TIMEOUT, TempDir, command_under, rpc_error, spawn_stdio, spawn_stdio_with,
    spawn_websocket,
};

fn start_params(id: &str, argv: &[&str]) -> Value {
    json!({
        "processId": id,
        "argv": argv,
        "cwd": std::env::temp_dir().to_string_lossy(),
        "env": {"PATH": "/usr/bin:/bin"},
        "tty": false,
        "arg0": null,
    })
}

async fn start(client: &mut Client, id: &str, argv: &[&str]) {
    let result = client.call("process/start", start_params(id, argv)).await;
    assert_eq!(result, json!({"processId": id, "sandboxType": "none"}));
}

/// Collects notifications for `id` until its `process/closed`.
async fn events_until_closed(client: &mut Client, id: &str) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let message = client.next_notification().await;
        if message["params"]["processId"] != id {
            continue;
        }
        let closed = message["method"] == "process/closed";
        events.push(message);
        if closed {
            return events;
        }
    }
}

/// Waits for `id`'s first output: a line the program prints once it is ready (its traps
/// installed) to be signalled.
async fn ready(client: &mut Client, id: &str) {
    loop {
        let message = client.next_notification().await;
        if message["method"] == "process/output" && message["params"]["processId"] == id {
            return;
        }
    }
}

/// The `process/exited` notification among a process's events.
fn exit_event(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["method"] == "process/exited")
        .expect("exited event")
}

fn decode(chunk: &Value) -> Vec<u8> {
    STANDARD
        .decode(chunk.as_str().expect("base64 string"))
        .expect("valid base64")
}

#[tokio::test]
async fn output_exit_and_close_are_numbered_in_order_and_replayable() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    start(
        &mut client,
        "p",
        &[
            "sh",
            "-c",
            "printf a; sleep 0.2; printf b >&2; sleep 0.2; exit 7",
        ],
    )
    .await;
    let events = events_until_closed(&mut client, "p").await;
    let summary: Vec<(String, u64)> = events
        .iter()
        .map(|e| {
            (
                e["method"].as_str().unwrap_or_default().to_owned(),
                e["params"]["seq"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("process/output".into(), 1),
            ("process/output".into(), 2),
            ("process/exited".into(), 3),
            ("process/closed".into(), 4)
        ]
    );
    assert_eq!(events[0]["params"]["stream"], "stdout");
    assert_eq!(decode(&events[0]["params"]["chunk"]), b"a");
    assert_eq!(events[1]["params"]["stream"], "stderr");
    assert_eq!(
        events[2]["params"],
        json!({"processId": "p", "seq": 3, "exitCode": 7, "sandboxDenied": false, "failure": null})
    );

    let replay = client.call("process/read", json!({"processId": "p"})).await;
    assert_eq!(replay["nextSeq"], 5);
    assert_eq!(
        (
            replay["exited"].clone(),
            replay["exitCode"].clone(),
            replay["closed"].clone()
        ),
        (json!(true), json!(7), json!(true))
    );
    assert_eq!(replay["chunks"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        (replay["failure"].clone(), replay["sandboxDenied"].clone()),
        (Value::Null, json!(false))
    );
    let one = client
        .call("process/read", json!({"processId": "p", "maxBytes": 1}))
        .await;
    assert_eq!(one["chunks"].as_array().map(Vec::len), Some(1));
    assert_eq!(one["nextSeq"], 2);
    let after = client
        .call("process/read", json!({"processId": "p", "afterSeq": 1}))
        .await;
    assert_eq!(after["chunks"][0]["seq"], 2);
}

#[tokio::test]
async fn five_megabytes_arrive_whole_with_contiguous_seqs() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    start(&mut client, "big", &["head", "-c", "5000000", "/dev/zero"]).await;
    let events = events_until_closed(&mut client, "big").await;
    let mut bytes = 0;
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["params"]["seq"], index as u64 + 1, "contiguous seqs");
        if event["method"] == "process/output" {
            let chunk = decode(&event["params"]["chunk"]);
            assert!(!chunk.is_empty() && chunk.len() <= 64 * 1024);
            assert!(chunk.iter().all(|&b| b == 0));
            bytes += chunk.len();
        }
    }
    assert_eq!(bytes, 5_000_000);
}

#[tokio::test]
async fn long_poll_wakes_on_output_or_times_out_while_others_are_served() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    start(
        &mut client,
        "slow",
        &["sh", "-c", "sleep 0.5; echo hi; sleep 30"],
    )
    .await;
    client.send(&json!({"id": "poll", "method": "process/read", "params": {"processId": "slow", "waitMs": 10000}})).await;
    let began = Instant::now();
    // A long poll never delays others.
    assert_eq!(
        client.call("environment/status", Value::Null).await["status"],
        "ready"
    );
    assert!(began.elapsed() < Duration::from_millis(400));
    let woke = client.reply_to(&json!("poll")).await;
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "woken by output, not the timeout"
    );
    assert_eq!(decode(&woke["result"]["chunks"][0]["chunk"]), b"hi\n");

    let began = Instant::now();
    let empty = client
        .call(
            "process/read",
            json!({"processId": "slow", "afterSeq": 1, "waitMs": 300}),
        )
        .await;
    assert!(began.elapsed() >= Duration::from_millis(280));
    assert_eq!(empty["chunks"], json!([]));
    assert_eq!(empty["nextSeq"], 2);
    assert_eq!(
        client
            .call("process/terminate", json!({"processId": "slow"}))
            .await,
        json!({"running": true})
    );
}

#[tokio::test]
async fn tty_echo_stdin_states_and_write_ids() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let mut params = start_params("tty", &["cat"]);
    params["tty"] = json!(true);
    client.call("process/start", params).await;
    let hello = STANDARD.encode("hello\n");
    let write = |id: Option<&str>| json!({"processId": "tty", "chunk": hello, "writeId": id});
    assert_eq!(
        client.call("process/write", write(Some("w1"))).await,
        json!({"status": "accepted"})
    );
    assert_eq!(
        client.call("process/write", write(Some("w1"))).await,
        json!({"status": "accepted"})
    );
    assert_eq!(
        client.call("process/write", write(None)).await,
        json!({"status": "accepted"})
    );
    // The terminal echoes each line and cat prints it: two writes, so "hello" four times.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.windows(5).filter(|w| w == b"hello").count() < 4 && Instant::now() < deadline {
        let message = client.next_notification().await;
        if message["method"] == "process/output" {
            assert_eq!(message["params"]["stream"], "pty");
            seen.extend(decode(&message["params"]["chunk"]));
        }
    }
    assert_eq!(
        seen.windows(5).filter(|w| w == b"hello").count(),
        4,
        "{}",
        String::from_utf8_lossy(&seen)
    );

    start(&mut client, "nostdin", &["sleep", "5"]).await;
    let chunk = STANDARD.encode("x");
    assert_eq!(
        client
            .call(
                "process/write",
                json!({"processId": "nostdin", "chunk": chunk})
            )
            .await,
        json!({"status": "stdinClosed"})
    );
    assert_eq!(
        client
            .call(
                "process/write",
                json!({"processId": "ghost", "chunk": chunk})
            )
            .await,
        json!({"status": "unknownProcess"})
    );
    assert_eq!(
        client
            .call_err(
                "process/write",
                json!({"processId": "nostdin", "chunk": chunk, "writeId": ""})
            )
            .await,
        rpc_error(-32602, "writeId must not be empty")
    );
}

#[tokio::test]
async fn a_write_pipelined_after_its_start_reaches_the_child() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let mut params = start_params("cat", &["cat"]);
    params["pipeStdin"] = json!(true);
    let text = [
        json!({"id": 1, "method": "process/start", "params": params}).to_string(),
        json!({"id": 2, "method": "process/write", "params": {"processId": "cat", "chunk": STANDARD.encode("ping\n")}}).to_string(),
    ]
    .join("\n");
    client.send_raw(format!("{text}\n").as_bytes()).await;
    assert_eq!(
        client.reply_to(&json!(2)).await["result"],
        json!({"status": "accepted"})
    );
    let read = client
        .call("process/read", json!({"processId": "cat", "waitMs": 5000}))
        .await;
    assert_eq!(decode(&read["chunks"][0]["chunk"]), b"ping\n");
}

#[tokio::test]
async fn start_validation_order_and_messages() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let mut malformed = start_params("x", &[]);
    malformed["sandbox"] =
        json!({"permissions": {"type": "workspace-write"}, "windowsSandboxLevel": "disabled"});
    assert_eq!(
        client.call_err("process/start", malformed).await,
        rpc_error(
            -32602,
            "unknown variant `workspace-write`, expected one of `managed`, `disabled`, `external`"
        )
    );
    let mut mxc = start_params("x", &[]);
    mxc["sandbox"] = json!({"permissions": {"type": "disabled"}, "windowsSandboxLevel": "mxc"});
    assert_eq!(
        client.call_err("process/start", mxc).await,
        rpc_error(-32602, "native MXC is unavailable on this executor")
    );
    let mut proxy = start_params("x", &[]);
    proxy["networkProxy"] = json!({});
    assert_eq!(
        client.call_err("process/start", proxy).await,
        rpc_error(-32602, "networkProxy is not supported by this executor")
    );
    assert_eq!(
        client
            .call_err("process/start", start_params("x", &[]))
            .await,
        rpc_error(-32602, "argv must not be empty")
    );
    start(&mut client, "dup", &["true"]).await;
    assert_eq!(
        client
            .call_err("process/start", start_params("dup", &["true"]))
            .await,
        rpc_error(-32600, "process dup already exists")
    );
    assert_eq!(
        client
            .call_err(
                "process/start",
                start_params("missing", &["no-such-program-wexec"])
            )
            .await,
        rpc_error(-32603, "No such file or directory (os error 2)")
    );
    let mut bad_cwd = start_params("x", &["true"]);
    bad_cwd["cwd"] = json!("file://host/tmp");
    assert_eq!(
        client.call_err("process/start", bad_cwd).await,
        rpc_error(
            -32602,
            "cwd URI `file://host/tmp` is not valid on this exec-server host: 'file://host/tmp' is invalid on 'linux'"
        )
    );
    assert_eq!(
        client
            .call_err("process/read", json!({"processId": "ghost"}))
            .await,
        rpc_error(-32600, "unknown process id ghost")
    );
    assert_eq!(
        client
            .call_err("process/start", json!({"processId": "x"}))
            .await["code"],
        -32602
    );
}

#[tokio::test]
async fn terminate_and_interrupt_semantics() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    start(&mut client, "t", &["sleep", "30"]).await;
    assert_eq!(
        client
            .call("process/terminate", json!({"processId": "t"}))
            .await,
        json!({"running": true})
    );
    let events = events_until_closed(&mut client, "t").await;
    let exited = exit_event(&events);
    assert_eq!(exited["params"]["exitCode"], 143);
    let closed = events.last().expect("closed event");
    assert_eq!(
        closed["params"]["seq"].as_u64(),
        exited["params"]["seq"].as_u64().map(|s| s + 1)
    );
    assert_eq!(
        client
            .call("process/terminate", json!({"processId": "t"}))
            .await,
        json!({"running": false})
    );
    assert_eq!(
        client
            .call("process/terminate", json!({"processId": "ghost"}))
            .await,
        json!({"running": false})
    );

    // SIGTERM ignored: SIGKILL after the grace → 137.
    start(
        &mut client,
        "stubborn",
        &["sh", "-c", "trap '' TERM; echo ready; sleep 30"],
    )
    .await;
    ready(&mut client, "stubborn").await;
    client
        .call("process/terminate", json!({"processId": "stubborn"}))
        .await;
    let events = events_until_closed(&mut client, "stubborn").await;
    let exited = exit_event(&events);
    assert_eq!(exited["params"]["exitCode"], 137);

    // interrupt reaches a shell trapping INT.
    start(
        &mut client,
        "trap",
        &[
            "sh",
            "-c",
            "trap 'exit 7' INT; echo ready; while true; do sleep 0.05; done",
        ],
    )
    .await;
    ready(&mut client, "trap").await;
    assert_eq!(
        client
            .call(
                "process/signal",
                json!({"processId": "trap", "signal": "interrupt"})
            )
            .await,
        json!({})
    );
    let events = events_until_closed(&mut client, "trap").await;
    let exited = exit_event(&events);
    assert_eq!(exited["params"]["exitCode"], 7);
    assert_eq!(
        client
            .call(
                "process/signal",
                json!({"processId": "ghost", "signal": "interrupt"})
            )
            .await,
        json!({})
    );
}

/// A process starts with every signal at its default disposition, whatever wexec inherited:
/// started from `nohup` or a shell's `&`, wexec has SIGHUP, SIGINT or SIGQUIT ignored, which
/// `exec` keeps and a non-interactive shell cannot `trap`, so `process/signal` would be lost.
#[tokio::test]
async fn signals_ignored_by_wexec_are_default_in_its_processes() {
    let (_server, mut client) = spawn_stdio_with(command_under(
        &["sh", "-c", r#"trap '' HUP INT QUIT; exec "$0" "$@""#],
        &["--sandbox", "danger-full-access"],
    ));
    client.handshake().await;
    start(
        &mut client,
        "ign",
        &["sh", "-c", "grep '^SigIgn:' /proc/self/status"],
    )
    .await;
    let events = events_until_closed(&mut client, "ign").await;
    let output: Vec<u8> = events
        .iter()
        .filter(|e| e["method"] == "process/output")
        .flat_map(|e| decode(&e["params"]["chunk"]))
        .collect();
    let text = String::from_utf8_lossy(&output);
    let ignored = text
        .trim()
        .strip_prefix("SigIgn:")
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .expect("a SigIgn line");
    // Signals 1..=31; glibc's own spawn leaves its internal 32 and 33 ignored, which no
    // program can change (its sigaction refuses them).
    assert_eq!(ignored & 0x7fff_ffff, 0, "{text}");

    start(
        &mut client,
        "trap",
        &[
            "sh",
            "-c",
            "trap 'exit 7' INT; echo ready; while true; do sleep 0.05; done",
        ],
    )
    .await;
    ready(&mut client, "trap").await;
    client
        .call(
            "process/signal",
            json!({"processId": "trap", "signal": "interrupt"}),
        )
        .await;
    let events = events_until_closed(&mut client, "trap").await;
    let exited = exit_event(&events);
    assert_eq!(exited["params"]["exitCode"], 7);
}

/// The scheduling policy a started program reports (`policy` in `/proc/self/sched`: 0 is
/// `SCHED_OTHER`, 3 `SCHED_BATCH`).
async fn program_policy(client: &mut Client, id: &str) -> String {
    let output = output_of(
        client,
        start_params(id, &["sh", "-c", "grep '^policy' /proc/self/sched"]),
    )
    .await;
    let text = String::from_utf8_lossy(&output).into_owned();
    text.split_whitespace()
        .last()
        .unwrap_or_default()
        .to_owned()
}

/// The zygote replaces spare helpers under `SCHED_BATCH`, and spares return to the normal
/// policy (confined ones from inside their user namespace): programs, confined or not, never
/// inherit the batch one, with or without `CAP_SYS_NICE`.
#[tokio::test]
async fn programs_run_under_the_normal_scheduling_policy() {
    for confined in [false, true] {
        let args: &[&str] = if confined {
            &[]
        } else {
            &["--sandbox", "danger-full-access"]
        };
        let (_server, mut client) = spawn_stdio(args);
        client.handshake().await;
        // The first start takes a spare forked at startup, the third one a replacement.
        for round in 0..3 {
            let id = format!("policy-{confined}-{round}");
            assert_eq!(program_policy(&mut client, &id).await, "0", "{id}");
        }
    }
    // Without CAP_SYS_NICE (and RLIMIT_NICE 0) too.
    if std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
    {
        let (_server, mut client) = spawn_stdio_with(command_under(
            &[
                "setpriv",
                "--bounding-set=-sys_nice",
                "--inh-caps=-sys_nice",
            ],
            &[],
        ));
        client.handshake().await;
        for round in 0..3 {
            let id = format!("policy-unprivileged-{round}");
            assert_eq!(program_policy(&mut client, &id).await, "0", "{id}");
        }
    }
}

/// Whether a process with this pid exists (zombies included).
fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn no_process_survives_stdin_eof() {
    let (mut server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    start(
        &mut client,
        "a",
        &["sh", "-c", "echo $$; sleep 60 & echo $!; wait"],
    )
    .await;
    start(
        &mut client,
        "b",
        &["sh", "-c", "trap '' TERM; echo $$; sleep 60"],
    )
    .await;
    let mut pids = Vec::new();
    while pids.len() < 3 {
        let message = client.next_notification().await;
        if message["method"] == "process/output" {
            let text = String::from_utf8(decode(&message["params"]["chunk"])).expect("utf-8");
            pids.extend(
                text.split_whitespace()
                    .map(|pid| pid.parse::<u32>().expect("pid")),
            );
        }
    }
    assert!(pids.iter().all(|&pid| alive(pid)));
    client.close().await;
    while let Received::Message(_) = client.receive().await {}
    assert!(server.wait().await.success());
    for pid in pids {
        assert!(!alive(pid), "pid {pid} outlived wexec");
    }
}

/// Waits until `path` exists.
async fn appears(path: &std::path::Path) {
    let deadline = Instant::now() + TIMEOUT;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn output_produced_while_detached_is_read_after_resume() {
    let dir = TempDir::new();
    let (go, done) = (dir.path().join("go"), dir.path().join("done"));
    let server = spawn_websocket(&["--sandbox", "danger-full-access"]).await;
    let mut first = server.connect().await;
    let session = first.handshake().await["sessionId"]
        .as_str()
        .expect("id")
        .to_owned();
    // It writes only once told to, and says when it has.
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.01; done; echo detached-output; : > '{}'",
        go.display(),
        done.display()
    );
    start(&mut first, "bg", &["sh", "-c", &script]).await;
    first.close().await;
    drop(first);
    server.stderr_containing("session detached").await;
    std::fs::write(&go, "").expect("write go");
    appears(&done).await;
    let (mut second, _) = server.resume(&session).await;
    second
        .send(&json!({"method": "initialized", "params": {}}))
        .await;
    let read = second
        .call("process/read", json!({"processId": "bg", "waitMs": 5000}))
        .await;
    assert_eq!(decode(&read["chunks"][0]["chunk"]), b"detached-output\n");
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read /proc/<pid>/fd")
        .count()
}

/// Pids whose parent is `pid` (zombies included).
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state, ppid, ...
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid == Some(pid) {
            found.push(child);
        }
    }
    found
}

/// Starts `count` processes pipelined (alternating pipes with stdin, and a pty) and waits for
/// every one to close.
async fn run_batch(client: &mut Client, prefix: &str, count: usize) {
    for i in 0..count {
        let mut params = start_params(
            &format!("{prefix}-{i}"),
            &["sh", "-c", "echo out; echo err >&2"],
        );
        params["tty"] = json!(i % 2 == 1);
        params["pipeStdin"] = json!(i % 2 == 0);
        client.send(&json!({"id": format!("{prefix}-{i}"), "method": "process/start", "params": params})).await;
    }
    let mut closed = 0;
    while closed < count {
        let message = client.next_notification().await;
        if message["method"] == "process/closed" {
            closed += 1;
        }
    }
    for i in 0..count {
        let reply = client.reply_to(&json!(format!("{prefix}-{i}"))).await;
        assert!(reply.get("result").is_some(), "{reply}");
    }
}

#[tokio::test]
async fn a_thousand_short_processes_leak_no_descriptors_and_no_children() {
    let (server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let pid = server.pid();
    // Warm up lazily created runtime state (blocking threads, reaper registrations) first.
    run_batch(&mut client, "warm", 4).await;
    // wexec's one lasting child: the process supervisor's zygote, whose children are the
    // helpers, each gone (its control socket closed) once its process has ended, the spare
    // helpers waiting for the next starts (childless), two unconfined and two confined, and
    // the zygote of the confined-with-network kind, with its own two spares.
    let zygote = children(pid);
    assert_eq!(zygote.len(), 1, "{zygote:?}");
    let only_spares = |zygote: u32| {
        let helpers = children(zygote);
        let (parents, spares): (Vec<u32>, Vec<u32>) = helpers
            .iter()
            .partition(|&&helper| !children(helper).is_empty());
        let [network] = parents[..] else {
            return false;
        };
        let network_spares = children(network);
        spares.len() == 4
            && network_spares.len() == 2
            && network_spares
                .iter()
                .all(|&spare| children(spare).is_empty())
    };
    let settled = Instant::now() + Duration::from_secs(5);
    while !only_spares(zygote[0]) && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let baseline = open_fds(pid);
    for batch in 0..10 {
        run_batch(&mut client, &format!("b{batch}"), 100).await;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while (open_fds(pid) != baseline || children(pid) != zygote || !only_spares(zygote[0]))
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        open_fds(pid),
        baseline,
        "open descriptors return to where they were"
    );
    assert_eq!(children(pid), zygote, "no child but the zygote");
    assert!(
        only_spares(zygote[0]),
        "every helper ended with its process: {:?}",
        children(zygote[0])
    );
}

#[tokio::test]
async fn terminate_is_not_held_up_by_a_write_the_child_never_reads() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let mut params = start_params("deaf", &["sh", "-c", "echo $$; exec sleep 60"]);
    params["pipeStdin"] = json!(true);
    client.call("process/start", params).await;
    let pid = first_output_pid(&mut client, "deaf").await;
    // Far more than a pipe buffer: this write blocks until the child reads or dies.
    let flood = STANDARD.encode(vec![b'x'; 1024 * 1024]);
    client
        .send(&json!({"id": "flood", "method": "process/write", "params": {"processId": "deaf", "chunk": flood}}))
        .await;
    let deadline = Instant::now() + TIMEOUT;
    while stdin_backlog(pid) == 0 {
        assert!(Instant::now() < deadline, "the write never began");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let began = Instant::now();
    assert_eq!(
        client
            .call("process/terminate", json!({"processId": "deaf"}))
            .await,
        json!({"running": true})
    );
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "terminate answered at once"
    );
    let write = client.reply_to(&json!("flood")).await;
    // The child died with the write in flight: either outcome tells the client the bytes did not
    // all reach a reader.
    assert!(
        write["result"] == json!({"status": "stdinClosed"})
            || write["error"] == rpc_error(-32603, "failed to write to process stdin"),
        "{write}"
    );
    // Writes after the terminate are answered too.
    let after = client
        .call(
            "process/write",
            json!({"processId": "deaf", "chunk": STANDARD.encode("y")}),
        )
        .await;
    assert_eq!(after, json!({"status": "stdinClosed"}));
}

/// Bytes waiting in the pipe that is `pid`'s stdin, asked through a descriptor of its own that
/// takes nothing out (and is closed again at once, so a dead child's pipe still breaks).
fn stdin_backlog(pid: u32) -> u64 {
    use std::os::unix::fs::OpenOptionsExt;
    let pipe = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/{pid}/fd/0"))
        .expect("open the child's stdin pipe");
    rustix::io::ioctl_fionread(&pipe).expect("FIONREAD")
}

/// Starts `sh -c 'echo $$; exec sleep 60'` as `id` and returns its pid.
async fn start_sleeper(client: &mut Client, id: &str) -> u32 {
    start(client, id, &["sh", "-c", "echo $$; exec sleep 60"]).await;
    first_output_pid(client, id).await
}

/// The pid `id` printed as its first output.
async fn first_output_pid(client: &mut Client, id: &str) -> u32 {
    loop {
        let message = client.next_notification().await;
        if message["method"] == "process/output" && message["params"]["processId"] == id {
            let text = String::from_utf8(decode(&message["params"]["chunk"])).expect("utf-8");
            return text.trim().parse().expect("pid");
        }
    }
}

async fn wait_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

#[tokio::test]
async fn an_expired_session_terminates_its_processes() {
    let server = spawn_websocket(&["--sandbox", "danger-full-access", "--detach-ttl", "1"]).await;
    let mut client = server.connect().await;
    client.handshake().await;
    let pid = start_sleeper(&mut client, "sleeper").await;
    client.close().await;
    drop(client);
    server.stderr_containing("session detached").await;
    let detached = Instant::now();
    assert!(
        wait_gone(pid, Duration::from_secs(5)).await,
        "expiry terminated pid {pid}"
    );
    // The detach was seen a little after it happened: the TTL (1 s) less that lag.
    assert!(
        detached.elapsed() >= Duration::from_millis(500),
        "a detached session keeps its processes until the TTL: gone after {:?}",
        detached.elapsed()
    );
}

#[tokio::test]
async fn sigterm_to_wexec_terminates_every_process_of_every_session() {
    let mut server = spawn_websocket(&["--sandbox", "danger-full-access"]).await;
    let mut first = server.connect().await;
    first.handshake().await;
    let mut second = server.connect().await;
    second.handshake().await;
    let pids = [
        start_sleeper(&mut first, "a").await,
        start_sleeper(&mut second, "b").await,
    ];
    server.kill_with("TERM").await;
    assert!(server.wait().await.success());
    for pid in pids {
        assert!(!alive(pid), "pid {pid} outlived wexec");
    }
}

#[tokio::test]
async fn a_closed_process_is_readable_until_its_retention_ends_then_its_id_is_free() {
    let (_server, mut client) =
        spawn_stdio(&["--sandbox", "danger-full-access", "--closed-retention", "2"]);
    client.handshake().await;
    start(&mut client, "brief", &["true"]).await;
    events_until_closed(&mut client, "brief").await;
    let closed_at = Instant::now();
    assert_eq!(
        client
            .call_err("process/start", start_params("brief", &["true"]))
            .await,
        rpc_error(-32600, "process brief already exists")
    );
    assert_eq!(
        client
            .call("process/read", json!({"processId": "brief"}))
            .await["closed"],
        true
    );
    // Nothing announces the end of the retention: read until the process is forgotten.
    let forgotten = loop {
        let reply = client
            .request("process/read", json!({"processId": "brief"}))
            .await;
        if let Some(error) = reply.get("error") {
            break error.clone();
        }
        assert!(closed_at.elapsed() < TIMEOUT, "still readable: {reply}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(forgotten, rpc_error(-32600, "unknown process id brief"));
    // Seen closed a little after the retention began: its 2 s less that lag.
    assert!(
        closed_at.elapsed() >= Duration::from_secs(1),
        "forgotten after {:?}",
        closed_at.elapsed()
    );
    start(&mut client, "brief", &["true"]).await;
}

/// Runs `params` to completion and returns everything it printed.
async fn output_of(client: &mut Client, params: Value) -> Vec<u8> {
    let id = params["processId"].as_str().expect("processId").to_owned();
    client.call("process/start", params).await;
    events_until_closed(client, &id)
        .await
        .iter()
        .filter(|event| event["method"] == "process/output")
        .flat_map(|event| decode(&event["params"]["chunk"]))
        .collect()
}

#[tokio::test]
async fn the_environment_is_exactly_env_and_arg0_is_what_the_child_sees() {
    let (_server, mut client) = spawn_stdio(&["--sandbox", "danger-full-access"]);
    client.handshake().await;
    let mut exact = start_params("env", &["/usr/bin/env"]);
    exact["env"] = json!({"ONLY": "this"});
    assert_eq!(output_of(&mut client, exact).await, b"ONLY=this\n");

    let mut policy = start_params("policy", &["/usr/bin/env"]);
    policy["env"] = json!({"B": "from-env"});
    policy["envPolicy"] = json!({"inherit": "none", "ignoreDefaultExcludes": false, "exclude": [], "set": {"A": "from-set", "B": "from-set"}, "includeOnly": []});
    assert_eq!(
        output_of(&mut client, policy).await,
        b"A=from-set\nB=from-env\n"
    );

    let mut renamed = start_params("arg0", &["sh", "-c", "tr '\\0' ' ' < /proc/$$/cmdline"]);
    renamed["arg0"] = json!("renamed-shell");
    let cmdline = output_of(&mut client, renamed).await;
    assert!(
        cmdline.starts_with(b"renamed-shell -c "),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );
}
