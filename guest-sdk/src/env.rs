//! The host's environment: facts about the machine, the loaded plugins, and the environment
//! variables the operator granted ([`crate::Info::env_var`]).

use crate::bindings::wexec::plugin::environment as wit;
pub use crate::bindings::wexec::plugin::environment::{HostFacts, PluginSummary, SandboxFacts};

/// Shell, version, working and temporary directories, platform. Always available.
pub fn host_info() -> HostFacts {
    wit::host_info()
}

/// `environmentInfo.providerId`: opaque, stable per wexec build. Always available.
pub fn provider_id() -> String {
    wit::provider_id()
}

/// How wexec confines processes; `None` when it runs none or cannot say. Always available.
pub fn sandbox() -> Option<SandboxFacts> {
    wit::sandbox()
}

/// The plugins wexec has loaded. Always available.
pub fn plugins() -> Vec<PluginSummary> {
    wit::plugins()
}

/// The host's name. Always available.
pub fn hostname() -> String {
    wit::hostname()
}

/// An environment variable of wexec's process: `Ok(None)` if unset; `Err` if the variable was
/// not granted to this plugin.
pub fn var(name: &str) -> Result<Option<String>, String> {
    wit::get_var(name)
}
