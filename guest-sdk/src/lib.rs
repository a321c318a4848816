//! Write [wexec](https://example.invalid/wexec) plugins in Rust.
//!
//! A plugin is a WebAssembly component that serves JSON-RPC methods for wexec. It acts on the
//! machine only through capabilities the operator granted: the [`fs`] roots, the [`http`] hosts,
//! the [`env`](mod@env) variables; [`log`] and [`respond`] are always available. Implement [`Plugin`],
//! export it with [`export_plugin!`], and build with `cargo build --target wasm32-wasip2`
//! (or `cargo component build`). The contract version ([`CONTRACT`]) is embedded in what
//! [`Plugin::info`] reports, so a wexec implementing another contract refuses the plugin with a
//! message saying which.
//!
//! ```
//! use serde::Deserialize;
//! use wexec_guest::{Call, Info, Plugin, Response, RpcError};
//!
//! struct Hello;
//!
//! #[derive(Deserialize)]
//! struct Greet {
//!     name: String,
//! }
//!
//! impl Plugin for Hello {
//!     fn info() -> Info {
//!         Info::new("hello", "1.0.0").method("hello/greet")
//!     }
//!
//!     fn handle(call: Call) -> Result<Response, RpcError> {
//!         match call.method() {
//!             "hello/greet" => {
//!                 let Greet { name } = call.params()?;
//!                 wexec_guest::log::info(&format!("greeting {name}"));
//!                 Response::json(&serde_json::json!({ "greeting": format!("Hello, {name}!") }))
//!             }
//!             other => Err(RpcError::method_not_found(other)),
//!         }
//!     }
//! }
//!
//! wexec_guest::export_plugin!(Hello);
//! ```

#![allow(
    unsafe_code,
    reason = "wit-bindgen's generated import and export glue is unsafe code"
)]

pub mod env;
pub mod fs;
pub mod http;
pub mod log;
pub mod path;
pub mod respond;
pub mod walk;

mod error;
mod plugin;

pub use error::RpcError;
pub use plugin::{CONTRACT, Call, Capability, Info, Plugin, Response, TOOLS_METHOD, Tool};
/// The protocol's plain data (method names, params and results, limits), shared with the host.
pub use wexec_protocol as protocol;
pub use wexec_protocol::ANY_GRANTED_VAR;

/// The generated bindings; used by [`export_plugin!`], not meant for plugin code.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "__export_plugin_world",
        default_bindings_module: "wexec_guest::bindings",
    });
}

/// Exports `$plugin` (a type implementing [`Plugin`]) as the component's handler.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        const _: () = {
            struct __WexecGuestExport;

            impl $crate::bindings::exports::wexec::plugin::handler::Guest for __WexecGuestExport {
                fn describe() -> $crate::bindings::exports::wexec::plugin::handler::PluginInfo {
                    $crate::__describe::<$plugin>()
                }

                fn handle(
                    method: ::std::string::String,
                    params: ::std::string::String,
                ) -> ::std::result::Result<
                    ::std::string::String,
                    $crate::bindings::wexec::plugin::types::RpcError,
                > {
                    $crate::__handle::<$plugin>(method, params)
                }
            }

            $crate::bindings::__export_plugin_world!(
                __WexecGuestExport with_types_in $crate::bindings
            );
        };
    };
}

#[doc(hidden)]
pub fn __describe<P: Plugin>() -> bindings::exports::wexec::plugin::handler::PluginInfo {
    P::info().into_wit()
}

#[doc(hidden)]
pub fn __handle<P: Plugin>(
    method: String,
    params: String,
) -> Result<String, bindings::wexec::plugin::types::RpcError> {
    if method == plugin::TOOLS_METHOD {
        return Ok(P::info().tools_json());
    }
    P::handle(Call::new(method, params))
        .map(Response::into_json)
        .map_err(error::to_wit)
}
