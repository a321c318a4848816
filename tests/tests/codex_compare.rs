//! The same scripted session against Codex's own exec-server 0.169 and against wexec, compared
//! reply by reply, field by field: how drift from the reference is caught. Every allowance
//! below names the difference of docs/protocol.md §2 it stands for; everything else must be
//! equal. Skipped, saying so (failed under CI), unless `CODEX_BIN` names the `codex` binary of
//! `@openai/codex@0.169.0` (`.ci/run` installs it).
//!
//! Both servers work on the same fixture path, rebuilt before each run, with the fixture as
//! their working directory (wexec's fs root); wexec runs unconfined (`danger-full-access`), as
//! Codex does without a `sandbox`.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::process::Command;
use wexec_tests::{Client, TempDir, codex_read_only, codex_workspace_write, spawn_stdio_with};

/// How a pair of replies is compared.
#[derive(Clone, Copy)]
enum Compare {
    /// Equal as JSON.
    Exact,
    /// Equal once these result members are removed.
    Ignoring(&'static [&'static str]),
    /// `environmentInfo`: the same members and the same capability names; the values are each
    /// server's own (version, provider, flags: §7.4).
    EnvironmentShape,
    /// `fs/readDirectory`: the same entries in any order (§9.3).
    AnyOrder,
    /// `process/read`: the same bytes per stream, exit and verdict; where the reads cut the
    /// output into chunks (and so the seqs) is timing, on both servers (§8.6).
    Output,
    /// `process/read` long-polled until the process has closed, then as [`Compare::Output`].
    UntilClosed,
}

/// One request of the script; `{root}` in its params is the fixture's path.
struct Step {
    method: &'static str,
    params: Value,
    compare: Compare,
}

fn step(method: &'static str, params: Value) -> Step {
    Step {
        method,
        params,
        compare: Compare::Exact,
    }
}

