//! `wexec mcp` over stdio, driven line by line: plugin tools (declared by contract 0.2.0
//! plugins, served under their own grants), plugins that trap, loop or eat memory behind a
//! tool, 0.1.0 plugins still loading, the tool list following a reload, and file resources.
//! The real clients' tests are in mcp_clients.rs.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir, spawn_stdio};

/// A `wexec mcp` on stdio after the 2025-11-25 handshake.
struct Mcp {
    server: Server,
    client: Client,
    next: i64,
}

impl Mcp {
    async fn start(args: &[&str]) -> Self {
        let mut all = vec!["mcp"];
        all.extend_from_slice(args);
        let (server, client) = spawn_stdio(&all);
        let mut mcp = Self {
            server,
            client,
            next: 1,
        };
        let init = mcp
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "wexec-tests", "version": "0"}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
        mcp.client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        mcp
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.client
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.client.reply_to(&json!(id)).await
    }

    async fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let reply = self
            .request("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        reply
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("tools/call {name} failed: {reply}"))
    }

    async fn tool_names(&mut self) -> Vec<String> {
        let listed = self.request("tools/list", json!({})).await;
        (listed["result"]["tools"].as_array().expect("tools").iter())
            .map(|tool| tool["name"].as_str().expect("name").to_owned())
            .collect()
    }
}

fn text(result: &Value) -> String {
    (result["content"].as_array().expect("content").iter())
        .filter_map(|block| block["text"].as_str())
        .collect()
}

fn wasm(variable: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| panic!("{variable} (set by tests/build.rs)"))
}

/// A config granting grep `root` read-only, and loading the probe with `limits`.
fn config(dir: &TempDir, root: &str, with_grep: bool) -> String {
    let mut text = format!(
        "[[plugins]]\nfile = \"{}\"\ntime-limit-ms = 500\nmemory-limit-mib = 64\n",
        wasm("WEXEC_PROBE_WASM")
    );
    if with_grep {
        text.push_str(&format!(
            "\n[[plugins]]\nfile = \"{}\"\nread-only-roots = [\"{root}\"]\n",
            wasm("WEXEC_GREP_WASM")
        ));
    }
    let path = dir.path().join("wexec.toml");
    // Written whole then renamed, as a deploy would.
    let temporary = dir.path().join("wexec.toml.new");
    std::fs::write(&temporary, text).expect("write config");
    std::fs::rename(&temporary, &path).expect("rename config");
    path.display().to_string()
}

#[tokio::test]
async fn plugin_tools_are_listed_and_served_under_their_plugins_grants() {
    let dir = TempDir::new();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::write(root.join("notes.txt"), "alpha\nneedle here\n").expect("write");
    let root = root.display().to_string();
    let config = config(&dir, &root, true);
    let mut mcp = Mcp::start(&["--fs-root", &root, "--config", &config]).await;
    let listed = mcp.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let grep = tools
        .iter()
        .find(|tool| tool["name"] == "grep")
        .expect("grep");
    assert_eq!(grep["annotations"]["readOnlyHint"], true, "{grep}");
    assert_eq!(grep["inputSchema"]["required"], json!(["pattern", "path"]));
    assert!(
        grep.get("method").is_none(),
        "the serving method is not shown: {grep}"
    );
    let found = mcp
        .tool("grep", json!({"pattern": "needle", "path": root}))
        .await;
    assert_eq!(found["isError"], false, "{found}");
    assert_eq!(
        found["structuredContent"]["matches"][0]["line"], 2,
        "{found}"
    );
    assert_eq!(text(&found), found["structuredContent"].to_string());
    // Its own grants: not the file tools' (/), not another plugin's.
    let outside = mcp
        .tool("grep", json!({"pattern": "x", "path": "/etc"}))
        .await;
    assert_eq!(outside["isError"], true, "{outside}");
    assert!(
        text(&outside).contains("outside the allowed roots"),
        "{outside}"
    );
    let bad = mcp.tool("grep", json!({"pattern": "x"})).await;
    assert_eq!(bad["isError"], true);
    assert_eq!(
        text(&bad),
        "invalid arguments for grep: missing required argument `path`"
    );
    let echoed = mcp.tool("probe_echo", json!({"text": "hi"})).await;
    assert_eq!(
        echoed["structuredContent"],
        json!({"text": "hi"}),
        "{echoed}"
    );
    let failed = mcp.tool("probe_fail", json!({})).await;
    assert_eq!(failed["isError"], true);
    assert_eq!(
        text(&failed),
        "plugin `probe` (probe/fail): probe failed on purpose"
    );
    let unknown = mcp
        .request("tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    drop(mcp.server);
}

#[tokio::test]
async fn a_plugin_tool_that_loops_eats_memory_or_panics_is_an_error_and_the_host_keeps_serving() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    std::fs::write(dir.path().join("a.txt"), "still here").expect("write");
    let config = config(&dir, &root, false);
    let mut mcp = Mcp::start(&["--fs-root", &root, "--config", &config]).await;
    for (tool, says) in [
        ("probe_spin", "time limit"),
        ("probe_grow", "memory"),
        ("probe_panic", "probe"),
    ] {
        let result = mcp.tool(tool, json!({})).await;
        assert_eq!(result["isError"], true, "{tool}: {result}");
        let message = text(&result);
        assert!(
            message.starts_with(&format!("plugin `probe` (probe/{})", &tool[6..])),
            "{tool}: {message}"
        );
        assert!(message.contains(says), "{tool}: {message}");
        let read = mcp.tool("read_text_file", json!({"path": "a.txt"})).await;
        assert_eq!(text(&read), "still here", "after {tool}");
    }
    drop(mcp.server);
}

