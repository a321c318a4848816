//! The plugin runtime: one wasmtime `Engine`, every plugin compiled once (and cached on disk)
//! and pre-linked, instances kept per session, and the host capabilities — one module per WIT
//! interface — through which plugins act.
//!
//! Instance policy (measured by `benches/plugin_dispatch.rs`): a fresh instance costs an order
//! of magnitude more than a call into a live one. So each session keeps up to [`IDLE_INSTANCES_PER_PLUGIN`] idle instances per
//! plugin and reuses them. An instance is never shared between sessions, is used by one call
//! at a time, and is discarded after a trap or a limit.

mod bindings;
mod cache;
mod engine;
mod environment;
pub mod facts;
mod filesystem;
pub mod fs;
pub mod grants;
mod http;
pub mod inspect;
mod json;
mod limits;
mod linked;
mod log;
mod net;
mod plugin;
mod pool;
pub mod port;
mod resources;
mod responder;
mod spec;
mod state;
pub mod threads;
mod ticker;
mod tools;
mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use wasmtime::Engine;

use self::bindings::exports::wexec::plugin::handler::PluginInfo;
use self::engine::Core;
use self::linked::{Linked, Linking};
use self::plugin::{link_in_background, validate};
use self::pool::{Instance, describe, new_store};
use self::spec::invalid;
use self::state::HostState;
use crate::facts::EnvironmentFacts;
use wexec_protocol::PluginSummary;
use wexec_protocol::rpc::{RpcError, RpcResult};

pub use self::cache::KEY_BYTES as CACHE_KEY_BYTES;
pub use self::fs::{ConnectionHandles, FileHandles, PerPlugin, WatchSlot};
pub use self::limits::Limits;
pub use self::plugin::{LoadedPlugin, RESERVED_NAMES, valid_plugin_name};
pub use self::pool::{IDLE_INSTANCES_PER_PLUGIN, InstancePool};
pub use self::spec::{
    CONTRACT_VERSION, LoadError, PluginSpec, SUPPORTED_CONTRACTS, read_plugin_file,
};
pub use self::state::{CallContext, Shared};
pub use self::tools::{TOOLS_METHOD, ToolDeclaration, valid_tool_name};

pub use self::facts::VERSION;
pub use self::ticker::EPOCH_TICK;

/// How often a call waits for an instance slot while all are taken.
const SLOT_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// The plugins in service, swapped whole by a reload.
#[derive(Default)]
struct Table {
    plugins: Vec<Arc<LoadedPlugin>>,
    by_method: HashMap<String, usize>,
}

