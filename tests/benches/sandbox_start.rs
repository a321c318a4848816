//! `process/start` → `process/closed` of `true`, with and without Codex's workspace-write
//! `sandbox` object, against wexec and (when `CODEX_BIN` names the `codex` binary of
//! `@openai/codex@0.169.0`) `codex exec-server`: the same raw client, one server of each kind,
//! interleaved in rounds so every configuration sees the same machine noise; and, in the same
//! rounds, the floor: the benchmark spawning `true` itself.
//!
//! Run: `CODEX_BIN=.../codex cargo bench -p wexec-tests --bench sandbox_start`; with
//! `WEXEC_BASELINE_BIN` naming another wexec build (the one before a change), it is measured in
//! the same rounds too.

#![expect(clippy::expect_used, clippy::print_stdout, reason = "benchmark binary")]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir};

const WARMUP: usize = 20;
const ROUNDS: usize = 20;
const PER_ROUND: usize = 10;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn uri(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

fn workspace_write(dir: &std::path::Path) -> Value {
    let special = |kind: &str, subpath: Option<&str>, access: &str| {
        let mut value = json!({"kind": kind});
        if let Some(subpath) = subpath {
            value["subpath"] = json!(subpath);
        }
        json!({"path": {"type": "special", "value": value}, "access": access})
    };
    let mut entries = vec![
        special("root", None, "read"),
        special("project_roots", None, "write"),
        special("slash_tmp", None, "write"),
        special("tmpdir", None, "write"),
    ];
    for name in [".git", ".agents", ".codex", ".aws"] {
        entries.push(special("project_roots", Some(name), "read"));
    }
    json!({
        "permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": entries}, "network": "restricted"},
        "cwd": uri(dir), "workspaceRoots": [uri(dir)], "windowsSandboxLevel": "disabled",
        "windowsSandboxProxySettingsMode": "reconcile", "useLegacyLandlock": false,
    })
}

/// Codex's `-s read-only` object: the only mode the Landlock tier runs without an operator's
/// acceptance.
fn read_only(dir: &std::path::Path) -> Value {
    json!({
        "permissions": {"type": "managed", "file_system": {"type": "restricted", "entries": [
            {"path": {"type": "special", "value": {"kind": "root"}}, "access": "read"}
        ]}, "network": "restricted"},
        "cwd": uri(dir), "workspaceRoots": [uri(dir)], "windowsSandboxLevel": "disabled",
        "windowsSandboxProxySettingsMode": "reconcile", "useLegacyLandlock": false,
    })
}

/// One start → closed of `true`.
async fn once(client: &mut Client, id: &str, dir: &std::path::Path, sandbox: &Value) -> Duration {
    let began = Instant::now();
    // Raw request: Codex's server sends no `jsonrpc` member, which `call` insists on.
    let request = client
        .send_request(
            "process/start",
            json!({"processId": id, "argv": ["/bin/true"], "cwd": uri(dir), "env": {"PATH": "/usr/bin:/bin"},
                   "tty": false, "sandbox": sandbox}),
        )
        .await;
    let reply = client.reply_to(&json!(request)).await;
    assert_eq!(reply["result"]["processId"], id, "{reply}");
    loop {
        let message = client.next_notification().await;
        if message["method"] == "process/closed" && message["params"]["processId"] == id {
            return began.elapsed();
        }
    }
}

struct Case {
    name: &'static str,
    client: Client,
    sandbox: Value,
    samples: Vec<Duration>,
    _server: Server,
}

/// Which wexec, started how.
#[derive(Clone, Copy)]
enum Build<'a> {
    /// This build.
    This,
    /// This build where user namespaces cannot be made.
    ThisWithoutUserNamespaces,
    /// Another build (`WEXEC_BASELINE_BIN`).
    Baseline(&'a str),
}

async fn wexec(
    dir: &TempDir,
    name: &'static str,
    build: Build<'_>,
    args: &[&str],
    sandbox: Value,
) -> Case {
    let root = dir.path().display().to_string();
    let mut all = vec!["--fs-root", root.as_str()];
    all.extend_from_slice(args);
    let mut command = match build {
        Build::This => wexec_tests::command(&all),
        Build::ThisWithoutUserNamespaces => {
            wexec_tests::command_under(&wexec_tests::WITHOUT_USER_NAMESPACES, &all)
        }
        Build::Baseline(binary) => wexec_tests::command_of(std::path::Path::new(binary), &all),
    };
    command.env("RUST_LOG", "warn");
    let (server, mut client) = wexec_tests::spawn_stdio_with(command);
    client.handshake().await;
    Case {
        name,
        client,
        sandbox,
        samples: Vec::new(),
        _server: server,
    }
}