#[tokio::test]
async fn plugins_of_contract_0_1_0_still_load_and_declare_no_tools() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let hostile = wasm("WEXEC_HOSTILE_WASM");
    let mut mcp = Mcp::start(&["--fs-root", &root, "--plugin", &hostile]).await;
    let names = mcp.tool_names().await;
    assert!(names.contains(&"read_text_file".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|name| name.contains("hostile")),
        "{names:?}"
    );
    drop(mcp.server);
}

#[tokio::test]
async fn a_reload_that_changes_the_plugins_updates_the_tool_list_and_says_so() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let config = config(&dir, &root, true);
    let mut mcp = Mcp::start(&["--fs-root", &root, "--config", &config]).await;
    assert!(mcp.tool_names().await.contains(&"grep".to_owned()));
    self::config(&dir, &root, false);
    mcp.server.kill_with("HUP").await;
    let notification = mcp.client.next_notification().await;
    assert_eq!(
        notification["method"], "notifications/tools/list_changed",
        "{notification}"
    );
    let names = mcp.tool_names().await;
    assert!(!names.contains(&"grep".to_owned()), "{names:?}");
    assert!(names.contains(&"probe_echo".to_owned()), "{names:?}");
    drop(mcp.server);
}

#[tokio::test]
async fn a_subscribed_file_reports_each_change_until_unsubscribed_and_outside_files_are_refused() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let file = dir.path().join("watched.txt");
    std::fs::write(&file, "one\n").expect("write");
    let uri = format!("file://{}", file.display());
    let mut mcp = Mcp::start(&["--fs-root", &root]).await;
    let subscribed = mcp
        .request("resources/subscribe", json!({"uri": uri}))
        .await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    for line in ["two\n", "three\n"] {
        let mut text = std::fs::read_to_string(&file).expect("read");
        text.push_str(line);
        std::fs::write(&file, text).expect("write");
        let updated = mcp.client.next_notification().await;
        assert_eq!(
            updated["method"], "notifications/resources/updated",
            "{updated}"
        );
        assert_eq!(updated["params"]["uri"], uri.as_str());
        // The watch is re-armed after a quiet moment (reports are at least 100 ms apart,
        // docs/mcp.md), which no message shows: a bounded wait, begun at the report.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let read = mcp.request("resources/read", json!({"uri": uri})).await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "one\ntwo\nthree\n",
        "{read}"
    );
    let outside = mcp
        .request(
            "resources/subscribe",
            json!({"uri": "file:///etc/hostname"}),
        )
        .await;
    assert_eq!(outside["error"]["code"], -32602, "{outside}");
    let unsubscribed = mcp
        .request("resources/unsubscribe", json!({"uri": uri}))
        .await;
    assert_eq!(unsubscribed["result"], json!({}));
    std::fs::write(&file, "changed after\n").expect("write");
    // Nothing arrives for it: only the pings' replies. No message is ordered after a report
    // that should not come, so a bounded wait stays, begun once the unsubscribe is answered.
    let pong = mcp.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let pong = mcp.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{pong}");
    let stray = mcp.client.take_stashed_notifications();
    assert!(stray.is_empty(), "notified after unsubscribing: {stray:?}");
    drop(mcp.server);
}

#[tokio::test]
async fn a_plugin_tool_never_takes_one_of_wexecs_own_names_even_unlisted() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let config = config(&dir, &root, false);
    for processes in [true, false] {
        let mut args = vec!["--fs-root", &root, "--config", &config];
        if !processes {
            args.push("--no-processes");
        }
        let mut mcp = Mcp::start(&args).await;
        let listed = mcp.request("tools/list", json!({})).await;
        let run = (listed["result"]["tools"].as_array().expect("tools").iter())
            .find(|tool| tool["name"] == "run_command")
            .cloned();
        match (processes, run) {
            (true, Some(run)) => assert_eq!(run["title"], "Run a command", "{run}"),
            (false, None) => {
                let call = mcp
                    .request(
                        "tools/call",
                        json!({"name": "run_command", "arguments": {"command": "id"}}),
                    )
                    .await;
                assert_eq!(call["error"]["code"], -32602, "{call}");
            }
            (_, run) => panic!("processes {processes}: run_command listed as {run:?}"),
        }
        drop(mcp.server);
    }
}

