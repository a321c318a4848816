//! The sandbox of one filesystem call (docs/protocol.md §7.3, "`fs/*` methods"; docs/sandbox.md):
//! plugin grants ∩ the request's `sandbox` ∩, under a read-only ceiling, no writes. The runtime
//! asks it before every access the called plugin makes.

use std::path::Path;
use std::sync::Arc;

use wexec_runtime::fs::{FsPolicy, Refusal};

use super::request::request_rules;
use super::rules::{Level, Rules};
use crate::protocol::sandbox::SandboxContext;
use crate::rpc::RpcError;

/// The policy of `requested` (each narrowing the last), without writes when `read_only`.
/// Canonicalises the requests' paths: it looks at the disk.
pub fn call_policy(
    requested: &[SandboxContext],
    read_only: bool,
) -> Result<Arc<dyn FsPolicy>, RpcError> {
    let mut rules = Rules::full();
    if !requested.is_empty() {
        let tmpdir = std::env::var_os("TMPDIR").map(std::path::PathBuf::from);
        // Without a `cwd` in the sandbox, what a relative path would mean to this server:
        // its own working directory (the default fs root), never the whole disk.
        let cwd = std::env::current_dir().map_err(|err| {
            RpcError::internal_error(format!("cannot read the working directory: {err}"))
        })?;
        for context in requested {
            let (request, _) = request_rules(context, &cwd, tmpdir.as_deref())?;
            rules = rules.intersect(&request);
        }
    }
    if read_only {
        let mut ceiling = Rules::default();
        ceiling.add("/".into(), Level::Read);
        rules = rules.intersect(&ceiling);
    }
    Ok(Arc::new(RulesPolicy { rules }))
}

/// A call's access as entries over absolute canonical paths.
#[derive(Debug)]
struct RulesPolicy {
    rules: Rules,
}

impl FsPolicy for RulesPolicy {
    fn read(&self, path: &Path, tree: bool) -> Result<(), Refusal> {
        match self.rules.level(path) {
            Level::Hidden => Err(Refusal::Denied),
            Level::Absent => Err(Refusal::NotFound),
            Level::Read | Level::Write if tree && self.below(path, Level::Read) => {
                Err(Refusal::Denied)
            }
            Level::Read | Level::Write => Ok(()),
        }
    }

    fn write(&self, path: &Path, tree: bool) -> Result<(), Refusal> {
        match self.rules.level(path) {
            Level::Hidden => Err(Refusal::Denied),
            Level::Absent | Level::Read => Err(Refusal::ReadOnly),
            Level::Write if tree && self.below(path, Level::Write) => Err(Refusal::ReadOnly),
            Level::Write => Ok(()),
        }
    }
}

impl RulesPolicy {
    /// Whether an entry strictly below `path` allows less than `level`.
    fn below(&self, path: &Path, level: Level) -> bool {
        self.rules.paths().any(|entry| {
            entry != path && entry.starts_with(path) && self.rules.level(entry) < level
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(entries: &[(&str, Level)]) -> RulesPolicy {
        let mut rules = Rules::default();
        for (path, level) in entries {
            rules.add((*path).into(), *level);
        }
        RulesPolicy { rules }
    }

    #[test]
    fn a_tree_is_refused_for_what_lies_below_it() {
        let policy = policy(&[
            ("/", Level::Read),
            ("/w", Level::Write),
            ("/w/ro", Level::Read),
            ("/w/secret", Level::Hidden),
        ]);
        let path = Path::new;
        assert_eq!(policy.read(path("/etc"), false), Ok(()));
        assert_eq!(policy.write(path("/etc"), false), Err(Refusal::ReadOnly));
        assert_eq!(policy.write(path("/w/file"), false), Ok(()));
        assert_eq!(policy.write(path("/w"), true), Err(Refusal::ReadOnly));
        assert_eq!(policy.read(path("/w"), true), Err(Refusal::Denied));
        assert_eq!(
            policy.read(path("/w/secret/x"), false),
            Err(Refusal::Denied)
        );
        let narrow = self::policy(&[("/w", Level::Write)]);
        assert_eq!(narrow.read(path("/etc"), false), Err(Refusal::NotFound));
    }
}
