//! Hot reload with `--config`: when the config or a plugin file changes (polled every 500 ms;
//! deploy by writing a new file and renaming it over the old one), or on SIGHUP, the plugin
//! list is rebuilt from the files and swapped in atomically by [`Runtime::reload`]. A broken
//! new version is refused with a logged error and the running one keeps serving; sessions and
//! processes are untouched.
//!
//! [`Runtime::reload`]: crate::runtime::Runtime::reload

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::signal::unix::{SignalKind, signal};

use super::ServerState;
use crate::settings::ReloadSource;

/// How often the watched files are checked.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// Starts watching in the background for the life of the process.
pub fn spawn_watcher(server: Arc<ServerState>, source: ReloadSource) {
    // Installed before anyone is served: a SIGHUP sent once the handshake is answered must
    // reload, never meet the default action (termination).
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(err) => {
            tracing::warn!(
                "cannot install a SIGHUP handler; reloads follow file changes only: {err}"
            );
            None
        }
    };
    tokio::spawn(async move {
        let mut seen = fingerprint(&source.watched_files());
        loop {
            let reason = tokio::select! {
                Some(()) = async { hangup.as_mut()?.recv().await } => "SIGHUP",
                () = tokio::time::sleep(POLL_EVERY) => {
                    let now = fingerprint(&source.watched_files());
                    if now == seen {
                        continue;
                    }
                    seen = now;
                    "a watched file changed"
                }
            };
            reload(&server, &source, reason).await;
        }
    });
}

async fn reload(server: &ServerState, source: &ReloadSource, reason: &str) {
    let specs = match source.specs() {
        Ok(specs) => specs,
        Err(err) => {
            tracing::error!(
                "plugin reload ({reason}) refused, the running plugins keep serving: {err}"
            );
            return;
        }
    };
    match server.runtime.reload(specs).await {
        Ok(changed) if changed.is_empty() => {
            tracing::debug!("plugin reload ({reason}): nothing changed");
        }
        Ok(changed) => {
            for plugin in &changed {
                tracing::info!(plugin = %plugin, reason, "plugin reloaded");
            }
            server
                .plugins_changed
                .send_modify(|generation| *generation += 1);
            if let Err(err) = server.refresh_environment_info().await {
                tracing::error!("after the reload: {err}");
            }
        }
        Err(err) => {
            tracing::error!(
                "plugin reload ({reason}) refused, the running plugins keep serving: {err}"
            );
        }
    }
}

/// What identifies a file's version: modification time, size and inode (a rename over it
/// changes the inode even within one timestamp tick).
type Fingerprint = Vec<(PathBuf, Option<(SystemTime, u64, u64)>)>;

fn fingerprint(files: &[PathBuf]) -> Fingerprint {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|file| {
            let stamp = std::fs::metadata(file)
                .ok()
                .and_then(|meta| Some((meta.modified().ok()?, meta.len(), meta.ino())));
            (file.clone(), stamp)
        })
        .collect()
}
