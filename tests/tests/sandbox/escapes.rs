//! No way out of a confined process (conformance item 15): links, `/proc` of host processes,
//! namespaces, mounts, ptrace, capabilities.

use wexec_tests::{TempDir, spawn_stdio};

use super::{codex_workspace_write, run};

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
