//! The real Codex CLI 0.169 with `wexec mcp` as an MCP server in its `config.toml`, its model
//! scripted (a local Responses API): the model calls wexec's `run_command`, then its
//! `read_text_file` on the file the command wrote, and Codex hands back wexec's results.
//! Codex asks approval for tools that are not read-only (wexec's honest hints):
//! `default_tools_approval_mode = "approve"` is the operator saying yes, as docs/mcp.md shows.
//! `CODEX_BIN` names the `codex` binary of `@openai/codex@0.169.0` (`.ci/run` installs it);
//! without it the test skips, except under CI.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::Path;

use serde_json::{Value, json};
use wexec_tests::{model_calls, model_says, real_client, scripted_model, wexec_bin};

/// Codex lists an MCP server's tools as one namespace, `mcp__<server>`.
const NAMESPACE: &str = "mcp__wexec";

/// The model's answer to `request`: `run_command`, then `read_text_file`, then "done", each
/// only once Codex offers wexec's tools.
fn next_step(request: &Value) -> Value {
    let offered =
        (request["tools"].as_array().into_iter().flatten()).any(|tool| tool["name"] == NAMESPACE);
    let answered = (request["input"].as_array().into_iter().flatten())
        .filter(|item| item["type"] == "function_call_output")
        .count();
    let call = |tool: &str, arguments: Value| {
        let mut call = model_calls(tool, &arguments);
        call["namespace"] = json!(NAMESPACE);
        call
    };
    match (offered, answered) {
        (true, 0) => call(
            "run_command",
            json!({"command": "echo made-by-wexec > made.txt; echo ran"}),
        ),
        (true, 1) => call("read_text_file", json!({"path": "made.txt"})),
        _ => model_says("done"),
    }
}

fn config(home: &Path, work: &Path) {
    let wexec = wexec_bin().display().to_string();
    let work = work.display().to_string();
    let text = format!(
        "[mcp_servers.wexec]\ncommand = {wexec:?}\nargs = [\"mcp\", \"--fs-root\", {work:?}]\n\
         required = true\ndefault_tools_approval_mode = \"approve\"\n"
    );
    std::fs::write(home.join(".codex/config.toml"), text).expect("write config.toml");
}

#[tokio::test]
async fn codex_calls_wexecs_mcp_tools() {
    let Some(codex) = real_client("CODEX_BIN", "the codex binary of @openai/codex@0.169.0") else {
        return;
    };
    let (_dir, work, home) = wexec_tests::codex_workspace();
    config(&home, &work);
    let (model, bodies) = scripted_model(next_step).await;
    let output = wexec_tests::codex_exec_command(&codex, &model, &work, &home, "workspace-write")
        .output()
        .await
        .expect("run codex");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let outputs: Vec<String> = (bodies.lock().expect("lock").iter())
        .flat_map(|body| body["input"].as_array().cloned().unwrap_or_default())
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].as_str().unwrap_or_default().to_owned())
        .collect();
    let ran = outputs
        .iter()
        .find(|output| output.contains("exit_code"))
        .unwrap_or_else(|| {
            panic!("run_command's result never reached the model: {outputs:?}\n{stderr}")
        });
    assert!(ran.contains(r#""stdout":"ran\n""#), "{ran}");
    assert!(ran.contains(r#""exit_code":0"#), "{ran}");
    assert!(
        outputs
            .iter()
            .any(|output| output.contains(r#"{"content":"made-by-wexec\n"}"#)),
        "read_text_file's result never reached the model: {outputs:?}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt")).expect("made.txt"),
        "made-by-wexec\n"
    );
}
