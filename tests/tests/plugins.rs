//! The plugin runtime against the real binary with the real `probe` guest
//! (docs/protocol.md §11): JSON round trip, the plugin's own error, trap, endless loop and
//! endless allocation, denied paths and hosts, grants from a config file, instance isolation.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use wexec_tests::{
    Client, PROBE_WASM, Server, TempDir, command, resident_bytes, rpc_error, spawn_stdio,
    spawn_stdio_with, spawn_websocket,
};

/// The probe's entry in a `plugin/list` result.
fn probe_entry(list: &Value) -> Value {
    list["plugins"]
        .as_array()
        .and_then(|plugins| plugins.iter().find(|plugin| plugin["name"] == "probe"))
        .cloned()
        .expect("probe is listed")
}

/// wexec with the probe loaded from a config file in `dir`, its `[[plugins]]` entry granting
/// `grants` (TOML), after the handshake.
async fn spawn_probe_configured(dir: &TempDir, grants: &str) -> (Server, Client) {
    let config = dir.path().join("wexec.toml");
    std::fs::write(
        &config,
        format!("[[plugins]]\nfile = \"{PROBE_WASM}\"\n{grants}\n"),
    )
    .expect("write config");
    let (server, mut client) = spawn_stdio(&["--config", &config.display().to_string()]);
    client.handshake().await;
    (server, client)
}

fn probe_args() -> Vec<&'static str> {
    vec![
        "--plugin",
        PROBE_WASM,
        "--plugin-time-limit-ms",
        "700",
        "--plugin-memory-limit-mib",
        "64",
    ]
}

#[tokio::test]
async fn a_plugin_round_trips_json_and_its_own_error() {
    let (_server, mut client) = spawn_stdio(&probe_args());
    let info = client.handshake().await;
    let names: Vec<Value> = info["environmentInfo"]["wexec"]["plugins"]
        .as_array()
        .expect("plugins")
        .iter()
        .map(|plugin| plugin["name"].clone())
        .collect();
    assert_eq!(
        names,
        vec![
            json!("fs"),
            json!("http"),
            json!("env"),
            json!("config"),
            json!("discovery"),
            json!("probe")
        ]
    );
    let params =
        json!({"nested": [1, 2.5, "three", {"four": null, "five": true}], "unicode": "é ✓"});
    assert_eq!(client.call("probe/echo", params.clone()).await, params);
    assert_eq!(
        client.call("probe/echo", Value::Null).await,
        Value::Null,
        "absent params are null"
    );
    assert_eq!(
        client.call_err("probe/fail", json!({})).await,
        json!({"code": 4242, "message": "probe failed on purpose", "data": {"why": "asked to"}})
    );
    let probe = probe_entry(&client.call("plugin/list", Value::Null).await);
    assert_eq!(probe["version"], "1.2.3");
    assert_eq!(probe["grants"], json!({}), "a --plugin gets no grants");
    assert!(
        probe["methods"]
            .as_array()
            .is_some_and(|m| m.contains(&json!("probe/echo")))
    );
}

#[tokio::test]
async fn plugin_methods_are_gated_like_any_other() {
    let (_server, mut client) = spawn_stdio(&probe_args());
    assert_eq!(
        client.call_err("probe/echo", json!({})).await,
        rpc_error(
            -32600,
            "client must call initialize before using plugin methods"
        )
    );
    client.initialize().await;
    assert_eq!(
        client.call_err("plugin/list", json!({})).await,
        rpc_error(
            -32600,
            "client must send initialized before using plugin methods"
        )
    );
}

