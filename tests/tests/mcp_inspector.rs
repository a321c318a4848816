//! `wexec mcp` checked by the MCP Inspector CLI (`@modelcontextprotocol/inspector` 2.x, on
//! Node 22): `tools/list --strict` (the tool schemas' portability) finds nothing to report in
//! either era, and its `tools/call` reaches files and processes and reports denials, over
//! stdio and Streamable HTTP. `WEXEC_MCP_INSPECTOR` names the inspector's launcher script and
//! `WEXEC_NODE22` the directory of a Node 22 `node` (`.ci/run` installs both); without them
//! the tests skip, except under CI.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::process::{Command, Output, Stdio};

use serde_json::Value;
use wexec_tests::{TempDir, real_client, wexec_bin};

struct Inspector {
    launcher: String,
    path: String,
    home: TempDir,
}

fn inspector() -> Option<Inspector> {
    let launcher = real_client("WEXEC_MCP_INSPECTOR", "the MCP Inspector's launcher script")?;
    let node = real_client("WEXEC_NODE22", "the directory holding Node 22's `node`")?;
    let path = format!("{node}:{}", std::env::var("PATH").unwrap_or_default());
    Some(Inspector {
        launcher,
        path,
        home: TempDir::new(),
    })
}

impl Inspector {
    /// `inspector --cli ARGS`.
    fn run(&self, args: &[&str]) -> Output {
        Command::new("node")
            .arg(&self.launcher)
            .arg("--cli")
            .args(args)
            .env("PATH", &self.path)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path())
            .stdin(Stdio::null())
            .output()
            .expect("run the MCP Inspector")
    }

    /// A `tools/call` in `era` whose JSON result it prints.
    fn call(&self, era: &str, target: &[&str], tool: &str, arguments: &str) -> Value {
        let mut args = vec![
            "--protocol-era",
            era,
            "--format",
            "json",
            "--method",
            "tools/call",
            "--tool-name",
            tool,
            "--tool-args-json",
            arguments,
        ];
        args.extend_from_slice(target);
        let output = self.run(&args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(stdout.trim()).unwrap_or_else(|err| {
            panic!(
                "{tool}: not JSON ({err}): {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
    }
}

fn text(result: &Value) -> String {
    let result = result.get("result").unwrap_or(result);
    (result["content"].as_array().into_iter().flatten())
        .filter_map(|block| block["text"].as_str())
        .collect()
}

fn is_error(result: &Value) -> bool {
    let result = result.get("result").unwrap_or(result);
    result["isError"] == true
}

/// What the inspector drives in each test: files in `root`, with one file to read.
fn workspace() -> (TempDir, String) {
    let dir = TempDir::new();
    std::fs::write(dir.path().join("hello.txt"), "hello from wexec\n").expect("write");
    let root = dir.path().display().to_string();
    (dir, root)
}

fn check(inspector: &Inspector, target: &[&str], root: &str) {
    for era in ["legacy", "modern"] {
        let mut args = vec!["--protocol-era", era, "--method", "tools/list", "--strict"];
        args.extend_from_slice(target);
        let listed = inspector.run(&args);
        let stderr = String::from_utf8_lossy(&listed.stderr);
        assert_eq!(
            listed.status.code(),
            Some(0),
            "{era}: --strict failed:\n{stderr}"
        );
        assert!(
            !stderr.contains("Issue:"),
            "{era}: --strict reports portability problems:\n{stderr}"
        );
        let stdout = String::from_utf8_lossy(&listed.stdout);
        assert!(
            stdout.contains("run_command") && stdout.contains("read_text_file"),
            "{stdout}"
        );
        let read = inspector.call(era, target, "read_text_file", r#"{"path": "hello.txt"}"#);
        assert_eq!(text(&read), "hello from wexec\n", "{era}: {read}");
        let run = inspector.call(
            era,
            target,
            "run_command",
            r#"{"command": "echo $((6 * 7))"}"#,
        );
        assert!(!is_error(&run), "{era}: {run}");
        assert!(text(&run).contains(r#""stdout":"42\n""#), "{era}: {run}");
        let denied = inspector.call(
            era,
            target,
            "read_text_file",
            r#"{"path": "/etc/hostname"}"#,
        );
        assert!(is_error(&denied), "{era}: {denied}");
        assert!(
            text(&denied).contains("outside the allowed roots"),
            "{era}: {denied}"
        );
    }
    assert!(!root.is_empty());
}

#[test]
fn the_inspector_finds_the_tools_portable_and_calls_them_over_stdio() {
    let Some(inspector) = inspector() else {
        return;
    };
    let (_dir, root) = workspace();
    let wexec = wexec_bin().display().to_string();
    check(&inspector, &[&wexec, "mcp", "--fs-root", &root], &root);
}

#[test]
fn the_inspector_calls_the_tools_over_streamable_http_with_the_token() {
    let Some(inspector) = inspector() else {
        return;
    };
    let (_dir, root) = workspace();
    let (_server, url) = wexec_tests::spawn_mcp_http(&["--fs-root", &root], "inspect0r");
    check(
        &inspector,
        &[
            "--transport",
            "http",
            "--server-url",
            &url,
            "--header",
            "Authorization: Bearer inspect0r",
        ],
        &root,
    );
    let refused = inspector.run(&[
        "--method",
        "tools/list",
        "--transport",
        "http",
        "--server-url",
        &url,
    ]);
    assert_ne!(refused.status.code(), Some(0), "no token, yet listed");
}
