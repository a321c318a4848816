//! No way out of a confined process (docs/sandbox.md): links, `/proc` of host processes,
//! namespaces, mounts, ptrace, capabilities.

use std::os::unix::fs::DirBuilderExt;

use serde_json::Value;
use wexec_tests::{TempDir, command, command_under, spawn_stdio, spawn_stdio_with};

use super::{codex_workspace_write, run};

/// The compile cache holds native code wexec runs: a process may not write it even where a
/// writable root contains it (with or without a client's sandbox), so it cannot swap an artifact
/// and its digest for its own code.
#[tokio::test]
async fn the_compile_cache_is_read_only_inside_a_writable_root() {
    let dir = TempDir::new();
    let cache = dir.path().join("cache");
    let mut cmd = command(&["--fs-root", &dir.path().display().to_string()]);
    cmd.env("XDG_CACHE_HOME", &cache);
    let (_server, mut client) = spawn_stdio_with(cmd);
    client.handshake().await;
    let artifacts = cache.join("wexec");
    let before: Vec<_> = std::fs::read_dir(&artifacts)
        .expect("the cache was filled")
        .flatten()
        .map(|entry| (entry.path(), std::fs::read(entry.path()).expect("read")))
        .collect();
    assert!(!before.is_empty());
    let script = format!(
        "cd {0} && ls | grep -c cwasm; for f in *; do echo evil > \"$f\"; done; touch injected; ls | grep -c injected",
        artifacts.display()
    );
    for (id, sandbox) in [
        ("plain", Value::Null),
        (
            "codex",
            codex_workspace_write(dir.path(), "restricted", true),
        ),
    ] {
        let outcome = run(&mut client, id, &script, dir.path(), sandbox).await;
        assert!(
            outcome.output.contains("Read-only file system"),
            "{id}: {outcome:?}"
        );
        assert!(!artifacts.join("injected").exists(), "{id}: {outcome:?}");
    }
    // Next to it the root stays writable.
    let beside = run(
        &mut client,
        "beside",
        "echo ok > beside && cat beside",
        dir.path(),
        Value::Null,
    )
    .await;
    assert_eq!(beside.output, "ok\n", "{beside:?}");
    for (path, contents) in before {
        assert_eq!(
            std::fs::read(&path).expect("read"),
            contents,
            "{}",
            path.display()
        );
    }
}

