//! A session's idle instances, and the store every instance lives in.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use wasmtime::{CallHook, Engine, Store, UpdateDeadline};

use crate::bindings;
use crate::bindings::exports::wexec::plugin::handler::PluginInfo;
use crate::plugin::LoadedPlugin;
use crate::spec::PluginSpec;
use crate::state::{Granted, HostState, Shared};
use crate::ticker::EPOCH_TICK;

/// Idle instances a session keeps per plugin.
pub const IDLE_INSTANCES_PER_PLUGIN: usize = 4;

/// Instances alive across all sessions above which an instance is not kept idle: sessions'
/// idle instances (detached ones' too) must leave room for calls in the engine's slots.
pub const IDLE_CEILING: usize = crate::engine::INSTANCE_SLOTS as usize / 2;

pub(crate) struct Instance {
    pub(crate) store: Store<HostState>,
    pub(crate) bindings: bindings::Plugin,
}

/// A session's idle instances, per plugin. Dropped with the session.
#[derive(Default)]
pub struct InstancePool {
    /// By plugin name: the generation the instances belong to, and the instances.
    idle: Mutex<HashMap<String, (u64, Vec<Instance>)>>,
}

impl std::fmt::Debug for InstancePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstancePool").finish_non_exhaustive()
    }
}

impl InstancePool {
    /// An idle instance of exactly this load of `plugin`; instances of a version a reload
    /// replaced are dropped.
    pub(crate) fn take(&self, plugin: &LoadedPlugin) -> Option<Instance> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let (generation, instances) = idle.get_mut(&plugin.name)?;
        if *generation != plugin.generation {
            instances.clear();
            return None;
        }
        instances.pop()
    }

    /// Drops every idle instance (the session ended).
    pub fn clear(&self) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    pub(crate) fn put(&self, plugin: &LoadedPlugin, instance: Instance) {
        let alive = instance.store.data().shared.stores.load(Ordering::Relaxed);
        if alive > IDLE_CEILING {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        // Every call puts its instance back: look up before allocating a key.
        if !idle.contains_key(&plugin.name) {
            idle.insert(plugin.name.clone(), (plugin.generation, Vec::new()));
        }
        let Some((generation, instances)) = idle.get_mut(&plugin.name) else {
            return;
        };
        if *generation != plugin.generation {
            // An old version's call finishing after a reload: its instance is not reused.
            if plugin.generation < *generation {
                return;
            }
            *generation = plugin.generation;
            instances.clear();
        }
        if instances.len() < IDLE_INSTANCES_PER_PLUGIN {
            instances.push(instance);
        }
    }
}

/// A store for an instance of `plugin`, its limits and guest-time clock armed.
pub(crate) fn new_store(
    engine: &Engine,
    plugin: Arc<Granted>,
    shared: Arc<Shared>,
) -> Store<HostState> {
    let mut store = Store::new(engine, HostState::new(plugin, shared));
    store.limiter(|state| &mut state.limiter);
    // Every way into guest code passes here, so the epoch ticker runs whenever a guest may.
    store.call_hook(|mut context, hook| {
        let presence = &mut context.data_mut().presence;
        match hook {
            CallHook::CallingWasm => presence.enter(),
            CallHook::ReturningFromWasm => presence.leave(),
            CallHook::CallingHost | CallHook::ReturningFromHost => {}
        }
        Ok(())
    });
    // Checked every tick while guest code runs: trap once the guest's own time is used up,
    // else yield so a busy guest never holds an executor thread. A call that has barely begun
    // runs on to the next tick instead: yielding it would only put it behind every queued
    // request while it holds its instance (which the queue's calls then instantiate anew).
    store.epoch_deadline_callback(|mut context| {
        let clock = &mut context.data_mut().clock;
        if clock.check() {
            return Err(wasmtime::Trap::Interrupt.into());
        }
        if clock.guest_time() < EPOCH_TICK / 2 {
            return Ok(UpdateDeadline::Continue(1));
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store
}

/// Instantiates `pre` once to read the plugin's description and, from a plugin built against
/// a contract that has them, its tool declaration (JSON text), within the plugin's limits and
/// without any grant.
pub(crate) async fn describe(
    engine: &Engine,
    pre: &bindings::PluginPre<HostState>,
    spec: &PluginSpec,
    shared: &Arc<Shared>,
) -> Result<(PluginInfo, Option<String>), String> {
    let placeholder = Arc::new(Granted {
        name: spec.origin.clone(),
        limits: spec.limits,
        ..Granted::default()
    });
    let mut store = new_store(engine, placeholder, Arc::clone(shared));
    store.data_mut().clock.start();
    store.set_epoch_deadline(1);
    let bindings = pre
        .instantiate_async(&mut store)
        .await
        .map_err(|err| format!("cannot be instantiated: {err:#}"))?;
    let handler = bindings.wexec_plugin_handler();
    let info = handler
        .call_describe(&mut store)
        .await
        .map_err(|err| format!("describe failed: {err:#}"))?;
    if info.contract == "0.1.0" {
        return Ok((info, None));
    }
    let declared = handler
        .call_handle(&mut store, crate::tools::TOOLS_METHOD, "null")
        .await
        .map_err(|err| format!("declaring its tools failed: {err:#}"))?;
    match declared {
        Ok(tools) => Ok((info, Some(tools))),
        // A plugin that serves no tools may answer as for any unknown method.
        Err(error) if error.code == wexec_protocol::rpc::METHOD_NOT_FOUND => Ok((info, None)),
        Err(error) => Err(format!("declaring its tools failed: {}", error.message)),
    }
}
