//! The Landlock tier (docs/sandbox.md, "Tiers"): wexec started where user namespaces are
//! unavailable for real ([`super::without_user_namespaces`]) confines processes with Landlock
//! and seccomp alone, against the escape cases the namespace tier is tested with; what this
//! tier cannot hold is refused per request, or run with the weaker guarantee the operator
//! accepted by name.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use wexec_tests::{TempDir, codex_read_only, codex_workspace_write, command_under};

use super::{none_left, run, wait_for_pids};

/// wexec without user namespaces, serving `args` over stdio.
fn spawn(launcher: &[&str], args: &[&str]) -> (wexec_tests::Server, wexec_tests::Client) {
    wexec_tests::spawn_stdio_with(command_under(launcher, args))
}

#[tokio::test]
async fn codex_read_only_runs_confined_by_landlock_and_the_escapes_fail() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    std::fs::write(work.join("a.txt"), "alpha").expect("write");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    let root = dir.path().display().to_string();
    let (server, mut client) = spawn(&launcher, &["--fs-root", &root]);
    client.handshake().await;
    let info = client.call("environment/info", json!({})).await;
    assert_eq!(info["wexec"]["sandbox"]["tier"], "landlock", "{info}");
    assert!(
        (info["wexec"]["sandbox"]["namespacesMissing"].as_str())
            .is_some_and(|missing| missing.starts_with("user namespaces is unavailable")),
        "{info}"
    );
    let sandbox = codex_read_only(&work);
    let works = run(
        &mut client,
        "works",
        "cat a.txt && ls / >/dev/null && echo listed && echo x > /dev/null && echo null-ok",
        &work,
        sandbox.clone(),
    )
    .await;
    assert_eq!(works.start["sandboxType"], "linuxSeccomp", "{works:?}");
    assert_eq!(works.start["sandboxTier"], "landlock", "{works:?}");
    assert_eq!(
        (works.exit, works.output.as_str()),
        (0, "alphalisted\nnull-ok\n"),
        "{works:?}"
    );
    let wexec = server.pid();
    let python = |code: &str| format!("python3 -c '{code}'; exit 1");
    let cases = [
        ("write", "echo x > b.txt".to_owned(), "Permission denied"),
        (
            "write-tmp",
            format!("echo x > {}/f", outside.display()),
            "Permission denied",
        ),
        (
            "truncate",
            "truncate -s 0 a.txt".to_owned(),
            "Permission denied",
        ),
        (
            "hardlink",
            format!("ln a.txt {}/h", outside.display()),
            "Permission denied",
        ),
        ("symlink", "ln -s /etc l".to_owned(), "Permission denied"),
        (
            "shm",
            "echo x > /dev/shm/wexec-landlock".to_owned(),
            "Permission denied",
        ),
        // wexec and its helpers are out of reach: no signal, no ptrace, no `/proc` peeking.
        (
            "signal",
            format!("kill -0 {wexec}"),
            "Operation not permitted",
        ),
        (
            "ptrace",
            python(&format!(
                "import ctypes,os; l=ctypes.CDLL(None,use_errno=True); r=l.ptrace(16,{wexec},0,0); print(\"ptrace\",r,os.strerror(ctypes.get_errno()))"
            )),
            "ptrace -1 Operation not permitted",
        ),
        (
            "environ",
            format!("cat /proc/{wexec}/environ"),
            "Permission denied",
        ),
        (
            "unshare",
            "unshare -Ur true".to_owned(),
            "Operation not permitted",
        ),
        (
            "mount",
            "mount -t tmpfs none /mnt".to_owned(),
            "ermission denied",
        ),
        (
            "network",
            python("import socket; socket.socket().connect((\"127.0.0.1\", 9))"),
            "Operation not permitted",
        ),
        // The host's SysV IPC namespace is shared in this tier: its calls are refused.
        (
            "sysv",
            python(
                "import ctypes,os; l=ctypes.CDLL(None,use_errno=True); r=l.shmget(0,4096,0o1600); print(\"shmget\",r,os.strerror(ctypes.get_errno()))",
            ),
            "shmget -1 Function not implemented",
        ),
    ];
    for (id, script, text) in cases {
        let run = run(&mut client, id, &script, &work, sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(run.output.contains(text), "{id}: {run:?}");
    }
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).expect("read"),
        "alpha"
    );
    for left in [work.join("b.txt"), work.join("l"), outside.join("f")] {
        assert!(!left.exists(), "{}", left.display());
    }
    assert!(!Path::new("/dev/shm/wexec-landlock").exists());
    let status = run(
        &mut client,
        "status",
        "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status",
        &work,
        sandbox,
    )
    .await;
    for line in [
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
    ] {
        assert!(
            status.output.lines().any(|got| got == line),
            "{line}: {status:?}"
        );
    }
}

