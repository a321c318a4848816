//! `capabilityRoots/discoverV1` (docs/protocol.md §7.6): one root's plugin files, skills and
//! namespace manifests, read verbatim through the read-only filesystem grant, as Codex's server
//! 0.169 finds them (probed): a bounded walk that enters hidden and symlinked directories,
//! `SKILL.md` files sorted by path, the first manifest of `.codex-plugin`, `.claude-plugin`,
//! `.cursor-plugin` at the root or in its nearest ancestor.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::Value;
use wexec_guest::fs::{self, ErrorKind};
use wexec_guest::path as uri;
use wexec_guest::protocol::{
    CapabilityRootDiscovery, CapabilityTextFile, DiscoveredPluginFiles, DiscoveredSkillFiles,
    FsWalkOptions,
};
use wexec_guest::walk;

use crate::files::{Reader, ReplyBudget};
use crate::paths::{basename, join, parent};

/// Where a plugin's manifest may be, by precedence.
pub const MANIFEST_PATHS: [&str; 3] = [
    ".codex-plugin/plugin.json",
    ".claude-plugin/plugin.json",
    ".cursor-plugin/plugin.json",
];
const SKILL_FILE: &str = "SKILL.md";
const SKILL_METADATA: &str = "agents/openai.yaml";
const DEFAULT_MCP_CONFIG: &str = ".mcp.json";
const DEFAULT_APPS_CONFIG: &str = ".app.json";

const SCAN: FsWalkOptions = FsWalkOptions {
    max_depth: 6,
    max_directories: 2_000,
    max_entries: 20_000,
    follow_directory_symlinks: true,
    prune_hidden_directories: false,
};

/// Scans `root` (native); `id` and `path` (the request's) are echoed. What is read counts
/// against the request's `reply`.
pub fn discover(
    id: String,
    path: String,
    root: &str,
    reply: &mut ReplyBudget,
) -> CapabilityRootDiscovery {
    let mut discovery = CapabilityRootDiscovery {
        id,
        path,
        plugin: None,
        skills: Vec::new(),
        namespace_manifests: Vec::new(),
        warnings: Vec::new(),
        error: None,
    };
    let shown = discovery.path.clone();
    match fs::metadata(root, true) {
        Ok(meta) if meta.is_directory => {}
        Ok(_) => {
            discovery.error = Some(format!("capability root {shown} is not a directory"));
            return discovery;
        }
        // wexec's own refusal, as every other method words it.
        Err(error) if error.kind == ErrorKind::OutsideRoots => {
            discovery.error = Some(error.message);
            return discovery;
        }
        Err(error) => {
            discovery.error = Some(format!(
                "failed to inspect capability root {shown}: {}",
                error.message
            ));
            return discovery;
        }
    }
    let walked = match walk::walk(root, &SCAN) {
        Ok(walked) => walked,
        Err(error) => {
            discovery.error = Some(format!(
                "failed to scan capability root {shown}: {}",
                error.message
            ));
            return discovery;
        }
    };
    let mut reader = Reader::new(reply);
    for error in walked.errors {
        reader.warn(format!(
            "failed to scan capability path {}: {}",
            error.path, error.message
        ));
    }
    if walked.truncated {
        reader.warn(format!(
            "capability scan reached its traversal limit (root: {shown})"
        ));
    }

    let mut skill_paths = Vec::new();
    let mut manifest_paths = Vec::new();
    for entry in walked.entries {
        if entry.kind != "file" {
            continue;
        }
        // The walk's paths are its own encoding of native paths: they decode.
        let Ok(native) = uri::decode(&entry.path) else {
            continue;
        };
        if basename(&native) == SKILL_FILE {
            skill_paths.push((entry.path, native));
        } else if let Some(priority) = manifest_priority(&native) {
            manifest_paths.push((uri::encode(parent(parent(&native))), priority, native));
        }
    }
    skill_paths.sort_unstable();
    manifest_paths.sort_unstable();

    let root_manifest = first_manifest(root, &mut reader);
    let inherited = match &root_manifest {
        Some(manifest) => Some(manifest.clone()),
        None => nearest_ancestor_manifest(root, &mut reader),
    };
    // The root's own manifests were tried already, whether one was read or refused.
    let mut seen_plugin_roots =
        HashSet::from([parent(parent(&join(root, MANIFEST_PATHS[0]))).to_owned()]);
    // The root's own manifest goes out twice (as its plugin's too): the second copy is charged
    // as well, or the reply could outgrow the message.
    let inherited =
        inherited.filter(|manifest| root_manifest.is_none() || reader.charge_again(manifest));
    if let Some(manifest) = inherited {
        if let Ok(native) = uri::decode(&manifest.path) {
            seen_plugin_roots.insert(parent(parent(&native)).to_owned());
        }
        discovery.namespace_manifests.push(manifest);
    }
    for (_, _, native) in manifest_paths {
        if !seen_plugin_roots.insert(parent(parent(&native)).to_owned()) {
            continue;
        }
        if let Some(manifest) = reader.read_manifest(&native) {
            discovery.namespace_manifests.push(manifest);
        }
    }

    if let Some(manifest) = root_manifest {
        let declared = Declarations::of(&manifest, root, &mut reader);
        let mcp_config = match declared.mcp_config {
            Declared::Inline => None,
            Declared::File(path) => reader.read(&path),
            Declared::Default => reader.read(&join(root, DEFAULT_MCP_CONFIG)),
        };
        let apps_config = match declared.apps_config {
            Declared::Inline => None,
            Declared::File(path) => reader.read(&path),
            Declared::Default => reader.read(&join(root, DEFAULT_APPS_CONFIG)),
        };
        discovery.plugin = Some(DiscoveredPluginFiles {
            manifest,
            mcp_config,
            apps_config,
        });
    }

    for (_, native) in skill_paths {
        let Some(instructions) = reader.read(&native) else {
            continue;
        };
        let metadata = reader.read(&join(parent(&native), SKILL_METADATA));
        discovery.skills.push(DiscoveredSkillFiles {
            instructions,
            metadata,
        });
    }
    discovery.warnings = reader.into_warnings();
    discovery
}

