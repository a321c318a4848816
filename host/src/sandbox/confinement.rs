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
    /// The Landlock tier instead of namespaces: `layers` is then empty, and these grants say
    /// what the program may reach (docs/sandbox.md, "Tiers").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<Landlock>,
}

/// A confinement by Landlock and seccomp alone, without namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landlock {
    /// What may be reached, each beneath its path; nothing else.
    pub grants: Vec<Grant>,
    /// Signals and abstract unix sockets must be scoped to the sandbox (Landlock ABI 6): on
    /// a kernel without scopes the start fails. `false` once the operator accepted `signals`:
    /// scoped where the kernel can.
    pub scoped: bool,
    /// The operator accepted `metadata`: mode, owner, times and extended attributes may be
    /// changed on any file the process's user owns (otherwise those calls are refused).
    #[serde(default)]
    pub metadata: bool,
}

/// A Landlock rule: `access` beneath `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// Absolute and canonical; a missing one is skipped.
    pub path: String,
    /// What may be done there.
    pub access: GrantAccess,
}

/// Rights a [`Grant`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GrantAccess {
    /// Read files, list directories, execute.
    Read,
    /// Everything the kernel's Landlock handles.
    Write,
    /// List directories only.
    List,
    /// Open a device node, read it, write it.
    Device,
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
