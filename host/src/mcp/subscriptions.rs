//! `resources/subscribe`: a file's changes as `notifications/resources/updated`, on the host's
//! watch capability (`fs/watchMissing`'s inotify, through the plugin serving `fs/*` and its
//! grants), bounded like it. A watch is one-shot and one per connection, so each subscription
//! has a line of its own and re-arms its watch after every change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{Peer, RoleServer};
use serde_json::{Value, json};

use super::door::{Door, Line};
use crate::protocol::FS_MISSING_CHANGED;

/// Subscriptions one session may hold (as many paths as one watch may name).
pub const MAX_SUBSCRIPTIONS: usize = crate::protocol::limits::MAX_WATCH_PATHS;

/// After a change is reported, the watch is re-armed this much later: a file written in many
/// pieces is reported a few times, not once per write.
const QUIET: Duration = Duration::from_millis(100);

/// A session's subscriptions, by URI.
#[derive(Debug, Default)]
pub struct Subscriptions(Mutex<HashMap<String, tokio::task::JoinHandle<()>>>);

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for (_, watch) in self
            .0
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
        {
            watch.abort();
        }
    }
}

/// Arms a one-shot watch of `path` on `line`: whether the plugin watches it.
async fn arm(door: &Door, line: &Line, id: u64, path: &str) -> Result<bool, McpError> {
    // A watch needs a missing path too; this sibling only fires if someone creates it.
    let params = json!({
        "watchId": id,
        "missing": [format!("{path}.wexec-subscription")],
        "present": path,
    });
    let armed = door
        .call_on(line, "fs/watchMissing", params)
        .await
        .map_err(|error| McpError::invalid_params(format!("{path}: {}", error.message), None))?;
    Ok(armed.get("watching") == Some(&Value::Bool(true)))
}

impl Subscriptions {
    /// Subscribes `peer` to changes of the file `uri`.
    pub async fn subscribe(
        &self,
        door: Arc<Door>,
        uri: String,
        peer: Peer<RoleServer>,
    ) -> Result<(), McpError> {
        if !uri.starts_with("file:///") {
            return Err(McpError::invalid_params(
                format!("`{uri}` is not a file:// URI of an absolute path"),
                None,
            ));
        }
        let path = crate::path_uri::parse_utf8(&uri)
            .map_err(|err| McpError::invalid_params(format!("{uri}: {err}"), None))?;
        {
            let subscriptions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if subscriptions.contains_key(&uri) {
                return Ok(());
            }
            if subscriptions.len() >= MAX_SUBSCRIPTIONS {
                return Err(McpError::invalid_params(
                    format!("a session may hold {MAX_SUBSCRIPTIONS} subscriptions"),
                    None,
                ));
            }
        }
        let line = door.line();
        if !arm(&door, &line, 1, &path).await? {
            return Err(McpError::invalid_params(
                format!(
                    "cannot watch {uri}: it does not exist, is not inside the allowed directories, or cannot be watched"
                ),
                None,
            ));
        }
        let watched = uri.clone();
        let watch = tokio::spawn(async move {
            let mut id = 1;
            loop {
                let Some(notification) = line.next_notification().await else {
                    return;
                };
                if notification.get("method").and_then(Value::as_str) != Some(FS_MISSING_CHANGED) {
                    continue;
                }
                let updated = ResourceUpdatedNotificationParam::new(watched.clone());
                if peer.notify_resource_updated(updated).await.is_err() {
                    return;
                }
                tokio::time::sleep(QUIET).await;
                id += 1;
                // Gone (removed, renamed away) or no longer watchable: the subscription ends.
                if !matches!(arm(&door, &line, id, &path).await, Ok(true)) {
                    return;
                }
            }
        });
        let mut subscriptions = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(earlier) = subscriptions.insert(uri, watch) {
            earlier.abort();
        }
        Ok(())
    }

    /// Ends the subscription to `uri`, if any.
    pub fn unsubscribe(&self, uri: &str) {
        let removed = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri);
        if let Some(watch) = removed {
            watch.abort();
        }
    }
}
