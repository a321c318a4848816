//! The Codex sandbox context a request may carry (`FileSystemSandboxContext`,
//! docs/protocol.md §7.3): plain data, decoded as Codex 0.169 sends it. What it means is
//! docs/sandbox.md's business.

use serde::{Deserialize, Serialize};

/// `sandbox` on `process/start` and the `fs/*` methods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxContext {
    /// What the request may do.
    pub permissions: Permissions,
    /// Base of relative globs and `current_working_directory` for fs methods.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The workspace roots: `project_roots` unless `policyContext` names them.
    #[serde(default)]
    pub workspace_roots: Option<Vec<String>>,
    /// Codex's newer spelling of `cwd` and `workspaceRoots`; wins over them.
    #[serde(default)]
    pub policy_context: Option<PolicyContext>,
    /// Required by Codex's type; only `mxc` matters (refused).
    pub windows_sandbox_level: WindowsSandboxLevel,
}

impl SandboxContext {
    /// How many filesystem entries it holds (0 unless restricted).
    pub fn entry_count(&self) -> usize {
        match &self.permissions {
            Permissions::Managed {
                file_system: FileSystemPermissions::Restricted { entries },
                ..
            } => entries.len(),
            _ => 0,
        }
    }
}

/// `policyContext`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyContext {
    /// As `cwd`.
    #[serde(default)]
    pub cwd: Option<String>,
    /// As `workspaceRoots`.
    #[serde(default)]
    pub workspace_roots: Option<Vec<String>>,
}

/// `windowsSandboxLevel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WindowsSandboxLevel {
    /// No Windows sandbox.
    Disabled,
    /// A restricted token.
    RestrictedToken,
    /// An elevated sandbox.
    Elevated,
    /// Native MXC: refused on this executor.
    Mxc,
}

/// `permissions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Permissions {
    /// Managed by Codex: these files and this network.
    Managed {
        /// What the filesystem allows.
        file_system: FileSystemPermissions,
        /// Whether the network is allowed.
        network: NetworkAccess,
    },
    /// No restriction.
    Disabled,
    /// Files left to an external sandbox; the network as said.
    External {
        /// Whether the network is allowed.
        network: NetworkAccess,
    },
}

/// `network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkAccess {
    /// No network.
    Restricted,
    /// Network allowed.
    Enabled,
}

/// `file_system`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FileSystemPermissions {
    /// Every path, read and write.
    Unrestricted,
    /// Only what `entries` say.
    Restricted {
        /// The entries, in any order (the longest matching path decides).
        entries: Vec<Entry>,
    },
}

/// One filesystem entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Where it applies.
    pub path: EntryPath,
    /// What it allows.
    pub access: Access,
    /// `skip`: nothing special for a missing path (the only value Codex sends).
    #[serde(default)]
    pub missing_path_behavior: Option<MissingPathBehavior>,
}

/// `missing_path_behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingPathBehavior {
    /// Skip a missing path.
    Skip,
}

/// `access`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Readable.
    Read,
    /// Readable and writable.
    Write,
    /// Nothing, and nothing below.
    Deny,
    /// As `deny`.
    None,
}

/// An entry's `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryPath {
    /// A PathUri.
    Path {
        /// The path.
        path: String,
    },
    /// A glob, relative to `cwd` unless absolute.
    GlobPattern {
        /// The pattern.
        pattern: String,
    },
    /// A special path.
    Special {
        /// Which one.
        value: SpecialPath,
    },
}

/// A special path: `{"kind": ..., "subpath"?: ...}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecialPath {
    /// Which one.
    pub kind: SpecialKind,
    /// Appended to it.
    #[serde(default)]
    pub subpath: Option<String>,
}

/// The special paths Codex knows; any other is `unknown` (no effect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecialKind {
    /// `/`.
    Root,
    /// What programs need to run: `/bin`, `/usr`, `/etc`, ..., `/dev`, `/proc`.
    Minimal,
    /// The working directory.
    CurrentWorkingDirectory,
    /// The workspace roots.
    ProjectRoots,
    /// The child's `TMPDIR`.
    Tmpdir,
    /// `/tmp`.
    SlashTmp,
    /// A kind this version does not know.
    #[serde(other)]
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_read_only_object_decodes() {
        let context: SandboxContext = serde_json::from_str(
            r#"{"permissions":{"type":"managed","file_system":{"type":"restricted","entries":[
               {"path":{"type":"special","value":{"kind":"root"}},"access":"read"},
               {"path":{"type":"special","value":{"kind":"project_roots","subpath":".git"}},"access":"read","missing_path_behavior":"skip"},
               {"path":{"type":"special","value":{"kind":"future_kind"}},"access":"write"}]},"network":"restricted"},
             "cwd":"file:///w","workspaceRoots":["file:///w"],"windowsSandboxLevel":"disabled",
             "windowsSandboxProxySettingsMode":"reconcile","useLegacyLandlock":false}"#,
        )
        .unwrap();
        let Permissions::Managed {
            file_system: FileSystemPermissions::Restricted { entries },
            network: NetworkAccess::Restricted,
        } = context.permissions
        else {
            panic!("{:?}", context.permissions)
        };
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[2].path,
            EntryPath::Special {
                value: SpecialPath {
                    kind: SpecialKind::Unknown,
                    subpath: None
                }
            }
        );
    }

    #[test]
    fn decoding_errors_are_serdes() {
        let err = serde_json::from_str::<SandboxContext>(r#"{"permissions":{"type":"disabled"}}"#)
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("missing field `windowsSandboxLevel`"),
            "{err}"
        );
        let err = serde_json::from_str::<SandboxContext>(
            r#"{"permissions":{"type":"bogus"},"windowsSandboxLevel":"disabled"}"#,
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "unknown variant `bogus`, expected one of `managed`, `disabled`, `external`"
            ),
            "{err}"
        );
    }
}