#[tokio::test]
async fn trap_loop_and_allocation_fail_precisely_and_the_host_keeps_serving() {
    let (server, mut client) = spawn_stdio(&probe_args());
    client.handshake().await;
    client.call("probe/echo", json!(1)).await;
    let baseline = resident_bytes(server.pid());

    let panic = client.call_err("probe/panic", json!({})).await;
    assert_eq!(panic["code"], -32603);
    let message = panic["message"].as_str().expect("message");
    assert!(
        message
            .starts_with("plugin probe failed: wasm trap: wasm `unreachable` instruction executed"),
        "{message}"
    );
    assert!(
        message.contains("probe panicked on purpose"),
        "the guest's panic message is reported: {message}"
    );

    // The loop runs while other requests are answered at once.
    client
        .send(&json!({"id": "spin", "method": "probe/spin"}))
        .await;
    let began = Instant::now();
    assert_eq!(
        client.call("environment/status", Value::Null).await["status"],
        "ready"
    );
    assert_eq!(
        client.call("probe/echo", json!("meanwhile")).await,
        json!("meanwhile")
    );
    assert!(
        began.elapsed() < Duration::from_millis(500),
        "served while the plugin spins"
    );
    let spin = client.reply_to(&json!("spin")).await;
    assert_eq!(
        spin["error"],
        rpc_error(-32603, "plugin probe exceeded its time limit of 700 ms")
    );

    for _ in 0..3 {
        assert_eq!(
            client.call_err("probe/grow", json!({})).await,
            rpc_error(-32603, "plugin probe exceeded its memory limit")
        );
    }
    assert_eq!(
        client.call("probe/echo", json!("after")).await,
        json!("after"),
        "the next call succeeds"
    );
    let after = resident_bytes(server.pid());
    assert!(
        after < baseline + 32 * 1024 * 1024,
        "memory returns to its level: {baseline} bytes before, {after} after three 64 MiB allocations"
    );
}

#[tokio::test]
async fn instances_are_reused_within_a_session_and_never_shared_between_sessions() {
    let server = spawn_websocket(&probe_args()).await;
    let mut first = server.connect().await;
    first.handshake().await;
    let mut second = server.connect().await;
    second.handshake().await;
    for expected in 1..=3 {
        assert_eq!(
            first.call("probe/calls", Value::Null).await,
            json!(expected)
        );
    }
    assert_eq!(
        second.call("probe/calls", Value::Null).await,
        json!(1),
        "a fresh instance for another session"
    );
    // After a trap the instance is discarded: the count starts again.
    first.call_err("probe/panic", Value::Null).await;
    assert_eq!(first.call("probe/calls", Value::Null).await, json!(1));
}

#[tokio::test]
async fn a_plugin_streams_notifications_after_its_early_response_and_only_in_its_namespace() {
    let (_server, mut client) = spawn_stdio(&probe_args());
    client.handshake().await;
    assert_eq!(
        client.call("probe/stream", Value::Null).await,
        json!({"streaming": true})
    );
    let mut seen = Vec::new();
    while seen.len() < 4 {
        seen.push(client.next_notification().await);
    }
    assert_eq!(
        seen,
        vec![
            json!({"jsonrpc": "2.0", "method": "probe/tick", "params": {"seq": 1}}),
            json!({"jsonrpc": "2.0", "method": "probe/tick", "params": {"seq": 2}}),
            json!({"jsonrpc": "2.0", "method": "probe/tick", "params": {"seq": 3}}),
            json!({"jsonrpc": "2.0", "method": "probe/done", "params": {"spoofRefused": true}}),
        ]
    );
}

