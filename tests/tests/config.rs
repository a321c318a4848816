//! `environmentConfig/read` (docs/protocol.md §7.5), served by the bundled `config` plugin through
//! read-only grants, against the real binary. The Codex home is a temp dir (`CODEX_HOME`); a
//! system layer (`/etc/codex`) this machine may have is left out of the comparisons.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir, spawn_stdio_with};

/// `home/` as the Codex home, `work/proj` a git project (`.git/HEAD`) with `sub/` below it, both
/// with a `.codex/config.toml`; `work/` is the fs root.
struct Fixture {
    dir: TempDir,
    _server: Server,
    client: Client,
}

const USER: &str =
    "model = \"o3\"\n[mcp_servers.user]\ncommand = \"user-cmd\"\nargs = [\"a\", \"b\"]\n";

impl Fixture {
    async fn new(user: &str) -> Self {
        let dir = TempDir::new();
        let path = |relative: &str| dir.path().join(relative);
        for sub in [
            "home",
            "work/proj/.git",
            "work/proj/.codex",
            "work/proj/sub/.codex",
        ] {
            std::fs::create_dir_all(path(sub)).expect("mkdir");
        }
        std::fs::write(path("work/proj/.git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        std::fs::write(
            path("work/proj/.codex/config.toml"),
            "[mcp_servers.proj]\ncommand = \"proj-cmd\"\n",
        )
        .expect("write");
        std::fs::write(
            path("work/proj/sub/.codex/config.toml"),
            "model = \"sub\"\n[mcp_servers.sub]\nurl = \"http://x\"\nenv = { A = \"1\" }\n",
        )
        .expect("write");
        let user = user.replace("{work}", &path("work").display().to_string());
        std::fs::write(path("home/config.toml"), user).expect("write");
        let root = path("work").display().to_string();
        let mut command = wexec_tests::command(&["--fs-root", &root]);
        command
            .env("CODEX_HOME", path("home"))
            .env("HOME", path("home"));
        let (server, mut client) = spawn_stdio_with(command);
        client.handshake().await;
        Self {
            dir,
            _server: server,
            client,
        }
    }

    fn path(&self, relative: &str) -> String {
        self.dir.path().join(relative).display().to_string()
    }

    async fn read(&mut self, cwd: &str, config: Value, requirements: Value) -> Value {
        let params = json!({"cwd": format!("file://{}", self.path(cwd)), "configPaths": config, "requirementsPaths": requirements});
        let mut result = self.client.call("environmentConfig/read", params).await;
        // This machine's own `/etc/codex`, if any, is not the test's.
        for kind in ["config", "requirements"] {
            let layers = result[kind]["layers"].as_array_mut().expect("layers");
            let system = if kind == "config" {
                "system ("
            } else {
                "/etc/codex/"
            };
            let before = layers.len();
            layers.retain(|layer| !layer["source"].as_str().unwrap_or("").starts_with(system));
            let removed = before - layers.len();
            let index = result[kind]["cloudInsertionIndex"].as_u64().expect("index");
            assert_eq!(index as usize, removed, "{kind}: system layers");
            result[kind]["cloudInsertionIndex"] = json!(0);
        }
        result
    }
}

fn layer(source: String, base_dir: String, toml: &str) -> Value {
    json!({"source": source, "baseDir": format!("file://{base_dir}"), "toml": toml})
}

#[tokio::test]
async fn user_and_trusted_project_layers_in_order_filtered_to_the_requested_keys() {
    let trusted = format!("{USER}\n[projects.\"{{work}}/proj\"]\ntrust_level = \"trusted\"\n");
    let mut fx = Fixture::new(&trusted).await;
    let result = fx
        .read(
            "work/proj/sub",
            json!([["mcp_servers"]]),
            json!([["mcp_servers"]]),
        )
        .await;
    let home = fx.path("home");
    let expected = json!({
        "userHomeDir": format!("file://{home}"),
        "codexHomeDir": format!("file://{home}"),
        "hostname": rustix_hostname(),
        "config": {"cloudInsertionIndex": 0, "layers": [
            layer(format!("user ({home}/config.toml)"), home.clone(), "[mcp_servers.user]\ncommand = \"user-cmd\"\nargs = [\"a\", \"b\"]\n"),
            layer(format!("project ({}/.codex/config.toml)", fx.path("work/proj")), format!("{}/.codex", fx.path("work/proj")), "[mcp_servers.proj]\ncommand = \"proj-cmd\"\n"),
            layer(format!("project ({}/.codex/config.toml)", fx.path("work/proj/sub")), format!("{}/.codex", fx.path("work/proj/sub")), "[mcp_servers.sub]\nurl = \"http://x\"\n\n[mcp_servers.sub.env]\nA = \"1\"\n"),
        ]},
        "requirements": {"cloudInsertionIndex": 0, "layers": []},
    });
    assert_eq!(result, expected);

    // A path through a non-table value keeps the value; tables on the way stay, even empty;
    // a layer without any requested key is left out.
    let result = fx
        .read(
            "work/proj/sub",
            json!([["model", "x"], ["mcp_servers", "user"]]),
            json!([]),
        )
        .await;
    let tomls: Vec<&str> = result["config"]["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|layer| layer["toml"].as_str().expect("toml"))
        .collect();
    assert_eq!(
        tomls,
        [
            "model = \"o3\"\n\n[mcp_servers.user]\ncommand = \"user-cmd\"\nargs = [\"a\", \"b\"]\n",
            "[mcp_servers]\n",
            "model = \"sub\"\n\n[mcp_servers]\n",
        ]
    );
    let result = fx
        .read("work/proj/sub", json!([["nothing"]]), json!([]))
        .await;
    assert_eq!(result["config"]["layers"], json!([]));
}

#[tokio::test]
async fn trust_is_decided_by_the_cwd_or_the_project_root_only() {
    // Trusting `sub` (the cwd) counts `sub` only; trusting a parent of the root counts nothing.
    let mut fx = Fixture::new(&format!(
        "{USER}\n[projects.\"{{work}}/proj/sub\"]\ntrust_level = \"trusted\"\n"
    ))
    .await;
    let result = fx
        .read("work/proj/sub", json!([["mcp_servers"]]), json!([]))
        .await;
    assert_eq!(
        project_sources(&result),
        [format!(
            "project ({}/.codex/config.toml)",
            fx.path("work/proj/sub")
        )]
    );

    for user in [
        format!("{USER}\n[projects.\"{{work}}\"]\ntrust_level = \"trusted\"\n"),
        format!("{USER}\n[projects.\"{{work}}/proj\"]\ntrust_level = \"untrusted\"\n"),
        USER.to_owned(),
    ] {
        let mut fx = Fixture::new(&user).await;
        let result = fx
            .read("work/proj/sub", json!([["mcp_servers"]]), json!([]))
            .await;
        assert_eq!(project_sources(&result), Vec::<String>::new(), "{user}");
    }
}

#[tokio::test]
async fn a_missing_cwd_is_no_error_and_bad_requests_get_codexs_errors() {
    let mut fx = Fixture::new(USER).await;
    let result = fx
        .read("work/nowhere", json!([["mcp_servers"]]), json!([]))
        .await;
    assert_eq!(result["config"]["layers"].as_array().map(Vec::len), Some(1));
    for (params, message) in [
        (
            json!({"cwd": "file:///", "configPaths": [], "requirementsPaths": []}),
            "at least one config or requirements path is required",
        ),
        (
            json!({"cwd": "file:///", "configPaths": [[]], "requirementsPaths": []}),
            "TOML paths must contain at least one key segment",
        ),
        (
            json!({"cwd": "file:///", "configPaths": [["a"]]}),
            "missing field `requirementsPaths`",
        ),
    ] {
        let error = fx.client.call_err("environmentConfig/read", params).await;
        assert_eq!(error, json!({"code": -32602, "message": message}));
    }
}

#[tokio::test]
async fn a_file_that_does_not_parse_is_an_internal_error_naming_it() {
    let mut fx = Fixture::new(&format!("{USER}model = \n")).await;
    let error = fx
        .client
        .call_err(
            "environmentConfig/read",
            json!({"cwd": "file:///", "configPaths": [["a"]], "requirementsPaths": []}),
        )
        .await;
    let file = Path::new(&fx.path("home")).join("config.toml");
    assert_eq!(
        error,
        json!({"code": -32603, "message": format!("failed to load executor-local config: {}:5:9: string values must be quoted, expected literal string", file.display())})
    );
}

#[tokio::test]
async fn nothing_outside_the_grants_is_read() {
    // A project outside the fs roots: its config is never read, even when trusted.
    let mut fx = Fixture::new(USER).await;
    let outside = fx.dir.path().join("elsewhere");
    std::fs::create_dir_all(outside.join(".codex")).expect("mkdir");
    std::fs::write(
        outside.join(".codex/config.toml"),
        "[mcp_servers.secret]\ncommand = \"x\"\n",
    )
    .expect("write");
    let user = format!(
        "{USER}\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        outside.display()
    );
    std::fs::write(fx.dir.path().join("home/config.toml"), user).expect("write");
    let params = json!({"cwd": format!("file://{}", outside.display()), "configPaths": [["mcp_servers"]], "requirementsPaths": []});
    let result = fx.client.call("environmentConfig/read", params).await;
    assert!(!result.to_string().contains("secret"), "{result}");
}

fn project_sources(result: &Value) -> Vec<String> {
    result["config"]["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .filter_map(|layer| layer["source"].as_str())
        .filter(|source| source.starts_with("project ("))
        .map(str::to_owned)
        .collect()
}

fn rustix_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .to_owned()
}
