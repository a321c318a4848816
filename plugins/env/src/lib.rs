//! The bundled `env` plugin: serves `environment/info` (docs/protocol.md §7.4) from the host's
//! environment capability. It needs no grants.

use serde_json::{Map, Value, json};
use wexec_guest::env as environment;
use wexec_guest::{Call, Info, Plugin, Response, RpcError};

struct Env;

impl Plugin for Env {
    fn info() -> Info {
        Info::new("env", env!("CARGO_PKG_VERSION")).method("environment/info")
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        if call.method() != "environment/info" {
            return Err(RpcError::method_not_found(call.method()));
        }
        // Parameterless: absent, null or any object (unknown members are ignored).
        call.no_params()?;
        Response::json(&info())
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
            "capabilityDiscoverySandbox": false,
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

wexec_guest::export_plugin!(Env);
