//! `capabilities/discoverV2` (docs/protocol.md §7.6): the executor's own skills and installed
//! plugins, each location scanned as `discoverV1` scans a root and then parsed, as Codex's
//! server 0.169 answers (probed): standalone skills of `$CODEX_HOME/skills`,
//! `$HOME/.agents/skills` and `/etc/codex/skills` in that order, then every
//! `$CODEX_HOME/plugins/cache/<marketplace>/<plugin>/<version>/` with a manifest, sorted by id;
//! one warning per location that could not be fully loaded.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use wexec_guest::fs::{self, ErrorKind};
use wexec_guest::path as uri;
use wexec_guest::protocol::{
    CapabilitiesDiscoverResponse, CapabilityRootDiscovery, DiscoveryRoot, ExecutorPlugin,
    ExecutorSkill,
};

use crate::files::ReplyBudget;
use crate::paths::{basename, join, parent};
use crate::{roots, skills};

const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
const MAX_CAPABILITIES: usize = 2_048;
const MAX_WARNINGS: usize = 64;
/// A namespace, `:` and a skill name.
const MAX_QUALIFIED_NAME_CHARS: usize = 64 * 2 + 1;
const INCOMPLETE: &str =
    "some capability metadata could not be loaded; discovery may be incomplete";
const UNRESOLVED: &str =
    "some capability locations could not be resolved; discovery may be incomplete";
const SIZE_LIMIT: &str = "capability discovery size limit reached";

/// A place capabilities are found.
struct Location {
    root: String,
    kind: LocationKind,
}