fn script() -> Vec<Step> {
    use Compare::*;
    let walk = |depth: u64, entries: u64, follow: bool| json!({"path": "file://{root}", "options": {"maxDepth": depth, "maxDirectories": 100, "maxEntries": entries, "followDirectorySymlinks": follow}});
    vec![
        Step {
            method: "environment/info",
            params: Value::Null,
            compare: EnvironmentShape,
        },
        step("environment/status", Value::Null),
        step("environment/info", json!({"x": 1})),
        step("environment/status", json!([])),
        step("environment/status", json!({})),
        step("no/suchMethod", json!({})),
        step("initialize", json!({"clientName": "again"})),
        // Files.
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/new.txt", "dataBase64": "aGVsbG8="}),
        ),
        step("fs/readFile", json!({"path": "file://{root}/new.txt"})),
        step("fs/readFile", json!({"path": "file://{root}/missing"})),
        step("fs/readFile", json!({"path": "file://{root}/dir"})),
        step("fs/readFile", json!({"path": "file://{root}/fifo"})),
        step("fs/readFile", json!({"path": "file://{root}/file/below"})),
        step("fs/readFile", json!({})),
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/dir", "dataBase64": ""}),
        ),
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/nodir/x", "dataBase64": ""}),
        ),
        step(
            "fs/createDirectory",
            json!({"path": "file://{root}/dir", "recursive": false}),
        ),
        step("fs/createDirectory", json!({"path": "file://{root}/dir"})),
        step("fs/createDirectory", json!({"path": "file://{root}/file"})),
        step(
            "fs/createDirectory",
            json!({"path": "file://{root}/made/deep/er"}),
        ),
        Step {
            method: "fs/getMetadata",
            // Birth and change times are the fixture's own (and Codex reports no birth time
            // through a link, §2).
            params: json!({"path": "file://{root}/file-link"}),
            compare: Ignoring(&["createdAtMs", "modifiedAtMs"]),
        },
        Step {
            method: "fs/getMetadata",
            params: json!({"path": "file://{root}/dir"}),
            compare: Ignoring(&["createdAtMs", "modifiedAtMs"]),
        },
        step("fs/getMetadata", json!({"path": "file://{root}/missing"})),
        step(
            "fs/canonicalize",
            json!({"path": "file://{root}/dir-link/../file"}),
        ),
        Step {
            method: "fs/readDirectory",
            params: json!({"path": "file://{root}/dir"}),
            compare: AnyOrder,
        },
        step("fs/walk", walk(5, 100, false)),
        step("fs/walk", walk(5, 100, true)),
        step("fs/walk", walk(0, 3, false)),
        step(
            "fs/walk",
            json!({"path": "file://{root}/dir-link", "options": {"maxDepth": 1, "maxDirectories": 5, "maxEntries": 5, "followDirectorySymlinks": true}}),
        ),
        step(
            "fs/walk",
            json!({"path": "file://{root}", "options": {"maxDepth": 1, "maxDirectories": 0, "maxEntries": 5, "followDirectorySymlinks": true}}),
        ),
        step(
            "fs/copy",
            json!({"sourcePath": "file://{root}/file", "destinationPath": "file://{root}/copy", "recursive": false}),
        ),
        step(
            "fs/copy",
            json!({"sourcePath": "file://{root}/dir", "destinationPath": "file://{root}/copy-dir", "recursive": false}),
        ),
        step(
            "fs/copy",
            json!({"sourcePath": "file://{root}/dir", "destinationPath": "file://{root}/dir/inside", "recursive": true}),
        ),
        step(
            "fs/remove",
            json!({"path": "file://{root}/dir", "recursive": false}),
        ),
        step(
            "fs/remove",
            json!({"path": "file://{root}/missing", "force": false}),
        ),
        step("fs/remove", json!({"path": "file://{root}/missing"})),
        // followSymlinks: false.
        step(
            "fs/readFile",
            json!({"path": "file://{root}/file-link", "followSymlinks": false}),
        ),
        step(
            "fs/readFile",
            json!({"path": "file://{root}/dir-link/a", "followSymlinks": false}),
        ),
        step(
            "fs/getMetadata",
            json!({"path": "file://{root}/file-link", "followSymlinks": false}),
        ),
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/file-link", "dataBase64": "", "followSymlinks": false}),
        ),
        step(
            "fs/remove",
            json!({"path": "file://{root}/file-link", "followSymlinks": false}),
        ),
        step(
            "fs/remove",
            json!({"path": "file://{root}/file-link", "followSymlinks": false, "recursive": false}),
        ),
        step(
            "fs/createDirectory",
            json!({"path": "file://{root}/dir-link/x", "followSymlinks": false}),
        ),
        // Handles.
        step(
            "fs/open",
            json!({"handleId": "r", "path": "file://{root}/digits"}),
        ),
        step(
            "fs/readBlock",
            json!({"handleId": "r", "offset": 6, "len": 3}),
        ),
        step(
            "fs/readBlock",
            json!({"handleId": "r", "offset": 8, "len": 4}),
        ),
        step(
            "fs/readBlock",
            json!({"handleId": "r", "offset": 10, "len": 4}),
        ),
        step(
            "fs/readBlock",
            json!({"handleId": "r", "offset": 0, "len": 0}),
        ),
        step(
            "fs/open",
            json!({"handleId": "r", "path": "file://{root}/digits"}),
        ),
        step(
            "fs/open",
            json!({"handleId": "x".repeat(33), "path": "file://{root}/digits"}),
        ),
        step(
            "fs/open",
            json!({"handleId": "d", "path": "file://{root}/dir"}),
        ),
        step(
            "fs/writeBlock",
            json!({"handleId": "r", "offset": 0, "chunk": "eA=="}),
        ),
        step(
            "fs/readBlock",
            json!({"handleId": "r", "offset": 0, "len": 1}),
        ),
        step(
            "fs/open",
            json!({"handleId": "w", "path": "file://{root}/written", "mode": "replace"}),
        ),
        step(
            "fs/writeBlock",
            json!({"handleId": "w", "offset": 2, "chunk": "eA=="}),
        ),
        step(
            "fs/writeBlock",
            json!({"handleId": "w", "offset": 0, "chunk": ""}),
        ),
        step(
            "fs/readBlock",
            json!({"handleId": "w", "offset": 0, "len": 1}),
        ),
        step(
            "fs/writeBlock",
            json!({"handleId": "w", "offset": 0, "chunk": "eA=="}),
        ),
        step("fs/readFile", json!({"path": "file://{root}/written"})),
        step("fs/close", json!({"handleId": "r"})),
        step("fs/close", json!({"handleId": "r"})),
        step(
            "fs/readBlock",
            json!({"handleId": "r", "offset": 0, "len": 1}),
        ),
        // Paths.
        step(
            "fs/readFile",
            json!({"path": "file://localhost{root}/file"}),
        ),
        step("fs/readFile", json!({"path": "file://host{root}/file"})),
        step("fs/readFile", json!({"path": "file:///C:/x"})),
        step("fs/readFile", json!({"path": "http://host/x"})),
        step("fs/readFile", json!({"path": "file://{root}/file?x"})),
        step("fs/readFile", json!({"path": "file://{root}/file#x"})),
        step("fs/readFile", json!({"path": "file://{root}/a%00"})),
        step("fs/readFile", json!({"path": "file://{root}/%66ile"})),
        // The `sandbox` Codex sends, on fs methods (§7.3): its workspace-write object writes
        // in the workspace but not in `.git`; its read-only object writes nowhere.
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/sandboxed", "dataBase64": "eA==", "sandbox": "{workspace-write}"}),
        ),
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/.git/config", "dataBase64": "eA==", "sandbox": "{workspace-write}"}),
        ),
        step(
            "fs/createDirectory",
            json!({"path": "file://{root}/.git/hooks", "sandbox": "{workspace-write}"}),
        ),
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/file", "dataBase64": "eA==", "sandbox": "{read-only}"}),
        ),
        step(
            "fs/remove",
            json!({"path": "file://{root}/digits", "sandbox": "{read-only}"}),
        ),
        step(
            "fs/copy",
            json!({"sourcePath": "file://{root}/file", "destinationPath": "file://{root}/copied", "recursive": false, "sandbox": "{read-only}"}),
        ),
        step(
            "fs/readFile",
            json!({"path": "file://{root}/file", "sandbox": "{read-only}"}),
        ),
        step(
            "fs/readFile",
            json!({"path": "file://{root}/.git/config", "sandbox": "{workspace-write}"}),
        ),
        // ... and on process/start: the write fails inside, and the denial is recognized.
        step(
            "process/start",
            json!({"processId": "ro", "argv": ["/bin/sh", "-c", "printf x > f; s=$?; sleep 0.2; exit $s"], "cwd": "file://{root}", "env": {"PATH": "/usr/bin:/bin"}, "tty": false, "sandbox": "{read-only}"}),
        ),
        Step {
            method: "process/read",
            params: json!({"processId": "ro", "waitMs": 5000}),
            compare: UntilClosed,
        },
        Step {
            method: "process/read",
            params: json!({"processId": "ro"}),
            compare: Output,
        },
        // Processes (the server's own sandbox off: no `sandbox`, danger-full-access).
        step("process/start", json!({})),
        step(
            "process/start",
            json!({"processId": "p", "argv": [], "cwd": "file://{root}", "env": {}, "tty": false}),
        ),
        step(
            "process/start",
            json!({"processId": "p", "argv": ["/no/such/program"], "cwd": "file://{root}", "env": {}, "tty": false}),
        ),
        step(
            "process/start",
            json!({"processId": "p", "argv": ["true"], "cwd": "file://host/tmp", "env": {}, "tty": false}),
        ),
        step(
            "process/start",
            json!({"processId": "p", "argv": ["true"], "cwd": "file://{root}", "env": {}, "tty": false, "envPolicy": {"inherit": "core"}}),
        ),
        step(
            "process/start",
            json!({"processId": "env", "argv": ["/bin/sh", "-c", "/usr/bin/env; sleep 0.2"], "cwd": "file://{root}", "env": {"X": "1"}, "tty": false, "envPolicy": {"inherit": "core", "ignoreDefaultExcludes": false, "exclude": ["PATH", "HOME", "SHELL", "TMPDIR"], "set": {"SET_TOKEN": "s"}, "includeOnly": []}}),
        ),
        step(
            "process/read",
            json!({"processId": "env", "afterSeq": 2, "waitMs": 5000}),
        ),
        step("process/read", json!({"processId": "env"})),
        step(
            "process/start",
            json!({"processId": "job", "argv": ["/bin/sh", "-c", "printf a; sleep 0.2; printf b >&2; sleep 0.2; exit 7"], "cwd": "file://{root}", "env": {"PATH": "/usr/bin:/bin"}, "tty": false}),
        ),
        step(
            "process/start",
            json!({"processId": "job", "argv": ["true"], "cwd": "file://{root}", "env": {}, "tty": false}),
        ),
        // A long poll until the job has closed (exited at seq 3, closed at 4): where a poll
        // returns between the exit and the close is a race on both servers.
        step(
            "process/read",
            json!({"processId": "job", "afterSeq": 3, "waitMs": 5000}),
        ),
        step("process/read", json!({"processId": "job"})),
        step("process/read", json!({"processId": "job", "maxBytes": 1})),
        step("process/read", json!({"processId": "nobody"})),
        // `writeId` is optional in wexec (§2), required by Codex.
        step(
            "process/write",
            json!({"processId": "nobody", "chunk": "eA==", "writeId": "w1"}),
        ),
        step(
            "process/write",
            json!({"processId": "job", "chunk": "eA==", "writeId": "w1"}),
        ),
        step(
            "process/signal",
            json!({"processId": "nobody", "signal": "interrupt"}),
        ),
        step("process/terminate", json!({"processId": "nobody"})),
        step("process/terminate", json!({"processId": "job"})),
        // Watches (§9.6), last: the changes that fire them are made through the protocol.
        watch(5, json!(["file://{root}/w/x/y"]), Value::Null),
        watch(5, json!(["file://{root}/other"]), Value::Null),
        watch(4, json!(["file://{root}/other"]), Value::Null),
        watch(6, json!([]), Value::Null),
        watch(7, json!(["file://{root}/file"]), Value::Null),
        watch(8, json!(["file://{root}/dangling"]), Value::Null),
        watch(9, json!(["file://{root}/file/below"]), Value::Null),
        watch(10, json!(["file://{root}/file-link/below"]), Value::Null),
        watch(11, json!(["file:///proc/nothing"]), Value::Null),
        watch(12, json!(["file://host/x"]), Value::Null),
        watch(
            13,
            json!(["file://{root}/x"]),
            json!("file://{root}/absent"),
        ),
        watch(
            14,
            json!(["file://{root}/x"]),
            json!("file://{root}/file-link"),
        ),
        watch(
            15,
            json!(["file://{root}/x"]),
            json!("file://{root}/digits"),
        ),
        step(
            "fs/writeFile",
            json!({"path": "file://{root}/digits", "dataBase64": "OQ=="}),
        ),
        step(NEXT_WATCH_NOTIFICATION, Value::Null),
        watch(
            16,
            json!(["file://{root}/w/x/y", "file://{root}/v"]),
            Value::Null,
        ),
        step("fs/createDirectory", json!({"path": "file://{root}/w"})),
        step(NEXT_WATCH_NOTIFICATION, Value::Null),
        step(
            "fs/watchMissing",
            json!({"watchId": 17, "missing": ["file://{root}/z"]}),
        ),
        step("fs/watchMissing", json!({"watchId": 18})),
        // Executor config (§7.5): the user layer and the trusted project's layers.
        step(
            "environmentConfig/read",
            json!({"cwd": "file://{root}/dir", "configPaths": [["mcp_servers"]], "requirementsPaths": [["mcp_servers"]]}),
        ),
        step(
            "environmentConfig/read",
            json!({"cwd": "file://{root}/dir", "configPaths": [["model", "x"], ["mcp_servers", "user"]], "requirementsPaths": []}),
        ),
        step(
            "environmentConfig/read",
            json!({"cwd": "file://{root}/nowhere", "configPaths": [["nothing"]], "requirementsPaths": []}),
        ),
        step(
            "environmentConfig/read",
            json!({"cwd": "file://{root}", "configPaths": [], "requirementsPaths": []}),
        ),
        step(
            "environmentConfig/read",
            json!({"cwd": "file://{root}", "configPaths": [[]], "requirementsPaths": []}),
        ),
        step(
            "environmentConfig/read",
            json!({"cwd": "file://{root}", "configPaths": [["a"]]}),
        ),
        // Capability discovery (§7.6): a plugin root, a root inside it, missing and file roots;
        // the Codex home's skills and installed plugins.
        step(
            "capabilityRoots/discoverV1",
            json!({"roots": [
                {"id": "p", "path": "file://{root}/cap"},
                {"id": "in", "path": "file://{root}/cap/skills", "sandbox": null},
                {"id": "m", "path": "file://{root}/missing"},
                {"id": "f", "path": "file://{root}/file"},
            ]}),
        ),
        step("capabilityRoots/discoverV1", json!({"roots": []})),
        step("capabilityRoots/discoverV1", json!({})),
        step("capabilities/discoverV2", json!({"cwd": "file://{root}"})),
        step("capabilities/discoverV2", json!({})),
    ]
}

