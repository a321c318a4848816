//! The wasmtime engine and linker every plugin runs on, and the thread that builds them.
//!
//! Building the engine takes milliseconds, nearly all of it the kernel setting up the instance pools
//! (a guard page per fiber stack, one `mprotect` each). It is built on its own thread, which then
//! stays as the epoch ticker: what needs it waits for it ([`Core::get`]), and a start that can
//! answer its first requests from what the compile cache remembers does not wait at all
//! (`linked.rs`). The thread starts building when the first thing needs the engine or when the
//! host says startup is over ([`Core::start`]), whichever comes first: built at once, it took
//! a CPU from the first answer on a 2-core machine.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tokio::sync::watch;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use super::bindings;
use super::state::HostState;

use crate::ticker::Ticker;

/// Plugin instances alive at once across all sessions (pooling allocator slots).
pub const INSTANCE_SLOTS: u32 = 1_000;

/// The smallest linear-memory reservation an engine is built with.
const MIN_MAX_MEMORY: usize = 64 * 1024 * 1024;

/// The engine and the linker with every host import.
pub struct Built {
    /// The engine.
    pub engine: Engine,
    /// The linker.
    pub linker: Linker<HostState>,
}

impl Built {
    /// An engine whose memories may grow to `max_memory` bytes, and its linker.
    fn new(max_memory: usize) -> Result<Self, String> {
        let engine = engine(max_memory).map_err(|err| format!("{err:#}"))?;
        let linker = linker(&engine).map_err(|err| format!("{err:#}"))?;
        Ok(Self { engine, linker })
    }
}

/// The engine and linker being built, or built.
#[derive(Clone)]
pub struct Core {
    built: watch::Receiver<Option<Result<Arc<Built>, String>>>,
    /// The build's outcome once seen: later calls read it without a lock.
    seen: Arc<OnceLock<Result<Arc<Built>, String>>>,
    /// The epoch ticker the stores of this engine count themselves in with.
    ticker: Arc<Ticker>,
    /// Taken to let the thread build ([`Core::start`]).
    go: Arc<Mutex<Option<std::sync::mpsc::Sender<()>>>>,
    /// Whether [`Core::start`] was called, for what waits for it without calling it.
    started: Arc<watch::Sender<bool>>,
}

impl Core {
    /// Starts the thread that builds an engine whose memories may grow to `max_memory` bytes
    /// once [`Core::start`] is called, and then ticks the epoch.
    pub fn build(max_memory: usize) -> std::io::Result<Self> {
        let (done, built) = watch::channel(None);
        let ticker = Arc::new(Ticker::default());
        let ticking = Arc::clone(&ticker);
        let (go, wait) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("wexec-engine".into())
            .spawn(move || {
                // Nothing is ever sent: the sender dropped is the signal.
                let _ = wait.recv();
                let outcome = Built::new(max_memory).map(Arc::new);
                let engine = outcome.as_ref().ok().map(|built| built.engine.clone());
                done.send_replace(Some(outcome));
                if let Some(engine) = engine {
                    ticking.run(&engine);
                }
            })?;
        Ok(Self {
            built,
            seen: Arc::default(),
            ticker,
            go: Arc::new(Mutex::new(Some(go))),
            started: Arc::new(watch::Sender::new(false)),
        })
    }

    /// Lets the engine be built now. Idempotent; [`Core::get`] calls it.
    pub fn start(&self) {
        drop(
            self.go
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        self.started
            .send_if_modified(|started| !std::mem::replace(started, true));
    }

    /// Resolves once [`Core::start`] was called, without calling it: work that can wait for
    /// the end of startup waits here.
    pub async fn started(&self) {
        let _ = self.started.subscribe().wait_for(|started| *started).await;
    }

    /// The epoch ticker of this core's engine.
    pub fn ticker(&self) -> &Arc<Ticker> {
        &self.ticker
    }

    /// Builds a core on this thread and starts its epoch ticker (`wexec plugin inspect`).
    pub fn build_here(max_memory: usize) -> Result<(Built, Arc<Ticker>), String> {
        let built = Built::new(max_memory)?;
        let ticker = Arc::new(Ticker::default());
        let ticking = (Arc::clone(&ticker), built.engine.clone());
        let thread = std::thread::Builder::new()
            .name("wexec-epoch".into())
            .spawn(move || ticking.0.run(&ticking.1));
        if let Err(err) = thread {
            tracing::error!(
                "cannot start the epoch ticker; plugin time limits will not apply: {err}"
            );
        }
        Ok((built, ticker))
    }

    /// The engine and linker, once built; the build's error if it failed.
    pub async fn get(&self) -> Result<Arc<Built>, String> {
        if let Some(seen) = self.seen.get() {
            return seen.clone();
        }
        self.start();
        let mut built = self.built.clone();
        let outcome = match built.wait_for(Option::is_some).await {
            Ok(outcome) => outcome
                .clone()
                .unwrap_or_else(|| Err("the engine was not built".to_owned())),
            Err(_) => Err("the engine's build thread is gone".to_owned()),
        };
        self.seen.get_or_init(|| outcome).clone()
    }
}

/// What the compile cache keys artifacts by besides the component: everything [`engine`] sets
/// that can change the code compiled (wasmtime's version is in the artifact, and checked).
pub fn fingerprint(max_memory: usize) -> String {
    format!(
        "pooling slots={INSTANCE_SLOTS} max-memory={} epoch-interruption {}",
        max_memory.max(MIN_MAX_MEMORY),
        std::env::consts::ARCH
    )
}

fn engine(max_memory: usize) -> wasmtime::Result<Engine> {
    let mut pooling = wasmtime::PoolingAllocationConfig::default();
    pooling
        .total_component_instances(INSTANCE_SLOTS)
        .total_core_instances(INSTANCE_SLOTS * 4)
        .total_memories(INSTANCE_SLOTS)
        .total_tables(INSTANCE_SLOTS * 4)
        .total_stacks(INSTANCE_SLOTS)
        .max_memory_size(max_memory.max(MIN_MAX_MEMORY))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What waits for the end of startup does not start the build; what needs the engine does.
    #[tokio::test]
    async fn the_engine_is_built_when_started_or_needed() {
        let core = Core::build(MIN_MAX_MEMORY).expect("thread");
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), core.started());
        assert!(waiting.await.is_err(), "started before anyone started it");
        assert!(core.built.borrow().is_none(), "built before it was started");
        let built = core.get().await;
        assert!(built.is_ok(), "{:?}", built.err());
        core.started().await;
        core.start();
        assert!(core.get().await.is_ok());
    }
}