/// The runtime.
pub struct Runtime {
    /// The engine and linker, built on their own thread (`engine.rs`).
    core: Core,
    /// The compile cache (if usable) and the engine's fingerprint, for linking.
    linking: Linking,
    /// Directories no plugin's filesystem capability exposes (the compile cache).
    hidden: Vec<std::path::PathBuf>,
    /// The largest memory limit the engine was configured for.
    max_memory: usize,
    table: RwLock<Arc<Table>>,
    shared: Arc<Shared>,
    /// Serializes reloads.
    reloading: tokio::sync::Mutex<()>,
    /// What went wrong after [`Self::load`] returned: the engine's build, a background link.
    failed: (
        tokio::sync::mpsc::UnboundedSender<LoadError>,
        tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<LoadError>>,
    ),
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("plugins", &self.summaries())
            .finish_non_exhaustive()
    }
}

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

    fn install(&self, table: Table) {
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
        *self
            .shared
            .plugins
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = self.summaries();
    }

    fn table(&self) -> Arc<Table> {
        Arc::clone(&self.table.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Startup is over: build the engine and link the bundled plugins [`Self::load`] left for
    /// later, unless a call already made them start. Until then they wait, so that they do not
    /// compete with the first answers for the CPU.
    pub fn warm_up(&self) {
        self.core.start();
    }

    /// Returns a load failure found after [`Self::load`] returned (the engine could not be built,
    /// a bundled plugin linked in the background could not be linked); pending while none is.
    /// wexec stops on it, as it would have at startup.
    pub async fn failure(&self) -> LoadError {
        let engine = async {
            // Waiting for the build must not start it.
            self.core.started().await;
            match self.core.get().await {
                Err(reason) => LoadError::Engine(reason),
                Ok(_) => std::future::pending().await,
            }
        };
        let link = async {
            let mut failed = self.failed.1.lock().await;
            match failed.recv().await {
                Some(failure) => failure,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            failure = engine => failure,
            failure = link => failure,
        }
    }

    /// Paths no plugin may reach: the compile cache (no process may write it either), and what
    /// [`Runtime::load`] was given.
    pub fn hidden(&self) -> &[std::path::PathBuf] {
        &self.hidden
    }

    /// The compile cache's directory, if there is one.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.linking.cache.as_ref().map(|cache| cache.dir())
    }

    /// The plugin serving `method`, if any.
    pub fn plugin_for(&self, method: &str) -> Option<Arc<LoadedPlugin>> {
        let table = self.table();
        table
            .by_method
            .get(method)
            .map(|&index| Arc::clone(&table.plugins[index]))
    }

    /// Every loaded plugin, in load order.
    pub fn plugins(&self) -> Vec<Arc<LoadedPlugin>> {
        self.table().plugins.clone()
    }

    /// Name, version and methods of every plugin.
    pub fn summaries(&self) -> Vec<PluginSummary> {
        self.plugins()
            .iter()
            .map(|plugin| PluginSummary {
                name: plugin.name.clone(),
                version: plugin.version.clone(),
                methods: plugin.methods.clone(),
            })
            .collect()
    }

    /// Calls `method` of `plugin` with `params` (JSON text) on an instance of `pool`.
    pub async fn call(
        &self,
        plugin: &Arc<LoadedPlugin>,
        pool: &InstancePool,
        method: &str,
        params: &str,
        call: CallContext,
    ) -> RpcResult {
        let mut instance = match pool.take(plugin) {
            Some(instance) => instance,
            None => self.instantiate(plugin).await?,
        };
        instance.store.data_mut().call = Some(call);
        instance.store.data_mut().clock.start();
        instance.store.data_mut().log.reset();
        instance.store.set_epoch_deadline(1);
        let outcome = instance
            .bindings
            .wexec_plugin_handler()
            .call_handle(&mut instance.store, method, params)
            .await;
        instance.store.data_mut().call = None;
        instance.store.data_mut().rooms.clear();
        instance
            .store
            .data()
            .log
            .report(&plugin.name, plugin.limits.log_bytes);
        match outcome {
            Ok(Ok(json)) => {
                pool.put(plugin, instance);
                // Leave room for the reply's envelope.
                if json.len() > wexec_protocol::limits::MAX_MESSAGE_BYTES - 1024 {
                    return Err(plugin_failed(
                        plugin,
                        &format!(
                            "its result of {} bytes would exceed the 64 MiB message limit",
                            json.len()
                        ),
                    ));
                }
                json::value(json)
                    .map_err(|err| plugin_failed(plugin, &format!("its result is not JSON: {err}")))
            }
            Ok(Err(error)) => {
                pool.put(plugin, instance);
                Err(responder::from_wit(error))
            }
            // The instance is dropped here: never reused after a trap or a limit.
            Err(err) => Err(failure(plugin, instance.store.data(), &err)),
        }
    }

    /// `environmentInfo` for `initialize`: what the bundled `env` plugin's `environment/info`
    /// returns. It is a function of the plugin, the host facts and the loaded plugins, so the
    /// compile cache remembers it under a key of all three (`<env key>.environment.json`, one
    /// file rewritten when they change), and a start whose inputs are unchanged answers without
    /// waiting for the plugin to be linked. The process sandbox's verdict is found anew at every
    /// start: it is never remembered, and once it is known the plugin is asked.
    pub async fn environment_info(&self) -> RpcResult {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Memo {
            inputs: String,
            info: serde_json::Value,
        }
        let plugin = self
            .plugin_for(wexec_protocol::ENVIRONMENT_INFO)
            .ok_or_else(|| RpcError::method_not_found(wexec_protocol::ENVIRONMENT_INFO))?;
        let sandbox_known = crate::facts::sandbox().await.is_some();
        let memo = match (&self.linking.cache, &plugin.cache_key) {
            (Some(cache), Some(key)) if plugin.source.builtin => {
                let facts = format!("{:?}", self.shared.facts);
                let plugins = serde_json::to_vec(&self.summaries()).unwrap_or_default();
                let inputs = cache::derived_key(&[key.as_bytes(), facts.as_bytes(), &plugins]);
                Some((cache, format!("{key}.environment.json"), inputs))
            }
            _ => None,
        };
        let remembered = memo.as_ref().and_then(|(cache, name, inputs)| {
            cache
                .memo(name)
                .and_then(|data| serde_json::from_slice::<Memo>(&data).ok())
                .filter(|memo| &memo.inputs == inputs && memo.info.is_object())
        });
        if let Some(memo) = remembered.as_ref().filter(|_| !sandbox_known) {
            // Re-encoded: what goes on the wire is compact JSON whatever the file holds.
            return serde_json::value::to_raw_value(&memo.info)
                .map_err(|err| RpcError::internal_error(err.to_string()));
        }
        let info = self.call_internal(wexec_protocol::ENVIRONMENT_INFO).await?;
        // Through a `Value` either way, so a remembered answer is the same text as a fresh one.
        let info: serde_json::Value = serde_json::from_str(info.get())
            .map_err(|err| RpcError::internal_error(err.to_string()))?;
        let text = serde_json::value::to_raw_value(&info)
            .map_err(|err| RpcError::internal_error(err.to_string()))?;
        // Written once per change of its inputs, not at every refresh after the probe.
        if let (Some((cache, name, inputs)), None) = (memo, remembered) {
            // What a start knows before its probe: without the verdict.
            let mut info = info;
            if let Some(wexec) = info
                .get_mut("wexec")
                .and_then(serde_json::Value::as_object_mut)
            {
                wexec.remove("sandbox");
            }
            if let Ok(data) = serde_json::to_vec(&Memo { inputs, info }) {
                cache.remember(&name, &data);
            }
        }
        Ok(text)
    }

    /// Calls a parameterless `method` for wexec itself (no client, no session).
    pub async fn call_internal(&self, method: &str) -> RpcResult {
        let Some(plugin) = self.plugin_for(method) else {
            return Err(RpcError::method_not_found(method));
        };
        let call = CallContext {
            port: None,
            handles: Arc::default(),
            watch: Arc::default(),
            sandbox: None,
        };
        self.call(&plugin, &InstancePool::default(), method, "null", call)
            .await
    }

    async fn instantiate(&self, plugin: &Arc<LoadedPlugin>) -> Result<Instance, RpcError> {
        let built = self.core.get().await.map_err(|reason| {
            plugin_failed(
                plugin,
                &format!("the WebAssembly engine could not be built: {reason}"),
            )
        })?;
        let pre = plugin
            .pre
            .get(&self.linking, &plugin.source)
            .await
            .map_err(|reason| plugin_failed(plugin, &reason))?;
        // Every slot taken (calls of many connections at once): wait for one, within the
        // plugin's time limit, rather than fail the call.
        let deadline = std::time::Instant::now() + plugin.limits.time;
        loop {
            let mut store = new_store(
                &built.engine,
                Arc::clone(&plugin.granted),
                Arc::clone(&self.shared),
            );
            match pre.instantiate_async(&mut store).await {
                Ok(bindings) => return Ok(Instance { store, bindings }),
                Err(err)
                    if err
                        .downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                        .is_some()
                        && std::time::Instant::now() < deadline =>
                {
                    drop(store);
                    tokio::time::sleep(SLOT_RETRY).await;
                }
                Err(err) => return Err(failure(plugin, store.data(), &err)),
            }
        }
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

/// -32603 `plugin <name> failed: <reason>`.
fn plugin_failed(plugin: &LoadedPlugin, reason: &str) -> RpcError {
    RpcError::internal_error(format!("plugin {} failed: {reason}", plugin.name))
}

/// Maps a trap or instantiation failure to the texts of docs/protocol.md §11.3.
fn failure(plugin: &LoadedPlugin, state: &HostState, err: &wasmtime::Error) -> RpcError {
    if state.clock.timed_out {
        return RpcError::internal_error(format!(
            "plugin {} exceeded its time limit of {} ms",
            plugin.name,
            state.clock.limit().as_millis()
        ));
    }
    if state.limiter.memory_exceeded {
        return RpcError::internal_error(format!(
            "plugin {} exceeded its memory limit",
            plugin.name
        ));
    }
    let reason = match err.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{}", err.root_cause()),
    };
    let reason = match state.stderr_tail() {
        Some(stderr) => format!("{reason} (guest stderr: {stderr})"),
        None => reason,
    };
    tracing::warn!(plugin = plugin.name, "{reason}");
    plugin_failed(plugin, &reason)
}
