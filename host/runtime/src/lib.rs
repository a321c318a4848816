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
mod call;
mod engine;
pub mod facts;
pub mod fs;
pub mod grants;
mod host;
pub mod inspect;
mod json;
mod limits;
mod linked;
mod load;
mod memo;
mod net;
mod outcome;
mod plugin;
mod pool;
pub mod port;
mod resources;
mod spec;
mod state;
mod table;
pub mod threads;
mod ticker;
mod tools;

pub use self::cache::KEY_BYTES as CACHE_KEY_BYTES;
pub use self::fs::{ConnectionHandles, FileHandles, PerPlugin, WatchSlot};
pub use self::limits::Limits;
pub use self::memo::Memo;
pub use self::outcome::{CallError, CallResult};
pub use self::plugin::{LoadedPlugin, RESERVED_NAMES, valid_plugin_name};
pub use self::pool::{IDLE_INSTANCES_PER_PLUGIN, InstancePool};
pub use self::spec::{
    CONTRACT_VERSION, LoadError, PluginSpec, SUPPORTED_CONTRACTS, read_plugin_file,
};
pub use self::state::{CallContext, Shared};
pub use self::table::Runtime;
pub use self::tools::{TOOLS_METHOD, ToolDeclaration, valid_tool_name};

pub use self::facts::VERSION;
pub use self::ticker::EPOCH_TICK;