#[tokio::test]
async fn file_contents_held_by_the_host_answer_as_base64_only_inside_valid_json() {
    let dir = TempDir::new();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).expect("mkdir");
    let small = root.join("hello.txt");
    std::fs::write(&small, "hello").expect("write");
    // Three of these exceed the 64 MiB an instance may hold; two do not.
    let big = root.join("big.bin");
    std::fs::write(&big, vec![7u8; 22 * 1024 * 1024]).expect("write");
    let (_server, mut client) = spawn_probe_configured(&dir, "read-only-roots = [\"root\"]").await;
    let small = small.display().to_string();

    assert_eq!(
        client.call("probe/contents", json!({"path": small})).await,
        json!({"len": 5, "data": "aGVsbG8="})
    );
    for (before, after, expected, why) in [
        (
            "[{\"k\": [",
            "]}, 1]",
            json!([{"k": ["aGVsbG8="]}, 1]),
            "the data may sit anywhere a string may",
        ),
        (
            "{\"a\":\"x\\",
            "}",
            json!({"a": "x\"aGVsbG8="}),
            "after an escaping backslash the data joins the string it is in: still JSON",
        ),
    ] {
        assert_eq!(
            client
                .call(
                    "probe/contents",
                    json!({"path": small, "before": before, "after": after}),
                )
                .await,
            expected,
            "{why}"
        );
    }
    // Parts that are not JSON around an empty string are refused, whatever the data would
    // have made of them: here `"` + data + `"` would close a string and open another.
    for (before, after) in [
        ("{\"a\":\"x", "\"}"),
        ("[", ""),
        ("{\"a\":", "} trailing"),
        ("", ":1"),
    ] {
        let err = client
            .call_err(
                "probe/contents",
                json!({"path": small, "before": before, "after": after}),
            )
            .await;
        assert_eq!(err["code"], -32603, "{before} … {after}: {err}");
        let message = err["message"].as_str().expect("message");
        assert!(
            message.starts_with("the result around the data is not JSON: "),
            "{message}"
        );
    }
    let big = big.display().to_string();
    let limit = "file contents held by the host would exceed 67108864 bytes: drop some first";
    for _ in 0..2 {
        // The same both times: what the first call held was released when it ended.
        assert_eq!(
            client
                .call_err("probe/contents", json!({"path": big, "holds": 3}))
                .await,
            rpc_error(-32600, &format!("held 2: {limit}"))
        );
    }
    assert_eq!(
        client.call("probe/contents", json!({"path": small})).await,
        json!({"len": 5, "data": "aGVsbG8="}),
        "the instance keeps serving"
    );
}

/// An HTTP server on 127.0.0.1 that answers every request with 200 `ok` and counts connections.
async fn http_origin() -> (String, Arc<AtomicUsize>) {
    http_server(|_| {
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_owned()
    })
    .await
}

/// An HTTP server on 127.0.0.1 answering each request (given its first line) with `respond`'s
/// raw response, counting connections.
async fn http_server(respond: fn(&str) -> String) -> (String, Arc<AtomicUsize>) {
    wexec_tests::http_server(move |line, mut stream| async move {
        let _ = stream.write_all(respond(&line).as_bytes()).await;
    })
    .await
}

#[tokio::test]
async fn without_grants_paths_and_hosts_are_denied_and_nothing_is_touched() {
    let (addr, hits) = http_origin().await;
    let (_server, mut client) = spawn_stdio(&probe_args());
    client.handshake().await;
    let dir = TempDir::new();
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "granted?").expect("write");
    let path = file.display().to_string();
    assert_eq!(
        client.call_err("probe/read", json!({"path": path})).await,
        rpc_error(-32600, "plugin probe has no filesystem grant"),
        "without a filesystem grant, every filesystem import is denied"
    );
    assert_eq!(
        client
            .call_err("probe/fetch", json!({"url": format!("http://{addr}/")}))
            .await,
        rpc_error(-32600, &format!("http/request to {addr} is not allowed"))
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the origin was never contacted"
    );
    assert_eq!(
        client.call_err("probe/var", json!({"name": "PATH"})).await,
        rpc_error(
            -32600,
            "plugin probe: reading environment variable PATH denied: not granted"
        )
    );
}

