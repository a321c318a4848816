//! The plugin author's workflow end to end, as a user runs it: `wexec plugin new` →
//! `cargo build --target wasm32-wasip2` → `wexec plugin inspect` → deploy with `--config` →
//! call; then hot reload under load, a broken deploy, and a plugin built against another
//! contract.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "helpers of a test fail the test on any error"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wexec_client::{Client, ClientOptions, StdioCommand};
use wexec_protocol::ProcessStartParams;
use wexec_tests::{TIMEOUT, TempDir, wexec_bin};

/// Scaffolded crates build here, so dependencies compile once per machine, not per run.
fn scaffold_target() -> PathBuf {
    wexec_bin()
        .parent()
        .and_then(Path::parent)
        .map(|target| target.join("scaffold"))
        .unwrap()
}

fn wexec_tool(args: &[&str]) -> std::process::Output {
    Command::new(wexec_bin()).args(args).output().unwrap()
}

/// Runs cargo with `args` in `dir`, into the shared scaffold target directory.
fn cargo(dir: &Path, args: &[&str]) {
    wexec_tests::nested_cargo(dir, &scaffold_target(), args);
}

/// Builds the crate in `dir` for wasm32-wasip2; returns the component's path.
fn build(dir: &Path, crate_name: &str) -> PathBuf {
    cargo(dir, &["build", "--release", "--target", "wasm32-wasip2"]);
    scaffold_target().join(format!("wasm32-wasip2/release/{crate_name}.wasm"))
}

/// Copies `from` next to `to` and renames it over `to`: how operators deploy atomically.
fn deploy(from: &Path, to: &Path) {
    let staging = to.with_extension("staging");
    std::fs::copy(from, &staging).unwrap();
    std::fs::rename(&staging, to).unwrap();
}

async fn connect(config: &Path) -> Client {
    let command = wexec_tests::client_command(&["--config", config.to_str().unwrap()]);
    Client::connect_stdio(command, ClientOptions::new("workflow-test"))
        .await
        .unwrap()
}

/// Like [`connect`], with wexec's log going to `log`, where the test can wait for what wexec
/// reports.
async fn connect_logging_to(config: &Path, log: &Path) -> Client {
    let wexec = wexec_tests::client_command(&["--config", config.to_str().unwrap()]);
    let mut command = StdioCommand::new("sh").args([
        "-c".to_owned(),
        r#"log=$1; shift; exec "$@" 2>"$log""#.to_owned(),
        "sh".to_owned(),
        log.display().to_string(),
        wexec.program.display().to_string(),
    ]);
    command = command.args(wexec.args);
    command.env = wexec.env;
    Client::connect_stdio(command, ClientOptions::new("workflow-test"))
        .await
        .unwrap()
}

