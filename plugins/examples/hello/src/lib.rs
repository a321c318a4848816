//! The smallest useful wexec plugin: `hello/greet {name}` → `{greeting}`, plus the host facts
//! every plugin may read. No capabilities requested, so it can touch neither files nor network.

use serde::{Deserialize, Serialize};
use wexec_guest::{Call, Info, Plugin, Response, RpcError};

struct Hello;

#[derive(Deserialize)]
struct Greet {
    name: String,
}

#[derive(Serialize)]
struct Greeting {
    greeting: String,
    host: String,
}

impl Plugin for Hello {
    fn info() -> Info {
        Info::new("hello", env!("CARGO_PKG_VERSION")).method("hello/greet")
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        match call.method() {
            "hello/greet" => {
                let Greet { name } = call.params()?;
                if name.is_empty() {
                    return Err(RpcError::invalid_params("name must not be empty"));
                }
                wexec_guest::log::debug(&format!("greeting {name}"));
                Response::json(&Greeting {
                    greeting: format!("Hello, {name}!"),
                    host: format!("wexec {}", wexec_guest::env::host_info().executor_version),
                })
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }
}

wexec_guest::export_plugin!(Hello);
