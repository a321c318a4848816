//! Capability discovery (docs/protocol.md §7.6), served by the bundled `discovery` plugin through
//! read-only grants, against the real binary: `capabilityRoots/discoverV1` on client-named
//! roots, `capabilities/discoverV2` on the Codex home (`CODEX_HOME`), `$HOME/.agents` and the
//! installed plugins. A `system-skills` location this machine may have is left out.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wexec_tests::{Client, Server, TempDir, spawn_stdio_with};

const V1: &str = "capabilityRoots/discoverV1";
const V2: &str = "capabilities/discoverV2";

struct Fixture {
    dir: TempDir,
    _server: Server,
    client: Client,
}

fn write(path: &Path, contents: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, contents).expect("write");
}

fn skill(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nbody\n")
}

const OPENAI_YAML: &str = "interface:\n  display_name: A\ndependencies:\n  tools:\n    - type: mcp\n      value: foo\n      description: the foo\n      transport: stdio\n      command: foo-cmd\n    - value: untyped\npolicy:\n  allow_implicit_invocation: false\n  products: [codex]\n";

impl Fixture {
    /// `work/` is the fs root; `home/` is `HOME`, `home/.codex` the Codex home; `outside/` is
    /// granted to nobody.
    async fn new() -> Self {
        let dir = TempDir::new();
        let path = |relative: &str| dir.path().join(relative);
        // A plugin root: manifest, MCP config, skills at several depths, hidden and linked.
        write(
            &path("work/p/.codex-plugin/plugin.json"),
            br#"{"name":"myplug"}"#,
        );
        write(&path("work/p/.mcp.json"), b"{\"mcpServers\":{}}\n");
        write(
            &path("work/p/skills/a/SKILL.md"),
            skill("a", "skill a").as_bytes(),
        );
        write(
            &path("work/p/skills/a/agents/openai.yaml"),
            OPENAI_YAML.as_bytes(),
        );
        write(
            &path("work/p/skills/b/SKILL.md"),
            skill("b", "skill b").as_bytes(),
        );
        write(
            &path("work/p/.hidden/c/SKILL.md"),
            skill("c", "c").as_bytes(),
        );
        write(&path("work/p/d1/d2/d3/d4/d5/d6/SKILL.md"), b"six deep\n");
        write(
            &path("work/p/d1/d2/d3/d4/d5/d6/d7/SKILL.md"),
            b"seven deep\n",
        );
        write(&path("work/p/big/SKILL.md"), &vec![b'x'; 2 * 1024 * 1024]);
        write(&path("work/p/nested/.cursor-plugin/plugin.json"), b"{}");
        write(
            &path("work/shared/s/SKILL.md"),
            skill("linked", "l").as_bytes(),
        );
        std::os::unix::fs::symlink(path("work/shared"), path("work/p/link")).expect("symlink");
        // Links leading out of every grant are not followed: nothing there is revealed.
        write(&path("outside/secret/SKILL.md"), b"secret\n");
        std::os::unix::fs::symlink(path("outside"), path("work/p/escape")).expect("symlink");
        std::fs::create_dir_all(path("work/p/skills/b/agents")).expect("mkdir");
        std::os::unix::fs::symlink(
            path("outside/secret/SKILL.md"),
            path("work/p/skills/b/agents/openai.yaml"),
        )
        .expect("symlink");
        // A FIFO named like a skill is passed over, never opened.
        let fifo = path("work/p/fifo/SKILL.md");
        std::fs::create_dir_all(fifo.parent().expect("parent")).expect("mkdir");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        write(&path("work/file"), b"");

        // The Codex home: standalone skills, an invalid one, and installed plugins.
        let codex = |relative: &str| path(&format!("home/.codex/{relative}"));
        write(&codex("skills/s1/SKILL.md"), b"---\nname: s1\ndescription: skill  one\nmetadata:\n  short-description: short one\n---\n");
        write(
            &codex("skills/s1/agents/openai.yaml"),
            OPENAI_YAML.as_bytes(),
        );
        write(
            &codex("skills/.system/sys/SKILL.md"),
            skill("sys", "system").as_bytes(),
        );
        write(&codex("skills/invalid/SKILL.md"), b"no front matter\n");
        write(
            &path("home/.agents/skills/u1/SKILL.md"),
            b"---\ndescription: unnamed\n---\n",
        );
        let cache = "plugins/cache/market";
        write(
            &codex(&format!("{cache}/plug/1.2.3/.codex-plugin/plugin.json")),
            br#"{"name":"plug","version":"9","interface":{"displayName":"Plug Display"}}"#,
        );
        write(
            &codex(&format!("{cache}/plug/1.2.3/skills/ps/SKILL.md")),
            skill("ps", "plugin skill").as_bytes(),
        );
        write(
            &codex(&format!("{cache}/plug2/0.1/.codex-plugin/plugin.json")),
            br#"{"name":"plug2"}"#,
        );
        write(&codex(&format!("{cache}/plug2/0.1/.mcp.json")), b"{}");

        let root = path("work").display().to_string();
        let mut command = wexec_tests::command(&["--fs-root", &root]);
        command.env("HOME", path("home")).env_remove("CODEX_HOME");
        let (server, mut client) = spawn_stdio_with(command);
        client.handshake().await;
        Self {
            dir,
            _server: server,
            client,
        }
    }

