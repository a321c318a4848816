//! The bundled `env` plugin: serves `environment/info` (PROTOCOL §7.4) from the host's
//! environment capability. It needs no grants.

#![allow(
    unsafe_code,
    reason = "wit-bindgen's generated import and export glue is unsafe code"
)]

wit_bindgen::generate!({ world: "plugin", path: "../../wit" });

use exports::wexec::plugin::handler::{Guest, PluginInfo};
use serde_json::{Map, Value, json};
use wexec::plugin::environment;
use wexec::plugin::types::RpcError;

struct Env;

impl Guest for Env {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "env".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            contract: "0.1.0".into(),
            methods: vec!["environment/info".into()],
            capabilities: Vec::new(),
            env_vars: Vec::new(),
        }
    }

    fn handle(method: String, params: String) -> Result<String, RpcError> {
        if method != "environment/info" {
            return Err(RpcError {
                code: -32601,
                message: format!("exec-server stub does not implement `{method}` yet"),
                data: None,
            });
        }
        // Parameterless: absent, null or any object (unknown members are ignored).
        match serde_json::from_str::<Value>(&params) {
            Ok(Value::Null | Value::Object(_)) => Ok(info().to_string()),
            _ => Err(RpcError {
                code: -32602,
                message: "this method takes no params".into(),
                data: None,
            }),
        }
    }
}

/// The `environmentInfo` object: host facts, the capabilities wexec supports, and the loaded
/// plugins.
fn info() -> Value {
    let facts = environment::host_info();
    let plugins: Vec<Value> = environment::plugins()
        .into_iter()
        .map(|plugin| json!({"name": plugin.name, "version": plugin.version, "methods": plugin.methods}))
        .collect();
    let mut info = Map::new();
    info.insert(
        "shell".into(),
        json!({"name": facts.shell_name, "path": facts.shell_path}),
    );
    info.insert("executorVersion".into(), json!(facts.executor_version));
    info.insert("cwd".into(), json!(facts.cwd));
    if let Some(home) = facts.user_home_dir {
        info.insert("userHomeDir".into(), json!(home));
    }
    info.insert("platformOs".into(), json!(facts.platform_os));
    if let Some(directories) = facts.temporary_directories {
        info.insert("temporaryDirectories".into(), json!(directories));
    }
    info.insert("tempDir".into(), json!(facts.temp_dir));
    info.insert(
        "capabilities".into(),
        json!({
            "sandboxedFileStreaming": true,
            "fileWriteStreaming": true,
            "networkProxyLaunch": false,
            "capabilityDiscoverSandbox": false,
            "environmentConfigRead": false,
            "httpHeaderEnvVars": false,
            "shellSnapshotV2": false,
            "windowsMxc": false,
        }),
    );
    info.insert(
        "wexec".into(),
        json!({"version": facts.executor_version, "plugins": plugins}),
    );
    Value::Object(info)
}

export!(Env);