async fn codex(binary: &str, dir: &TempDir, name: &'static str, sandbox: Value) -> Case {
    let home = dir.path().join(format!("home-{name}"));
    std::fs::create_dir_all(home.join(".codex")).expect("codex home");
    let mut command = tokio::process::Command::new(binary);
    command
        .args(["exec-server", "--listen", "stdio://"])
        .env("HOME", &home)
        .env("CODEX_HOME", home.join(".codex"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let (server, mut client) = wexec_tests::spawn_stdio_with(command);
    let request = client
        .send_request("initialize", json!({"clientName": "sandbox_start"}))
        .await;
    client.reply_to(&json!(request)).await;
    client.send(&json!({"method": "initialized"})).await;
    Case {
        name,
        client,
        sandbox,
        samples: Vec::new(),
        _server: server,
    }
}

#[tokio::main]
async fn main() {
    let dir = TempDir::new();
    let sandbox = workspace_write(dir.path());
    let mut cases = vec![
        wexec(
            &dir,
            "wexec, workspace-write sandbox",
            Build::This,
            &[],
            sandbox.clone(),
        )
        .await,
        wexec(
            &dir,
            "wexec, unsandboxed (danger-full-access, no sandbox)",
            Build::This,
            &["--sandbox", "danger-full-access"],
            Value::Null,
        )
        .await,
        wexec(
            &dir,
            "wexec, read-only sandbox (namespace tier)",
            Build::This,
            &[],
            read_only(dir.path()),
        )
        .await,
        wexec(
            &dir,
            "wexec without user namespaces, read-only sandbox (Landlock tier)",
            Build::ThisWithoutUserNamespaces,
            &[],
            read_only(dir.path()),
        )
        .await,
    ];
    if let Ok(baseline) = std::env::var("WEXEC_BASELINE_BIN") {
        cases.push(
            wexec(
                &dir,
                "baseline wexec, workspace-write sandbox",
                Build::Baseline(&baseline),
                &[],
                sandbox.clone(),
            )
            .await,
        );
        cases.push(
            wexec(
                &dir,
                "baseline wexec, unsandboxed (danger-full-access, no sandbox)",
                Build::Baseline(&baseline),
                &["--sandbox", "danger-full-access"],
                Value::Null,
            )
            .await,
        );
    }
    match std::env::var("CODEX_BIN") {
        Ok(binary) => {
            cases.push(
                codex(
                    &binary,
                    &dir,
                    "codex exec-server, workspace-write sandbox",
                    sandbox.clone(),
                )
                .await,
            );
            cases.push(
                codex(
                    &binary,
                    &dir,
                    "codex exec-server, read-only sandbox",
                    read_only(dir.path()),
                )
                .await,
            );
            cases.push(codex(&binary, &dir, "codex exec-server, unsandboxed", Value::Null).await);
        }
        Err(_) => println!("CODEX_BIN is not set: measuring wexec only"),
    }
    let mut counter = 0;
    for case in &mut cases {
        for _ in 0..WARMUP {
            counter += 1;
            once(
                &mut case.client,
                &format!("w{counter}"),
                dir.path(),
                &case.sandbox,
            )
            .await;
        }
    }
    // The floor, measured in the same rounds: this process spawning `true` itself and waiting
    // for it (std uses posix_spawn), without a server, a sandbox or a protocol.
    let mut floor = Vec::new();
    for _ in 0..ROUNDS {
        for _ in 0..PER_ROUND {
            let began = Instant::now();
            let status = std::process::Command::new("/bin/true")
                .status()
                .expect("spawn /bin/true");
            assert!(status.success());
            floor.push(began.elapsed());
        }
        for case in &mut cases {
            for _ in 0..PER_ROUND {
                counter += 1;
                let took = once(
                    &mut case.client,
                    &format!("p{counter}"),
                    dir.path(),
                    &case.sandbox,
                )
                .await;
                case.samples.push(took);
            }
        }
    }
    let mut medians = Vec::new();
    for case in &mut cases {
        case.samples.sort_unstable();
        let median = percentile(&case.samples, 0.5);
        println!(
            "{}: start → closed of `true`, {} runs: median {:.2} ms, p10 {:.2} ms, p90 {:.2} ms",
            case.name,
            case.samples.len(),
            median.as_secs_f64() * 1e3,
            percentile(&case.samples, 0.1).as_secs_f64() * 1e3,
            percentile(&case.samples, 0.9).as_secs_f64() * 1e3,
        );
        medians.push(median.as_secs_f64());
    }
    floor.sort_unstable();
    let floor_median = percentile(&floor, 0.5).as_secs_f64();
    println!(
        "floor, spawn + wait of /bin/true from the benchmark itself, {} runs: median {:.2} ms",
        floor.len(),
        floor_median * 1e3
    );
    println!(
        "wexec sandboxed − wexec unsandboxed: {:.2} ms",
        (medians[0] - medians[1]) * 1e3
    );
    println!(
        "wexec unsandboxed − floor: {:.2} ms",
        (medians[1] - floor_median) * 1e3
    );
    if medians.len() == 4 {
        println!(
            "codex sandboxed / wexec sandboxed: {:.1}×",
            medians[2] / medians[0]
        );
        println!(
            "codex unsandboxed / wexec unsandboxed: {:.1}×",
            medians[3] / medians[1]
        );
    }
}
