//! The real Codex CLI 0.169 pointed at wexec (`CODEX_EXEC_SERVER_URL`), driven by a scripted
//! model (a local Responses API that answers one tool call, then "done"): its commands and
//! patches under `-s read-only` and `-s workspace-write` end as against its own exec-server.
//! Skipped, saying so, unless `CODEX_BIN` names the `codex` binary of `@openai/codex@0.169.0`
//! (`.ci/run` installs it).

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wexec_tests::{TempDir, spawn_websocket};

/// A Responses API that calls `exec_command` with `command` first, then says "done"; it
/// keeps every request body.
async fn scripted_model(command: String) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&bodies);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            let command = command.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|value| value.trim().parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0u8; length];
                if stream.read_exact(&mut body).await.is_err() {
                    return;
                }
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let answered = request["input"].as_array().is_some_and(|input| {
                    input
                        .iter()
                        .any(|item| item["type"] == "function_call_output")
                });
                seen.lock().expect("lock").push(request);
                let item = if answered {
                    json!({"type": "message", "role": "assistant", "id": "m1",
                           "content": [{"type": "output_text", "text": "done"}]})
                } else {
                    json!({"type": "function_call", "id": "fc1", "call_id": "call1", "name": "exec_command",
                           "arguments": json!({"cmd": command}).to_string()})
                };
                let events = [
                    json!({"type": "response.created", "response": {"id": "r"}}),
                    json!({"type": "response.output_item.done", "item": item}),
                    json!({"type": "response.completed", "response": {"id": "r", "usage": {
                        "input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
                        "output_tokens_details": null, "total_tokens": 2}}}),
                ];
                let data: String = events
                    .iter()
                    .map(|event| {
                        format!(
                            "event: {}\ndata: {event}\n\n",
                            event["type"].as_str().unwrap_or("")
                        )
                    })
                    .collect();
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{data}",
                    data.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    (addr, bodies)
}

/// Runs `codex exec -s <mode>` in `work` against wexec at `url`; returns what the scripted
/// model was sent back as the command's output.
async fn codex_exec(
    codex: &str,
    url: &str,
    work: &Path,
    home: &Path,
    mode: &str,
    command: &str,
) -> String {
    let (model, bodies) = scripted_model(command.to_owned()).await;
    let provider = format!(
        r#"model_providers.scripted={{name="scripted",base_url="http://{model}/v1",wire_api="responses",env_key="OPENAI_API_KEY"}}"#
    );
    let output = tokio::process::Command::new(codex)
        .args([
            "exec",
            "--skip-git-repo-check",
            "-s",
            mode,
            "-m",
            "scripted-model",
        ])
        .args(["-c", "model_provider=scripted", "-c", &provider, "-C"])
        .arg(work)
        .arg("go")
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env("OPENAI_API_KEY", "unused")
        .env("CODEX_EXEC_SERVER_URL", url)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run codex");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bodies = bodies.lock().expect("lock");
    bodies
        .iter()
        .flat_map(|body| body["input"].as_array().cloned().unwrap_or_default())
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].to_string())
        .collect()
}

#[tokio::test]
async fn codex_runs_commands_and_patches_through_wexec_in_its_sandbox_modes() {
    let Ok(codex) = std::env::var("CODEX_BIN") else {
        eprintln!("skipped: set CODEX_BIN to the codex binary of @openai/codex@0.169.0");
        return;
    };
    let dir = TempDir::new();
    let work = dir.path().join("work");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::create_dir_all(home.join(".codex")).expect("mkdir");
    let root = work.display().to_string();
    let server = spawn_websocket(&["--fs-root", &root]).await;
    let url = server.url.clone().expect("url");
    // read-only: the command runs, its write fails as on Codex's own server.
    let output = codex_exec(
        &codex,
        &url,
        &work,
        &home,
        "read-only",
        "printf x > ro.txt; echo status=$?",
    )
    .await;
    assert!(output.contains("ro.txt: Read-only file system"), "{output}");
    assert!(!work.join("ro.txt").exists());
    // workspace-write: the workspace is written, an absent .git cannot be made.
    let output = codex_exec(
        &codex,
        &url,
        &work,
        &home,
        "workspace-write",
        "printf x > rw.txt; mkdir -p .git/hooks; echo status=$?",
    )
    .await;
    assert!(output.contains("status=1"), "{output}");
    assert_eq!(
        std::fs::read_to_string(work.join("rw.txt")).expect("rw.txt"),
        "x"
    );
    assert!(!work.join(".git/hooks").exists());
    // A patch (Codex applies it through wexec's fs methods, with its sandbox).
    let patch =
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\nEOF";
    codex_exec(&codex, &url, &work, &home, "workspace-write", patch).await;
    assert_eq!(
        std::fs::read_to_string(work.join("hello.txt")).expect("hello.txt"),
        "hi\n"
    );
}
