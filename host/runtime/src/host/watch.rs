//! The WIT `watch` interface: the filesystem grant check first (watching is reading the roots),
//! then the watch on the calling connection ([`crate::fs::watch`]), its set-up counted as host
//! I/O rather than guest time.

use std::sync::Arc;
use std::time::Instant;

use crate::bindings::wexec::plugin::watch::Host;
use crate::fs;
use crate::state::HostState;

impl Host for HostState {
    async fn watch_missing(
        &mut self,
        id: u64,
        missing: Vec<String>,
        present: Option<String>,
    ) -> Result<bool, String> {
        self.granted().map_err(|error| error.message)?;
        let Some(call) = self.call.as_ref() else {
            return Err("watches are only available during a call".into());
        };
        let Some(port) = call.port.clone() else {
            return Err("no client is attached to this call".into());
        };
        let slot = Arc::clone(&call.watch);
        let notification = format!("{}/missingChanged", self.plugin.name);
        let started = Instant::now();
        let roots = &self.plugin.roots;
        let started_watch = slot.start(
            id,
            || fs::watch(roots, &missing, present.as_deref()),
            port,
            notification,
        );
        self.clock.add_host_time(started.elapsed());
        started_watch
    }
}
