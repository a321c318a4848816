//! The `environment` interface: host facts, the loaded plugins, and granted variables.

use std::sync::PoisonError;

use crate::bindings::wexec::plugin::environment::{Host, HostFacts, PluginSummary, SandboxFacts};
use crate::bindings::wexec::plugin::types::Capability;
use crate::state::HostState;

impl Host for HostState {
    async fn host_info(&mut self) -> HostFacts {
        let info = self.shared.facts.reported();
        HostFacts {
            shell_name: info.shell.name,
            shell_path: info.shell.path,
            executor_version: info.executor_version,
            cwd: info.cwd,
            user_home_dir: info.user_home_dir,
            platform_os: info.platform_os,
            temporary_directories: info.temporary_directories,
            temp_dir: info.temp_dir,
        }
    }

    async fn sandbox(&mut self) -> Option<SandboxFacts> {
        let facts = crate::facts::sandbox().await?;
        Some(SandboxFacts {
            tier: facts.tier,
            namespaces_missing: facts.namespaces_missing,
            accepted: facts.accepted,
        })
    }

    async fn provider_id(&mut self) -> String {
        crate::facts::provider_id()
    }

    async fn plugins(&mut self) -> Vec<PluginSummary> {
        let plugins = self
            .shared
            .plugins
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        plugins
            .iter()
            .map(|plugin| PluginSummary {
                name: plugin.name.clone(),
                version: plugin.version.clone(),
                methods: plugin.methods.clone(),
            })
            .collect()
    }

    async fn hostname(&mut self) -> String {
        rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned()
    }

    async fn get_var(&mut self, name: String) -> Result<Option<String>, String> {
        if !self.plugin.declared(Capability::EnvironmentVars)
            || !self.plugin.grants.allows_var(&name)
        {
            return Err(format!(
                "plugin {}: reading environment variable {name} denied: not granted",
                self.plugin.name
            ));
        }
        Ok(std::env::var(&name).ok())
    }
}
