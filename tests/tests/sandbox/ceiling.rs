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

#[tokio::test]
async fn a_kernel_without_the_mechanisms_refuses_confinement_and_nothing_runs() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    // workspace-write cannot be enforced: wexec does not start.
    let output = command(&["--fs-root", &root, "--simulate-missing-sandbox"])
        .output()
        .await
        .expect("run wexec");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("wexec: cannot enforce --sandbox workspace-write on this kernel: user namespaces is unavailable; use --sandbox danger-full-access to run unconfined"),
        "{stderr}"
    );
    // danger-full-access starts; a restricted request is refused before any side effect.
    let (_server, mut client) = spawn_stdio(&[
        "--fs-root",
        &root,
        "--sandbox",
        "danger-full-access",
        "--simulate-missing-sandbox",
    ]);
    client.handshake().await;
    let marker = dir.path().join("ran");
    let error = client
        .call_err(
            "process/start",
            json!({
                "processId": "p",
                "argv": ["touch", marker.display().to_string()],
                "cwd": root,
                "env": {"PATH": "/usr/bin:/bin"},
                "tty": false,
                "sandbox": codex_read_only(dir.path()),
            }),
        )
        .await;
    assert_eq!(
        error,
        rpc_error(-32602, "sandbox intent cannot be enforced on this executor")
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(!marker.exists());
    let unknown = client
        .call_err("process/read", json!({"processId": "p"}))
        .await;
    assert_eq!(unknown, rpc_error(-32600, "unknown process id p"));
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