/// Not a request: the step's reply is the next `fs/missingChanged` notification.
const NEXT_WATCH_NOTIFICATION: &str = "(next fs/missingChanged)";

fn watch(id: u64, missing: Value, present: Value) -> Step {
    step(
        "fs/watchMissing",
        json!({"watchId": id, "missing": missing, "present": present}),
    )
}

const SKILL_A: &str =
    "---\nname: a\ndescription: skill a\nmetadata:\n  short-description: short\n---\n";
const OPENAI_YAML: &str = "dependencies:\n  tools:\n    - type: mcp\n      value: foo\n      transport: stdio\n      command: foo-cmd\npolicy:\n  allow_implicit_invocation: false\n  products: [codex, chatgpt]\n";

/// The Codex home's skills and installed plugins, for `capabilities/discoverV2`.
fn build_home(home: &Path) {
    for (file, text) in [
        ("skills/s1/SKILL.md", SKILL_A),
        ("skills/s1/agents/openai.yaml", OPENAI_YAML),
        (
            "skills/.system/sys/SKILL.md",
            "---\ndescription: unnamed\n---\n",
        ),
        ("skills/bad/SKILL.md", "no front matter\n"),
        (".agents/skills/u/SKILL.md", SKILL_A),
        (
            "plugins/cache/m/plug/1.0/.codex-plugin/plugin.json",
            r#"{"name":"plug","interface":{"displayName":"Plug"}}"#,
        ),
        ("plugins/cache/m/plug/1.0/skills/x/SKILL.md", SKILL_A),
        ("plugins/cache/m/bare/2.0/README", "no manifest"),
    ] {
        let path = home.join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
}

/// The fixture both servers work on.
fn build_fixture(root: &Path) {
    if root.exists() {
        std::fs::remove_dir_all(root).expect("clear fixture");
    }
    for dir in ["dir/sub", "dir/.hidden", "empty", ".git"] {
        std::fs::create_dir_all(root.join(dir)).expect("mkdir");
    }
    for dir in [
        "dir/.codex",
        ".codex",
        "cap/.codex-plugin",
        "cap/skills/a/agents",
        "cap/skills/b",
        "cap/big",
    ] {
        std::fs::create_dir_all(root.join(dir)).expect("mkdir");
    }
    for (file, text) in [
        ("file", "f"),
        (".git/config", "c"),
        (".git/HEAD", "ref: refs/heads/main\n"),
        (
            ".codex/config.toml",
            "[mcp_servers.proj]\ncommand = \"proj\"\n",
        ),
        (
            "dir/.codex/config.toml",
            "model = \"m\"\n[mcp_servers.sub]\nurl = \"http://x\"\nenv = { A = \"1\" }\n",
        ),
        ("digits", "0123456789"),
        ("cap/.codex-plugin/plugin.json", r#"{"name":"cap"}"#),
        ("cap/.mcp.json", "{}"),
        ("cap/skills/a/SKILL.md", SKILL_A),
        ("cap/skills/a/agents/openai.yaml", OPENAI_YAML),
        ("cap/skills/b/SKILL.md", "no front matter\n"),
        ("dir/a", "a"),
        ("dir/b", "b"),
    ] {
        std::fs::write(root.join(file), text).expect("write");
    }
    std::fs::write(root.join("cap/big/SKILL.md"), vec![b'x'; 2 << 20]).expect("write");
    std::os::unix::fs::symlink(root.join("file"), root.join("file-link")).expect("symlink");
    std::os::unix::fs::symlink(root.join("dir"), root.join("dir-link")).expect("symlink");
    std::os::unix::fs::symlink(root.join("nowhere"), root.join("dangling")).expect("symlink");
    let status = std::process::Command::new("mkfifo")
        .arg(root.join("fifo"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
}

/// Runs the script on one server; the replies in script order, `jsonrpc` and `id` removed.
async fn run(command: Command, root: &str) -> Vec<Value> {
    let (_server, mut client): (_, Client) = spawn_stdio_with(command);
    let mut id = 0;
    let mut exchange = async |client: &mut Client, method: &str, params: Value| {
        id += 1;
        client
            .send(&json!({"id": id, "method": method, "params": params}))
            .await;
        let mut reply = client.reply_to(&json!(id)).await;
        // Ids differ where a step polls more often on one server; the order is the script's.
        if let Some(object) = reply.as_object_mut() {
            object.remove("jsonrpc");
            object.remove("id");
        }
        reply
    };
    let init = exchange(&mut client, "initialize", json!({"clientName": "compare"})).await;
    assert!(init.get("result").is_some(), "initialize: {init}");
    client
        .send(&json!({"method": "initialized", "params": {}}))
        .await;
    let workspace_write = codex_workspace_write(Path::new(root), "restricted", false);
    let read_only = codex_read_only(Path::new(root));
    let mut replies = Vec::new();
    for step in script() {
        let text = step
            .params
            .to_string()
            .replace(r#""{workspace-write}""#, &workspace_write.to_string())
            .replace(r#""{read-only}""#, &read_only.to_string())
            .replace("{root}", root);
        let mut params: Value = serde_json::from_str(&text).expect("params");
        if step.method == NEXT_WATCH_NOTIFICATION {
            replies.push(next_watch_notification(&mut client).await);
            continue;
        }
        let mut reply = exchange(&mut client, step.method, params.clone()).await;
        if matches!(step.compare, Compare::UntilClosed) {
            while reply["result"]["closed"] == false {
                let next = reply["result"]["nextSeq"].as_u64().unwrap_or(1);
                params["afterSeq"] = json!(next.saturating_sub(1));
                reply = exchange(&mut client, step.method, params.clone()).await;
            }
        }
        replies.push(reply);
    }
    replies
}

/// The next `fs/missingChanged`, `jsonrpc` removed; process notifications are passed over.
async fn next_watch_notification(client: &mut Client) -> Value {
    loop {
        let mut notification = client.next_notification().await;
        if notification["method"] == "fs/missingChanged" {
            if let Some(object) = notification.as_object_mut() {
                object.remove("jsonrpc");
            }
            return notification;
        }
    }
}

fn environment_shape(reply: &Value) -> Value {
    let info = &reply["result"];
    let mut members: Vec<&String> = info
        .as_object()
        .map(|object| object.keys().filter(|key| *key != "wexec").collect())
        .unwrap_or_default();
    members.sort();
    let mut flags: Vec<&String> = info["capabilities"]
        .as_object()
        .map(|object| object.keys().collect())
        .unwrap_or_default();
    flags.sort();
    json!({"members": members, "capabilities": flags})
}

/// Members wexec adds to Codex's results (docs/protocol.md): the tier beside `sandboxType`.
const EXTENSIONS: [&str; 2] = ["sandboxTier", "sandboxAccepted"];

fn normalized(reply: &Value, compare: Compare) -> Value {
    let mut reply = reply.clone();
    if let Some(result) = reply["result"].as_object_mut() {
        for member in EXTENSIONS {
            result.remove(member);
        }
    }
    match compare {
        Compare::Exact => {}
        Compare::Ignoring(members) => {
            if let Some(result) = reply["result"].as_object_mut() {
                for member in members {
                    result.remove(*member);
                }
            }
        }
        Compare::EnvironmentShape => return environment_shape(&reply),
        Compare::Output | Compare::UntilClosed => {
            let result = &reply["result"];
            let mut streams = serde_json::Map::new();
            for chunk in result["chunks"].as_array().into_iter().flatten() {
                let bytes = STANDARD
                    .decode(chunk["chunk"].as_str().unwrap_or_default())
                    .unwrap_or_default();
                let stream = chunk["stream"].as_str().unwrap_or_default().to_owned();
                let text = streams.entry(stream).or_insert_with(|| json!(""));
                *text = json!(format!(
                    "{}{}",
                    text.as_str().unwrap_or_default(),
                    String::from_utf8_lossy(&bytes)
                ));
            }
            return json!({
                "output": streams,
                "exitCode": result["exitCode"],
                "exited": result["exited"],
                "closed": result["closed"],
                "sandboxDenied": result["sandboxDenied"],
                "failure": result["failure"],
                "error": reply["error"],
            });
        }
        Compare::AnyOrder => {
            if let Some(entries) = reply["result"]["entries"].as_array_mut() {
                entries.sort_by_key(Value::to_string);
            }
        }
    }
    reply
}

#[tokio::test]
async fn a_scripted_session_answers_as_codex_exec_server_does() {
    let Some(codex) =
        wexec_tests::real_client("CODEX_BIN", "the codex binary of @openai/codex@0.169.0")
    else {
        return;
    };
    let dir = TempDir::new();
    let root_path = dir.path().join("work");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("mkdir home");
    let root = root_path.display().to_string();
    let user = format!(
        "model = \"o3\"\n[mcp_servers.user]\ncommand = \"u\"\nargs = [\"a\"]\n\n[projects.\"{root}\"]\ntrust_level = \"trusted\"\n"
    );
    std::fs::write(home.join("config.toml"), user).expect("write user config");
    build_home(&home);

    build_fixture(&root_path);
    let mut reference = Command::new(&codex);
    reference
        .args(["exec-server", "--listen", "stdio://"])
        .current_dir(&root_path)
        .env("HOME", &home)
        .env("CODEX_HOME", &home)
        .env_remove("TMPDIR")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let theirs = run(reference, &root).await;

    build_fixture(&root_path);
    let mut ours = wexec_tests::command(&["--fs-root", &root, "--sandbox", "danger-full-access"]);
    ours.current_dir(&root_path)
        .env("HOME", &home)
        .env("CODEX_HOME", &home)
        .env_remove("TMPDIR");
    let ours = run(ours, &root).await;

    let mut differences = Vec::new();
    for ((step, theirs), ours) in script().iter().zip(&theirs).zip(&ours) {
        let (theirs, ours) = (
            normalized(theirs, step.compare),
            normalized(ours, step.compare),
        );
        if theirs != ours {
            differences.push(format!(
                "{} {}\n  codex: {theirs}\n  wexec: {ours}",
                step.method, step.params
            ));
        }
    }
    assert_eq!(theirs.len(), ours.len());
    assert!(
        differences.is_empty(),
        "{} of {} replies differ from Codex's exec-server:\n{}",
        differences.len(),
        theirs.len(),
        differences.join("\n")
    );
}
