//! The `log` interface: plugin diagnostics into wexec's log, tagged with the plugin's name.

use super::bindings::wexec::plugin::log::{Host, Level};
use super::state::HostState;

/// Longest message logged; the rest is cut so a plugin cannot flood the log with one call.
const MAX_MESSAGE_CHARS: usize = 4_096;

impl Host for HostState {
    async fn log(&mut self, level: Level, message: String) {
        let plugin = self.plugin.name.as_str();
        let message: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
        match level {
            Level::Trace => tracing::trace!(plugin, "{message}"),
            Level::Debug => tracing::debug!(plugin, "{message}"),
            Level::Info => tracing::info!(plugin, "{message}"),
            Level::Warn => tracing::warn!(plugin, "{message}"),
            Level::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

impl super::bindings::wexec::plugin::types::Host for HostState {}