/// The error of a `process/start` of `touch marker` under `sandbox`.
async fn touching(client: &mut wexec_tests::Client, marker: &Path, sandbox: Value) -> Value {
    let cwd = marker.parent().expect("a parent").display().to_string();
    client
        .request(
            "process/start",
            json!({
                "processId": "touch",
                "argv": ["touch", marker.display().to_string()],
                "cwd": cwd,
                "env": {"PATH": "/usr/bin:/bin"},
                "tty": false,
                "sandbox": sandbox,
            }),
        )
        .await
}

#[tokio::test]
async fn a_carve_out_is_refused_until_the_operator_accepts_it_by_name() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join(".git")).expect("mkdir");
    let root = dir.path().display().to_string();
    let marker = work.join("ran");
    let (_server, mut client) = spawn(&launcher, &["--fs-root", &root]);
    client.handshake().await;
    let refused = touching(
        &mut client,
        &marker,
        codex_workspace_write(&work, "restricted", false),
    )
    .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let expected = format!(
        "sandbox intent cannot be enforced on this executor: {}/.agents must stay read-only inside the writable {}, which needs mount namespaces (user namespaces is unavailable",
        work.display(),
        work.display()
    );
    assert!(message.starts_with(&expected), "{refused}");
    assert!(
        message.ends_with(
            "; the operator's --sandbox-accept carve-outs would run it with that path writable"
        ),
        "{refused}"
    );
    assert!(!marker.exists());
    // The default ceiling (no request) writes in the roots and the temp dir: refused too.
    let refused = touching(&mut client, &marker, Value::Null).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(!marker.exists());
    drop(client);

    let (_server, mut client) = spawn(
        &launcher,
        &["--fs-root", &root, "--sandbox-accept", "carve-outs"],
    );
    client.handshake().await;
    let sandbox = codex_workspace_write(&work, "restricted", false);
    let written = run(
        &mut client,
        "w",
        "echo x > f && echo y > .git/config && cat f .git/config",
        &work,
        sandbox.clone(),
    )
    .await;
    assert_eq!(written.start["sandboxTier"], "landlock", "{written:?}");
    assert_eq!(
        written.start["sandboxAccepted"],
        json!(["carve-outs"]),
        "{written:?}"
    );
    assert_eq!(
        (written.exit, written.output.as_str()),
        (0, "x\ny\n"),
        "{written:?}"
    );
    // Outside the writable roots, nothing.
    let outside = run(
        &mut client,
        "o",
        &format!("echo x > {}/f", dir.path().display()),
        &work,
        sandbox,
    )
    .await;
    assert!(outside.output.contains("Permission denied"), "{outside:?}");
    assert!(!dir.path().join("f").exists());
    let info = client.call("environment/info", json!({})).await;
    assert_eq!(
        info["wexec"]["sandbox"]["accepted"],
        json!(["carve-outs"]),
        "{info}"
    );
}

#[tokio::test]
async fn a_denied_path_in_a_readable_tree_stays_hidden_and_its_siblings_readable() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("keys")).expect("mkdir");
    std::fs::write(dir.path().join("keys/id"), "private").expect("write");
    std::fs::write(dir.path().join("token"), "s3cret").expect("write");
    std::fs::write(dir.path().join("notes"), "public").expect("write");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn(&launcher, &["--fs-root", &root]);
    client.handshake().await;
    let path = |path: &Path, access: &str| -> Value {
        json!({"path": {"type": "path", "path": super::uri(path)}, "access": access})
    };
    let sandbox = super::managed(
        dir.path(),
        vec![
            super::special("root", None, "read"),
            path(&dir.path().join("keys"), "none"),
            path(&dir.path().join("token"), "none"),
        ],
        "restricted",
    );
    let notes = run(
        &mut client,
        "notes",
        "cat notes",
        dir.path(),
        sandbox.clone(),
    )
    .await;
    assert_eq!(
        (notes.exit, notes.output.as_str()),
        (0, "public"),
        "{notes:?}"
    );
    for (id, script) in [
        ("token", "cat token"),
        ("key", "cat keys/id"),
        ("list", "ls keys"),
    ] {
        let run = run(&mut client, id, script, dir.path(), sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(run.output.contains("Permission denied"), "{id}: {run:?}");
        assert!(
            !run.output.contains("s3cret") && !run.output.contains("private"),
            "{id}: {run:?}"
        );
    }
}

