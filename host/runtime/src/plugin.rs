//! A loaded plugin: its description checked against the contract and wexec's naming rules,
//! its grants narrowed to what it declared, its roots opened.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bindings::exports::wexec::plugin::handler::PluginInfo;
use crate::bindings::wexec::plugin::types::Capability;
use crate::fs::Roots;
use crate::grants::Grants;
use crate::limits::Limits;
use crate::linked::{Linked, Linking};
use crate::spec::{LoadError, PluginSpec, SUPPORTED_CONTRACTS, invalid};
use crate::state::Granted;

/// Names a plugin may not take: they belong to wexec's own method families.
pub const RESERVED_NAMES: [&str; 13] = [
    "fs",
    "http",
    "env",
    "config",
    "discovery",
    "capabilities",
    "plugin",
    "process",
    "environment",
    "environmentConfig",
    "capabilityRoots",
    "network",
    "initialize",
];

/// A loaded plugin. Calls hold an `Arc` of it, so a call in flight finishes on the version it
/// started with even if a reload replaces it.
pub struct LoadedPlugin {
    /// Unique per load (a reloaded plugin gets a new one): keys idle instances.
    pub generation: u64,
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The methods it serves.
    pub methods: Vec<String>,
    /// The MCP tools it declares (contract 0.2.0).
    pub tools: Vec<crate::tools::ToolDeclaration>,
    /// What it may use: its declarations intersected with the operator's grants.
    pub grants: Grants,
    /// Its limits.
    pub limits: Limits,
    /// What it was loaded from (a reload reuses the plugin when this is unchanged).
    pub(crate) source: PluginSpec,
    /// What its instances may use.
    pub(crate) granted: Arc<Granted>,
    /// Linked and ready to instantiate, or being linked (`linked.rs`).
    pub(crate) pre: Linked,
    /// Its compile-cache key, when there is a cache.
    pub(crate) cache_key: Option<String>,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.name)
            .field("version", &self.version)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

/// Links `plugins` in the background, one after the other, so that their first calls rarely
/// wait; a failure is reported on `failed` (wexec then stops, as when a plugin cannot be loaded
/// at startup). They wait for the end of startup (`Runtime::warm_up`) or a call that builds the
/// engine, whichever comes first; one at a time and at a lower priority, because on a small
/// machine all of them at once held up the first requests.
pub fn link_in_background(
    plugins: Vec<Arc<LoadedPlugin>>,
    linking: Linking,
    failed: tokio::sync::mpsc::UnboundedSender<LoadError>,
) {
    if plugins.is_empty() {
        return;
    }
    tokio::spawn(async move {
        linking.core.started().await;
        for plugin in plugins {
            match plugin
                .pre
                .link_in_background(&linking, &plugin.source)
                .await
            {
                Ok(()) => tracing::debug!(plugin = plugin.name, "plugin linked in the background"),
                // An engine that could not be built is reported as such (`Runtime::failure`).
                Err(_) if linking.core.get().await.is_err() => return,
                Err(reason) => {
                    let _ = failed.send(invalid(&plugin.source, reason));
                }
            }
        }
    });
}

/// `[a-z][a-z0-9-]{0,31}`.
pub fn valid_plugin_name(name: &str) -> bool {
    name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

pub(crate) fn validate(
    info: PluginInfo,
    tools: Option<&str>,
    spec: &PluginSpec,
    pre: Linked,
    cache_key: Option<String>,
    hidden: &[std::path::PathBuf],
) -> Result<LoadedPlugin, String> {
    if !SUPPORTED_CONTRACTS.contains(&info.contract.as_str()) {
        return Err(format!(
            "was built against plugin contract {}, but this wexec implements {}",
            info.contract,
            SUPPORTED_CONTRACTS.join(" and ")
        ));
    }
    let name = &info.name;
    if !valid_plugin_name(name) {
        return Err(format!(
            "plugin name `{name}` must match [a-z][a-z0-9-]{{0,31}}"
        ));
    }
    if !spec.builtin && RESERVED_NAMES.contains(&name.as_str()) {
        return Err(format!("plugin name `{name}` is reserved by wexec"));
    }
    if info.methods.is_empty() {
        return Err("serves no methods".into());
    }
    // The bundled plugins serve wexec's own method families (fs/*, http/*, environment/*).
    for method in info.methods.iter().filter(|_| !spec.builtin) {
        let valid = method
            .strip_prefix(name.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|rest| !rest.is_empty());
        if !valid {
            return Err(format!("method `{method}` must be `{name}/<method>`"));
        }
    }
    let tools = match tools {
        Some(declaration) => crate::tools::declarations(declaration, &info.methods)?,
        None => Vec::new(),
    };
    let wants_vars: BTreeSet<String> = if info.capabilities.contains(&Capability::EnvironmentVars) {
        info.env_vars.iter().cloned().collect()
    } else {
        BTreeSet::new()
    };
    let grants = spec.grants.clone().restrict_to(
        info.capabilities.contains(&Capability::Filesystem),
        info.capabilities.contains(&Capability::Http),
        &wants_vars,
    );
    if let Some((root, cache)) = grants.fs_roots.iter().find_map(|root| {
        let cache = hidden.iter().find(|dir| root.path.starts_with(dir))?;
        Some((root, cache))
    }) {
        return Err(format!(
            "its filesystem root {} lies inside wexec's compile cache {}, which no plugin may reach; grant another directory, or move the cache with XDG_CACHE_HOME",
            root.path.display(),
            cache.display()
        ));
    }
    let roots = Roots::open(&grants.fs_roots, hidden)
        .map_err(|err| format!("cannot open its filesystem roots: {err}"))?;
    static GENERATIONS: AtomicU64 = AtomicU64::new(1);
    let granted = Arc::new(Granted {
        name: info.name.clone(),
        capabilities: info.capabilities,
        grants: grants.clone(),
        limits: spec.limits,
        roots,
    });
    Ok(LoadedPlugin {
        generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
        name: info.name,
        version: info.version,
        methods: info.methods,
        tools,
        grants,
        limits: spec.limits,
        source: spec.clone(),
        granted,
        pre,
        cache_key,
    })
}
