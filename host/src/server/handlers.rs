//! Handlers of the methods the host serves natively. `environment/status` stays native so
//! health checks never depend on a plugin; `environment/info` is the `env` plugin's.

pub mod plugin;
pub mod process;

use serde_json::Value;

use super::processor::RequestContext;
use crate::protocol::EnvironmentStatus;
use crate::rpc::{RpcResult, expect_no_params, to_result};

/// `environment/status`.
pub async fn environment_status(_ctx: RequestContext, params: Value) -> RpcResult {
    expect_no_params(&params)?;
    to_result(&EnvironmentStatus {
        status: "ready".to_owned(),
    })
}
