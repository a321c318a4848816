//! Sandboxes (docs/protocol.md §7.3, docs/sandbox.md): the operator ceiling, a client's request,
//! and the effective policy — ceiling ∩ request, per path and for the network — a process runs
//! under or a filesystem call is checked against. Enforcing it is the process supervisor's job
//! ([`crate::process`]); this module only decides.

mod ceiling;
pub mod confinement;
mod fs_policy;
pub mod kernel;
mod landlock;
mod minimal;
mod placeholders;
mod request;
pub mod rules;

use std::path::{Path, PathBuf};

pub use ceiling::{Ceiling, Mode};
pub use fs_policy::call_policy;
pub use landlock::Weaker;
pub use placeholders::{Held, hold, release_all, sweep_dead_logs as sweep_placeholders};
pub use request::{request_rules, too_many_entries};

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

/// Logs the placeholders this wexec makes in `state`; returns what to give
/// [`sweep_placeholders`] once startup is over, to remove those that wexecs which died without
/// cleaning up left.
pub fn log_placeholders(state: &crate::state::State) -> Option<std::os::fd::OwnedFd> {
    let logs = match state.placeholders() {
        Ok(logs) => logs,
        Err(err) => {
            tracing::warn!(
                "cannot log placeholders in {}: {err}; a SIGKILLed wexec's would stay",
                state.dir().display()
            );
            return None;
        }
    };
    let sweep = logs.try_clone().ok();
    placeholders::start_log(logs);
    sweep
}

/// How one process runs.
#[derive(Debug)]
pub struct ProcessPolicy {
    /// `sandboxType` of the reply.
    pub sandbox_type: &'static str,
    /// The tier confining it (`None`: unconfined), and the weaker guarantees it relies on.
    pub tier: Option<(kernel::Tier, Vec<Weaker>)>,
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
            tier: None,
            confinement: None,
            placeholders: Vec::new(),
        });
    }
    let tier = kernel::available()
        .map_err(|missing| RpcError::invalid_params(format!("{REFUSAL}: {missing}")))?;
    let layers = guarded(layers, &ceiling.protected, &ceiling.secrets);
    let layers = with_git_directories(layers)?;
    if tier == kernel::Tier::Landlock {
        return landlock_policy(&layers, network, ceiling, sandbox_type);
    }
    let placeholders = placeholders_for(&layers)?;
    Ok(ProcessPolicy {
        sandbox_type,
        tier: Some((kernel::Tier::Namespaces, Vec::new())),
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
            landlock: None,
        }),
        placeholders,
    })
}

/// The policy under the Landlock tier: the layers as grants, or a refusal naming what this
/// tier cannot hold and what the namespace tier lacks here. Nothing is mounted over, so no
/// placeholder is made.
fn landlock_policy(
    layers: &[(PathBuf, Level)],
    network: bool,
    ceiling: &Ceiling,
    sandbox_type: &'static str,
) -> Result<ProcessPolicy, RpcError> {
    let accepted = &ceiling.accepted;
    // wexec's secrets are a token file and the state directory, whose names say nothing.
    let named = &ceiling.secrets;
    let (grants, mut relied) = landlock::plan(layers, accepted, &ceiling.protected, named)
        .map_err(|inexpressible| {
            let missing = kernel::namespaces_missing()
                .map_or_else(String::new, |missing| format!(" ({missing})"));
            let hint = inexpressible
                .acceptable()
                .map_or_else(String::new, |weaker| {
                    format!(
                        "; the operator's --sandbox-accept {} would run it with that path writable",
                        weaker.name()
                    )
                });
            RpcError::invalid_params(format!("{REFUSAL}: {inexpressible}{missing}{hint}"))
        })?;
    let scoped = !accepted.contains(&Weaker::Signals);
    if !scoped && !kernel::landlock_scopes() {
        relied.push(Weaker::Signals);
    }
    let metadata = accepted.contains(&Weaker::Metadata);
    if metadata {
        relied.push(Weaker::Metadata);
    }
    Ok(ProcessPolicy {
        sandbox_type,
        tier: Some((kernel::Tier::Landlock, relied)),
        confinement: Some(Confinement {
            layers: Vec::new(),
            network,
            probe: false,
            landlock: Some(confinement::Landlock {
                grants,
                scoped,
                metadata,
            }),
        }),
        placeholders: Vec::new(),
    })
}

