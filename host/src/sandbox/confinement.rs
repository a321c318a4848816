//! What the sandbox decides for one process, as the supervisor's helper applies it: plain data
//! that crosses the control socket (`process/supervisor/wire.rs`).

use serde::{Deserialize, Serialize};

/// How a confined program sees the system (docs/sandbox.md): its own user, mount, PID and
/// (without network) network namespaces, this view of the filesystem, and a seccomp filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confinement {
    /// The view, outermost first: the first layer is `/`, each later one lies below an
    /// earlier one and overrides it there. Paths are canonical; a missing one is skipped.
    pub layers: Vec<Layer>,
    /// Sockets other than `AF_UNIX` pairs allowed.
    pub network: bool,
    /// Set up everything, then exit 0 instead of running the program (the startup probe).
    pub probe: bool,
}

/// One path of a [`Confinement`]'s view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layer {
    /// Absolute and canonical.
    pub path: String,
    /// What the program may do there.
    pub access: LayerAccess,
}

/// What a confined program may do below a [`Layer`]'s path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LayerAccess {
    /// Nothing: the path shows as an empty, inaccessible directory or file (`EACCES`).
    Hidden,
    /// Not there (only as the root: an empty root with the later layers in it).
    Absent,
    /// Read, never write (`EROFS`).
    Read,
    /// Read and write.
    Write,
}
