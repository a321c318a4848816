//! Handlers of the methods the host serves natively. `environment/status` stays native so
//! health checks never depend on a plugin; `environment/info` is the `env` plugin's.

pub mod plugin;
pub mod process;

use super::context::RequestContext;
use crate::protocol::{EnvironmentStatus, NoParams};
use crate::rpc::{RpcResult, to_result};

/// `environment/status`.
pub async fn environment_status(_ctx: RequestContext, _params: NoParams) -> RpcResult {
    to_result(&EnvironmentStatus {
        status: "ready".to_owned(),
    })
}
