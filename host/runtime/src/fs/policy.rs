//! A request's sandbox applied to the filesystem capability for one call (docs/protocol.md §7.3,
//! "`fs/*` methods"): on top of the plugin's roots, the call may only read what the request's
//! `sandbox` lets it read and write what it lets it write, whatever the plugin does. Checked
//! on resolved, symlink-free paths, with the reference server's errors.

use std::path::Path;

use super::resolve::Resolved;
use super::{Error, ErrorKind};
use crate::rules::{Level, Rules};

/// What one call may do, as entries over absolute canonical paths.
#[derive(Debug, Clone)]
pub struct FsPolicy {
    rules: Rules,
}

impl FsPolicy {
    /// The policy of `rules`.
    pub fn new(rules: Rules) -> Self {
        Self { rules }
    }

    /// Reading `resolved` (and, for a tree, everything below it).
    pub fn read(&self, resolved: &Resolved<'_>, tree: bool) -> Result<(), Error> {
        let path = resolved.absolute();
        match self.rules.level(&path) {
            Level::Hidden => Err(denied()),
            Level::Absent => Err(not_found()),
            Level::Read | Level::Write if tree && self.below(&path, Level::Read) => Err(denied()),
            Level::Read | Level::Write => Ok(()),
        }
    }

    /// Changing `resolved` (and, for a tree, everything below it).
    pub fn write(&self, resolved: &Resolved<'_>, tree: bool) -> Result<(), Error> {
        let path = resolved.absolute();
        match self.rules.level(&path) {
            Level::Hidden => Err(denied()),
            Level::Absent | Level::Read => Err(read_only()),
            Level::Write if tree && self.below(&path, Level::Write) => Err(read_only()),
            Level::Write => Ok(()),
        }
    }

    /// Whether an entry strictly below `path` allows less than `level`.
    fn below(&self, path: &Path, level: Level) -> bool {
        self.rules.paths().any(|entry| {
            entry != path && entry.starts_with(path) && self.rules.level(entry) < level
        })
    }
}

fn denied() -> Error {
    Error {
        kind: ErrorKind::PermissionDenied,
        message: "Permission denied (os error 13)".to_owned(),
    }
}

fn not_found() -> Error {
    Error {
        kind: ErrorKind::NotFound,
        message: "No such file or directory (os error 2)".to_owned(),
    }
}

/// The reference server's answer to a denied write (-32603 through the fs plugin).
fn read_only() -> Error {
    Error {
        kind: ErrorKind::Other,
        message: "Read-only file system (os error 30)".to_owned(),
    }
}
