//! `plugin/list` and calls to plugin-claimed methods (docs/protocol.md §11).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::path_uri;
use crate::protocol::sandbox::SandboxContext;
use crate::protocol::{
    CAPABILITY_ROOTS_DISCOVER_V1, NoParams, PluginGrants, PluginList, PluginListing,
};
use crate::rpc::{RpcError, RpcResult, to_result};
use crate::runtime::CallContext;
use crate::runtime::fs::FsPolicy;
use crate::runtime::port::CallPort;
use crate::sandbox;
use crate::server::context::RequestContext;

/// A method claimed by a plugin: its params (absent = `null`) go to the plugin as JSON text,
/// on an instance of the calling session.
pub async fn call(ctx: RequestContext, params: Value) -> RpcResult {
    let Some(plugin) = ctx.server.runtime.plugin_for(&ctx.method) else {
        return Err(RpcError::method_not_found(&ctx.method));
    };
    let call = CallContext {
        port: Some(Arc::clone(&ctx.reply) as Arc<dyn CallPort>),
        handles: ctx.connection.handles.for_plugin(&plugin.name),
        watch: ctx.connection.watches.for_plugin(&plugin.name),
        sandbox: call_sandbox(&ctx, &params).await?,
    };
    // The slot is held while the call runs and until its reply is queued, whichever is later.
    let slot = Arc::clone(&ctx.connection.plugin_calls)
        .acquire_owned()
        .await
        .map(Arc::new)
        .map_err(|_| RpcError::internal_error("the connection is closing"))?;
    ctx.reply.hold_until_queued(Box::new(Arc::clone(&slot)));
    let outcome = ctx
        .server
        .runtime
        .call(
            &plugin,
            ctx.session.session().instances(),
            &ctx.method,
            &params.to_string(),
            call,
        )
        .await;
    drop(slot);
    crate::rpc::call_outcome(outcome)
}

/// Methods whose `sandbox` param (Codex's, docs/protocol.md §7.3) confines the filesystem
/// capability for the call, whichever plugin serves them.
fn takes_sandbox(method: &str) -> bool {
    ["fs/", "capabilityRoots/", "capabilities/"]
        .iter()
        .any(|prefix| method.starts_with(prefix))
}

/// The call's filesystem policy: plugin grants ∩ the request's `sandbox` ∩, under a read-only
/// ceiling, no writes (docs/sandbox.md). `None` when nothing narrows the grants.
/// `capabilityRoots/discoverV1` carries a `sandbox` per root; one call has one policy, so the
/// call gets what every root's sandbox allows (docs/protocol.md §7.6).
async fn call_sandbox(
    ctx: &RequestContext,
    params: &Value,
) -> Result<Option<Arc<dyn FsPolicy>>, RpcError> {
    if !takes_sandbox(&ctx.method) {
        return Ok(None);
    }
    let requested = if ctx.method == CAPABILITY_ROOTS_DISCOVER_V1 {
        let roots = params.get("roots").and_then(Value::as_array);
        (roots.into_iter().flatten())
            .filter_map(|root| root.get("sandbox"))
            .collect()
    } else {
        Vec::from_iter(params.get("sandbox"))
    };
    let requested = (requested.into_iter())
        .filter(|sandbox| !sandbox.is_null())
        .map(|sandbox| {
            SandboxContext::deserialize(sandbox)
                .map_err(|err| RpcError::invalid_params(err.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    sandbox::too_many_entries(requested.iter().map(SandboxContext::entry_count).sum())?;
    let read_only = ctx.server.processes.ceiling.mode == sandbox::Mode::ReadOnly;
    if requested.is_empty() && !read_only {
        return Ok(None);
    }
    // Canonical paths look at the disk: on the blocking pool, not a connection's thread.
    tokio::task::spawn_blocking(move || sandbox::call_policy(&requested, read_only))
        .await
        .map_err(|err| RpcError::internal_error(format!("sandbox setup failed: {err}")))?
        .map(Some)
}

/// `plugin/list`: every plugin with its methods and effective grants.
pub async fn list(ctx: RequestContext, _params: NoParams) -> RpcResult {
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
