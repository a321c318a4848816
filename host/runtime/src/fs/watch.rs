//! `fs/watchMissing` watches (docs/protocol.md §9.6): which paths a watch looks at inside the
//! roots, the one watch a plugin has per connection, and the notification it sends once.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use wexec_protocol::limits::{
    MAX_PATH_BYTES, MAX_PATH_COMPONENTS, MAX_WATCH_ANCESTORS, MAX_WATCH_PATHS,
};

use super::inotify::{Inotify, Interest, Trigger};
use super::resolve::Probe;
use super::{Roots, normalize};
use crate::port::CallPort;

/// A started watch: its inotify interests, given back when it is dropped.
#[derive(Debug)]
pub struct Watching {
    inotify: Option<Arc<Inotify>>,
    wds: Vec<i32>,
    trigger: Arc<Trigger>,
    fired: tokio::sync::oneshot::Receiver<()>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        if let Some(inotify) = &self.inotify {
            inotify.forget(&self.wds, &self.trigger);
        }
    }
}

impl Watching {
    fn new() -> Self {
        let (trigger, fired) = Trigger::new();
        Self {
            inotify: None,
            wds: Vec::new(),
            trigger,
            fired,
        }
    }

    fn add(&mut self, at: &std::os::fd::OwnedFd, interest: Interest) -> Result<(), String> {
        let inotify = match &self.inotify {
            Some(inotify) => Arc::clone(inotify),
            None => Inotify::shared()?,
        };
        let wd = inotify.add(at, interest, &self.trigger)?;
        self.inotify = Some(inotify);
        self.wds.push(wd);
        Ok(())
    }

