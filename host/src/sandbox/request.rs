//! A client's `sandbox` (Codex's `FileSystemSandboxContext`) as entries (docs/protocol.md §7.3).

use std::path::{Path, PathBuf};

use super::rules::{Level, Rules};
use super::{REFUSAL, canonical};
use crate::path_uri;
use crate::protocol::sandbox::{
    Access, EntryPath, FileSystemPermissions, NetworkAccess, Permissions, SandboxContext,
    SpecialKind, WindowsSandboxLevel,
};
use crate::rpc::RpcError;

/// The request's entries and whether it allows the network. The sandbox's own `cwd` is
/// `current_working_directory` and the base of relative patterns; `cwd` stands in for it when
/// it is absent (the process's working directory). `tmpdir` is the child's `TMPDIR`.
pub fn request_rules(
    context: &SandboxContext,
    cwd: &Path,
    tmpdir: Option<&Path>,
) -> Result<(Rules, bool), RpcError> {
    if context.windows_sandbox_level == WindowsSandboxLevel::Mxc {
        return Err(RpcError::invalid_params(
            "native MXC is unavailable on this executor",
        ));
    }
    let (file_system, network) = match &context.permissions {
        Permissions::Disabled => return Ok((Rules::full(), true)),
        Permissions::External { network } => (None, *network),
        Permissions::Managed {
            file_system,
            network,
        } => (Some(file_system), *network),
    };
    let network = network == NetworkAccess::Enabled;
    let entries = match file_system {
        None | Some(FileSystemPermissions::Unrestricted) => return Ok((Rules::full(), network)),
        Some(FileSystemPermissions::Restricted { entries }) => entries,
    };
    too_many_entries(entries.len())?;
    let parse =
        |uri: &str| path_uri::parse(uri).map_err(|err| RpcError::invalid_params(err.to_string()));
    let base = match context
        .policy_context
        .as_ref()
        .and_then(|policy| policy.cwd.as_deref())
        .or(context.cwd.as_deref())
    {
        Some(uri) => parse(uri)?,
        None => cwd.to_path_buf(),
    };
    let roots = context
        .policy_context
        .as_ref()
        .and_then(|policy| policy.workspace_roots.as_ref())
        .or(context.workspace_roots.as_ref());
    let project_roots: Vec<PathBuf> = match roots {
        None => Vec::new(),
        Some(roots) if roots.is_empty() => vec![base.clone()],
        Some(roots) => roots
            .iter()
            .map(|root| parse(root))
            .collect::<Result<_, _>>()?,
    };
    let mut rules = Rules::default();
    // Every entry names one of a few bases (a project root with `.git`, `.agents`...):
    // each is resolved once.
    let mut bases_seen: Vec<(PathBuf, PathBuf)> = Vec::new();
    for entry in entries {
        let level = match entry.access {
            Access::Read => Level::Read,
            Access::Write => Level::Write,
            Access::Deny | Access::None => Level::Hidden,
        };
        let paths: Vec<PathBuf> = match &entry.path {
            EntryPath::Path { path } => vec![canonical(&parse(path)?)],
            EntryPath::GlobPattern { pattern } => {
                if !pattern.contains(['*', '?', '[']) {
                    vec![canonical(&base.join(pattern))]
                } else if level == Level::Hidden {
                    // A denial wexec cannot expand would be a hole: never less than asked.
                    return Err(RpcError::invalid_params(REFUSAL));
                } else {
                    // An unexpanded grant only narrows.
                    Vec::new()
                }
            }
            EntryPath::Special { value } => {
                let bases: Vec<PathBuf> = match value.kind {
                    SpecialKind::Root => vec![PathBuf::from("/")],
                    SpecialKind::CurrentWorkingDirectory => vec![base.clone()],
                    SpecialKind::ProjectRoots => project_roots.clone(),
                    SpecialKind::Tmpdir => tmpdir.map(Path::to_path_buf).into_iter().collect(),
                    SpecialKind::SlashTmp => vec![PathBuf::from("/tmp")],
                    SpecialKind::Unknown => Vec::new(),
                    // Canonical (or links) already.
                    SpecialKind::Minimal => super::minimal::paths(),
                };
                let canonical_already = value.kind == SpecialKind::Minimal;
                let bases = bases.iter().map(|base| match canonical_already {
                    true => base.clone(),
                    false => canonical_base(&mut bases_seen, base),
                });
                match &value.subpath {
                    Some(subpath) => bases.map(|base| below(&base, subpath)).collect(),
                    None => bases.collect(),
                }
            }
        };
        for path in paths {
            rules.add(path, level);
        }
    }
    Ok((rules, network))
}

