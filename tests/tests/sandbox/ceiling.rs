//! The operator ceiling (docs/protocol.md §7.3, §8.1): what a process may do at most, whatever
//! the client asks; a kernel that cannot enforce it; processes switched off.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{TempDir, command, rpc_error, spawn_stdio};

use super::{codex_read_only, codex_workspace_write, run};

#[tokio::test]
async fn the_default_ceiling_confines_a_request_without_sandbox() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let ok = run(
        &mut client,
        "in",
        "echo x > in.txt && echo written",
        dir.path(),
        Value::Null,
    )
    .await;
    assert_eq!(ok.start["sandboxType"], "linuxSeccomp");
    assert_eq!((ok.exit, ok.output.as_str()), (0, "written\n"), "{ok:?}");
    let out = run(
        &mut client,
        "out",
        "echo x > /etc/wexec-ceiling",
        dir.path(),
        Value::Null,
    )
    .await;
    assert!(out.output.contains("Read-only file system"), "{out:?}");
    assert!(!std::path::Path::new("/etc/wexec-ceiling").exists());
}

#[tokio::test]
async fn the_ceiling_narrows_a_looser_request() {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let root = dir.path().display().to_string();
    // read-only ceiling: Codex's workspace-write request writes nothing, not even its workspace.
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root, "--sandbox", "read-only"]);
    client.handshake().await;
    let run1 = run(
        &mut client,
        "w",
        "echo x > f",
        &work,
        codex_workspace_write(&work, "restricted", true),
    )
    .await;
    assert!(run1.output.contains("Read-only file system"), "{run1:?}");
    let disabled = json!({"permissions": {"type": "disabled"}, "windowsSandboxLevel": "disabled"});
    let run2 = run(&mut client, "d", "echo x > f", &work, disabled).await;
    assert!(run2.output.contains("Read-only file system"), "{run2:?}");
    assert!(!work.join("f").exists());
    drop(client);
    // workspace-write ceiling with one writable root: a request for more gets only that.
    let allowed = dir.path().join("allowed");
    std::fs::create_dir(&allowed).expect("mkdir");
    let allowed_arg = allowed.display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root, "--writable-root", &allowed_arg]);
    client.handshake().await;
    let run3 = run(
        &mut client,
        "w",
        "echo x > f",
        &work,
        codex_workspace_write(&work, "restricted", true),
    )
    .await;
    assert!(run3.output.contains("Read-only file system"), "{run3:?}");
    let run4 = run(
        &mut client,
        "a",
        "echo x > ../allowed/f && echo ok",
        &work,
        codex_workspace_write(dir.path(), "restricted", true),
    )
    .await;
    assert_eq!(run4.output, "ok\n", "{run4:?}");
}

#[tokio::test]
async fn danger_full_access_runs_unconfined_unless_asked() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) =
        spawn_stdio(&["--fs-root", &root, "--sandbox", "danger-full-access"]);
    client.handshake().await;
    let plain = run(&mut client, "p", "echo $$ > pid", dir.path(), Value::Null).await;
    assert_eq!(plain.start["sandboxType"], "none");
    let pid = std::fs::read_to_string(dir.path().join("pid")).expect("pid");
    assert_ne!(pid.trim(), "2", "a host pid, not a namespace's");
    let asked = run(
        &mut client,
        "a",
        "printf x > f",
        dir.path(),
        codex_read_only(dir.path()),
    )
    .await;
    assert_eq!(asked.start["sandboxType"], "linuxSeccomp");
    assert!(asked.denied, "{asked:?}");
}