enum LocationKind {
    /// Standalone skills, found under this id.
    Skills(&'static str),
    /// An installed plugin: its id and version.
    Plugin { id: String, version: String },
}

/// Discovers what `codex_home` and `home` (native, when known) hold.
pub fn discover(codex_home: Option<&Path>, home: Option<&str>) -> CapabilitiesDiscoverResponse {
    let codex_home = codex_home.map(|dir| dir.to_string_lossy().into_owned());
    let mut locations = Vec::new();
    if let Some(dir) = &codex_home {
        locations.push(skills_at(join(dir, "skills"), "codex-home-skills"));
    }
    if let Some(home) = home {
        locations.push(skills_at(join(home, ".agents/skills"), "user-agent-skills"));
    }
    locations.push(skills_at("/etc/codex/skills".to_owned(), "system-skills"));
    let mut unresolved = false;
    if let Some(dir) = &codex_home {
        unresolved = installed_plugins(&join(dir, "plugins/cache"), &mut locations);
    }

    let mut response = CapabilitiesDiscoverResponse::default();
    if unresolved {
        response.warnings.push(UNRESOLVED.to_owned());
    }
    let mut budget = Budget::default();
    // What the scans read, shared: bounds the memory of the request as in discoverV1.
    let mut reply = ReplyBudget::default();
    let count = locations.len();
    for (index, location) in locations.into_iter().enumerate() {
        let (found, warned) = load(location, &mut reply);
        if warned && response.warnings.len() < MAX_WARNINGS {
            response.warnings.push(INCOMPLETE.to_owned());
        }
        budget.append(&mut response, found);
        if budget.full() && index + 1 < count {
            budget.truncated = true;
            break;
        }
    }
    response
        .plugins
        .sort_by(|a, b| a.id.cmp(&b.id).then_with(|| a.root.cmp(&b.root)));
    enforce_size(&mut response, budget.truncated);
    response
}

fn skills_at(root: String, id: &'static str) -> Location {
    Location {
        root,
        kind: LocationKind::Skills(id),
    }
}

/// Adds every `<cache>/<marketplace>/<plugin>/<version>` directory; whether a listing failed
/// for another reason than absence.
fn installed_plugins(cache: &str, locations: &mut Vec<Location>) -> bool {
    let mut unresolved = false;
    let mut subdirectories = |dir: &str| -> Vec<String> {
        match fs::read_directory(dir) {
            Ok(entries) => {
                let mut names: Vec<String> = (entries.into_iter())
                    .filter(|entry| entry.is_directory)
                    .map(|entry| entry.name)
                    .collect();
                names.sort_unstable();
                names
            }
            Err(error) => {
                unresolved |= !matches!(error.kind, ErrorKind::NotFound | ErrorKind::OutsideRoots);
                Vec::new()
            }
        }
    };
    for market in subdirectories(cache) {
        let market_dir = join(cache, &market);
        for plugin in subdirectories(&market_dir) {
            let plugin_dir = join(&market_dir, &plugin);
            for version in subdirectories(&plugin_dir) {
                locations.push(Location {
                    root: join(&plugin_dir, &version),
                    kind: LocationKind::Plugin {
                        id: format!("{plugin}@{market}"),
                        version,
                    },
                });
            }
        }
    }
    unresolved
}

/// What one location yields.
enum Found {
    Nothing,
    Skills(Vec<ExecutorSkill>),
    Plugin(Box<ExecutorPlugin>),
}

/// Scans and parses one location; whether anything could not be loaded.
fn load(location: Location, reply: &mut ReplyBudget) -> (Found, bool) {
    let root_uri = uri::encode(&location.root);
    // A location that is not there is normal.
    match fs::metadata(&location.root, true) {
        Ok(meta) if meta.is_directory => {}
        Ok(_) => return (Found::Nothing, false),
        Err(error)
            if matches!(
                error.kind,
                ErrorKind::NotFound | ErrorKind::OutsideRoots | ErrorKind::PermissionDenied
            ) =>
        {
            return (Found::Nothing, false);
        }
        Err(_) => return (Found::Nothing, true),
    }
    let id = match &location.kind {
        LocationKind::Plugin { id, .. } => id.clone(),
        LocationKind::Skills(_) => String::new(),
    };
    let discovery = roots::discover(id, root_uri.clone(), &location.root, reply);
    let mut warned = !discovery.warnings.is_empty() || discovery.error.is_some();
    if let LocationKind::Plugin { .. } = location.kind
        && discovery.plugin.is_none()
    {
        // "installed plugin at <root> has no readable manifest"
        return (Found::Nothing, true);
    }
    let discovery_root = match location.kind {
        LocationKind::Skills(id) => Some(DiscoveryRoot {
            id: id.to_owned(),
            path: root_uri.clone(),
        }),
        LocationKind::Plugin { .. } => None,
    };
    let namespaces = namespaces(&discovery);
    let mut parsed = Vec::new();
    for skill in &discovery.skills {
        match parse_skill(skill, &namespaces, discovery_root.clone()) {
            Some(skill) => parsed.push(skill),
            None => warned = true,
        }
    }
    let found = match (location.kind, discovery.plugin) {
        (LocationKind::Plugin { id, version }, Some(files)) => {
            Found::Plugin(Box::new(ExecutorPlugin {
                id,
                display_name: display_name(&files.manifest.contents, &location.root),
                remote_plugin_id: None,
                version,
                root: root_uri,
                files,
                skills: parsed,
            }))
        }
        _ => Found::Skills(parsed),
    };
    (found, warned)
}

#[derive(Deserialize)]
struct ManifestNames {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    interface: Option<ManifestInterface>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestInterface {
    #[serde(default)]
    display_name: Option<String>,
}

/// The name a manifest gives its plugin, else its root directory's.
fn plugin_name(manifest: &str, plugin_root: &str) -> Option<String> {
    let names = serde_json::from_str::<ManifestNames>(manifest).ok()?;
    match names.name.filter(|name| !name.trim().is_empty()) {
        Some(name) => Some(name),
        None => Some(basename(plugin_root).to_owned()).filter(|name| !name.is_empty()),
    }
}

fn display_name(manifest: &str, plugin_root: &str) -> String {
    let (display, name) = match serde_json::from_str::<ManifestNames>(manifest) {
        Ok(names) => (names.interface.and_then(|i| i.display_name), names.name),
        Err(_) => (None, None),
    };
    [display, name]
        .into_iter()
        .flatten()
        .find(|name| !name.trim().is_empty())
        .unwrap_or_else(|| basename(plugin_root).to_owned())
}

/// Plugin roots (native) and the namespace their manifests give; the first manifest of a root
/// wins.
fn namespaces(discovery: &CapabilityRootDiscovery) -> HashMap<String, String> {
    let mut namespaces = HashMap::new();
    for manifest in &discovery.namespace_manifests {
        let Ok(path) = uri::decode(&manifest.path) else {
            continue;
        };
        let root = parent(parent(&path)).to_owned();
        if let Some(name) = plugin_name(&manifest.contents, &root) {
            namespaces.entry(root).or_insert(name);
        }
    }
    namespaces
}

/// A discovered skill, parsed and named within its nearest plugin; `None` when its front
/// matter is invalid.
fn parse_skill(
    skill: &wexec_guest::protocol::DiscoveredSkillFiles,
    namespaces: &HashMap<String, String>,
    discovery_root: Option<DiscoveryRoot>,
) -> Option<ExecutorSkill> {
    let path = uri::decode(&skill.instructions.path).ok()?;
    let dir = parent(&path);
    let front = skills::front_matter(&skill.instructions.contents, basename(dir))?;
    let mut name = front.name;
    let mut ancestor = dir;
    while !ancestor.is_empty() {
        if let Some(namespace) = namespaces.get(ancestor) {
            if namespace.chars().count() + 1 + name.chars().count() > MAX_QUALIFIED_NAME_CHARS {
                return None;
            }
            name = format!("{namespace}:{name}");
            break;
        }
        ancestor = parent(ancestor);
    }
    let (dependencies, policy) = match &skill.metadata {
        Some(file) => skills::metadata(&file.contents),
        None => (None, None),
    };
    Some(ExecutorSkill {
        name,
        description: front.description,
        short_description: front.short_description,
        path: skill.instructions.path.clone(),
        discovery_root,
        dependencies,
        policy,
    })
}

/// How much of the response is spent.
#[derive(Default)]
struct Budget {
    capabilities: usize,
    bytes: usize,
    truncated: bool,
}

impl Budget {
    fn admit(&mut self, capabilities: usize, bytes: usize) -> bool {
        if self.capabilities + capabilities > MAX_CAPABILITIES
            || self.bytes + bytes > MAX_RESPONSE_BYTES
        {
            self.truncated = true;
            return false;
        }
        self.capabilities += capabilities;
        self.bytes += bytes;
        true
    }

