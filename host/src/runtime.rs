//! The plugin runtime: one wasmtime `Engine`, every plugin compiled once (and cached on disk)
//! and pre-linked, instances kept per session, and the host capabilities — one module per WIT
//! interface — through which plugins act.
//!
//! Instance policy (measured, see the closing note of the runtime issue and
//! `benches/plugin_dispatch.rs`): a fresh instance costs tens of microseconds, a call into a
//! live one a few. So each session keeps up to [`IDLE_INSTANCES_PER_PLUGIN`] idle instances per
//! plugin and reuses them. An instance is never shared between sessions, is used by one call
//! at a time, and is discarded after a trap or a limit.

mod bindings;
pub mod builtin;
mod cache;
mod environment;
pub mod filesystem;
pub mod http;
mod limits;
mod log;
mod responder;
mod state;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::value::RawValue;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store, UpdateDeadline};

use self::bindings::exports::wexec::plugin::handler::PluginInfo;
use self::bindings::wexec::plugin::types::Capability;
use self::state::HostState;
use crate::environment::EnvironmentFacts;
use crate::grants::Grants;
use crate::protocol::PluginSummary;
use crate::rpc::{RpcError, RpcResult, internal_error};

pub use self::filesystem::FileHandles;
pub use self::limits::Limits;
pub use self::responder::Reply;

/// The contract version this host implements (`wit/plugin.wit`).
pub const CONTRACT_VERSION: &str = "0.1.0";

/// Idle instances a session keeps per plugin.
pub const IDLE_INSTANCES_PER_PLUGIN: usize = 4;

/// How often the epoch advances: the granularity of time limits, and how often a busy guest
/// yields its thread back to the async runtime.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Plugin instances alive at once across all sessions (pooling allocator slots).
const INSTANCE_SLOTS: u32 = 1_000;

/// Names a plugin may not take: they belong to wexec's own method families.
const RESERVED_NAMES: [&str; 9] = [
    "fs",
    "http",
    "plugin",
    "process",
    "environment",
    "environmentConfig",
    "capabilityRoots",
    "network",
    "initialize",
];

/// What to load.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    /// Where the component came from, for error messages (a path, or `built-in fs`).
    pub origin: String,
    /// The component.
    pub bytes: Arc<[u8]>,
    /// What the operator granted.
    pub grants: Grants,
    /// Its limits.
    pub limits: Limits,
    /// Whether the plugin may use names reserved for wexec's own families (the bundled plugins).
    pub builtin: bool,
}

/// A loaded plugin.
#[derive(Debug)]
pub struct LoadedPlugin {
    /// Position in the runtime's list.
    pub index: usize,
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The methods it serves.
    pub methods: Vec<String>,
    /// What it may use: its declarations intersected with the operator's grants.
    pub grants: Grants,
    /// Its limits.
    pub limits: Limits,
    /// The capabilities it declared.
    capabilities: Vec<Capability>,
    /// Its filesystem roots, opened.
    roots: filesystem::Roots,
}

impl LoadedPlugin {
    /// Whether the plugin declared `capability`.
    fn declared(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }
}

/// A plugin that could not be loaded. Messages name the file and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The engine could not be built.
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    /// Compilation or linking failed.
    #[error("plugin {origin}: {reason}")]
    Invalid {
        /// The file.
        origin: String,
        /// Why.
        reason: String,
    },
    /// Two plugins claim one method.
    #[error("method {method} is claimed by both plugin {first} and plugin {second}")]
    Clash {
        /// The method.
        method: String,
        /// The plugin loaded first.
        first: String,
        /// The other.
        second: String,
    },
}

/// State shared by every instance.
#[derive(Debug)]
pub struct Shared {
    /// Host facts for the environment capability.
    pub facts: Arc<EnvironmentFacts>,
    /// Summaries of every loaded plugin (filled once loading completes).
    pub plugins: Mutex<Vec<PluginSummary>>,
    /// The HTTP client.
    pub http: http::Client,
}

struct Prepared {
    plugin: Arc<LoadedPlugin>,
    pre: bindings::PluginPre<HostState>,
}

