//! What Codex's read-only and workspace-write objects allow, matched against what Codex's own
//! exec-server does (docs/sandbox.md).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{TempDir, spawn_stdio};

use super::{codex_read_only, codex_workspace_write, run};

#[tokio::test]
async fn read_only_refuses_every_write_with_erofs_and_reports_the_denial() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let sandbox = codex_read_only(dir.path());
    let denied = run(
        &mut client,
        "w",
        "printf x > ro_denied.txt",
        dir.path(),
        sandbox.clone(),
    )
    .await;
    assert_eq!(
        denied.start,
        json!({"processId": "w", "sandboxType": "linuxSeccomp", "sandboxTier": "namespaces"})
    );
    // dash exits 2 here, bash (Codex's reference run) 1.
    assert_ne!(denied.exit, 0);
    assert!(
        denied
            .output
            .ends_with("ro_denied.txt: Read-only file system\n"),
        "{denied:?}"
    );
    assert!(denied.denied, "{denied:?}");
    assert!(!dir.path().join("ro_denied.txt").exists());
    for (id, script) in [
        ("tmp", "touch /tmp/wexec-ro-$$"),
        ("mkdir", "mkdir d"),
        ("rm", "rm -f /etc/hostname"),
    ] {
        let run = run(&mut client, id, script, dir.path(), sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(
            run.output.contains("Read-only file system"),
            "{id}: {run:?}"
        );
    }
    // Reads work; a zero exit is never a denial, whatever the output says.
    std::fs::write(dir.path().join("in.txt"), "inside").expect("write");
    let read = run(
        &mut client,
        "r",
        "cat in.txt /etc/hostname > /dev/null && cat in.txt && echo ' Read-only file system'",
        dir.path(),
        sandbox.clone(),
    )
    .await;
    assert_eq!((read.exit, read.denied), (0, false), "{read:?}");
    assert_eq!(read.output, "inside Read-only file system\n");
    let sys = run(&mut client, "sys", "kill -SYS $$", dir.path(), sandbox).await;
    assert_eq!((sys.exit, sys.denied), (159, true), "{sys:?}");
}

#[tokio::test]
async fn workspace_write_allows_the_workspace_and_keeps_protected_directories_read_only() {
    let dir = TempDir::new();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join(".git/hooks")).expect("mkdir");
    let sibling = dir.path().join("sibling");
    std::fs::create_dir(&sibling).expect("mkdir");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    // Without the /tmp entries, as `exclude_slash_tmp` and `exclude_tmpdir_env_var` send it:
    // the sibling (under the ceiling's writable temp dir) is then out of reach too.
    let sandbox = codex_workspace_write(&work, "restricted", false);
    let ok = run(
        &mut client,
        "ok",
        "echo a > f && mkdir -p src/x && echo done",
        &work,
        sandbox.clone(),
    )
    .await;
    assert_eq!((ok.exit, ok.output.as_str()), (0, "done\n"), "{ok:?}");
    assert_eq!(std::fs::read_to_string(work.join("f")).expect("f"), "a\n");
    let sibling_file = sibling.join("x");
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let cases = [
        (
            "sibling",
            format!("echo x > {}", sibling_file.display()),
            "Read-only file system",
        ),
        (
            "home",
            format!("touch {home}/wexec-sandbox-probe"),
            "Read-only file system",
        ),
        (
            "hooks",
            "echo x > .git/hooks/x".to_owned(),
            "Read-only file system",
        ),
        (
            "codex",
            "echo x > .codex/config.toml".to_owned(),
            "Read-only file system",
        ),
        (
            "agents",
            "mkdir -p .agents/skills/x".to_owned(),
            "Read-only file system",
        ),
        (
            "aws",
            "touch .aws/credentials".to_owned(),
            "Read-only file system",
        ),
        ("mv", "mv .git moved".to_owned(), "Device or resource busy"),
        (
            "link",
            "ln /etc/hostname hard".to_owned(),
            "Invalid cross-device link",
        ),
        (
            "symlink",
            format!("ln -s {} out && echo x > out/y", sibling.display()),
            "Read-only file system",
        ),
    ];
    for (id, script, text) in cases {
        let run = run(&mut client, id, &script, &work, sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(run.output.contains(text), "{id}: {run:?}");
    }
    assert!(!sibling_file.exists());
    assert!(
        !std::path::Path::new(&home)
            .join("wexec-sandbox-probe")
            .exists()
    );
    assert!(!work.join("moved").exists() && work.join(".git/hooks").is_dir());
    assert!(!work.join(".git/hooks/x").exists() && !work.join("hard").exists());
    // The absent protected directories were empty read-only mounts while it ran, and are gone
    // once its close was reported.
    let listing = || {
        let mut left: Vec<String> = std::fs::read_dir(&work)
            .expect("list")
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        left
    };
    assert_eq!(listing(), [".git", "f", "out", "src"]);
    // With the /tmp entries, the temp dir is writable as well.
    let tmp = run(
        &mut client,
        "tmp",
        &format!("echo x > {}", sibling_file.display()),
        &work,
        codex_workspace_write(&work, "restricted", true),
    )
    .await;
    assert_eq!(tmp.exit, 0, "{tmp:?}");
}

#[tokio::test]
async fn a_deny_entry_hides_a_path_and_the_longest_entry_decides() {
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("secret/inner")).expect("mkdir");
    std::fs::write(dir.path().join("secret/inner/key"), "k").expect("write");
    std::fs::write(dir.path().join("token"), "t").expect("write");
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let path = |path: &std::path::Path, access: &str| -> Value {
        json!({"path": {"type": "path", "path": super::uri(path)}, "access": access})
    };
    let sandbox = super::managed(
        dir.path(),
        vec![
            super::special("root", None, "read"),
            path(dir.path(), "write"),
            path(&dir.path().join("secret"), "deny"),
            // A narrower grant does not reopen a denial.
            path(&dir.path().join("secret/inner"), "write"),
            path(&dir.path().join("token"), "none"),
        ],
        "restricted",
    );
    for (id, script) in [
        ("list", "ls secret"),
        ("read", "cat secret/inner/key"),
        ("write", "echo x > secret/inner/new"),
        ("file", "cat token"),
    ] {
        let run = run(&mut client, id, script, dir.path(), sandbox.clone()).await;
        assert_ne!(run.exit, 0, "{id}: {run:?}");
        assert!(run.output.contains("Permission denied"), "{id}: {run:?}");
        assert!(run.denied, "{id}: {run:?}");
    }
    let ok = run(
        &mut client,
        "ok",
        "echo y > ok.txt && cat ok.txt",
        dir.path(),
        sandbox,
    )
    .await;
    assert_eq!((ok.exit, ok.output.as_str()), (0, "y\n"), "{ok:?}");
    assert!(!dir.path().join("secret/inner/new").exists());
}

#[tokio::test]
async fn a_tty_works_sandboxed() {
    let dir = TempDir::new();
    let root = dir.path().display().to_string();
    let (_server, mut client) = spawn_stdio(&["--fs-root", &root]);
    client.handshake().await;
    let tty = super::run_with(
        &mut client,
        "tty",
        "test -t 0 && test -t 1 && echo on-a-tty",
        dir.path(),
        codex_read_only(dir.path()),
        json!({"tty": true}),
    )
    .await;
    assert_eq!(tty.exit, 0, "{tty:?}");
    assert!(tty.output.contains("on-a-tty"), "{tty:?}");
}
