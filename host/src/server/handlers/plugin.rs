//! `plugin/list` and calls to plugin-claimed methods (PROTOCOL §11).

use std::sync::Arc;

use serde_json::Value;

use crate::path_uri;
use crate::protocol::{PluginGrants, PluginList, PluginListing};
use crate::rpc::{RpcResult, expect_no_params, method_not_found, to_result};
use crate::runtime::CallContext;
use crate::server::processor::RequestContext;

/// A method claimed by a plugin: its params (absent = `null`) go to the plugin as JSON text,
/// on an instance of the calling session.
pub async fn call(ctx: RequestContext, params: Value) -> RpcResult {
    let Some(plugin) = ctx.server.runtime.plugin_for(&ctx.method) else {
        return Err(method_not_found(&ctx.method));
    };
    let call = CallContext {
        reply: Some(Arc::clone(&ctx.reply)),
        handles: ctx.connection.handles.for_plugin(&plugin.name),
    };
    ctx.server
        .runtime
        .call(
            &plugin,
            ctx.session.session().instances(),
            &ctx.method,
            &params.to_string(),
            call,
        )
        .await
}

/// `plugin/list`: every plugin with its methods and effective grants.
pub async fn list(ctx: RequestContext, params: Value) -> RpcResult {
    expect_no_params(&params)?;
    let plugins = ctx
        .server
        .runtime
        .plugins()
        .iter()
        .map(|plugin| PluginListing {
            name: plugin.name.clone(),
            version: plugin.version.clone(),
            methods: plugin.methods.clone(),
            grants: PluginGrants {
                fs_roots: (plugin.grants.fs_roots.iter())
                    .map(|root| path_uri::to_uri(&root.path))
                    .collect(),
                allow_hosts: (plugin.grants.allow_hosts.iter())
                    .map(|pattern| pattern.as_str().to_owned())
                    .collect(),
                env_vars: plugin.grants.env_vars.iter().cloned().collect(),
            },
        })
        .collect();
    to_result(&PluginList { plugins })
}
