//! Calls into plugins, each on an instance of the calling session's pool, and what a trap or a
//! limit means for the call ([`CallError`]).

use std::sync::Arc;

use super::host::responder::from_wit;
use super::json;
use super::outcome::{CallError, CallResult};
use super::plugin::LoadedPlugin;
use super::pool::{Instance, InstancePool, new_store};
use super::state::{CallContext, HostState};
use super::table::Runtime;

/// How often a call waits for an instance slot while all are taken.
const SLOT_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

impl Runtime {
    /// Calls `method` of `plugin` with `params` (JSON text) on an instance of `pool`.
    pub async fn call(
        &self,
        plugin: &Arc<LoadedPlugin>,
        pool: &InstancePool,
        method: &str,
        params: &str,
        call: CallContext,
    ) -> CallResult {
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
                Err(CallError::Answered(from_wit(error)))
            }
            // The instance is dropped here: never reused after a trap or a limit.
            Err(err) => Err(failure(plugin, instance.store.data(), &err)),
        }
    }

    /// Calls a parameterless `method` for wexec itself (no client, no session).
    pub async fn call_internal(&self, method: &str) -> CallResult {
        let Some(plugin) = self.plugin_for(method) else {
            return Err(CallError::NoPlugin {
                method: method.to_owned(),
            });
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

    async fn instantiate(&self, plugin: &Arc<LoadedPlugin>) -> Result<Instance, CallError> {
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

fn plugin_failed(plugin: &LoadedPlugin, reason: &str) -> CallError {
    CallError::Failed {
        plugin: plugin.name.clone(),
        reason: reason.to_owned(),
    }
}

/// What a trap or an instantiation failure means.
fn failure(plugin: &LoadedPlugin, state: &HostState, err: &wasmtime::Error) -> CallError {
    if state.clock.timed_out {
        return CallError::TimeLimit {
            plugin: plugin.name.clone(),
            limit_ms: state.clock.limit().as_millis(),
        };
    }
    if state.limiter.memory_exceeded {
        return CallError::MemoryLimit {
            plugin: plugin.name.clone(),
        };
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
