//! A request's sandbox applied to the filesystem capability for one call (docs/protocol.md §7.3,
//! "`fs/*` methods"): on top of the plugin's roots, the call may only read what the request's
//! `sandbox` lets it read and write what it lets it write, whatever the plugin does. What the
//! sandbox allows is the server's to decide (its sandbox module); the runtime asks before every
//! access, on resolved, symlink-free paths, and answers a refusal with the reference server's
//! errors.

use std::path::Path;

use super::resolve::Resolved;
use super::{Error, ErrorKind};

/// Why a call may not touch a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The sandbox denies the path (or something below it).
    Denied,
    /// The sandbox does not reach the path: to the call it is not there.
    NotFound,
    /// The path (or something below it) is read-only.
    ReadOnly,
}

/// What one call may do, over absolute canonical paths.
pub trait FsPolicy: Send + Sync + std::fmt::Debug {
    /// Reading `path` (and, for a `tree`, everything below it).
    fn read(&self, path: &Path, tree: bool) -> Result<(), Refusal>;

    /// Changing `path` (and, for a `tree`, everything below it).
    fn write(&self, path: &Path, tree: bool) -> Result<(), Refusal>;
}

/// Whether the call may read `resolved` (and, for a `tree`, everything below it).
pub(super) fn may_read(
    policy: &dyn FsPolicy,
    resolved: &Resolved<'_>,
    tree: bool,
) -> Result<(), Error> {
    policy.read(&resolved.absolute(), tree).map_err(error)
}

/// Whether the call may change `resolved` (and, for a `tree`, everything below it).
pub(super) fn may_write(
    policy: &dyn FsPolicy,
    resolved: &Resolved<'_>,
    tree: bool,
) -> Result<(), Error> {
    policy.write(&resolved.absolute(), tree).map_err(error)
}

fn error(refusal: Refusal) -> Error {
    let (kind, message) = match refusal {
        Refusal::Denied => (
            ErrorKind::PermissionDenied,
            "Permission denied (os error 13)",
        ),
        Refusal::NotFound => (
            ErrorKind::NotFound,
            "No such file or directory (os error 2)",
        ),
        // The reference server's answer to a denied write (-32603 through the fs plugin).
        Refusal::ReadOnly => (ErrorKind::Other, "Read-only file system (os error 30)"),
    };
    Error {
        kind,
        message: message.to_owned(),
    }
}