/// `layers` with wexec's own state out of reach, whatever the ceiling's mode and the request
/// say: `protected` paths at most readable, `secrets` hidden. Applied to every confined
/// process (an unconfined one runs with wexec's rights, by the operator's choice).
fn guarded(
    layers: Vec<(PathBuf, Level)>,
    protected: &[PathBuf],
    secrets: &[PathBuf],
) -> Vec<(PathBuf, Level)> {
    if protected.is_empty() && secrets.is_empty() {
        return layers;
    }
    let mut effective = rules::Rules::default();
    for (path, level) in layers {
        effective.add(path, level);
    }
    let mut cap = rules::Rules::full();
    for path in protected {
        cap.add(path.clone(), Level::Read);
    }
    for path in secrets {
        cap.add(path.clone(), Level::Hidden);
    }
    rules::layers(&effective, &cap)
}

/// Bytes of a `.git` file read for its `gitdir:` line (git writes one short line).
const GIT_FILE_BYTES: u64 = 4096;

/// A protected `.git` that is a file pointing elsewhere (`gitdir: <dir>`, a worktree or a
/// separate git dir) protects that directory too, as Codex does: its hooks run on the host.
/// Where the process could not write it anyway, nothing is added.
/// A pointer through a symbolic link the process could re-point (one inside a writable layer)
/// is refused: protecting where the link leads today would not hold tomorrow's target.
fn with_git_directories(
    mut layers: Vec<(PathBuf, Level)>,
) -> Result<Vec<(PathBuf, Level)>, RpcError> {
    let mut extra = Vec::new();
    let view = || {
        let mut view = rules::Rules::default();
        for (path, level) in &layers {
            view.add(path.clone(), *level);
        }
        view
    };
    let mut writable: Option<rules::Rules> = None;
    for (path, level) in &layers {
        if *level != Level::Read || path.file_name().is_none_or(|name| name != ".git") {
            continue;
        }
        let Some(target) = git_file_target(path) else {
            continue;
        };
        let base = path.parent().unwrap_or(Path::new("/"));
        let target = base.join(target);
        let view = writable.get_or_insert_with(view);
        if links_on_the_way(&target).iter().any(|link| {
            link.parent()
                .is_some_and(|dir| view.level(dir) == Level::Write)
        }) {
            return Err(RpcError::invalid_params(REFUSAL));
        }
        // Only ever narrower: a `gitdir` naming a path the process may not read (a secret,
        // something outside the readable roots) must not make it readable.
        let target = canonical(&target);
        if view.level(&target) == Level::Write {
            extra.push((target, Level::Read));
        }
    }
    if extra.is_empty() {
        return Ok(layers);
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
    Ok(layers)
}

/// The `gitdir:` of a `.git` that is a regular file (usually it is a directory, or absent: one
/// `lstat` says so); only its first [`GIT_FILE_BYTES`] are read, whatever its size.
fn git_file_target(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if !std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file()) {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let mut text = Vec::new();
    file.take(GIT_FILE_BYTES).read_to_end(&mut text).ok()?;
    let text = String::from_utf8_lossy(&text);
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    (!target.is_empty()).then(|| target.to_owned())
}

/// The symbolic links met resolving `path` (absolute), each as the path where it lies.
fn links_on_the_way(path: &Path) -> Vec<PathBuf> {
    // Components still to walk, the next last.
    fn pending_of(path: &Path) -> impl Iterator<Item = std::ffi::OsString> {
        let parts: Vec<_> = path
            .components()
            .filter_map(|part| match part {
                std::path::Component::Normal(name) => Some(name.to_os_string()),
                std::path::Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        parts.into_iter().rev()
    }
    let mut links = Vec::new();
    let mut resolved = PathBuf::from("/");
    let mut pending: Vec<_> = pending_of(path).collect();
    // Bounded as the kernel bounds a lookup.
    let mut budget = 40;
    while let Some(name) = pending.pop() {
        if name == ".." {
            resolved.pop();
            continue;
        }
        let here = resolved.join(&name);
        match std::fs::read_link(&here) {
            Ok(target) if budget > 0 => {
                budget -= 1;
                links.push(here);
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                pending.extend(pending_of(&target));
            }
            _ => resolved = here,
        }
    }
    links
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

#[cfg(test)]
mod tests {
    use super::*;

    fn level(layers: &[(PathBuf, Level)], path: &str) -> Level {
        let mut rules = rules::Rules::default();
        for (path, level) in layers {
            rules.add(path.clone(), *level);
        }
        rules.level(Path::new(path))
    }

    #[test]
    fn wexec_s_own_files_are_never_writable_and_secrets_never_readable() {
        let cache = PathBuf::from("/home/a/.cache/wexec");
        let config = PathBuf::from("/home/a/deploy/wexec.toml");
        let token = PathBuf::from("/home/a/token");
        // A writable home (the ceiling's or a request's), and a writable root inside the cache.
        let layers = vec![
            (PathBuf::from("/"), Level::Read),
            (PathBuf::from("/home/a"), Level::Write),
            (PathBuf::from("/home/a/.cache/wexec/x"), Level::Write),
        ];
        let kept = guarded(layers.clone(), &[cache.clone(), config.clone()], &[token]);
        assert_eq!(level(&kept, "/home/a/.cache/wexec/k.cwasm"), Level::Read);
        assert_eq!(level(&kept, "/home/a/.cache/wexec/x/y"), Level::Read);
        assert_eq!(level(&kept, "/home/a/deploy/wexec.toml"), Level::Read);
        assert_eq!(level(&kept, "/home/a/token"), Level::Hidden);
        assert_eq!(level(&kept, "/home/a/notes"), Level::Write);
        assert_eq!(level(&kept, "/etc/passwd"), Level::Read);
        // Nothing to guard: the layers as they were.
        assert_eq!(guarded(layers.clone(), &[], &[]), layers);
    }

    #[test]
    fn a_gitdir_protects_what_is_writable_and_opens_nothing_else() {
        let base =
            canonical(&std::env::temp_dir().join(format!("wexec-gitdir-{}", std::process::id())));
        let (work, hidden, shared) = (base.join("w"), base.join("hidden"), base.join("shared"));
        for dir in [&work, &hidden, &shared] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let layers = |gitdir: &Path| {
            std::fs::write(work.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
            with_git_directories(vec![
                (PathBuf::from("/"), Level::Read),
                (base.clone(), Level::Write),
                (hidden.clone(), Level::Hidden),
                (work.join(".git"), Level::Read),
            ])
            .unwrap()
        };
        // A writable git directory elsewhere is protected...
        assert_eq!(
            level(&layers(&shared), &shared.display().to_string()),
            Level::Read
        );
        // ... a hidden one stays hidden, and one outside every root stays absent.
        let inside = hidden.join("s");
        assert!(!layers(&inside).iter().any(|(path, _)| path == &inside));
        assert_eq!(
            level(&layers(&inside), &inside.display().to_string()),
            Level::Hidden
        );
        assert!(
            !layers(Path::new("/etc"))
                .iter()
                .any(|(path, _)| path == Path::new("/etc"))
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn links_on_the_way_are_found_wherever_they_lie() {
        let base = std::env::temp_dir().join(format!("wexec-links-{}", std::process::id()));
        std::fs::create_dir_all(base.join("store/gd")).unwrap();
        std::os::unix::fs::symlink("store", base.join("link")).unwrap();
        std::os::unix::fs::symlink(base.join("link"), base.join("abs")).unwrap();
        let base = canonical(&base);
        assert_eq!(
            links_on_the_way(&base.join("store/gd")),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            links_on_the_way(&base.join("link/gd")),
            vec![base.join("link")]
        );
        assert_eq!(
            links_on_the_way(&base.join("abs/gd")),
            vec![base.join("abs"), base.join("link")]
        );
        std::fs::remove_dir_all(&base).unwrap();
    }
}
