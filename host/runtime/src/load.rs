//! Loading plugins: at startup ([`Runtime::load`]) and at a reload ([`Runtime::reload`]), each
//! compiled or found in the compile cache, linked, described and validated, and the method
//! table built from them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use wasmtime::Engine;

use super::bindings::exports::wexec::plugin::handler::PluginInfo;
use super::engine::{self, Core};
use super::linked::{self, Linked, Linking};
use super::plugin::{LoadedPlugin, link_in_background, validate};
use super::pool::describe;
use super::spec::{CONTRACT_VERSION, LoadError, PluginSpec, invalid};
use super::state::{HostState, Shared};
use super::table::{Runtime, Table};
use super::{bindings, cache, net};
use crate::facts::EnvironmentFacts;

impl Runtime {
    /// Builds the engine and loads `specs`: compile (or load from the cache), link, describe,
    /// validate names and methods.
    pub async fn load(
        specs: Vec<PluginSpec>,
        facts: Arc<EnvironmentFacts>,
        writable_by_processes: &[std::path::PathBuf],
        also_hidden: &[std::path::PathBuf],
        cache_key: Option<[u8; cache::KEY_BYTES]>,
    ) -> Result<Self, LoadError> {
        let max_memory = specs
            .iter()
            .map(|spec| spec.limits.memory_bytes)
            .max()
            .unwrap_or(0);
        // The engine is built on its own thread; finding what the cache remembers
        // needs no engine, and a start that finds everything remembered does not wait for it.
        let core = Core::build(max_memory)
            .map_err(|err| LoadError::Engine(format!("cannot start a thread: {err}")))?;
        // Where processes or plugins may write: the cache must not be reachable through a link
        // there.
        let exposed: Vec<_> = specs
            .iter()
            .flat_map(|spec| &spec.grants.fs_roots)
            .filter(|root| root.writable)
            .map(|root| root.path.clone())
            .chain(writable_by_processes.iter().cloned())
            .collect();
        // Without a key nothing read back could be trusted: no cache.
        let cache = cache_key.and_then(|key| {
            cache::default_dir().and_then(|dir| cache::Cache::open(&dir, &exposed, key))
        });
        let fingerprint = engine::fingerprint(max_memory);
        let keys: Vec<Option<String>> = specs
            .iter()
            .map(|spec| {
                cache
                    .as_ref()
                    .map(|_| cache::key(&fingerprint, &spec.bytes, spec.sha256))
            })
            .collect();
        // Bundled plugins described before are validated from that and linked later.
        let remembered: Vec<Option<(PluginInfo, Option<String>)>> = specs
            .iter()
            .zip(&keys)
            .map(|(spec, key)| {
                let (cache, key) = (cache.as_ref()?, key.as_deref()?);
                // Only a description this wexec could have written for this very plugin.
                let name = spec.origin.strip_prefix("built-in ")?;
                spec.builtin
                    .then(|| linked::remembered(cache, key))
                    .flatten()
                    .filter(|(info, _)| info.contract == CONTRACT_VERSION && info.name == name)
            })
            .collect();
        let shared = Arc::new(Shared {
            facts,
            plugins: Mutex::new(Vec::new()),
            http: net::Client::default(),
            ticker: Arc::clone(core.ticker()),
            stores: Arc::default(),
        });
        let hidden = cache
            .iter()
            .map(|cache| cache.dir().to_path_buf())
            .chain(also_hidden.iter().cloned())
            .collect();
        let runtime = Self {
            linking: Linking {
                core: core.clone(),
                cache,
                fingerprint,
            },
            core,
            hidden,
            max_memory,
            table: RwLock::default(),
            shared,
            reloading: tokio::sync::Mutex::new(()),
            failed: {
                let (send, receive) = tokio::sync::mpsc::unbounded_channel();
                (send, tokio::sync::Mutex::new(receive))
            },
        };
        // The others are linked now. Deserializing (or compiling) and linking are CPU-bound
        // and independent: one thread each, side by side. Startup serves nobody yet, so
        // blocking this thread for them holds up nothing. Describing runs guest code: one after
        // the other, in order.
        let built = match remembered.iter().any(Option::is_none) {
            true => Some(runtime.core.get().await.map_err(LoadError::Engine)?),
            false => None,
        };
        let linking = &runtime.linking;
        let starts = std::thread::scope(|scope| {
            let threads: Vec<_> = specs
                .iter()
                .zip(remembered)
                .map(|(spec, remembered)| match (remembered, &built) {
                    (Some(info), _) => Ok(Start::Remembered(info)),
                    (None, Some(built)) => Err(scope.spawn(move || {
                        Start::Linked(Arc::clone(built), linking.link(built, spec, None))
                    })),
                    (None, None) => unreachable!("built whenever a plugin is not remembered"),
                })
                .collect();
            threads
                .into_iter()
                .map(|start| {
                    start.unwrap_or_else(|thread| {
                        thread
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                })
                .collect::<Vec<_>>()
        });
        let mut plugins = Vec::with_capacity(specs.len());
        let mut later = Vec::new();
        for ((spec, key), start) in specs.into_iter().zip(keys).zip(starts) {
            let plugin = match start {
                Start::Remembered((info, tools)) => {
                    let plugin = Arc::new(
                        validate(
                            info,
                            tools.as_deref(),
                            &spec,
                            Linked::pending(),
                            key,
                            &runtime.hidden,
                        )
                        .map_err(|reason| invalid(&spec, reason))?,
                    );
                    later.push(Arc::clone(&plugin));
                    plugin
                }
                Start::Linked(built, pre) => runtime.finish(&built.engine, spec, pre?, key).await?,
            };
            tracing::info!(
                plugin = plugin.name,
                version = plugin.version,
                origin = plugin.source.origin,
                "plugin loaded"
            );
            plugins.push(plugin);
        }
        runtime.install(assemble(plugins)?);
        link_in_background(later, runtime.linking.clone(), runtime.failed.0.clone());
        Ok(runtime)
    }

    /// Replaces the plugins with `specs` atomically: unchanged ones (same file contents, grants
    /// and limits) are kept as they are, changed ones are compiled, described and validated.
    /// Any failure leaves the running plugins untouched. Calls in flight finish on the version
    /// they started with; new calls use the new one. Returns the names of the plugins that
    /// changed (loaded, replaced or removed).
    pub async fn reload(&self, specs: Vec<PluginSpec>) -> Result<Vec<String>, LoadError> {
        let _one_at_a_time = self.reloading.lock().await;
        let current = self.table();
        let mut plugins = Vec::with_capacity(specs.len());
        let mut changed = Vec::new();
        for spec in specs {
            let kept = current
                .plugins
                .iter()
                .find(|plugin| plugin.source == spec)
                .cloned();
            match kept {
                Some(plugin) => plugins.push(plugin),
                None => {
                    if spec.limits.memory_bytes > self.max_memory {
                        return Err(LoadError::Invalid {
                            origin: spec.origin,
                            reason: format!(
                                "its memory limit of {} bytes exceeds the {} bytes wexec was started with; restart wexec to raise it",
                                spec.limits.memory_bytes, self.max_memory
                            ),
                        });
                    }
                    let plugin = self.prepare(spec).await?;
                    changed.push(plugin.name.clone());
                    plugins.push(plugin);
                }
            }
        }
        for old in &current.plugins {
            if !plugins.iter().any(|plugin| Arc::ptr_eq(plugin, old))
                && !changed.contains(&old.name)
            {
                changed.push(old.name.clone());
            }
        }
        let table = assemble(plugins)?;
        if !changed.is_empty() {
            self.install(table);
        }
        Ok(changed)
    }

    /// Compiles (or loads from the cache), links, describes and validates one plugin.
    async fn prepare(&self, spec: PluginSpec) -> Result<Arc<LoadedPlugin>, LoadError> {
        let built = self.core.get().await.map_err(LoadError::Engine)?;
        let key = self.linking.key(&spec);
        let pre = self.linking.link(&built, &spec, None)?;
        self.finish(&built.engine, spec, pre, key).await
    }

    /// Describes and validates a linked plugin; remembers a bundled plugin's description.
    async fn finish(
        &self,
        engine: &Engine,
        spec: PluginSpec,
        pre: bindings::PluginPre<HostState>,
        key: Option<String>,
    ) -> Result<Arc<LoadedPlugin>, LoadError> {
        let (info, tools) = describe(engine, &pre, &spec, &self.shared)
            .await
            .map_err(|reason| invalid(&spec, reason))?;
        let description = linked::Description::of(&info, tools.as_deref());
        let plugin = validate(
            info,
            tools.as_deref(),
            &spec,
            Linked::ready(pre),
            key,
            &self.hidden,
        )
        .map_err(|reason| invalid(&spec, reason))?;
        if let (true, Some(cache), Some(key)) =
            (spec.builtin, &self.linking.cache, &plugin.cache_key)
        {
            linked::remember(cache, key, &description);
        }
        Ok(Arc::new(plugin))
    }
}

/// How a plugin starts: from the description the cache remembers (linked later), or linked
/// now on the engine it was linked with.
enum Start {
    Remembered((PluginInfo, Option<String>)),
    Linked(
        Arc<engine::Built>,
        Result<bindings::PluginPre<HostState>, LoadError>,
    ),
}

/// Builds the method table, refusing duplicate names and methods claimed twice.
fn assemble(plugins: Vec<Arc<LoadedPlugin>>) -> Result<Table, LoadError> {
    let mut by_method: HashMap<String, usize> = HashMap::new();
    for (index, plugin) in plugins.iter().enumerate() {
        for method in &plugin.methods {
            if let Some(&first) = by_method.get(method) {
                return Err(LoadError::Clash {
                    method: method.clone(),
                    first: plugins[first].name.clone(),
                    second: plugin.name.clone(),
                });
            }
            by_method.insert(method.clone(), index);
        }
        if let Some(other) = plugins[..index]
            .iter()
            .find(|other| other.name == plugin.name)
        {
            return Err(LoadError::Invalid {
                origin: plugin.source.origin.clone(),
                reason: format!("a plugin named {} is already loaded", other.name),
            });
        }
    }
    Ok(Table { plugins, by_method })
}