#[tokio::test]
async fn glob_patterns_are_bounded() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let mut mcp = Mcp::start(&["--fs-root", &root]).await;
    let many: Vec<String> = (0..65).map(|i| format!("{{a,b}}{i}*")).collect();
    let refused = mcp
        .tool(
            "search_files",
            json!({"path": ".", "pattern": "*", "excludePatterns": many}),
        )
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        text(&refused).contains("more than the 64 allowed"),
        "{refused}"
    );
    let long = mcp
        .tool(
            "directory_tree",
            json!({"path": ".", "excludePatterns": ["x".repeat(2000)]}),
        )
        .await;
    assert!(
        text(&long).contains("longer than the 1024 allowed"),
        "{long}"
    );
    let fine = mcp
        .tool(
            "search_files",
            json!({"path": ".", "pattern": "*.txt", "excludePatterns": ["target"]}),
        )
        .await;
    assert_eq!(fine["isError"], false, "{fine}");
    drop(mcp.server);
}

/// Lines the SDK's own stdio transport dropped without a word get JSON-RPC's errors, and the
/// session goes on; a request whose id the client reuses while the first is in flight still
/// gets its answer.
#[tokio::test]
async fn unreadable_lines_get_their_error_and_every_request_its_answer() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").expect("write a.txt");
    let mut mcp = Mcp::start(&["--fs-root", &root]).await;

    mcp.client.send_text("{not json").await;
    let parse = mcp.client.reply_to(&Value::Null).await;
    assert_eq!(parse["error"]["code"], -32700, "{parse}");

    let bad = json!({"jsonrpc": "2.0", "id": "bad", "method": "tools/call", "params": 7});
    mcp.client.send(&bad).await;
    let bad = mcp.client.reply_to(&json!("bad")).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let message = bad["error"]["message"].as_str().expect("message");
    assert!(message.contains("tools/call"), "{bad}");

    let old = json!({"jsonrpc": "1.0", "id": "old", "method": "tools/list"});
    mcp.client.send(&old).await;
    let old = mcp.client.reply_to(&json!("old")).await;
    assert_eq!(old["error"]["code"], -32600, "{old}");

    // The same id twice, in one write: two answers.
    let read = json!({"jsonrpc": "2.0", "id": "twice", "method": "tools/call",
                      "params": {"name": "read_text_file", "arguments": {"path": "a.txt"}}});
    mcp.client
        .send_raw(format!("{read}\n{read}\n").as_bytes())
        .await;
    for _ in 0..2 {
        let reply = mcp.client.reply_to(&json!("twice")).await;
        assert_eq!(text(&reply["result"]), "alpha\n", "{reply}");
    }

    let read = mcp.tool("read_text_file", json!({"path": "a.txt"})).await;
    assert_eq!(text(&read), "alpha\n", "{read}");
    drop(mcp.server);
}

/// Before a lifecycle is chosen, a tool call is the SDK's to refuse (it carries no protocol
/// version): no tool runs for a client that did not say which protocol it speaks.
#[tokio::test]
async fn a_tool_call_before_any_lifecycle_runs_nothing() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (server, mut client) = spawn_stdio(&["mcp", "--fs-root", &root]);
    let marker = dir.path().join("written.txt");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "write_file",
                                 "arguments": {"path": marker.display().to_string(), "content": "x"}}});
    client.send(&call).await;
    let refused = client.reply_to(&json!(1)).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        !marker.exists(),
        "a tool ran before the lifecycle was chosen"
    );
    drop(server);
}

/// A client that reuses the id of a request still in flight (JSON-RPC forbids it, clients do
/// it) can still cancel both, and leaving still ends everything it started.
#[tokio::test]
async fn requests_sharing_an_id_are_all_cancelled_and_the_end_of_input_ends_them() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let mut mcp = Mcp::start(&["--fs-root", &root]).await;
    let marker = format!(
        "{}.{}",
        100_000 + std::process::id() % 100_000,
        mcp.server.pid()
    );
    let sleeping = |marker: &str| {
        let marker = marker.to_owned();
        wexec_tests::running_where(move |cmdline| {
            String::from_utf8_lossy(cmdline).contains(&marker)
        })
    };
    let long = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "run_command",
                                 "arguments": {"argv": ["sleep", marker], "timeout_ms": 600_000}}});
    mcp.client.send(&long).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sleeping(&marker).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!sleeping(&marker).is_empty(), "the command did not start");
    // The same id again, answered at once: the first is still in flight under it.
    let quick = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                       "params": {"name": "list_allowed_directories", "arguments": {}}});
    mcp.client.send(&quick).await;
    let answered = mcp.client.reply_to(&json!(5)).await;
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    mcp.client
        .send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 5}}),
        )
        .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !sleeping(&marker).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        sleeping(&marker).is_empty(),
        "the cancelled command still runs"
    );

    // Two more under one id, then the end of input: wexec ends both and exits.
    let second = format!("{marker}1");
    for (id, what) in [(7, &second), (7, &marker)] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "run_command",
                                     "arguments": {"argv": ["sleep", what], "timeout_ms": 600_000}}});
        mcp.client.send(&call).await;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sleeping(&marker).len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    mcp.client.close().await;
    assert!(mcp.server.wait().await.success());
    assert!(
        sleeping(&marker).is_empty(),
        "a command outlived its session"
    );
}