    /// Resolves once the watch fires (never, if nothing it watches is inside the roots).
    async fn fired(&mut self) {
        if (&mut self.fired).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Whether `path` is `/proc`, `/sys` or beneath them: pseudo-filesystems inotify cannot watch
/// meaningfully.
fn pseudo(path: &Path) -> bool {
    path.starts_with("/proc") || path.starts_with("/sys")
}

/// Starts watching `missing` and `present` (native absolute paths) inside `roots`: `None` when
/// the request is one docs/protocol.md §9.6 answers `false`. Error: the OS refused a watch.
///
/// The cost is linear in the request's size: the resolver's path limits are checked before
/// anything else is done with a path, and ancestors are counted without building any.
pub fn watch(
    roots: &Roots,
    missing: &[String],
    present: Option<&str>,
) -> Result<Option<Watching>, String> {
    if missing.is_empty() || missing.len() > MAX_WATCH_PATHS {
        return Ok(None);
    }
    if missing
        .iter()
        .map(String::as_str)
        .chain(present)
        .any(over_limits)
    {
        return Ok(None);
    }
    let Some(normal) = missing
        .iter()
        .map(|path| normalize(Path::new(path)))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let present = match present.map(|path| normalize(Path::new(path))) {
        Some(None) => return Ok(None),
        Some(Some(path)) => Some(path),
        None => None,
    };
    if normal.iter().chain(&present).any(|path| pseudo(path)) {
        return Ok(None);
    }
    if !ancestors_within(&normal, MAX_WATCH_ANCESTORS) {
        return Ok(None);
    }
    let mut watching = Watching::new();
    if let Some(present) = &present {
        let Probe::Exists {
            at,
            parent,
            symlink: false,
        } = roots.probe(&present.to_string_lossy())
        else {
            return Ok(None);
        };
        watching.add(&at, Interest::Changed)?;
        if let Some((parent, name)) = parent {
            watching.add(&parent, Interest::Renamed(name))?;
        }
    }
    let mut targets = Vec::new();
    for path in &normal {
        match roots.probe(&path.to_string_lossy()) {
            // Looked at by nobody: missing, as far as the plugin may know.
            Probe::Outside => {}
            Probe::Missing { ancestor, name } => targets.push((ancestor, name)),
            Probe::Exists { .. } | Probe::Unwatchable => return Ok(None),
        }
    }
    for (ancestor, name) in targets {
        watching.add(&ancestor, Interest::Created(name))?;
    }
    // Created between the look and the watch: the event was missed, so fire now.
    let created = normal.iter().any(|path| {
        matches!(
            roots.probe(&path.to_string_lossy()),
            Probe::Exists { .. } | Probe::Unwatchable
        )
    });
    let present_gone = present.as_ref().is_some_and(|path| {
        !matches!(
            roots.probe(&path.to_string_lossy()),
            Probe::Exists { symlink: false, .. }
        )
    });
    if created || present_gone {
        watching.trigger.fire();
    }
    Ok(Some(watching))
}

/// Whether `path` is beyond what the resolver ever walks: more than [`MAX_PATH_BYTES`] bytes or
/// [`MAX_PATH_COMPONENTS`] components.
fn over_limits(path: &str) -> bool {
    path.len() > MAX_PATH_BYTES
        || path.split('/').filter(|part| !part.is_empty()).count() > MAX_PATH_COMPONENTS
}

/// Whether the distinct ancestor directories of `paths` (normal, absolute), `/` included, are
/// at most `max`. They are the inner nodes of the paths' tree of components: each path adds
/// its own, each name hashed once, and the count stops as soon as it exceeds `max`.
fn ancestors_within(paths: &[PathBuf], max: usize) -> bool {
    // Node 0 is `/`; a node is its parent's number and a name.
    let mut nodes: HashMap<(usize, &OsStr), usize> = HashMap::new();
    let mut root = false;
    for path in paths {
        let names: Vec<&OsStr> = path
            .components()
            .filter_map(|part| match part {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        let Some((_, parents)) = names.split_last() else {
            continue;
        };
        root = true;
        let mut node = 0;
        for name in parents {
            let next = nodes.len() + 1;
            node = *nodes.entry((node, name)).or_insert(next);
            if nodes.len() + 1 > max {
                return false;
            }
        }
    }
    usize::from(root) + nodes.len() <= max
}

/// One plugin's watch on one connection: the highest id it used there and the watch running.
/// Dropped with the connection, which ends the watch.
#[derive(Debug, Default)]
pub struct WatchSlot {
    state: Mutex<SlotState>,
}

#[derive(Debug, Default)]
struct SlotState {
    highest: Option<u64>,
    current: Option<tokio::task::AbortHandle>,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(current) = state.current.take() {
            current.abort();
        }
    }
}

impl WatchSlot {
    /// Starts watch `id` with what `start` sets up, unless `id` is not above every id used on
    /// this slot. The current watch ends either way. Once fired, `notification` is sent with
    /// `{"watchId": <id>}` through `port`, after the call's response.
    pub fn start(
        &self,
        id: u64,
        start: impl FnOnce() -> Result<Option<Watching>, String>,
        port: Arc<dyn CallPort>,
        notification: String,
    ) -> Result<bool, String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.highest.is_some_and(|highest| id <= highest) {
            return Ok(false);
        }
        state.highest = Some(id);
        if let Some(current) = state.current.take() {
            current.abort();
        }
        let Some(mut watching) = start()? else {
            return Ok(false);
        };
        let task = tokio::spawn(async move {
            watching.fired().await;
            // The watch ends here: its inotify interests go before the notification does.
            drop(watching);
            let params = format!(r#"{{"watchId":{id}}}"#);
            let Ok(params) = serde_json::value::RawValue::from_string(params) else {
                return;
            };
            // Fails only when the client is gone, with nobody left to tell.
            let _ = port.notify_after_reply(&notification, &params).await;
        });
        state.current = Some(task.abort_handle());
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// The ancestors as a set, the obvious (quadratic) way.
    fn counted(paths: &[PathBuf]) -> usize {
        paths
            .iter()
            .flat_map(|path| path.ancestors().skip(1))
            .collect::<HashSet<_>>()
            .len()
    }

    #[test]
    fn ancestors_are_counted_as_the_set_of_them_would() {
        let sets: [&[&str]; 5] = [
            &["/"],
            &["/a"],
            &["/a/b/c", "/a/b/d", "/a/e"],
            &["/x/y", "/z/y/w", "/x/y/v"],
            &["/a/b", "/b/a", "/a/b/c/d/e/f/g"],
        ];
        for set in sets {
            let paths: Vec<PathBuf> = set.iter().map(PathBuf::from).collect();
            let count = counted(&paths);
            assert!(ancestors_within(&paths, count), "{set:?}");
            assert_eq!(
                ancestors_within(&paths, count.saturating_sub(1)),
                count == 0,
                "{set:?}"
            );
        }
    }

    #[test]
    fn a_path_past_the_resolvers_limits_is_refused_before_any_work() {
        assert!(over_limits(&format!("/{}", "a".repeat(MAX_PATH_BYTES))));
        assert!(over_limits(&"/a".repeat(MAX_PATH_COMPONENTS + 1)));
        assert!(!over_limits(&"/a".repeat(MAX_PATH_COMPONENTS)));
        // 20,000 components: refused at once.
        let deep = PathBuf::from("/".to_owned() + &"a/".repeat(20_000));
        assert!(!ancestors_within(&[deep], MAX_WATCH_ANCESTORS));
    }
}