    fn uri(&self, relative: &str) -> String {
        format!("file://{}", self.dir.path().join(relative).display())
    }

    fn file(&self, relative: &str, contents: &str) -> Value {
        json!({"path": self.uri(relative), "contents": contents})
    }

    fn skill_files(&self, relative: &str, contents: &str, metadata: Value) -> Value {
        json!({"instructions": self.file(relative, contents), "metadata": metadata})
    }

    async fn discover(&mut self, roots: Value) -> Vec<Value> {
        let result = self.client.call(V1, json!({ "roots": roots })).await;
        result["roots"].as_array().expect("roots").clone()
    }
}

#[tokio::test]
async fn discover_v1_reads_a_plugin_root_as_codex_does() {
    let mut fx = Fixture::new().await;
    let roots = fx
        .discover(json!([{"id": "r1", "path": fx.uri("work/p")}]))
        .await;
    let manifest = fx.file("work/p/.codex-plugin/plugin.json", r#"{"name":"myplug"}"#);
    let expected = json!({
        "id": "r1",
        "path": fx.uri("work/p"),
        "plugin": {
            "manifest": manifest,
            "mcpConfig": fx.file("work/p/.mcp.json", "{\"mcpServers\":{}}\n"),
            "appsConfig": null,
        },
        // By path; hidden and linked directories entered, six levels deep and no deeper; the
        // FIFO, the link out of the grants and the oversized file left out.
        "skills": [
            fx.skill_files("work/p/.hidden/c/SKILL.md", &skill("c", "c"), Value::Null),
            fx.skill_files("work/p/d1/d2/d3/d4/d5/d6/SKILL.md", "six deep\n", Value::Null),
            fx.skill_files("work/p/link/s/SKILL.md", &skill("linked", "l"), Value::Null),
            fx.skill_files(
                "work/p/skills/a/SKILL.md",
                &skill("a", "skill a"),
                fx.file("work/p/skills/a/agents/openai.yaml", OPENAI_YAML),
            ),
            fx.skill_files("work/p/skills/b/SKILL.md", &skill("b", "skill b"), Value::Null),
        ],
        "namespaceManifests": [manifest, fx.file("work/p/nested/.cursor-plugin/plugin.json", "{}")],
        "warnings": [format!(
            "capability file {} exceeds the 1048576-byte limit",
            fx.uri("work/p/big/SKILL.md")
        )],
        "error": null,
    });
    assert_eq!(roots, [expected]);
    assert!(!roots[0].to_string().contains("secret"));
}

#[tokio::test]
async fn discover_v1_answers_each_root_and_refuses_bad_requests() {
    let mut fx = Fixture::new().await;
    let roots = fx
        .discover(json!([
            {"id": "missing", "path": fx.uri("work/missing")},
            {"id": "file", "path": fx.uri("work/file")},
            {"id": "outside", "path": fx.uri("outside")},
            // Inside a plugin: its manifest is the namespace.
            {"id": "inner", "path": fx.uri("work/p/skills/b"), "sandbox": null},
        ]))
        .await;
    let errors: Vec<&Value> = roots.iter().map(|root| &root["error"]).collect();
    let outside = fx.dir.path().join("outside");
    assert_eq!(
        errors,
        [
            &json!(format!(
                "failed to inspect capability root {}: No such file or directory (os error 2)",
                fx.uri("work/missing")
            )),
            &json!(format!(
                "capability root {} is not a directory",
                fx.uri("work/file")
            )),
            &json!(format!(
                "path `{}` is outside the allowed roots",
                outside.display()
            )),
            &Value::Null,
        ]
    );
    for root in &roots[..3] {
        assert_eq!(root["skills"], json!([]));
        assert_eq!(root["plugin"], Value::Null);
    }
    assert_eq!(
        roots[3]["namespaceManifests"],
        json!([fx.file("work/p/.codex-plugin/plugin.json", r#"{"name":"myplug"}"#)])
    );
    // The link to a file outside the grants reads as no metadata.
    assert_eq!(roots[3]["skills"][0]["metadata"], Value::Null);

    assert_eq!(fx.discover(json!([])).await, Vec::<Value>::new());
    let too_many = vec![json!({"id": "x", "path": fx.uri("work")}); 129];
    assert_eq!(
        fx.client.call_err(V1, json!({ "roots": too_many })).await,
        json!({"code": -32600, "message": "capability root discovery accepts at most 128 roots"})
    );
    let relative = fx
        .client
        .call_err(V1, json!({"roots": [{"id": "x", "path": "relative/p"}]}))
        .await;
    assert_eq!(relative["code"], -32602);
    assert_eq!(
        fx.client.call_err(V1, json!({})).await,
        json!({"code": -32602, "message": "missing field `roots`"})
    );
    let bad_sandbox =
        json!({"roots": [{"id": "x", "path": fx.uri("work/p"), "sandbox": {"bad": 1}}]});
    assert_eq!(
        fx.client.call_err(V1, bad_sandbox).await,
        json!({"code": -32602, "message": "missing field `permissions`"})
    );
}

#[tokio::test]
async fn discover_v1_reads_only_what_every_sandbox_allows() {
    let mut fx = Fixture::new().await;
    let work = fx.dir.path().join("work");
    let denying = wexec_tests::managed(
        &work,
        vec![
            wexec_tests::special("root", None, "read"),
            json!({"path": {"type": "path", "path": fx.uri("work/p/skills/a")}, "access": "none"}),
        ],
        "restricted",
    );
    let reading = wexec_tests::codex_read_only(&work);
    // One root asks for less than the other: the call gets what both allow.
    let roots = fx
        .discover(json!([
            {"id": "p", "path": fx.uri("work/p/skills"), "sandbox": reading},
            {"id": "q", "path": fx.uri("work/p/skills/b"), "sandbox": denying},
        ]))
        .await;
    let text = serde_json::to_string(&roots).expect("json");
    assert!(!text.contains("skill a"), "{text}");
    assert!(!text.contains("foo-cmd"), "{text}");
    let skills: Vec<&Value> = (roots[0]["skills"].as_array().expect("skills").iter())
        .map(|skill| &skill["instructions"]["path"])
        .collect();
    assert_eq!(skills, [&json!(fx.uri("work/p/skills/b/SKILL.md"))]);
    assert!(
        roots[0]["warnings"][0]
            .as_str()
            .is_some_and(|warning| warning.contains("work/p/skills/a")),
        "{:?}",
        roots[0]["warnings"]
    );
    assert_eq!(
        roots[1]["skills"][0]["instructions"]["contents"],
        skill("b", "skill b")
    );
}

#[tokio::test]
async fn discover_v2_parses_user_skills_and_installed_plugins() {
    let mut fx = Fixture::new().await;
    let mut result = fx.client.call(V2, json!({"cwd": fx.uri("work")})).await;
    // This machine's own `/etc/codex/skills`, if any, is not the test's.
    result["skills"]
        .as_array_mut()
        .expect("skills")
        .retain(|skill| skill["discoveryRoot"]["id"] != "system-skills");
    let codex_skills = json!({"id": "codex-home-skills", "path": fx.uri("home/.codex/skills")});
    let dependencies = json!({"tools": [{
        "type": "mcp", "value": "foo", "description": "the foo", "transport": "stdio",
        "command": "foo-cmd", "url": null, "oauthCallbackPort": null,
    }]});
    let policy = json!({"allowImplicitInvocation": false, "products": ["codex"]});
    let cache = "home/.codex/plugins/cache/market";
    let plug_manifest =
        r#"{"name":"plug","version":"9","interface":{"displayName":"Plug Display"}}"#;
    let expected = json!({
        // By id.
        "plugins": [
            {
                "id": "plug2@market",
                "displayName": "plug2",
                "remotePluginId": null,
                "version": "0.1",
                "root": fx.uri(&format!("{cache}/plug2/0.1")),
                "files": {
                    "manifest": fx.file(&format!("{cache}/plug2/0.1/.codex-plugin/plugin.json"), r#"{"name":"plug2"}"#),
                    "mcpConfig": fx.file(&format!("{cache}/plug2/0.1/.mcp.json"), "{}"),
                    "appsConfig": null,
                },
                "skills": [],
            },
            {
                "id": "plug@market",
                "displayName": "Plug Display",
                "remotePluginId": null,
                "version": "1.2.3",
                "root": fx.uri(&format!("{cache}/plug/1.2.3")),
                "files": {
                    "manifest": fx.file(&format!("{cache}/plug/1.2.3/.codex-plugin/plugin.json"), plug_manifest),
                    "mcpConfig": null,
                    "appsConfig": null,
                },
                "skills": [{
                    "name": "plug:ps",
                    "description": "plugin skill",
                    "shortDescription": null,
                    "path": fx.uri(&format!("{cache}/plug/1.2.3/skills/ps/SKILL.md")),
                    "dependencies": null,
                    "policy": null,
                }],
            },
        ],
        "skills": [
            {
                "name": "sys",
                "description": "system",
                "shortDescription": null,
                "path": fx.uri("home/.codex/skills/.system/sys/SKILL.md"),
                "discoveryRoot": codex_skills,
                "dependencies": null,
                "policy": null,
            },
            {
                "name": "s1",
                "description": "skill one",
                "shortDescription": "short one",
                "path": fx.uri("home/.codex/skills/s1/SKILL.md"),
                "discoveryRoot": codex_skills,
                "dependencies": dependencies,
                "policy": policy,
            },
            {
                "name": "u1",
                "description": "unnamed",
                "shortDescription": null,
                "path": fx.uri("home/.agents/skills/u1/SKILL.md"),
                "discoveryRoot": {"id": "user-agent-skills", "path": fx.uri("home/.agents/skills")},
                "dependencies": null,
                "policy": null,
            },
        ],
        // The invalid skill, once for its location.
        "warnings": ["some capability metadata could not be loaded; discovery may be incomplete"],
    });
    assert_eq!(result, expected);

    assert_eq!(
        fx.client.call_err(V2, json!({})).await,
        json!({"code": -32602, "message": "missing field `cwd`"})
    );
}

#[tokio::test]
async fn one_deeply_nested_skill_costs_only_itself() {
    let mut fx = Fixture::new().await;
    // The YAML parser's time grows with the square of the nesting: 120,000 brackets took the
    // whole request past the plugin's 30 s.
    let bomb = format!(
        "---\nname: fm\ndescription: d\nx: {}\n---\n",
        "[".repeat(120_000)
    );
    write(
        &fx.dir.path().join("home/.codex/skills/fm/SKILL.md"),
        bomb.as_bytes(),
    );
    write(
        &fx.dir
            .path()
            .join("home/.codex/skills/fm2/agents/openai.yaml"),
        format!("policy: {}\n", "{a: ".repeat(60_000)).as_bytes(),
    );
    write(
        &fx.dir.path().join("home/.codex/skills/fm2/SKILL.md"),
        skill("fm2", "kept").as_bytes(),
    );
    let result = fx.client.call(V2, json!({"cwd": fx.uri("work")})).await;
    let names: Vec<&Value> = (result["skills"].as_array().expect("skills").iter())
        .map(|skill| &skill["name"])
        .collect();
    assert!(names.contains(&&json!("s1")), "{names:?}");
    assert!(!names.contains(&&json!("fm")), "{names:?}");
    let kept = (result["skills"].as_array().expect("skills").iter())
        .find(|skill| skill["name"] == "fm2")
        .expect("the skill with the nested metadata is kept");
    assert_eq!(
        (&kept["dependencies"], &kept["policy"]),
        (&Value::Null, &Value::Null)
    );
}

#[tokio::test]
async fn a_root_too_big_for_one_reply_loses_its_files_not_the_request() {
    let mut fx = Fixture::new().await;
    // Control characters take six bytes each in JSON: twelve such 1 MiB skills (within the
    // 16 MiB a root may read) would make a reply past the 64 MiB message limit.
    let mut text = b"---\nname: n\ndescription: d\n---\n".to_vec();
    text.resize(1024 * 1024 - 1, 1);
    for index in 0..12 {
        write(
            &fx.dir.path().join(format!("work/esc/s{index:02}/SKILL.md")),
            &text,
        );
    }
    let roots = fx
        .discover(json!([
            {"id": "hostile", "path": fx.uri("work/esc")},
            {"id": "good", "path": fx.uri("work/p/skills/b")},
        ]))
        .await;
    let kept = roots[0]["skills"].as_array().expect("skills").len();
    assert!((1..12).contains(&kept), "{kept} of 12 kept");
    assert_eq!(
        roots[0]["warnings"],
        json!([
            "capability discovery reply reached its 50331648-byte limit; the rest of this root is left out"
        ])
    );
    // The next root is answered, with what still fits.
    assert_eq!(roots[1]["error"], Value::Null);
    assert_eq!(roots[1]["id"], "good");
}