/// Refuses a request whose sandboxes hold more than
/// [`MAX_SANDBOX_ENTRIES`](crate::protocol::limits::MAX_SANDBOX_ENTRIES) entries in all.
pub fn too_many_entries(count: usize) -> Result<(), RpcError> {
    use crate::protocol::limits::MAX_SANDBOX_ENTRIES;
    if count > MAX_SANDBOX_ENTRIES {
        return Err(RpcError::invalid_params(format!(
            "sandbox has {count} filesystem entries; the limit is {MAX_SANDBOX_ENTRIES}"
        )));
    }
    Ok(())
}

/// `base` canonical, resolved once per request (`seen` keeps what was).
fn canonical_base(seen: &mut Vec<(PathBuf, PathBuf)>, base: &Path) -> PathBuf {
    if let Some((_, canonical)) = seen.iter().find(|(known, _)| known == base) {
        return canonical.clone();
    }
    let resolved = canonical(base);
    seen.push((base.to_path_buf(), resolved.clone()));
    resolved
}

/// `subpath` below the canonical `base`, canonical: joined as it is when it is one name that
/// is not a link (or does not exist), which is what Codex's subpaths are (`.git`...).
fn below(base: &Path, subpath: &str) -> PathBuf {
    let joined = base.join(subpath);
    let mut parts = Path::new(subpath).components();
    let one_name = matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    );
    let link = std::fs::symlink_metadata(&joined).is_ok_and(|meta| meta.file_type().is_symlink());
    if one_name && !link {
        joined
    } else {
        canonical(&joined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(json: &str) -> SandboxContext {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn codex_workspace_write_object() {
        let dir = std::env::temp_dir().join(format!("wexec-request-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let uri = path_uri::to_uri(&dir);
        let json = format!(
            r#"{{"permissions":{{"type":"managed","file_system":{{"type":"restricted","entries":[
            {{"path":{{"type":"special","value":{{"kind":"root"}}}},"access":"read"}},
            {{"path":{{"type":"special","value":{{"kind":"project_roots"}}}},"access":"write"}},
            {{"path":{{"type":"special","value":{{"kind":"project_roots","subpath":".git"}}}},"access":"read","missing_path_behavior":"skip"}},
            {{"path":{{"type":"special","value":{{"kind":"tmpdir"}}}},"access":"write"}},
            {{"path":{{"type":"path","path":"{uri}/secret"}},"access":"none"}}]}},"network":"enabled"}},
            "cwd":"{uri}","workspaceRoots":["{uri}"],"windowsSandboxLevel":"disabled"}}"#
        );
        let (rules, network) = request_rules(&context(&json), &dir, None).unwrap();
        assert!(network);
        let dir = canonical(&dir);
        assert_eq!(rules.level(Path::new("/etc")), Level::Read);
        assert_eq!(rules.level(&dir.join("src")), Level::Write);
        assert_eq!(rules.level(&dir.join(".git/config")), Level::Read);
        assert_eq!(rules.level(&dir.join("secret/x")), Level::Hidden);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unrestricted_forms_and_refusals() {
        let cwd = Path::new("/");
        let full = |json| request_rules(&context(json), cwd, None).unwrap();
        assert_eq!(
            full(r#"{"permissions":{"type":"disabled"},"windowsSandboxLevel":"disabled"}"#),
            (Rules::full(), true)
        );
        assert_eq!(
            full(
                r#"{"permissions":{"type":"external","network":"restricted"},"windowsSandboxLevel":"disabled"}"#
            ),
            (Rules::full(), false)
        );
        let err = request_rules(
            &context(r#"{"permissions":{"type":"disabled"},"windowsSandboxLevel":"mxc"}"#),
            cwd,
            None,
        )
        .unwrap_err();
        assert_eq!(err.message, "native MXC is unavailable on this executor");
        let err = request_rules(
            &context(
                r#"{"permissions":{"type":"managed","file_system":{"type":"restricted","entries":[
                {"path":{"type":"glob_pattern","pattern":"**/*.env"},"access":"deny"}]},"network":"restricted"},
                "windowsSandboxLevel":"disabled"}"#,
            ),
            cwd,
            None,
        )
        .unwrap_err();
        assert_eq!(err.message, REFUSAL);
    }
}
