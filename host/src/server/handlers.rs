//! Handlers of the methods the host serves natively. (`environment/info` moves to the `env`
//! plugin when it lands; `environment/status` stays native so health checks never depend on a
//! plugin.)

pub mod plugin;
pub mod process;

use serde_json::Value;

use super::processor::RequestContext;
use crate::protocol::EnvironmentStatus;
use crate::rpc::{RpcResult, expect_no_params, to_result};

/// `environment/info`.
pub async fn environment_info(ctx: RequestContext, params: Value) -> RpcResult {
    expect_no_params(&params)?;
    to_result(&ctx.server.environment_info())
}

/// `environment/status`.
pub async fn environment_status(_ctx: RequestContext, params: Value) -> RpcResult {
    expect_no_params(&params)?;
    to_result(&EnvironmentStatus {
        status: "ready".to_owned(),
    })
}