async fn version_of(client: &Client, name: &str) -> String {
    let list = client.plugin_list().await.unwrap();
    list.plugins
        .into_iter()
        .find(|plugin| plugin.name == name)
        .map(|plugin| plugin.version)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaffold_build_inspect_deploy_call_and_hot_reload_under_load() {
    let work = TempDir::new();
    let dir = work.path().join("wf-demo");
    let created = wexec_tool(&["plugin", "new", "wf-demo", "--dir", dir.to_str().unwrap()]);
    assert!(created.status.success(), "{created:?}");
    // The SDK is named relative to the crate, so moving both together keeps it building.
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let sdk_line = manifest
        .lines()
        .find(|line| line.starts_with("wexec-guest"))
        .unwrap();
    assert!(sdk_line.contains("path = \"../"), "{sdk_line}");
    let v1 = build(&dir, "wf_demo");

    let inspect = wexec_tool(&["plugin", "inspect", v1.to_str().unwrap()]);
    let report = String::from_utf8(inspect.stdout).unwrap();
    assert!(inspect.status.success(), "{report}");
    assert!(report.contains("name:         wf-demo"), "{report}");
    assert!(report.contains("methods:      wf-demo/echo"), "{report}");
    assert!(report.contains("capabilities: none"), "{report}");
    assert!(report.contains("wexec:plugin@0.1.0"), "{report}");
    assert!(report.contains("loadable:     yes"), "{report}");

    // Deploy with a config file and call it.
    let deployed = work.path().join("wf-demo.wasm");
    deploy(&v1, &deployed);
    let config = work.path().join("wexec.toml");
    std::fs::write(&config, "[[plugins]]\nfile = \"wf-demo.wasm\"\n").unwrap();
    let log = work.path().join("wexec.log");
    let client = connect_logging_to(&config, &log).await;
    let reply: Value = client
        .call("wf-demo/echo", &json!({"text": "hey"}))
        .await
        .unwrap();
    assert_eq!(reply, json!({"text": "hey", "length": 3}));
    assert_eq!(version_of(&client, "wf-demo").await, "0.1.0");

    // A process started before the reload must not notice it.
    let argv = ["sh", "-c", "read line; echo got $line"]
        .map(String::from)
        .to_vec();
    let mut start = ProcessStartParams::new("survivor", argv, "/");
    start.pipe_stdin = true;
    let survivor = client.start_process(start).await.unwrap();

    // Version 2 doubles the length.
    let source = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(
        &source,
        text.replace("length: text.len(),", "length: text.len() * 2,"),
    )
    .unwrap();
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("version = \"0.1.0\"", "version = \"0.2.0\""),
    )
    .unwrap();
    let v2 = build(&dir, "wf_demo");

    // A client calls in a loop across the reload and must never see an error.
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, v2_seen) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let caller = tokio::spawn({
        let (client, stop, calls, v2_seen) = (
            client.clone(),
            Arc::clone(&stop),
            Arc::clone(&calls),
            Arc::clone(&v2_seen),
        );
        async move {
            while !stop.load(Ordering::SeqCst) {
                let reply: Value = client
                    .call("wf-demo/echo", &json!({"text": "abcd"}))
                    .await
                    .expect("no call fails across a reload");
                match reply["length"].as_u64() {
                    Some(4) => assert!(!v2_seen.load(Ordering::SeqCst), "went back to v1"),
                    Some(8) => v2_seen.store(true, Ordering::SeqCst),
                    other => panic!("unexpected {other:?}"),
                }
                calls.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    // Some calls go to v1 before the deploy.
    let deadline = Instant::now() + TIMEOUT;
    while calls.load(Ordering::SeqCst) < 3 {
        assert!(Instant::now() < deadline, "the calls never began");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    deploy(&v2, &deployed);
    let deadline = Instant::now() + TIMEOUT;
    while !v2_seen.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "v2 never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(version_of(&client, "wf-demo").await, "0.2.0");

    // A broken deploy is refused; v2 keeps serving.
    std::fs::write(work.path().join("junk"), b"not a component").unwrap();
    deploy(&work.path().join("junk"), &deployed);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        if logged.contains("refused, the running plugins keep serving") {
            break;
        }
        assert!(Instant::now() < deadline, "no refusal logged:\n{logged}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reply: Value = client
        .call("wf-demo/echo", &json!({"text": "xy"}))
        .await
        .unwrap();
    assert_eq!(reply["length"], 4);
    stop.store(true, Ordering::SeqCst);
    caller.await.unwrap();
    assert!(calls.load(Ordering::SeqCst) > 10, "the loop ran");

    // New sessions see the new version in initialize; the process lived through it all.
    let info = client.environment_info().await.unwrap();
    let listed = info.wexec.unwrap().plugins;
    assert!(
        listed
            .iter()
            .any(|plugin| plugin.name == "wf-demo" && plugin.version == "0.2.0")
    );
    survivor.write(b"through\n").await.unwrap();
    let output = tokio::time::timeout(TIMEOUT, survivor.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(output.stdout, b"got through\n");
    assert_eq!(output.exit_code, Some(0));
}

#[tokio::test]
async fn a_plugin_built_against_another_contract_is_refused() {
    let work = TempDir::new();
    let dir = work.path().join("wf-other");
    let created = wexec_tool(&["plugin", "new", "wf-other", "--dir", dir.to_str().unwrap()]);
    assert!(created.status.success(), "{created:?}");
    // The same plugin, but bound to a WIT package of another version, without the SDK.
    let wit =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/plugin.wit"))
            .unwrap();
    assert!(wit.contains("package wexec:plugin@0.1.0;"));
    std::fs::create_dir_all(dir.join("wit")).unwrap();
    std::fs::write(
        dir.join("wit/plugin.wit"),
        wit.replace("package wexec:plugin@0.1.0;", "package wexec:plugin@0.9.0;"),
    )
    .unwrap();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let manifest = manifest
        .lines()
        .filter(|line| !line.starts_with("wexec-guest"))
        .collect::<Vec<_>>()
        .join("\n")
        .replace(
            "[dependencies]",
            "[dependencies]\nwit-bindgen = \"=0.63.0\"",
        );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        r#"#![allow(unsafe_code)]
wit_bindgen::generate!({ world: "plugin", path: "wit" });
use exports::wexec::plugin::handler::{Guest, PluginInfo};
use wexec::plugin::types::RpcError;
struct Other;
impl Guest for Other {
    fn describe() -> PluginInfo {
        PluginInfo { name: "wf-other".into(), version: "1.0.0".into(), contract: "0.9.0".into(),
            methods: vec!["wf-other/x".into()], capabilities: Vec::new(), env_vars: Vec::new() }
    }
    fn handle(_: String, _: String) -> Result<String, RpcError> { Ok("{}".into()) }
}
export!(Other);
"#,
    )
    .unwrap();
    let wasm = build(&dir, "wf_other");
    let inspect = wexec_tool(&["plugin", "inspect", wasm.to_str().unwrap()]);
    let report = String::from_utf8(inspect.stdout).unwrap();
    assert_eq!(inspect.status.code(), Some(1), "{report}");
    assert!(report.contains("wexec:plugin@0.9.0"), "{report}");
    assert!(
        report
            .contains("loadable:     no: does not fit wexec's plugin contract wexec:plugin@0.1.0"),
        "{report}"
    );
    let serve = Command::new(wexec_bin())
        .args(["--plugin", wasm.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert!(!serve.status.success(), "{stderr}");
    assert!(
        stderr.contains("does not fit wexec's plugin contract wexec:plugin@0.1.0"),
        "{stderr}"
    );
}

/// The other build path: `cargo component build`. Skipped where cargo-component is not
/// installed, unless `WEXEC_REQUIRE_CARGO_COMPONENT=1` (CI sets it) makes that a failure.
#[tokio::test]
async fn a_scaffold_builds_with_cargo_component_too() {
    let cargo_bin = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let available = Command::new(&cargo_bin)
        .args(["component", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !available {
        assert!(
            std::env::var_os("WEXEC_REQUIRE_CARGO_COMPONENT").is_none(),
            "cargo-component is required here: cargo install cargo-component --locked"
        );
        eprintln!("skipped: cargo-component is not installed");
        return;
    }
    let work = TempDir::new();
    let dir = work.path().join("wf-component");
    let created = wexec_tool(&[
        "plugin",
        "new",
        "wf-component",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    assert!(created.status.success(), "{created:?}");
    cargo(&dir, &["component", "build", "--release"]);
    let wasm = scaffold_target().join("wasm32-wasip1/release/wf_component.wasm");
    let inspect = wexec_tool(&["plugin", "inspect", wasm.to_str().unwrap()]);
    let report = String::from_utf8(inspect.stdout).unwrap();
    assert!(inspect.status.success(), "{report}");
    let config = work.path().join("wexec.toml");
    let file = wasm.to_str().unwrap();
    std::fs::write(&config, format!("[[plugins]]\nfile = \"{file}\"\n")).unwrap();
    let client = connect(&config).await;
    let reply: Value = client
        .call("wf-component/echo", &json!({"text": "wasip1"}))
        .await
        .unwrap();
    assert_eq!(reply, json!({"text": "wasip1", "length": 6}));
}

#[tokio::test]
async fn sighup_reloads_the_configured_plugins() {
    let work = TempDir::new();
    let config = work.path().join("wexec.toml");
    let hello = work.path().join("hello.wasm");
    std::fs::copy(wexec_tests::HELLO_WASM, &hello).unwrap();
    std::fs::write(&config, "[[plugins]]\nfile = \"hello.wasm\"\n").unwrap();
    let (server, mut client) = wexec_tests::spawn_stdio_with(wexec_tests::command(&[
        "--config",
        config.to_str().unwrap(),
    ]));
    client.handshake().await;
    server.kill_with("HUP").await;
    let deadline = Instant::now() + TIMEOUT;
    while !server
        .stderr()
        .contains("plugin reload (SIGHUP): nothing changed")
    {
        assert!(
            Instant::now() < deadline,
            "no reload logged:\n{}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Still serving, same session.
    let reply = client.call("hello/greet", json!({"name": "again"})).await;
    assert_eq!(reply["greeting"], "Hello, again!");
}

/// Without `RUST_LOG`, an operator still sees a reload take effect: one info line per plugin,
/// and nothing in colour when stderr is no terminal.
#[tokio::test]
async fn a_reload_that_changes_a_plugin_is_logged_at_the_default_level() {
    let work = TempDir::new();
    let config = work.path().join("wexec.toml");
    std::fs::copy(wexec_tests::HELLO_WASM, work.path().join("hello.wasm")).unwrap();
    std::fs::write(&config, "plugins = []\n").unwrap();
    let mut command = wexec_tests::command(&["--config", config.to_str().unwrap()]);
    command.env_remove("RUST_LOG");
    let (server, mut client) = wexec_tests::spawn_stdio_with(command);
    client.handshake().await;
    std::fs::write(&config, "[[plugins]]\nfile = \"hello.wasm\"\n").unwrap();
    server.kill_with("HUP").await;
    let deadline = Instant::now() + TIMEOUT;
    // The file watch may see the change before the signal arrives: either reason will do.
    let logged = "INFO wexec::server::reload: plugin reloaded plugin=hello reason=";
    while !server.stderr().contains(logged) {
        assert!(
            Instant::now() < deadline,
            "no reload logged:\n{}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!server.stderr().contains('\u{1b}'), "{}", server.stderr());
    let reply = client.call("hello/greet", json!({"name": "again"})).await;
    assert_eq!(reply["greeting"], "Hello, again!");
}