    fn full(&self) -> bool {
        self.capabilities == MAX_CAPABILITIES || self.bytes == MAX_RESPONSE_BYTES
    }

    fn append(&mut self, response: &mut CapabilitiesDiscoverResponse, found: Found) {
        match found {
            Found::Nothing => {}
            Found::Plugin(mut plugin) => {
                // The plugin itself counts as one capability.
                let room = MAX_CAPABILITIES - self.capabilities;
                if room == 0 {
                    self.truncated = true;
                    return;
                }
                if plugin.skills.len() > room - 1 {
                    self.truncated = true;
                    plugin.skills.truncate(room - 1);
                }
                if self.admit(1 + plugin.skills.len(), json_len(&*plugin)) {
                    response.plugins.push(*plugin);
                }
            }
            Found::Skills(skills) => {
                for skill in skills {
                    if self.capabilities == MAX_CAPABILITIES {
                        self.truncated = true;
                        break;
                    }
                    if self.admit(1, json_len(&skill)) {
                        response.skills.push(skill);
                    }
                }
            }
        }
    }
}

fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// A truncated or oversized response says so first and sheds warnings, then capabilities,
/// until it fits.
fn enforce_size(response: &mut CapabilitiesDiscoverResponse, truncated: bool) {
    response.warnings.truncate(MAX_WARNINGS);
    if !truncated && json_len(response) <= MAX_RESPONSE_BYTES {
        return;
    }
    response.warnings.truncate(MAX_WARNINGS - 1);
    response.warnings.insert(0, SIZE_LIMIT.to_owned());
    while json_len(response) > MAX_RESPONSE_BYTES {
        if response.warnings.len() > 1 {
            response.warnings.truncate(1);
        } else if response.skills.pop().is_none() && response.plugins.pop().is_none() {
            break;
        }
    }
}