#[tokio::test]
async fn readable_roots_hide_the_rest_of_the_disk() {
    let dir = TempDir::new();
    let visible = dir.path().join("visible");
    std::fs::create_dir(&visible).expect("mkdir");
    std::fs::write(visible.join("v"), "v").expect("write");
    let hidden = TempDir::new();
    std::fs::write(hidden.path().join("h"), "h").expect("write");
    let visible_arg = visible.display().to_string();
    let (_server, mut client) = spawn_stdio(&[
        "--fs-root",
        &visible_arg,
        "--writable-root",
        &visible_arg,
        "--readable-root",
        &visible_arg,
    ]);
    client.handshake().await;
    let script = format!(
        "exec 2>&1; cat v; cat /etc/hostname > /dev/null && echo etc; cat {}/h",
        hidden.path().display()
    );
    let run = run(&mut client, "r", &script, &visible, Value::Null).await;
    assert!(run.output.starts_with("vetc\n"), "{run:?}");
    assert!(run.output.contains("No such file or directory"), "{run:?}");
    assert!(!run.output.contains("\nh"), "{run:?}");
}

/// The error of a `process/start` of `touch marker` in `cwd` with `sandbox` (none if null).
async fn start_touching(
    client: &mut wexec_tests::Client,
    marker: &std::path::Path,
    cwd: &str,
    sandbox: Value,
) -> Value {
    let mut params = json!({
        "processId": "p",
        "argv": ["touch", marker.display().to_string()],
        "cwd": cwd,
        "env": {"PATH": "/usr/bin:/bin"},
        "tty": false,
    });
    if !sandbox.is_null() {
        params["sandbox"] = sandbox;
    }
    client.call_err("process/start", params).await
}

/// The refusal of a process that needs confinement on a kernel without user namespaces.
const MISSING: &str =
    "sandbox intent cannot be enforced on this executor: user namespaces is unavailable";

#[tokio::test]
async fn a_kernel_without_the_mechanisms_refuses_confinement_and_nothing_runs() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    // With --require-sandbox, workspace-write that cannot be enforced stops wexec before it
    // answers anything.
    let mut refused = command(&[
        "--fs-root",
        &root,
        "--simulate-missing-sandbox",
        "--require-sandbox",
    ]);
    refused.stdin(std::process::Stdio::piped());
    let mut refused = refused.spawn().expect("run wexec");
    let mut stdin = refused.stdin.take().expect("stdin");
    // wexec may already have refused and exited: a write then fails, which is no failure.
    let _ = tokio::io::AsyncWriteExt::write_all(
        &mut stdin,
        b"{\"id\":1,\"method\":\"initialize\",\"params\":{\"clientName\":\"t\"}}\n",
    )
    .await;
    let output = refused.wait_with_output().await.expect("wexec ends");
    assert!(!output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "",
        "answered before refusing"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("wexec: cannot enforce --sandbox workspace-write on this kernel: user namespaces is unavailable"),
        "{stderr}"
    );
    assert!(stderr.contains("--sandbox danger-full-access"), "{stderr}");
    // By default it serves, and refuses each process that needs confinement, saying why;
    // under either ceiling a restricted request is refused before any side effect.
    for ceiling in ["workspace-write", "danger-full-access"] {
        let (_server, mut client) = spawn_stdio(&[
            "--fs-root",
            &root,
            "--sandbox",
            ceiling,
            "--simulate-missing-sandbox",
        ]);
        client.handshake().await;
        let marker = dir.path().join("ran");
        let sandbox = codex_read_only(dir.path());
        let error = start_touching(&mut client, &marker, &root, sandbox).await;
        assert_eq!(error, rpc_error(-32602, MISSING), "{ceiling}");
        // A program that ran despite the refusal would tell no one, and no later message is
        // ordered after it: the bounded wait stays, begun at the refusal.
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(!marker.exists(), "{ceiling}");
        let unknown = client
            .call_err("process/read", json!({"processId": "p"}))
            .await;
        assert_eq!(unknown, rpc_error(-32600, "unknown process id p"));
        let status = client.call("environment/status", json!({})).await;
        assert_eq!(status["status"], "ready", "{ceiling}");
    }
}

