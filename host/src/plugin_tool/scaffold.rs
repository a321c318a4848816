//! `wexec plugin new`: a crate on the wexec-guest SDK that builds on the first try.

use std::path::{Path, PathBuf};

/// Why a scaffold was not written.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name does not fit the plugin naming rule.
    #[error("plugin name `{0}` must match [a-z][a-z0-9-]{{0,31}} and not be one wexec reserves")]
    Name(String),
    /// The target exists.
    #[error("{0} already exists; choose another --dir")]
    Exists(PathBuf),
    /// The SDK directory was not found.
    #[error("the wexec-guest SDK was not found at {0}; pass --sdk <wexec checkout>/guest-sdk")]
    Sdk(PathBuf),
    /// Writing failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Where this wexec's own SDK is (when run from its checkout).
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../guest-sdk");

/// Writes `Cargo.toml`, `src/lib.rs`, `README.md` and `.gitignore` for plugin `name` into
/// `dir`, which must not exist.
pub fn scaffold(name: &str, dir: &Path, sdk: Option<&Path>) -> Result<(), ScaffoldError> {
    if !valid_name(name) {
        return Err(ScaffoldError::Name(name.to_owned()));
    }
    if dir.exists() {
        return Err(ScaffoldError::Exists(dir.to_owned()));
    }
    let sdk = sdk.map_or_else(|| PathBuf::from(BUILT_FROM_SDK), Path::to_path_buf);
    let sdk = std::fs::canonicalize(&sdk)
        .ok()
        .filter(|sdk| sdk.join("Cargo.toml").is_file())
        .ok_or(ScaffoldError::Sdk(sdk))?;
    // Relative, so the crate keeps building when the checkout and the crate move together
    // (or the crate lives inside the checkout).
    let created = std::fs::create_dir_all(dir).and_then(|()| std::fs::canonicalize(dir));
    let crate_dir = created.map_err(|source| ScaffoldError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let sdk = relative(&crate_dir, &sdk);
    let fill = |template: &str| {
        template
            .replace("{{name}}", name)
            .replace("{{crate}}", &name.replace('-', "_"))
            .replace("{{sdk}}", &sdk.display().to_string().replace('\\', "\\\\"))
    };
    let files = [
        ("Cargo.toml", fill(CARGO_TOML)),
        ("src/lib.rs", fill(LIB_RS)),
        ("README.md", fill(README)),
        (".gitignore", "/target\n".to_owned()),
    ];
    for (file, text) in files {
        let path = dir.join(file);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, text));
        written.map_err(|source| ScaffoldError::Write { path, source })?;
    }
    Ok(())
}

/// `to` as a path relative to the directory `from` (both absolute and canonical).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let up = from.components().skip(common).map(|_| Path::new(".."));
    let down = to
        .components()
        .skip(common)
        .map(|part| Path::new(part.as_os_str()));
    let path: PathBuf = up.chain(down).collect();
    if path.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        path
    }
}

/// The host's rule for plugin names, reserved names included.
fn valid_name(name: &str) -> bool {
    crate::runtime::valid_plugin_name(name) && !crate::runtime::RESERVED_NAMES.contains(&name)
}

const CARGO_TOML: &str = r#"[package]
name = "{{name}}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
wexec-guest = { path = "{{sdk}}" }
serde = { version = "1", features = ["derive"] }
serde_json = "1"

# A crate of its own, even when created inside another workspace.
[workspace]

[profile.release]
opt-level = "s"
strip = true
"#;

const LIB_RS: &str = r#"//! The `{{name}}` wexec plugin.

use serde::{Deserialize, Serialize};
use wexec_guest::{Call, Info, Plugin, Response, RpcError, Tool};

struct Main;

#[derive(Deserialize)]
struct EchoParams {
    text: String,
}

#[derive(Serialize)]
struct EchoResult {
    text: String,
    length: usize,
}

impl Plugin for Main {
    fn info() -> Info {
        // Ask for capabilities here, e.g. `.capability(wexec_guest::Capability::Filesystem)`;
        // the operator grants them in wexec.toml.
        Info::new("{{name}}", env!("CARGO_PKG_VERSION"))
            .method("{{name}}/echo")
            // `wexec mcp` lists this tool and calls `{{name}}/echo` with its arguments.
            .tool(
                Tool::new("{{name}}_echo", "{{name}}/echo")
                    .title("Echo")
                    .description("Returns the text it was given, with its length in bytes.")
                    .input_schema(serde_json::json!({
                        "type": "object",
                        "properties": {"text": {"type": "string"}},
                        "required": ["text"],
                    }))
                    .output_schema(serde_json::json!({
                        "type": "object",
                        "properties": {"text": {"type": "string"}, "length": {"type": "integer"}},
                        "required": ["text", "length"],
                    }))
                    .read_only(true)
                    .idempotent(true)
                    .open_world(false),
            )
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        match call.method() {
            "{{name}}/echo" => {
                let EchoParams { text } = call.params()?;
                wexec_guest::log::debug(&format!("echo of {} bytes", text.len()));
                Response::json(&EchoResult {
                    length: text.len(),
                    text,
                })
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }
}

wexec_guest::export_plugin!(Main);
"#;

const README: &str = r#"# {{name}}

A wexec plugin serving `{{name}}/echo`: `{"text": "hi"}` → `{"text": "hi", "length": 2}`.

Build (needs `rustup target add wasm32-wasip2`):

```sh
cargo build --release --target wasm32-wasip2
wexec plugin inspect target/wasm32-wasip2/release/{{crate}}.wasm
```

Or with cargo-component: `cargo component build --release` (the component is
`target/wasm32-wasip1/release/{{crate}}.wasm`).

Run it and call it:

```sh
printf '%s\n' \
  '{"id":1,"method":"initialize","params":{"clientName":"me"}}' \
  '{"method":"initialized","params":{}}' \
  '{"id":2,"method":"{{name}}/echo","params":{"text":"hi"}}' |
  wexec --plugin target/wasm32-wasip2/release/{{crate}}.wasm
```

Its MCP tool, `{{name}}_echo`, is listed and callable by any MCP client of
`wexec mcp --plugin target/wasm32-wasip2/release/{{crate}}.wasm`.

To grant capabilities, list the plugin in a `wexec.toml` and run `wexec --config wexec.toml`
(see wexec's docs/plugins.md).
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_host_rule() {
        assert!(valid_name("hello") && valid_name("a-1"));
        for bad in ["", "Hello", "1a", "a_b", "fs", &"a".repeat(33)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_sdk_path_is_relative_to_the_crate() {
        let cases = [
            ("/w/plugins/mine", "/w/guest-sdk", "../../guest-sdk"),
            ("/home/a/mine", "/w/guest-sdk", "../../../w/guest-sdk"),
            ("/w", "/w/guest-sdk", "guest-sdk"),
            ("/w/guest-sdk", "/w/guest-sdk", "."),
        ];
        for (from, to, expected) in cases {
            assert_eq!(
                relative(Path::new(from), Path::new(to)),
                Path::new(expected)
            );
        }
    }
}
