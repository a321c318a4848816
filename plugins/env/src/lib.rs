//! The bundled `env` plugin: serves `environment/info` (docs/protocol.md §7.4) from the host's
//! environment capability. It needs no grants.

use wexec_guest::env as environment;
use wexec_guest::protocol::{
    CAPABILITIES, ENVIRONMENT_INFO, EnvironmentInfo, PluginSummary, SandboxInfo, ShellInfo,
    WexecInfo,
};
use wexec_guest::{Call, Info, Plugin, Response, RpcError};

struct Env;

impl Plugin for Env {
    fn info() -> Info {
        Info::new("env", env!("CARGO_PKG_VERSION")).method(ENVIRONMENT_INFO)
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        if call.method() != ENVIRONMENT_INFO {
            return Err(RpcError::method_not_found(call.method()));
        }
        // Parameterless: absent, null or any object (unknown members are ignored).
        call.no_params()?;
        Response::json(&info())
    }
}

/// The `environmentInfo` object: host facts, the capabilities wexec supports, and the loaded
/// plugins.
fn info() -> EnvironmentInfo {
    let facts = environment::host_info();
    let plugins = environment::plugins()
        .into_iter()
        .map(|plugin| PluginSummary {
            name: plugin.name,
            version: plugin.version,
            methods: plugin.methods,
        })
        .collect();
    EnvironmentInfo {
        shell: ShellInfo {
            name: facts.shell_name,
            path: facts.shell_path,
        },
        executor_version: facts.executor_version.clone(),
        provider_id: environment::provider_id(),
        cwd: facts.cwd,
        user_home_dir: facts.user_home_dir,
        platform_os: facts.platform_os,
        // wexec has no helper commands of its own to put on a child's `PATH`.
        prepend_path_dirs: Vec::new(),
        temporary_directories: facts.temporary_directories.unwrap_or_default(),
        temp_dir: facts.temp_dir,
        capabilities: CAPABILITIES
            .iter()
            .map(|&(name, supported)| (name.to_owned(), supported))
            .collect(),
        wexec: Some(WexecInfo {
            version: facts.executor_version,
            plugins,
            sandbox: environment::sandbox().map(|sandbox| SandboxInfo {
                tier: sandbox.tier,
                namespaces_missing: sandbox.namespaces_missing,
                accepted: sandbox.accepted,
            }),
        }),
    }
}

wexec_guest::export_plugin!(Env);
