//! The process's one inotify instance, shared by every watch of every connection (the kernel
//! allows 128 instances per user by default, so one per watch would run out), read by one
//! thread that fires the subscriptions an event concerns.
//!
//! The kernel gives one watch descriptor per inode, whichever path or subscriber added it; so
//! the registry keeps, per descriptor, every subscriber's interest, adds masks up
//! (`IN_MASK_ADD`) and removes the kernel's watch only when its last interest goes.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

/// What a subscriber wants to hear about one watched inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interest {
    /// A directory: the entry `name` created or moved in; the directory itself removed or
    /// moved (what the path below it means changed).
    Created(OsString),
    /// The inode itself modified, its metadata changed, removed or moved; not entries inside it.
    Changed,
    /// A directory: the entry `name` created, removed or moved in or out.
    Renamed(OsString),
}

impl Interest {
    fn mask(&self) -> WatchFlags {
        match self {
            Self::Created(_) => {
                WatchFlags::CREATE
                    | WatchFlags::MOVED_TO
                    | WatchFlags::DELETE_SELF
                    | WatchFlags::MOVE_SELF
                    | WatchFlags::ONLYDIR
            }
            Self::Changed => {
                WatchFlags::MODIFY
                    | WatchFlags::ATTRIB
                    | WatchFlags::DELETE_SELF
                    | WatchFlags::MOVE_SELF
            }
            Self::Renamed(_) => {
                WatchFlags::CREATE
                    | WatchFlags::MOVED_TO
                    | WatchFlags::MOVED_FROM
                    | WatchFlags::DELETE
                    | WatchFlags::ONLYDIR
            }
        }
    }

    /// Whether an event (`name`: the entry it is about, `None` for the inode itself) concerns
    /// this interest. A watch the kernel dropped (`IGNORED`: the inode is gone) concerns all.
    fn matches(&self, events: ReadFlags, name: Option<&OsStr>) -> bool {
        if events.contains(ReadFlags::IGNORED) {
            return true;
        }
        let gone = ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF;
        match (self, name) {
            (Self::Created(wanted), Some(name)) => {
                wanted == name && events.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO)
            }
            (Self::Created(_), None) => events.intersects(gone),
            (Self::Changed, None) => {
                events.intersects(ReadFlags::MODIFY | ReadFlags::ATTRIB | gone)
            }
            (Self::Changed, Some(_)) => false,
            (Self::Renamed(wanted), Some(name)) => {
                wanted == name
                    && events.intersects(
                        ReadFlags::CREATE
                            | ReadFlags::MOVED_TO
                            | ReadFlags::MOVED_FROM
                            | ReadFlags::DELETE,
                    )
            }
            (Self::Renamed(_), None) => false,
        }
    }
}

/// Fires a subscription once.
#[derive(Debug, Default)]
pub struct Trigger(Mutex<Option<tokio::sync::oneshot::Sender<()>>>);

impl Trigger {
    /// A trigger and what resolves when it fires.
    pub fn new() -> (Arc<Self>, tokio::sync::oneshot::Receiver<()>) {
        let (send, receive) = tokio::sync::oneshot::channel();
        (Arc::new(Self(Mutex::new(Some(send)))), receive)
    }

    /// Fires; later calls do nothing.
    pub fn fire(&self) {
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(sender) = sender {
            let _ = sender.send(());
        }
    }
}

#[derive(Debug, Default)]
struct Registry {
    by_watch: HashMap<i32, Vec<(Interest, Arc<Trigger>)>>,
}

/// The shared instance.
#[derive(Debug)]
pub struct Inotify {
    fd: OwnedFd,
    registry: Mutex<Registry>,
}

static SHARED: OnceLock<Result<Arc<Inotify>, String>> = OnceLock::new();