/// A kernel where user namespaces cannot be made (as in Docker's default seccomp profile or
/// under Ubuntu's AppArmor restriction), for real: wexec runs in a user namespace whose
/// `max_user_namespaces` is 0. README's session is answered in full, files are served, and a
/// process the Landlock tier cannot hold is refused naming what is missing, from the first
/// answer to the last (`landlock.rs` runs what it can hold).
#[tokio::test]
async fn without_user_namespaces_wexec_serves_all_but_confined_processes() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    std::fs::write(dir.path().join("a.txt"), "alpha").expect("write a.txt");
    let (_server, mut client) =
        wexec_tests::spawn_stdio_with(wexec_tests::command_under(&launcher, &["--fs-root", &root]));
    client.handshake().await;
    for method in ["environment/status", "environment/info", "plugin/list"] {
        client.call(method, json!({})).await;
    }
    let path = dir.path().join("a.txt").display().to_string();
    let read = client.call("fs/readFile", json!({"path": path})).await;
    assert_eq!(read["dataBase64"], "YWxwaGE=", "{read}");
    let marker = dir.path().join("ran");
    // The Landlock tier is in force: what it cannot hold (the temp dir and the root writable,
    // with `.git` and the like read-only inside) is refused, naming what is missing.
    let error = start_touching(&mut client, &marker, &root, Value::Null).await;
    assert_eq!(error["code"], -32602, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("sandbox intent cannot be enforced on this executor: ")
            && message.contains("must stay read-only inside the writable")
            && message.contains("(user namespaces is unavailable"),
        "{error}"
    );
    assert!(!marker.exists());
    // Still serving after the refusal.
    let status = client.call("environment/status", json!({})).await;
    assert_eq!(status["status"], "ready");
}

#[tokio::test]
async fn no_processes_refuses_every_process_method() {
    let (_server, mut client) = spawn_stdio(&["--no-processes"]);
    client.handshake().await;
    let text = "process execution is disabled on this executor";
    for (method, params) in [
        (
            "process/start",
            json!({"processId": "p", "argv": ["true"], "cwd": "/", "env": {}, "tty": false}),
        ),
        ("process/read", json!({"processId": "p"})),
        ("process/write", json!({"processId": "p", "chunk": ""})),
        (
            "process/signal",
            json!({"processId": "p", "signal": "interrupt"}),
        ),
        ("process/terminate", json!({"processId": "p"})),
    ] {
        assert_eq!(
            client.call_err(method, params).await,
            rpc_error(-32600, text),
            "{method}"
        );
    }
}

#[tokio::test]
async fn the_config_file_sets_the_ceiling_and_the_command_line_wins() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let config = dir.path().join("wexec.toml");
    std::fs::write(
        &config,
        "[sandbox]\nmode = \"read-only\"\n\n[process-limits]\nopen-files = 40\n",
    )
    .expect("config");
    let config = config.display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root, "--config", &config]);
    client.handshake().await;
    let denied = run(
        &mut client,
        "w",
        "exec 2>&1; ulimit -n; echo x > f",
        dir.path(),
        Value::Null,
    )
    .await;
    assert!(denied.output.starts_with("40\n"), "{denied:?}");
    assert!(
        denied.output.contains("Read-only file system"),
        "{denied:?}"
    );
    drop(client);
    let (_server, mut client) = spawn_stdio(&[
        "--fs-root",
        &root,
        "--config",
        &config,
        "--sandbox",
        "workspace-write",
        "--process-open-files",
        "50",
    ]);
    client.handshake().await;
    let allowed = run(
        &mut client,
        "w",
        "exec 2>&1; ulimit -n; echo x > f && echo ok",
        dir.path(),
        Value::Null,
    )
    .await;
    assert_eq!(allowed.output, "50\nok\n", "{allowed:?}");
    std::fs::write(
        dir.path().join("off.toml"),
        "[sandbox]\nprocesses = false\n",
    )
    .expect("config");
    let off = dir.path().join("off.toml").display().to_string();
    drop(client);
    let (_server, mut client) = spawn_stdio(&["--config", &off]);
    client.handshake().await;
    let error = client
        .call_err("process/read", json!({"processId": "p"}))
        .await;
    assert_eq!(
        error,
        rpc_error(-32600, "process execution is disabled on this executor")
    );
}