/// `<dir>/.codex-plugin/plugin.json` and its kin: the precedence of the manifest directory.
fn manifest_priority(path: &str) -> Option<usize> {
    if basename(path) != "plugin.json" {
        return None;
    }
    let directory = basename(parent(path));
    MANIFEST_PATHS
        .iter()
        .position(|manifest| manifest.strip_suffix("/plugin.json") == Some(directory))
}

/// The first manifest of `dir`, by precedence.
pub fn first_manifest(dir: &str, reader: &mut Reader) -> Option<CapabilityTextFile> {
    MANIFEST_PATHS
        .iter()
        .find_map(|manifest| reader.read_manifest(&join(dir, manifest)))
}

/// A root inside a plugin belongs to it: the nearest ancestor's manifest. Ancestors outside the
/// grant read as having none.
fn nearest_ancestor_manifest(root: &str, reader: &mut Reader) -> Option<CapabilityTextFile> {
    let mut dir = root.trim_end_matches('/');
    while !dir.is_empty() {
        dir = parent(dir);
        if let Some(manifest) = first_manifest(if dir.is_empty() { "/" } else { dir }, reader) {
            return Some(manifest);
        }
    }
    None
}

/// Where a manifest says a companion file is.
enum Declared {
    /// Not declared (or declared wrongly): the default file.
    Default,
    /// Declared inline in the manifest: no file.
    Inline,
    /// A file below the root (native).
    File(String),
}

struct Declarations {
    mcp_config: Declared,
    apps_config: Declared,
}

impl Declarations {
    fn of(manifest: &CapabilityTextFile, root: &str, reader: &mut Reader) -> Self {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Raw {
            #[serde(default)]
            mcp_servers: Option<Value>,
            #[serde(default)]
            apps: Option<Value>,
        }
        let Ok(raw) = serde_json::from_str::<Raw>(&manifest.contents) else {
            return Declarations {
                mcp_config: Declared::Default,
                apps_config: Declared::Default,
            };
        };
        let mut declared = |field: &str, value: Option<Value>| match value {
            Some(Value::Object(_)) => Declared::Inline,
            Some(Value::String(path)) => match below_root(&path) {
                Ok(relative) => Declared::File(join(root, relative)),
                Err(why) => {
                    reader.warn(format!("ignoring {field} in {}: {why}", manifest.path));
                    Declared::Default
                }
            },
            _ => Declared::Default,
        };
        Declarations {
            mcp_config: declared("mcpServers", raw.mcp_servers),
            apps_config: declared("apps", raw.apps),
        }
    }
}

/// A declared path: `./` and then something that stays below the root.
fn below_root(path: &str) -> Result<&str, &'static str> {
    let Some(relative) = path.strip_prefix("./") else {
        return Err("path must start with `./`");
    };
    if relative.is_empty()
        || relative.starts_with('/')
        || relative
            .split(['/', '\\'])
            .any(|component| component == "..")
    {
        return Err("path must remain below the capability root");
    }
    Ok(relative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_by_precedence() {
        assert_eq!(manifest_priority("/p/.codex-plugin/plugin.json"), Some(0));
        assert_eq!(manifest_priority("/p/.cursor-plugin/plugin.json"), Some(2));
        assert_eq!(manifest_priority("/p/plugin.json"), None);
        assert_eq!(manifest_priority("/p/.codex-plugin/other.json"), None);
    }

    #[test]
    fn declared_paths_stay_below_the_root() {
        assert_eq!(below_root("./cfg/mcp.json"), Ok("cfg/mcp.json"));
        for bad in ["mcp.json", "/abs"] {
            assert_eq!(below_root(bad), Err("path must start with `./`"), "{bad}");
        }
        for bad in ["./", "./../x", "./a/../../x", "./a\\..\\x", ".//etc/passwd"] {
            assert_eq!(
                below_root(bad),
                Err("path must remain below the capability root"),
                "{bad}"
            );
        }
    }
}