#[tokio::test]
async fn a_config_file_grants_roots_hosts_and_variables() {
    let (addr, hits) = http_origin().await;
    let dir = TempDir::new();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).expect("mkdir");
    std::fs::write(root.join("inside.txt"), "hello from the root").expect("write");
    std::fs::write(dir.path().join("outside.txt"), "secret").expect("write");
    std::os::unix::fs::symlink(dir.path().join("outside.txt"), root.join("escape"))
        .expect("symlink");
    let config = dir.path().join("wexec.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\ntime-limit-ms = 5000\n\n[[plugins]]\nfile = \"{PROBE_WASM}\"\nread-only-roots = [\"root\"]\nallow-hosts = [\"127.0.0.1:*\"]\nenv-vars = [\"PROBE_VAR\", \"NOT_DECLARED\"]\n"
        ),
    )
    .expect("write config");
    let mut cmd = command(&["--config", &config.display().to_string()]);
    cmd.env("PROBE_VAR", "granted value")
        .env("NOT_DECLARED", "x");
    let (_server, mut client) = spawn_stdio_with(cmd);
    client.handshake().await;

    let probe = probe_entry(&client.call("plugin/list", Value::Null).await);
    assert_eq!(
        probe["grants"],
        json!({
            "fsRoots": [format!("file://{}", root.display())],
            "allowHosts": ["127.0.0.1:*"],
            "envVars": ["PROBE_VAR"],
        }),
        "grants are what the operator granted intersected with what the plugin declared"
    );
    let read = client
        .call(
            "probe/read",
            json!({"path": root.join("inside.txt").display().to_string()}),
        )
        .await;
    assert_eq!(read, json!({"size": 19, "text": "hello from the root"}));
    for path in [
        root.join("escape"),
        root.join("../outside.txt"),
        dir.path().join("outside.txt"),
    ] {
        let path = path.display().to_string();
        assert_eq!(
            client.call_err("probe/read", json!({"path": path})).await,
            rpc_error(
                -32600,
                &format!("path `{path}` is outside the allowed roots")
            )
        );
    }
    assert_eq!(
        client
            .call("probe/fetch", json!({"url": format!("http://{addr}/")}))
            .await,
        json!({"status": 200})
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        client
            .call_err("probe/fetch", json!({"url": "http://localhost:1/"}))
            .await,
        rpc_error(-32600, "http/request to localhost:1 is not allowed"),
        "hosts compare as written, without DNS"
    );
    assert_eq!(
        client.call("probe/var", json!({"name": "PROBE_VAR"})).await,
        json!({"value": "granted value"})
    );
    assert_eq!(
        client
            .call_err("probe/var", json!({"name": "NOT_DECLARED"}))
            .await["code"],
        -32600
    );
}

async fn startup_error(args: &[&str]) -> String {
    let output = command(args).output().await.expect("run wexec");
    assert!(!output.status.success(), "{args:?} must fail");
    assert!(output.stdout.is_empty());
    // Logs come first; the error is the last line.
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .trim_end()
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn bad_plugins_and_configs_stop_wexec_with_a_message_naming_the_file() {
    let dir = TempDir::new();
    let missing = dir.path().join("missing.wasm").display().to_string();
    assert_eq!(
        startup_error(&["--plugin", &missing]).await,
        format!("wexec: plugin {missing}: cannot be read: No such file or directory (os error 2)")
    );
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, "not wasm").expect("write");
    let junk = junk.display().to_string();
    let message = startup_error(&["--plugin", &junk]).await;
    assert!(
        message.starts_with(&format!(
            "wexec: plugin {junk}: not a valid WebAssembly component"
        )),
        "{message}"
    );
    assert_eq!(
        startup_error(&["--plugin", PROBE_WASM, "--plugin", PROBE_WASM]).await,
        "wexec: method probe/echo is claimed by both plugin probe and plugin probe"
    );
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "[[plugins]]\nfile = \"x.wasm\"\nsurprise = 1\n").expect("write");
    let config = config.display().to_string();
    let message = startup_error(&["--config", &config]).await;
    assert!(
        message.starts_with(&format!("wexec: config {config}: ")),
        "{message}"
    );
    assert!(message.contains("unknown field `surprise`"), "{message}");
}

#[tokio::test]
async fn a_busy_plugin_does_not_stop_other_sessions() {
    let server = spawn_websocket(&probe_args()).await;
    let mut busy = server.connect().await;
    busy.handshake().await;
    let mut other: Client = server.connect().await;
    other.handshake().await;
    for id in 0..4 {
        busy.send(&json!({"id": id, "method": "probe/spin"})).await;
    }
    let began = Instant::now();
    for _ in 0..20 {
        other.call("probe/echo", json!("still here")).await;
    }
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "served while four instances spin: {:?}",
        began.elapsed()
    );
    for id in 0..4 {
        assert_eq!(busy.reply_to(&json!(id)).await["error"]["code"], -32603);
    }
}

