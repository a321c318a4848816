//! The host side of the WIT contract (`wit/plugin.wit`): one module per interface a plugin
//! imports, each checking the plugin's grant before it acts. What they act on (the confined
//! filesystem, the network client, the call's port back to its client) lives beside them in
//! the runtime.

mod environment;
mod filesystem;
mod http;
mod log;
pub(crate) mod responder;
mod watch;