#[tokio::test]
async fn links_proc_namespaces_mounts_and_ptrace_lead_nowhere() {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("mkdir");
    std::fs::write(outside.join("victim"), "v").expect("write");
    let root = dir.path().display().to_string();
    let (server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let sandbox = codex_workspace_write(&work, "restricted", false);
    let host_pid = server.pid();
    let cases = [
        // A symbolic link out of the workspace does not make its target writable.
        ("symlink", format!("ln -s {} l && echo x > l/f", outside.display()), "Read-only file system"),
        // Nor does a hard link of an outside file (it cannot even be made).
        ("hardlink", format!("ln {}/victim h", outside.display()), "Invalid cross-device link"),
        // Host processes are not in this PID namespace: not wexec, not the host's init root.
        ("proc", format!("ls /proc/{host_pid}/root"), "No such file or directory"),
        ("proc-root", format!("echo x > /proc/1/root{}/f", outside.display()), "Permission denied"),
        ("unshare", "unshare -Urm true".to_owned(), "Operation not permitted"),
        ("mount", "mount -t tmpfs none /mnt".to_owned(), "ermission denied"),
        ("remount", "mount -o remount,rw /".to_owned(), "ermission denied"),
        (
            "ptrace",
            "python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); r=l.ptrace(16,1,0,0); print(\"ptrace\",r,os.strerror(ctypes.get_errno()))'; exit 1".to_owned(),
            "ptrace -1 Operation not permitted",
        ),
    ];
    for (id, script, text) in cases {
        let run = run(&mut client, id, &script, &work, sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(run.output.contains(text), "{id}: {run:?}");
    }
    assert!(!outside.join("f").exists() && !work.join("h").exists());
    let status = run(
        &mut client,
        "status",
        "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; echo pid $$; ls /proc | grep -c '^[0-9]'",
        &work,
        sandbox,
    )
    .await;
    assert_eq!(status.exit, 0, "{status:?}");
    for line in [
        "CapInh:\t0000000000000000",
        "CapPrm:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "CapBnd:\t0000000000000000",
        "CapAmb:\t0000000000000000",
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "pid 2",
    ] {
        assert!(
            status.output.lines().any(|got| got == line),
            "{line}: {status:?}"
        );
    }
    // The init, the shell and `ls`: nothing of the host.
    let visible: usize = status
        .output
        .lines()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or(99);
    assert!(visible <= 4, "{status:?}");
}

/// Found by attacking the sandbox: host sysctls through the namespace's `/proc`, renaming a
/// workspace's parent, a `.git` pointing elsewhere, a `.git` that is a link.
#[tokio::test]
async fn host_sysctls_parent_renames_and_git_indirections_are_held() {
    let dir = TempDir::new();
    let ws = dir.path().join("p/ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    // A separate git dir inside the writable temp dir, named by a pointer file.
    let real = dir.path().join("realgit");
    std::fs::create_dir_all(real.join("hooks")).expect("mkdir");
    std::fs::write(ws.join(".git"), format!("gitdir: {}\n", real.display())).expect("pointer");
    let root = ws.display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let sandbox = codex_workspace_write(&ws, "restricted", true);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let cases = [
        (
            "sysctl",
            "echo wexec-probe > /proc/sys/kernel/hostname".to_owned(),
            "Read-only file system",
        ),
        (
            "core",
            "echo '|/bin/false' > /proc/sys/kernel/core_pattern".to_owned(),
            "Read-only file system",
        ),
        (
            "rename",
            format!("mv {0}/p {0}/p_old", dir.path().display()),
            "Device or resource busy",
        ),
        (
            "gitdir",
            format!("echo x > {}/hooks/pre-commit", real.display()),
            "Read-only file system",
        ),
    ];
    for (id, script, text) in cases {
        let run = run(&mut client, id, &script, &ws, sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(run.output.contains(text), "{id}: {run:?}");
    }
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname"),
        hostname
    );
    assert!(ws.is_dir() && !real.join("hooks/pre-commit").exists());
    // A protected name that is a link inside a writable root cannot be held: refused.
    std::fs::remove_file(ws.join(".git")).expect("rm");
    std::os::unix::fs::symlink(&real, ws.join(".git")).expect("symlink");
    let error = client
        .call_err(
            "process/start",
            serde_json::json!({"processId": "link", "argv": ["true"], "cwd": root, "env": {}, "tty": false, "sandbox": sandbox}),
        )
        .await;
    assert_eq!(
        error,
        wexec_tests::rpc_error(-32602, "sandbox intent cannot be enforced on this executor")
    );
}

/// Two confined processes without network do not meet through abstract unix sockets (each has
/// its own network namespace).
#[tokio::test]
async fn confined_processes_do_not_share_abstract_sockets() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let name = dir.path().join("name");
    // Autobinds by sending (bind is refused), publishes its name, waits for a datagram.
    let listener = format!(
        "python3 -c \"import socket,time; s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)\ntry: s.sendmsg([b'x'], [], 0, b'\\0wexec-none')\nexcept OSError: pass\nn=s.getsockname(); open('{0}','wb').write(n.encode('latin-1') if isinstance(n,str) else n); s.settimeout(3)\ntry: print('received', s.recv(9))\nexcept OSError as e: print('nothing', e)\"",
        name.display()
    );
    let params = serde_json::json!({
        "processId": "listener", "argv": ["sh", "-c", listener], "cwd": root,
        "env": {"PATH": "/usr/bin:/bin"}, "tty": false,
    });
    let started = client.call("process/start", params).await;
    for _ in 0..200 {
        if name.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let sender = format!(
        "python3 -c \"import socket; n=open('{0}','rb').read(); s=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.sendmsg([b'hello'], [], 0, n); print('sent')\"",
        name.display()
    );
    let sent = run(
        &mut client,
        "sender",
        &sender,
        dir.path(),
        serde_json::Value::Null,
    )
    .await;
    assert!(!sent.output.contains("sent"), "{sent:?}");
    let listened = super::finish(&mut client, "listener", started).await;
    assert!(listened.output.starts_with("nothing"), "{listened:?}");
}

/// Naming the cache itself (or a directory in it) as a writable root does not make it writable.
#[tokio::test]
async fn a_writable_root_at_the_compile_cache_stays_read_only() {
    let dir = TempDir::new();
    let artifacts = dir.path().join("cache/wexec");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&artifacts)
        .expect("mkdir");
    let root = dir.path().display().to_string();
    let cache_root = artifacts.display().to_string();
    let mut cmd = command(&["--fs-root", &root, "--writable-root", &cache_root]);
    cmd.env("XDG_CACHE_HOME", dir.path().join("cache"));
    let (_server, mut client) = spawn_stdio_with(cmd);
    client.handshake().await;
    let script = format!("touch {cache_root}/injected");
    let outcome = run(&mut client, "at", &script, dir.path(), Value::Null).await;
    assert!(
        outcome.output.contains("Read-only file system"),
        "{outcome:?}"
    );
    assert!(!artifacts.join("injected").exists());
}

/// A cache path through a link a process or plugin could re-point is not used: the link could
/// lead the next start to a directory of their making.
#[tokio::test]
async fn a_compile_cache_reached_through_a_link_inside_a_root_is_not_used() {
    let dir = TempDir::new();
    std::fs::create_dir(dir.path().join("real")).expect("mkdir");
    std::os::unix::fs::symlink("real", dir.path().join("link")).expect("symlink");
    let mut cmd = command(&["--fs-root", &dir.path().display().to_string()]);
    cmd.env("XDG_CACHE_HOME", dir.path().join("link/cache"));
    let (server, mut client) = spawn_stdio_with(cmd);
    client.handshake().await;
    let log = server
        .stderr_containing("passes through the symbolic link")
        .await;
    assert!(log.contains("compile cache disabled"), "{log}");
    let cached = std::fs::read_dir(dir.path().join("real/cache/wexec"))
        .map(|entries| entries.count())
        .unwrap_or(0);
    assert_eq!(cached, 0, "nothing is cached there");
}

/// With the cache warm, wexec answers before the engine exists; if the engine then cannot be
/// built, wexec still stops with the startup error (here: too little address space for its
/// instance pools).
#[tokio::test]
async fn an_engine_that_cannot_be_built_stops_wexec_even_after_a_warm_start() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let cache = dir.path().join("cache");
    let args = [
        "--fs-root",
        root.as_str(),
        "--sandbox",
        "danger-full-access",
    ];
    {
        let mut cmd = command(&args);
        cmd.env("XDG_CACHE_HOME", &cache);
        let (_server, mut client) = spawn_stdio_with(cmd);
        client.handshake().await;
    }
    let launcher = ["sh", "-c", "ulimit -v 2048000; exec \"$0\" \"$@\""];
    let mut cmd = command_under(&launcher, &args);
    cmd.env("XDG_CACHE_HOME", &cache);
    let (mut server, _client) = spawn_stdio_with(cmd);
    let status = tokio::time::timeout(wexec_tests::TIMEOUT, server.wait())
        .await
        .expect("wexec stops");
    assert!(!status.success());
    // stderr is read as it comes: wait for the message rather than read what arrived so far.
    server
        .stderr_containing("cannot configure the WebAssembly engine")
        .await;
}

/// wexec's own files are out of every confined process's reach whatever the ceiling: the
/// compile cache and the config and plugin files read-only (a process that rewrote them would
/// choose what wexec's next reload or start runs), the WebSocket token file unreadable; the fs
/// plugin sees none of them.
#[tokio::test]
async fn wexecs_own_files_are_out_of_reach_whatever_the_ceiling() {
    let dir = TempDir::new();
    let (deploy, cache) = (dir.path().join("deploy"), dir.path().join("cache"));
    std::fs::create_dir(&deploy).expect("mkdir");
    let plugin = deploy.join("hello.wasm");
    std::fs::copy(wexec_tests::HELLO_WASM, &plugin).expect("copy plugin");
    let config = deploy.join("wexec.toml");
    std::fs::write(&config, "[[plugins]]\nfile = \"hello.wasm\"\n").expect("config");
    let token = deploy.join("token");
    std::fs::write(&token, "s3cret-token\n").expect("token");
    let root = dir.path().display().to_string();
    for mode in ["workspace-write", "danger-full-access"] {
        let mut cmd = command(&[
            "--listen",
            "ws://127.0.0.1:0",
            "--fs-root",
            &root,
            "--sandbox",
            mode,
            "--config",
            &config.display().to_string(),
            "--ws-auth",
            "capability-token",
            "--ws-token-file",
            &token.display().to_string(),
        ]);
        cmd.env("XDG_CACHE_HOME", &cache);
        let server = wexec_tests::spawn_websocket_with(cmd).await;
        let mut client = server
            .connect_with(Some("s3cret-token"))
            .await
            .expect("connect with the token");
        client.handshake().await;
        let script = format!(
            "cat {token} || echo no-token; for f in {config} {plugin} {cache}/wexec/*.cwasm; do echo evil > \"$f\" || echo kept; done; touch {cache}/wexec/injected",
            token = token.display(),
            config = config.display(),
            plugin = plugin.display(),
            cache = cache.display(),
        );
        let outcome = run(
            &mut client,
            "own",
            &script,
            dir.path(),
            codex_workspace_write(dir.path(), "restricted", true),
        )
        .await;
        assert!(!outcome.output.contains("s3cret"), "{mode}: {outcome:?}");
        assert!(outcome.output.contains("no-token"), "{mode}: {outcome:?}");
        assert!(
            !outcome.output.contains("kept\nevil"),
            "{mode}: {outcome:?}"
        );
        assert!(
            !cache.join("wexec/injected").exists(),
            "{mode}: {outcome:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&config).expect("config"),
            "[[plugins]]\nfile = \"hello.wasm\"\n",
            "{mode}"
        );
        assert_eq!(
            std::fs::read(&plugin).expect("plugin"),
            std::fs::read(wexec_tests::HELLO_WASM).expect("hello"),
            "{mode}"
        );
        // The fs plugin: outside the roots, and their directory cannot be replaced.
        for file in [&config, &token, &plugin] {
            let err = client
                .call_err(
                    "fs/readFile",
                    serde_json::json!({"path": file.display().to_string()}),
                )
                .await;
            assert_eq!(err["code"], -32600, "{mode}: {err}");
        }
        let err = client
            .call_err(
                "fs/remove",
                serde_json::json!({"path": deploy.display().to_string(), "recursive": true}),
            )
            .await;
        assert_eq!(err["code"], -32600, "{mode}: {err}");
        assert!(config.exists(), "{mode}");
    }
}

/// A `.git` file whose `gitdir:` goes through a symbolic link the process could re-point is
/// refused: protecting where the link leads at the start would not protect where it leads
/// after (a host `git` would then run the process's hooks).
#[tokio::test]
async fn a_gitdir_reached_through_a_writable_link_is_refused() {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join(".store/gd/hooks")).expect("mkdir");
    std::os::unix::fs::symlink(".store", work.join(".link")).expect("link");
    std::fs::write(work.join(".git"), "gitdir: .link/gd\n").expect(".git");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let err = client
        .call_err(
            "process/start",
            serde_json::json!({
                "processId": "p", "argv": ["true"], "cwd": work.display().to_string(),
                "env": {"PATH": "/usr/bin:/bin"}, "tty": false,
                "sandbox": codex_workspace_write(&work, "restricted", false),
            }),
        )
        .await;
    assert_eq!(
        err,
        wexec_tests::rpc_error(-32602, "sandbox intent cannot be enforced on this executor")
    );
    // Without the link the directory it names is held read-only instead.
    std::fs::write(work.join(".git"), "gitdir: .store/gd\n").expect(".git");
    let outcome = run(
        &mut client,
        "direct",
        "touch .store/gd/hooks/post-checkout || echo refused; touch .store/other && echo beside",
        &work,
        codex_workspace_write(&work, "restricted", false),
    )
    .await;
    assert!(
        outcome.output.contains("Read-only file system"),
        "{outcome:?}"
    );
    assert!(outcome.output.contains("beside"), "{outcome:?}");
    assert!(!work.join(".store/gd/hooks/post-checkout").exists());
}