#[tokio::test]
async fn every_redirect_hop_is_checked_against_the_grants() {
    let (origin, origin_hits) = http_origin().await;
    // Redirects to whatever `?to=` names.
    let (redirector, _) = http_server(|line| {
        let location = line
            .split_whitespace()
            .nth(1)
            .and_then(|target| target.split_once("?to="))
            .map(|(_, to)| to.to_owned())
            .unwrap_or_default();
        format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    })
    .await;
    let allowed = format!("http://{redirector}/hop?to=http://{origin}/final");
    let denied = format!("http://{redirector}/hop?to=http://localhost:1/elsewhere");
    let dir = TempDir::new();
    let (_server, mut client) =
        spawn_probe_configured(&dir, "allow-hosts = [\"127.0.0.1:*\"]").await;

    let stop = client.call("probe/fetch", json!({"url": allowed})).await;
    assert_eq!(
        stop,
        json!({"status": 302}),
        "not following returns the 3xx as is"
    );
    assert_eq!(origin_hits.load(Ordering::SeqCst), 0);
    let followed = client
        .call("probe/fetch", json!({"url": allowed, "follow": true}))
        .await;
    assert_eq!(followed, json!({"status": 200}));
    assert_eq!(origin_hits.load(Ordering::SeqCst), 1);
    assert_eq!(
        client
            .call_err("probe/fetch", json!({"url": denied, "follow": true}))
            .await,
        rpc_error(-32600, "http/request to localhost:1 is not allowed"),
        "a hop to an ungranted host is refused before it is contacted"
    );
    // Without `?to=` the redirector sends clients back to itself.
    let looping = format!("http://{redirector}/loop");
    assert_eq!(
        client
            .call_err("probe/fetch", json!({"url": looping, "follow": true}))
            .await,
        rpc_error(-32603, "more than 10 redirects")
    );
}

#[tokio::test]
async fn compiled_plugins_are_cached_so_a_restart_does_not_recompile() {
    let cache = TempDir::new();
    let run = || {
        let mut cmd = command(&["--plugin", PROBE_WASM]);
        cmd.env("XDG_CACHE_HOME", cache.path());
        spawn_stdio_with(cmd)
    };
    let (_first, mut client) = run();
    client.handshake().await;
    client.call("probe/noop", Value::Null).await;
    let snapshot = || {
        let mut artifacts: Vec<(std::path::PathBuf, std::time::SystemTime)> =
            std::fs::read_dir(cache.path().join("wexec"))
                .expect("cache dir")
                .flatten()
                .map(|entry| {
                    (
                        entry.path(),
                        entry
                            .metadata()
                            .and_then(|meta| meta.modified())
                            .expect("mtime"),
                    )
                })
                .collect();
        artifacts.sort();
        artifacts
    };
    let written = snapshot();
    let ending = |suffix: &str| {
        written
            .iter()
            .filter(|(path, _)| path.to_string_lossy().ends_with(suffix))
            .count()
    };
    assert_eq!(
        (
            ending(".cwasm"),
            ending(".keyed-blake3"),
            ending(".describe.json"),
            ending(".environment.json"),
            written.len()
        ),
        (6, 6, 5, 1, 18),
        "the five bundled plugins and the probe, each with its digest; the bundled plugins' descriptions and the env plugin's environmentInfo: {written:?}"
    );

    let (_second, mut client) = run();
    client.handshake().await;
    client.call("probe/noop", Value::Null).await;
    assert_eq!(
        snapshot(),
        written,
        "the second start loaded every artifact instead of compiling again"
    );
}