#[tokio::test]
async fn descendants_die_with_the_program_on_terminate_and_with_wexec() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    for (case, marker) in [
        ("exit", "300.1811"),
        ("terminate", "300.1812"),
        ("KILL", "300.1813"),
    ] {
        let dir = TempDir::new();
        let root = dir.path().display().to_string();
        let (mut server, mut client) = spawn(&launcher, &["--fs-root", &root]);
        client.handshake().await;
        let then = if case == "exit" {
            "sleep 0.3; exit 4"
        } else {
            "exec sleep 300"
        };
        let script = format!(
            "setsid sh -c 'sleep {marker} & (setsid sleep {marker} &); exec sleep {marker}' & {then}"
        );
        let start = client
            .call(
                "process/start",
                json!({
                    "processId": "tree",
                    "argv": ["sh", "-c", script],
                    "cwd": root,
                    "env": {"PATH": "/usr/bin:/bin"},
                    "tty": false,
                    "sandbox": codex_read_only(dir.path()),
                }),
            )
            .await;
        assert_eq!(start["sandboxTier"], "landlock", "{start}");
        wait_for_pids(marker, 3).await;
        match case {
            "exit" => {
                assert!(none_left(marker, Duration::from_secs(5)).await, "{case}");
                let read = client
                    .call("process/read", json!({"processId": "tree", "waitMs": 3000}))
                    .await;
                assert_eq!(read["exitCode"], 4, "{read}");
            }
            "terminate" => {
                client
                    .call("process/terminate", json!({"processId": "tree"}))
                    .await;
                assert!(none_left(marker, Duration::from_secs(5)).await, "{case}");
            }
            signal => {
                server.kill_with(signal).await;
                let _ = tokio::time::timeout(Duration::from_secs(10), server.wait()).await;
                assert!(none_left(marker, Duration::from_secs(5)).await, "{case}");
            }
        }
    }
}

/// With network on, the Landlock tier's processes share the host's network namespace as the
/// namespace tier's do, and are kept off wexec's own listener the same way; other ports stay
/// reachable.
#[tokio::test]
async fn with_network_wexecs_own_listener_stays_out_of_reach() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let other = listener.local_addr().expect("addr").port();
    let server = wexec_tests::spawn_websocket_with(command_under(
        &launcher,
        &[
            "--listen",
            "ws://127.0.0.1:0",
            "--fs-root",
            &root,
            "--process-network",
        ],
    ))
    .await;
    let own: u16 = (server.url.as_deref())
        .and_then(|url| url.rsplit(':').next())
        .and_then(|port| port.parse().ok())
        .expect("port");
    let mut client = server.connect().await;
    client.handshake().await;
    let with_network = super::managed(
        dir.path(),
        vec![super::special("root", None, "read")],
        "enabled",
    );
    let connect = "import socket,sys; s=socket.socket(); s.settimeout(5); s.connect((\"127.0.0.1\", int(sys.argv[1]))); print(\"connected\")";
    let own_port = run(
        &mut client,
        "own",
        &format!("python3 -c '{connect}' {own}"),
        dir.path(),
        with_network.clone(),
    )
    .await;
    assert_eq!(own_port.start["sandboxTier"], "landlock", "{own_port:?}");
    assert!(
        own_port.output.contains("PermissionError: [Errno 13]"),
        "{own_port:?}"
    );
    let other_port = run(
        &mut client,
        "other",
        &format!("python3 -c '{connect}' {other}"),
        dir.path(),
        with_network,
    )
    .await;
    assert_eq!(
        (other_port.exit, other_port.output.as_str()),
        (0, "connected\n"),
        "{other_port:?}"
    );
}