/// The runtime.
pub struct Runtime {
    engine: Engine,
    plugins: Vec<Prepared>,
    by_method: HashMap<String, usize>,
    shared: Arc<Shared>,
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
    ) -> Result<Self, LoadError> {
        let max_memory = specs
            .iter()
            .map(|spec| spec.limits.memory_bytes)
            .max()
            .unwrap_or(0);
        let engine = engine(max_memory).map_err(|err| LoadError::Engine(format!("{err:#}")))?;
        let linker = linker(&engine).map_err(|err| LoadError::Engine(format!("{err:#}")))?;
        let shared = Arc::new(Shared {
            facts,
            plugins: Mutex::new(Vec::new()),
            http: http::Client::new().map_err(|err| LoadError::Engine(err.to_string()))?,
        });
        let cache_dir = cache::default_dir();
        let mut plugins: Vec<Prepared> = Vec::new();
        let mut by_method: HashMap<String, usize> = HashMap::new();
        for spec in specs {
            // Some causes (wasmparser's) span lines; a startup error reads best on one.
            let invalid = |reason: String| LoadError::Invalid {
                origin: spec.origin.clone(),
                reason: reason.split_whitespace().collect::<Vec<_>>().join(" "),
            };
            let component = cache::load_or_compile(&engine, &spec.bytes, cache_dir.as_deref())
                .map_err(|err| invalid(format!("not a valid WebAssembly component: {err:#}")))?;
            let pre = linker
                .instantiate_pre(&component)
                .and_then(bindings::PluginPre::new)
                .map_err(|err| {
                    invalid(format!(
                        "does not fit wexec's plugin contract wexec:plugin@{CONTRACT_VERSION}: {err:#}"
                    ))
                })?;
            let info = describe(&engine, &pre, &spec, &shared)
                .await
                .map_err(invalid)?;
            let index = plugins.len();
            let plugin = validate(index, info, &spec).map_err(invalid)?;
            for method in &plugin.methods {
                if let Some(&first) = by_method.get(method) {
                    return Err(LoadError::Clash {
                        method: method.clone(),
                        first: plugins[first].plugin.name.clone(),
                        second: plugin.name.clone(),
                    });
                }
                by_method.insert(method.clone(), index);
            }
            if let Some(other) = plugins
                .iter()
                .find(|other| other.plugin.name == plugin.name)
            {
                return Err(invalid(format!(
                    "a plugin named {} is already loaded",
                    other.plugin.name
                )));
            }
            tracing::info!(
                plugin = plugin.name,
                version = plugin.version,
                origin = spec.origin,
                "plugin loaded"
            );
            plugins.push(Prepared {
                plugin: Arc::new(plugin),
                pre,
            });
        }
        let runtime = Self {
            engine,
            plugins,
            by_method,
            shared,
        };
        *runtime
            .shared
            .plugins
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = runtime.summaries();
        start_epoch_ticker(runtime.engine.clone());
        Ok(runtime)
    }

    /// The plugin serving `method`, if any.
    pub fn plugin_for(&self, method: &str) -> Option<&Arc<LoadedPlugin>> {
        self.by_method
            .get(method)
            .map(|&index| &self.plugins[index].plugin)
    }

    /// Every loaded plugin, in load order.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<LoadedPlugin>> {
        self.plugins.iter().map(|prepared| &prepared.plugin)
    }

    /// Name, version and methods of every plugin.
    pub fn summaries(&self) -> Vec<PluginSummary> {
        self.plugins()
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
        let mut instance = match pool.take(plugin.index) {
            Some(instance) => instance,
            None => self.instantiate(plugin).await?,
        };
        instance.store.data_mut().call = Some(call);
        instance.store.data_mut().clock.start();
        instance.store.set_epoch_deadline(1);
        let outcome = instance
            .bindings
            .wexec_plugin_handler()
            .call_handle(&mut instance.store, method, params)
            .await;
        instance.store.data_mut().call = None;
        match outcome {
            Ok(Ok(json)) => {
                pool.put(plugin.index, instance);
                // Leave room for the reply's envelope.
                if json.len() > crate::rpc::MAX_MESSAGE_BYTES - 1024 {
                    return Err(plugin_failed(
                        plugin,
                        &format!(
                            "its result of {} bytes would exceed the 64 MiB message limit",
                            json.len()
                        ),
                    ));
                }
                RawValue::from_string(json)
                    .map_err(|err| plugin_failed(plugin, &format!("its result is not JSON: {err}")))
            }
            Ok(Err(error)) => {
                pool.put(plugin.index, instance);
                Err(responder::from_wit(error))
            }
            // The instance is dropped here: never reused after a trap or a limit.
            Err(err) => Err(failure(plugin, instance.store.data(), &err)),
        }
    }

    /// Calls a parameterless `method` for wexec itself (no client, no session).
    pub async fn call_internal(&self, method: &str) -> RpcResult {
        let Some(plugin) = self.plugin_for(method) else {
            return Err(crate::rpc::method_not_found(method));
        };
        let call = CallContext {
            reply: None,
            handles: Arc::default(),
        };
        self.call(plugin, &InstancePool::default(), method, "null", call)
            .await
    }

    async fn instantiate(&self, plugin: &Arc<LoadedPlugin>) -> Result<Instance, RpcError> {
        let prepared = &self.plugins[plugin.index];
        let mut store = new_store(&self.engine, Arc::clone(plugin), Arc::clone(&self.shared));
        let bindings = prepared
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|err| failure(plugin, store.data(), &err))?;
        Ok(Instance { store, bindings })
    }
}

fn engine(max_memory: usize) -> wasmtime::Result<Engine> {
    let mut pooling = wasmtime::PoolingAllocationConfig::default();
    pooling
        .total_component_instances(INSTANCE_SLOTS)
        .total_core_instances(INSTANCE_SLOTS * 4)
        .total_memories(INSTANCE_SLOTS)
        .total_tables(INSTANCE_SLOTS * 4)
        .total_stacks(INSTANCE_SLOTS)
        .max_memory_size(max_memory.max(64 * 1024 * 1024))
        .max_component_instance_size(1 << 20)
        .max_core_instance_size(1 << 20);
    let mut config = wasmtime::Config::new();
    config
        .epoch_interruption(true)
        .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pooling));
    Engine::new(&config)
}