/// A start whose bundled plugins and environment the cache remembers answers from those
/// memos, but never with stale or broken ones: another working directory gets its own
/// `environmentInfo`, and unreadable memos are derived again (and the plugins still load).
#[tokio::test]
async fn remembered_descriptions_and_environment_follow_their_inputs() {
    let cache = TempDir::new();
    let (here, there) = (TempDir::new(), TempDir::new());
    let start = |cwd: &std::path::Path| {
        let mut cmd = command(&["--fs-root", &cwd.display().to_string()]);
        cmd.env("XDG_CACHE_HOME", cache.path()).current_dir(cwd);
        spawn_stdio_with(cmd)
    };
    let cwd_of = |info: &Value| info["environmentInfo"]["cwd"].as_str().map(str::to_owned);
    let file_uri = |dir: &std::path::Path| {
        format!(
            "file://{}",
            std::fs::canonicalize(dir).expect("canonical").display()
        )
    };
    for dir in [here.path(), here.path(), there.path(), here.path()] {
        let (_server, mut client) = start(dir);
        let info = client.handshake().await;
        assert_eq!(cwd_of(&info), Some(file_uri(dir)));
        assert_eq!(
            wexec_tests::without_sandbox_verdict(
                &client.call("environment/info", Value::Null).await
            ),
            wexec_tests::without_sandbox_verdict(&info["environmentInfo"]),
            "initialize and environment/info agree"
        );
        std::fs::write(dir.join("a.txt"), "a").expect("write");
        let read = json!({"path": dir.join("a.txt").display().to_string()});
        assert_eq!(client.call("fs/readFile", read).await["dataBase64"], "YQ==");
    }
    let memos: Vec<_> = std::fs::read_dir(cache.path().join("wexec"))
        .expect("cache dir")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.to_string_lossy().ends_with(".json"))
        .collect();
    assert_eq!(
        memos.len(),
        6,
        "five descriptions, one environment: {memos:?}"
    );
    for memo in &memos {
        std::fs::write(memo, "{\"name\":").expect("break the memo");
    }
    let (_server, mut client) = start(here.path());
    let info = client.handshake().await;
    assert_eq!(cwd_of(&info), Some(file_uri(here.path())));
    assert_eq!(
        wexec_tests::plugin_names(&info["environmentInfo"]),
        vec!["fs", "http", "env", "config", "discovery"]
    );
    for memo in &memos {
        let text = std::fs::read_to_string(memo).expect("memo");
        // The JSON, then its keyed digest (64 hex digits).
        let json = text
            .get(..text.len().saturating_sub(64))
            .unwrap_or_default();
        assert!(
            serde_json::from_str::<Value>(json).is_ok(),
            "{} derived again: {text}",
            memo.display()
        );
    }
}

/// The `/proc` directory of wexec's epoch ticker thread (`wexec-engine`).
fn ticker_thread(pid: u32) -> std::path::PathBuf {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("wexec's threads");
    for task in tasks {
        let task = task.expect("a thread").path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if name.trim() == "wexec-engine" {
            return task;
        }
    }
    panic!("wexec has no wexec-engine thread");
}

/// Voluntary context switches of wexec's epoch ticker thread: its wakeups.
fn ticker_wakeups(pid: u32) -> u64 {
    let status = std::fs::read_to_string(ticker_thread(pid).join("status")).expect("thread status");
    (status.lines())
        .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("voluntary_ctxt_switches")
}

/// Whether the ticker is parked: it waits on a futex then, and in `nanosleep` between ticks.
fn ticker_parked(pid: u32) -> bool {
    let syscall = std::fs::read_to_string(ticker_thread(pid).join("syscall")).expect("syscall");
    let number = syscall
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok());
    number == Some(libc::SYS_futex)
}

#[tokio::test]
async fn an_idle_wexec_wakes_nobody_and_still_stops_a_looping_plugin() {
    let (server, mut client) = spawn_stdio(&probe_args());
    client.handshake().await;
    assert_eq!(client.call("probe/echo", json!(1)).await, json!(1));
    // A second without a guest call parks the ticker (it ticked 200 times a second before).
    let deadline = Instant::now() + wexec_tests::TIMEOUT;
    while !ticker_parked(server.pid()) {
        assert!(Instant::now() < deadline, "the idle ticker never parked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = ticker_wakeups(server.pid());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let woke = ticker_wakeups(server.pid()) - before;
    assert!(woke <= 2, "the idle ticker woke {woke} times in a second");

    // A guest entering wakes it: the loop is still stopped at its limit.
    let began = Instant::now();
    assert_eq!(
        client.call_err("probe/spin", json!({})).await,
        rpc_error(-32603, "plugin probe exceeded its time limit of 700 ms")
    );
    assert!(began.elapsed() < Duration::from_secs(3), "stopped in time");
}