/// Found attacking the tier: what Landlock does not cover — another process's limits and
/// scheduling by pid, a file's mode, owner, times and attributes — is refused by seccomp, and
/// allowed only where the operator accepted `metadata`.
#[tokio::test]
async fn limits_of_other_processes_and_file_metadata_are_out_of_reach() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let dir = TempDir::new();
    std::fs::write(dir.path().join("a.txt"), "alpha").expect("write");
    let root = dir.path().display().to_string();
    let (server, mut client) = spawn(&launcher, &["--fs-root", &root]);
    client.handshake().await;
    let wexec = server.pid();
    let sandbox = codex_read_only(dir.path());
    let helper = "$(awk '{print $4}' /proc/$$/stat)";
    for (id, script) in [
        (
            "prlimit-helper",
            format!("prlimit --pid {helper} --nofile=0:0"),
        ),
        ("prlimit-wexec", format!("prlimit --pid {wexec} --cpu=0:0")),
        ("renice", format!("renice -n 5 -p {wexec}")),
        ("taskset", format!("taskset -p 1 {wexec}")),
        // Every process of the user (`PRIO_USER`, who 0), wexec's included.
        (
            "renice-user",
            "python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); r=l.setpriority(2,0,19); print(r,os.strerror(ctypes.get_errno()))'; exit 1".to_owned(),
        ),
        ("chmod", "chmod 000 a.txt".to_owned()),
        (
            "utime",
            "python3 -c 'import os; os.utime(\"a.txt\", (0, 0))'".to_owned(),
        ),
        (
            "xattr",
            "python3 -c 'import os; os.setxattr(\"a.txt\", \"user.k\", b\"v\")'".to_owned(),
        ),
    ] {
        let run = run(&mut client, id, &script, dir.path(), sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(run.output.contains("not permitted"), "{id}: {run:?}");
    }
    // Its own limits stay the process's to set.
    let own = run(
        &mut client,
        "own",
        "ulimit -n 64 && prlimit --pid $$ --nofile 2>/dev/null | tail -1 | tr -s ' '",
        dir.path(),
        sandbox,
    )
    .await;
    assert_eq!(own.exit, 0, "{own:?}");
    assert!(
        server.pid() == wexec && std::fs::metadata(format!("/proc/{wexec}")).is_ok(),
        "wexec still runs"
    );
    let mode = std::fs::metadata(dir.path().join("a.txt"))
        .expect("a.txt")
        .permissions();
    assert_ne!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0);
    drop(client);

    let (_server, mut client) = spawn(
        &launcher,
        &[
            "--fs-root",
            &root,
            "--sandbox-accept",
            "carve-outs,metadata",
        ],
    );
    client.handshake().await;
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let accepted = run(
        &mut client,
        "chmod",
        "printf '#!/bin/sh\\necho ran' > s.sh && chmod +x s.sh && ./s.sh",
        &work,
        codex_workspace_write(&work, "restricted", false),
    )
    .await;
    assert_eq!(
        (accepted.exit, accepted.output.as_str()),
        (0, "ran\n"),
        "{accepted:?}"
    );
    assert_eq!(
        accepted.start["sandboxAccepted"],
        json!(["carve-outs", "metadata"]),
        "{accepted:?}"
    );
}

/// Found attacking the tier: a `.git` file is read to protect the git directory it names, and
/// a process that may write `.git` (carve-outs accepted) chooses that name. Naming a path the
/// process may not read must not make it readable; nor may accepting carve-outs leave
/// wexec's own files writable.
#[tokio::test]
async fn a_planted_gitdir_opens_nothing_and_wexecs_files_stay_read_only() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let dir = TempDir::new();
    let (work, hidden) = (dir.path().join("work"), dir.path().join("hidden"));
    std::fs::create_dir_all(&work).expect("mkdir");
    std::fs::create_dir_all(&hidden).expect("mkdir");
    std::fs::write(hidden.join("s.txt"), "secret").expect("write");
    let config = work.join("wexec.toml");
    std::fs::write(&config, "").expect("config");
    let work_arg = work.display().to_string();
    let (_server, mut client) = spawn(
        &launcher,
        &[
            "--fs-root",
            &work_arg,
            "--writable-root",
            &work_arg,
            "--readable-root",
            &work_arg,
            "--sandbox-accept",
            "carve-outs",
        ],
    );
    client.handshake().await;
    let sandbox = codex_workspace_write(&work, "restricted", false);
    let target = hidden.join("s.txt").display().to_string();
    let plant = run(
        &mut client,
        "plant",
        &format!("printf 'gitdir: {target}\\n' > .git && cat {target}"),
        &work,
        sandbox.clone(),
    )
    .await;
    assert!(plant.output.contains("Permission denied"), "{plant:?}");
    let read = run(
        &mut client,
        "read",
        &format!("cat {target}"),
        &work,
        sandbox,
    )
    .await;
    assert_ne!(read.exit, 0, "{read:?}");
    assert!(!read.output.contains("secret"), "{read:?}");
    drop(client);

    let config_arg = config.display().to_string();
    let (_server, mut client) = spawn(
        &launcher,
        &[
            "--fs-root",
            &work_arg,
            "--config",
            &config_arg,
            "--sandbox-accept",
            "carve-outs",
        ],
    );
    client.handshake().await;
    let refused = touching(
        &mut client,
        &work.join("ran"),
        codex_workspace_write(&work, "restricted", false),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        (refused["error"]["message"].as_str()).is_some_and(|message| message.contains(&format!(
            "{config_arg} is wexec's own and must stay read-only inside the writable {work_arg}"
        ))),
        "{refused}"
    );
}