fn linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    bindings::Plugin::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |state| state)?;
    Ok(linker)
}

fn new_store(engine: &Engine, plugin: Arc<LoadedPlugin>, shared: Arc<Shared>) -> Store<HostState> {
    let mut store = Store::new(engine, HostState::new(plugin, shared));
    store.limiter(|state| &mut state.limiter);
    // Checked every tick while guest code runs: trap once the guest's own time is used up,
    // else yield so a busy guest never holds an executor thread.
    store.epoch_deadline_callback(|mut context| {
        if context.data_mut().clock.check() {
            return Err(wasmtime::Trap::Interrupt.into());
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store
}

fn start_epoch_ticker(engine: Engine) {
    let ticker = std::thread::Builder::new()
        .name("wexec-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        });
    if let Err(err) = ticker {
        tracing::error!("cannot start the epoch ticker; plugin time limits will not apply: {err}");
    }
}

/// Instantiates `pre` once to read the plugin's description, within the plugin's limits.
async fn describe(
    engine: &Engine,
    pre: &bindings::PluginPre<HostState>,
    spec: &PluginSpec,
    shared: &Arc<Shared>,
) -> Result<PluginInfo, String> {
    let placeholder = Arc::new(LoadedPlugin {
        index: usize::MAX,
        name: spec.origin.clone(),
        version: String::new(),
        methods: Vec::new(),
        grants: Grants::default(),
        limits: spec.limits,
        capabilities: Vec::new(),
        roots: filesystem::Roots::default(),
    });
    let mut store = new_store(engine, placeholder, Arc::clone(shared));
    store.data_mut().clock.start();
    store.set_epoch_deadline(1);
    let bindings = pre
        .instantiate_async(&mut store)
        .await
        .map_err(|err| format!("cannot be instantiated: {err:#}"))?;
    bindings
        .wexec_plugin_handler()
        .call_describe(&mut store)
        .await
        .map_err(|err| format!("describe failed: {err:#}"))
}

fn validate(index: usize, info: PluginInfo, spec: &PluginSpec) -> Result<LoadedPlugin, String> {
    if info.contract != CONTRACT_VERSION {
        return Err(format!(
            "was built against plugin contract {}, but this wexec implements {CONTRACT_VERSION}",
            info.contract
        ));
    }
    let name = &info.name;
    let valid_name = name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid_name {
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
    let roots = filesystem::Roots::open(&grants.fs_roots)
        .map_err(|err| format!("cannot open its filesystem roots: {err}"))?;
    Ok(LoadedPlugin {
        index,
        name: info.name,
        version: info.version,
        methods: info.methods,
        grants,
        limits: spec.limits,
        capabilities: info.capabilities,
        roots,
    })
}

/// -32603 `plugin <name> failed: <reason>`.
fn plugin_failed(plugin: &LoadedPlugin, reason: &str) -> RpcError {
    internal_error(format!("plugin {} failed: {reason}", plugin.name))
}

/// Maps a trap or instantiation failure to the texts of PROTOCOL §11.3.
fn failure(plugin: &LoadedPlugin, state: &HostState, err: &wasmtime::Error) -> RpcError {
    if state.clock.timed_out {
        return internal_error(format!(
            "plugin {} exceeded its time limit of {} ms",
            plugin.name,
            state.clock.limit().as_millis()
        ));
    }
    if state.limiter.memory_exceeded {
        return internal_error(format!("plugin {} exceeded its memory limit", plugin.name));
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

/// What the capabilities need to know about the call in progress.
pub struct CallContext {
    /// Sends the reply (early, through the responder, or when the handler returns); `None`
    /// for wexec's own calls, which have no client.
    pub reply: Option<Arc<Reply>>,
    /// The calling connection's file handles.
    pub handles: Arc<FileHandles>,
}

struct Instance {
    store: Store<HostState>,
    bindings: bindings::Plugin,
}

/// A session's idle instances, per plugin. Dropped with the session.
#[derive(Default)]
pub struct InstancePool {
    idle: Mutex<HashMap<usize, Vec<Instance>>>,
}

impl std::fmt::Debug for InstancePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstancePool").finish_non_exhaustive()
    }
}

impl InstancePool {
    fn take(&self, plugin: usize) -> Option<Instance> {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(&plugin)
            .and_then(Vec::pop)
    }

    /// Drops every idle instance (the session ended).
    pub fn clear(&self) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn put(&self, plugin: usize, instance: Instance) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let instances = idle.entry(plugin).or_default();
        if instances.len() < IDLE_INSTANCES_PER_PLUGIN {
            instances.push(instance);
        }
    }
}

/// A plugin file read from disk.
pub fn read_plugin_file(path: &std::path::Path) -> Result<Arc<[u8]>, LoadError> {
    std::fs::read(path)
        .map(Arc::from)
        .map_err(|err| LoadError::Invalid {
            origin: path.display().to_string(),
            reason: format!("cannot be read: {err}"),
        })
}
