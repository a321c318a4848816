//! The real Codex CLI 0.169 pointed at wexec (`CODEX_EXEC_SERVER_URL`, or an
//! `environments.toml`), driven by a scripted model (a local Responses API that answers one tool
//! call, then "done"): its commands and patches under `-s read-only` and `-s workspace-write`
//! end as against its own exec-server. Skipped, saying so (failed under CI), unless `CODEX_BIN`
//! names the `codex` binary of `@openai/codex@0.169.0` (`.ci/run` installs it).

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wexec_tests::spawn_websocket;

/// A Responses API that calls `exec_command` with `command` first, then says "done"; it
/// keeps every request body.
async fn scripted_model(command: String) -> (String, Arc<Mutex<Vec<Value>>>) {
    wexec_tests::scripted_model(move |request| {
        let answered = request["input"].as_array().is_some_and(|input| {
            input
                .iter()
                .any(|item| item["type"] == "function_call_output")
        });
        if answered {
            wexec_tests::model_says("done")
        } else {
            wexec_tests::model_calls("exec_command", &json!({"cmd": command}))
        }
    })
    .await
}

/// Runs `codex exec -s <mode>` in `work` against wexec at `url` (`CODEX_EXEC_SERVER_URL`), or,
/// with `None`, at what `$CODEX_HOME/environments.toml` names; returns what the scripted model
/// was sent back as the command's output.
async fn codex_exec(
    codex: &str,
    url: Option<&str>,
    work: &Path,
    home: &Path,
    mode: &str,
    command: &str,
) -> String {
    let (model, bodies) = scripted_model(command.to_owned()).await;
    let mut codex = wexec_tests::codex_exec_command(codex, &model, work, home, mode);
    match url {
        Some(url) => codex.env("CODEX_EXEC_SERVER_URL", url),
        None => codex.env_remove("CODEX_EXEC_SERVER_URL"),
    };
    let output = codex.output().await.expect("run codex");
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
    let Some(codex) =
        wexec_tests::real_client("CODEX_BIN", "the codex binary of @openai/codex@0.169.0")
    else {
        return;
    };
    let (_dir, work, home) = wexec_tests::codex_workspace();
    let root = work.display().to_string();
    let server = spawn_websocket(&["--fs-root", &root]).await;
    let url = server.url.clone().expect("url");
    // read-only: the command runs, its write fails as on Codex's own server.
    let output = codex_exec(
        &codex,
        Some(&url),
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
        Some(&url),
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
    codex_exec(&codex, Some(&url), &work, &home, "workspace-write", patch).await;
    assert_eq!(
        std::fs::read_to_string(work.join("hello.txt")).expect("hello.txt"),
        "hi\n"
    );
}

/// README's way to attach Codex: `$CODEX_HOME/environments.toml` naming wexec as the only
/// environment, with its bearer token (which `CODEX_EXEC_SERVER_URL` cannot carry). Without
/// `include_local = false`, an unreachable wexec would make Codex fall back to running commands
/// on the host.
#[tokio::test]
async fn codex_runs_through_the_wexec_its_environments_toml_names() {
    let Some(codex) =
        wexec_tests::real_client("CODEX_BIN", "the codex binary of @openai/codex@0.169.0")
    else {
        return;
    };
    let (_dir, work, home) = wexec_tests::codex_workspace();
    let root = work.display().to_string();
    let token = "environments-toml-token";
    let server = spawn_websocket(&["--fs-root", &root, "--token", token]).await;
    let url = server.url.clone().expect("url");
    let environments = format!(
        "include_local = false\ndefault = \"wexec\"\n\n[[environments]]\nid = \"wexec\"\nurl = \"{url}\"\nauth_bearer_token = \"{token}\"\n"
    );
    std::fs::write(home.join(".codex/environments.toml"), environments)
        .expect("write environments.toml");
    let output = codex_exec(
        &codex,
        None,
        &work,
        &home,
        "workspace-write",
        "printf x > env.txt; printf y > .git; echo status=$?",
    )
    .await;
    assert!(output.contains("status=1"), "{output}");
    assert_eq!(
        std::fs::read_to_string(work.join("env.txt")).expect("env.txt"),
        "x"
    );
    assert!(!work.join(".git").exists());
    server
        .stderr_containing("client=\"codex-environment\"")
        .await;
}

/// Where user namespaces are unavailable (taken away for real here, as Docker's default
/// seccomp profile or Ubuntu's AppArmor restriction do), Codex's read-only mode runs its
/// command confined by the Landlock tier, and its workspace-write mode, which needs `.git`
/// and the like kept read-only inside the workspace, gets the refusal (docs/sandbox.md,
/// "Tiers").
#[tokio::test]
async fn without_user_namespaces_codex_read_only_runs_under_the_landlock_tier() {
    let Some(codex) =
        wexec_tests::real_client("CODEX_BIN", "the codex binary of @openai/codex@0.169.0")
    else {
        return;
    };
    let launcher = wexec_tests::WITHOUT_USER_NAMESPACES;
    let (_dir, work, home) = wexec_tests::codex_workspace();
    std::fs::write(work.join("seen.txt"), "landlock").expect("write");
    let root = work.display().to_string();
    let server = wexec_tests::spawn_websocket_with(wexec_tests::command_under(
        &launcher,
        &["--listen", "ws://127.0.0.1:0", "--fs-root", &root],
    ))
    .await;
    let url = server.url.clone().expect("url");
    let output = codex_exec(
        &codex,
        Some(&url),
        &work,
        &home,
        "read-only",
        "cat seen.txt; printf x > ro.txt; echo status=$?",
    )
    .await;
    assert!(output.contains("landlock"), "{output}");
    assert!(output.contains("ro.txt: Permission denied"), "{output}");
    assert!(
        output.contains("status=1") || output.contains("status=2"),
        "{output}"
    );
    assert!(!work.join("ro.txt").exists());
    let output = codex_exec(
        &codex,
        Some(&url),
        &work,
        &home,
        "workspace-write",
        "printf x > rw.txt; echo status=$?",
    )
    .await;
    assert!(
        output.contains("sandbox intent cannot be enforced on this executor"),
        "{output}"
    );
    assert!(!work.join("rw.txt").exists());
}