impl Inotify {
    /// The process's instance, made (with its reader thread) on first use.
    pub fn shared() -> Result<Arc<Self>, String> {
        SHARED
            .get_or_init(|| {
                let fd = inotify::init(CreateFlags::CLOEXEC)
                    .map_err(|err| format!("cannot start watching: inotify: {err}"))?;
                let shared = Arc::new(Self {
                    fd,
                    registry: Mutex::default(),
                });
                let reader = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name("wexec-inotify".into())
                    .spawn(move || reader.read_forever())
                    .map_err(|err| format!("cannot start watching: {err}"))?;
                Ok(shared)
            })
            .clone()
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches the inode `at` refers to for `interest`, firing `trigger`. Returns the watch
    /// descriptor, to give back with [`Inotify::forget`].
    pub fn add(
        &self,
        at: &OwnedFd,
        interest: Interest,
        trigger: &Arc<Trigger>,
    ) -> Result<i32, String> {
        // Through the descriptor, not a path: the inode looked up inside the root is the one
        // watched, whatever was renamed meanwhile.
        let path = format!("/proc/self/fd/{}", at.as_fd().as_raw_fd());
        let mut registry = self.registry();
        let wd = inotify::add_watch(&self.fd, path, interest.mask() | WatchFlags::MASK_ADD)
            .map_err(|err| match err {
                rustix::io::Errno::NOSPC => format!(
                    "cannot watch: the inotify watch limit is reached ({err}; see /proc/sys/fs/inotify/max_user_watches)"
                ),
                err => format!("cannot watch: {err}"),
            })?;
        (registry.by_watch.entry(wd).or_default()).push((interest, Arc::clone(trigger)));
        Ok(wd)
    }

    /// Drops `trigger`'s interests in the watches `wds`; a watch nobody wants any more is
    /// removed from the kernel.
    pub fn forget(&self, wds: &[i32], trigger: &Arc<Trigger>) {
        let mut registry = self.registry();
        for wd in wds {
            let Some(interests) = registry.by_watch.get_mut(wd) else {
                continue;
            };
            interests.retain(|(_, other)| !Arc::ptr_eq(other, trigger));
            if interests.is_empty() {
                registry.by_watch.remove(wd);
                // Already gone if the kernel dropped it (its inode was removed).
                let _ = inotify::remove_watch(&self.fd, *wd);
            }
        }
    }

    fn read_forever(&self) {
        let mut buffer = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(&self.fd, &mut buffer);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => {
                    tracing::error!("inotify stopped: {err}; watches no longer fire");
                    return;
                }
            };
            let (wd, events) = (event.wd(), event.events());
            let name = event
                .file_name()
                .map(|name| OsStr::from_bytes(name.to_bytes()).to_os_string());
            let mut registry = self.registry();
            if events.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Events were lost: every subscriber may have missed its own.
                for (_, trigger) in registry.by_watch.values().flatten() {
                    trigger.fire();
                }
                continue;
            }
            if let Some(interests) = registry.by_watch.get(&wd) {
                for (interest, trigger) in interests {
                    if interest.matches(events, name.as_deref()) {
                        trigger.fire();
                    }
                }
            }
            if events.contains(ReadFlags::IGNORED) {
                registry.by_watch.remove(&wd);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interests_match_only_their_events() {
        let created = Interest::Created("a".into());
        assert!(created.matches(ReadFlags::CREATE, Some(OsStr::new("a"))));
        assert!(created.matches(ReadFlags::MOVED_TO, Some(OsStr::new("a"))));
        assert!(!created.matches(ReadFlags::CREATE, Some(OsStr::new("b"))));
        assert!(!created.matches(ReadFlags::DELETE, Some(OsStr::new("a"))));
        assert!(created.matches(ReadFlags::DELETE_SELF, None));
        assert!(!created.matches(ReadFlags::ATTRIB, None));
        assert!(Interest::Changed.matches(ReadFlags::ATTRIB, None));
        assert!(Interest::Changed.matches(ReadFlags::MODIFY, None));
        assert!(!Interest::Changed.matches(ReadFlags::CREATE, Some(OsStr::new("x"))));
        assert!(!Interest::Changed.matches(ReadFlags::MODIFY, Some(OsStr::new("x"))));
        let renamed = Interest::Renamed("p".into());
        assert!(renamed.matches(ReadFlags::MOVED_TO, Some(OsStr::new("p"))));
        assert!(renamed.matches(ReadFlags::DELETE, Some(OsStr::new("p"))));
        assert!(!renamed.matches(ReadFlags::DELETE, Some(OsStr::new("q"))));
        assert!(!renamed.matches(ReadFlags::ATTRIB, None));
        for interest in [created, Interest::Changed, renamed] {
            assert!(interest.matches(ReadFlags::IGNORED, None));
        }
    }
}
