//! Sandboxes (docs/protocol.md §7.3, docs/sandbox.md): the operator ceiling, a client's request,
//! and the effective policy — ceiling ∩ request, per path and for the network — a process runs
//! under or a filesystem call is checked against. Enforcing it is the process supervisor's job
//! ([`crate::process`]); this module only decides.

mod ceiling;
pub mod confinement;
pub mod kernel;
mod placeholders;
mod request;
pub use wexec_runtime::rules;

use std::path::{Path, PathBuf};

pub use ceiling::{Ceiling, Mode};
pub use placeholders::{Held, hold, release_all};
pub use request::request_rules;

use self::confinement::{Confinement, Layer, LayerAccess};
use crate::protocol::sandbox::SandboxContext;
use crate::rpc::RpcError;
use rules::Level;

/// The refusal when the kernel cannot enforce what a request needs (Codex's text).
pub const REFUSAL: &str = "sandbox intent cannot be enforced on this executor";

/// Codex's `sandboxType` when something is enforced (or a `sandbox` was sent).
pub const SANDBOXED: &str = "linuxSeccomp";
/// Codex's `sandboxType` otherwise.
pub const UNSANDBOXED: &str = "none";

/// How one process runs.
#[derive(Debug)]
pub struct ProcessPolicy {
    /// `sandboxType` of the reply.
    pub sandbox_type: &'static str,
    /// The confinement, `None` when nothing is restricted.
    pub confinement: Option<Confinement>,
    /// Read-only paths to create (and remove afterwards) so that they can be mounted over.
    pub placeholders: Vec<PathBuf>,
}

/// The policy of a `process/start` in `cwd` with the child's `tmpdir`; `no_network`
/// (`enforceManagedNetwork`) restricts the network whatever else allows it. Refused (-32602)
/// when the request is malformed for wexec or the kernel cannot enforce what it needs.
pub fn process_policy(
    ceiling: &Ceiling,
    request: Option<&SandboxContext>,
    no_network: bool,
    cwd: &Path,
    tmpdir: Option<&Path>,
) -> Result<ProcessPolicy, RpcError> {
    let (request_rules, request_network) = match request {
        Some(context) => request_rules(context, cwd, tmpdir)?,
        None => (rules::Rules::full(), true),
    };
    let layers = rules::layers(&ceiling.rules(), &request_rules);
    let network = request_network && ceiling.network() && !no_network;
    let restricted = rules::restricts(&layers, network);
    let sandbox_type = if restricted || request.is_some() {
        SANDBOXED
    } else {
        UNSANDBOXED
    };
    if !restricted {
        return Ok(ProcessPolicy {
            sandbox_type,
            confinement: None,
            placeholders: Vec::new(),
        });
    }
    if kernel::available().is_err() {
        return Err(RpcError::invalid_params(REFUSAL));
    }
    let layers = with_git_directories(layers);
    let placeholders = placeholders_for(&layers)?;
    Ok(ProcessPolicy {
        sandbox_type,
        confinement: Some(Confinement {
            layers: layers
                .into_iter()
                .map(|(path, level)| Layer {
                    path: path.to_string_lossy().into_owned(),
                    access: match level {
                        Level::Hidden => LayerAccess::Hidden,
                        Level::Absent => LayerAccess::Absent,
                        Level::Read => LayerAccess::Read,
                        Level::Write => LayerAccess::Write,
                    },
                })
                .collect(),
            network,
            probe: false,
        }),
        placeholders,
    })
}

/// A protected `.git` that is a file pointing elsewhere (`gitdir: <dir>`, a worktree or a
/// separate git dir) protects that directory too, as Codex does: its hooks run on the host.
fn with_git_directories(mut layers: Vec<(PathBuf, Level)>) -> Vec<(PathBuf, Level)> {
    let mut extra = Vec::new();
    for (path, level) in &layers {
        if *level != Level::Read || path.file_name().is_none_or(|name| name != ".git") {
            continue;
        }
        // Usually a directory, or absent: one `stat` says so.
        if !std::fs::metadata(path).is_ok_and(|meta| meta.is_file()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let Some(target) = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("gitdir:"))
        else {
            continue;
        };
        let base = path.parent().unwrap_or(Path::new("/"));
        extra.push((canonical(&base.join(target.trim())), Level::Read));
    }
    if extra.is_empty() {
        return layers;
    }
    layers.extend(extra);
    layers.sort_by(|a, b| (a.0.components().count(), &a.0).cmp(&(b.0.components().count(), &b.0)));
    // On one path the weaker access stays.
    layers.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            earlier.1 = earlier.1.min(later.1);
        }
        same
    });
    layers
}

/// Missing paths that must stay unwritable inside a writable one: each gets an empty
/// directory to mount over while the process runs (Codex mounts an empty read-only directory
/// there too). A missing one whose parent is missing as well cannot be held so (the parent
/// could be created and renamed away), so it is refused: never less than was asked.
fn placeholders_for(layers: &[(PathBuf, Level)]) -> Result<Vec<PathBuf>, RpcError> {
    let mut view = rules::Rules::default();
    for (path, level) in layers {
        view.add(path.clone(), *level);
    }
    let mut placeholders = Vec::new();
    for (path, level) in layers {
        let Some(parent) = path.parent() else {
            continue;
        };
        if *level == Level::Write {
            continue;
        }
        let mut existing = parent;
        while std::fs::symlink_metadata(existing).is_err() {
            match existing.parent() {
                Some(up) => existing = up,
                None => break,
            }
        }
        // Only inside a writable directory could the path be created or replaced.
        if view.level(existing) != Level::Write {
            continue;
        }
        match std::fs::symlink_metadata(path) {
            // A link cannot be mounted over and can be replaced: what it protects could not
            // be held.
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(RpcError::invalid_params(REFUSAL));
            }
            Ok(meta) => {
                // An empty directory may be another process's (or another wexec's)
                // placeholder, which must not vanish while this process needs it: hold it too.
                let empty =
                    || std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none());
                let held = placeholders::is_held(path) || (meta.is_dir() && empty());
                if !held {
                    continue;
                }
            }
            Err(_) if existing != parent => return Err(RpcError::invalid_params(REFUSAL)),
            Err(_) => {}
        }
        placeholders.push(path.clone());
    }
    Ok(placeholders)
}

/// `path` made absolute and canonical as far as it exists (the rest appended, `.` and `..`
/// resolved lexically), so that a symbolic link can neither widen nor dodge an entry.
pub fn canonical(path: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    let mut missing = Vec::new();
    let mut existing = path;
    let base = loop {
        match existing.parent() {
            Some(parent) => {
                if let Some(name) = existing.file_name() {
                    missing.push(name.to_os_string());
                }
                existing = parent;
                if let Ok(canonical) = std::fs::canonicalize(existing) {
                    break canonical;
                }
            }
            None => break PathBuf::from("/"),
        }
    };
    let mut result = base;
    for name in missing.into_iter().rev() {
        match name.to_str() {
            Some(".") => {}
            Some("..") => {
                result.pop();
            }
            _ => result.push(name),
        }
    }
    result
}
