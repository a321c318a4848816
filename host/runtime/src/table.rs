//! The runtime and the plugins in service: a table swapped whole by a reload, and what the
//! server asks of it. Loading is `load.rs`, calls are `call.rs`.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use wexec_protocol::PluginSummary;

use super::engine::Core;
use super::linked::Linking;
use super::plugin::LoadedPlugin;
use super::spec::LoadError;
use super::state::Shared;

/// The plugins in service, swapped whole by a reload.
#[derive(Default)]
pub(crate) struct Table {
    pub(crate) plugins: Vec<Arc<LoadedPlugin>>,
    pub(crate) by_method: HashMap<String, usize>,
}

/// The runtime.
pub struct Runtime {
    /// The engine and linker, built on their own thread (`engine.rs`).
    pub(crate) core: Core,
    /// The compile cache (if usable) and the engine's fingerprint, for linking.
    pub(crate) linking: Linking,
    /// Directories no plugin's filesystem capability exposes (the compile cache).
    pub(crate) hidden: Vec<std::path::PathBuf>,
    /// The largest memory limit the engine was configured for.
    pub(crate) max_memory: usize,
    pub(crate) table: RwLock<Arc<Table>>,
    pub(crate) shared: Arc<Shared>,
    /// Serializes reloads.
    pub(crate) reloading: tokio::sync::Mutex<()>,
    /// What went wrong after [`Self::load`] returned: the engine's build, a background link.
    pub(crate) failed: (
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
    pub(crate) fn install(&self, table: Table) {
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(table);
        *self
            .shared
            .plugins
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = self.summaries();
    }

    pub(crate) fn table(&self) -> Arc<Table> {
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
}
