//! The flat method table: for each method, its gating family (docs/protocol.md §5.2), whether it is
//! exempt from the in-flight limit, which params key orders it (docs/protocol.md §6), and its
//! handler. The router knows nothing about transports.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use super::ServerState;
use super::dispatch::{LaneKey, LaneRole, Runs};
use super::handlers;
use super::processor::RequestContext;
use crate::protocol;
use crate::rpc::RpcResult;

/// Method families named in gating errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `process/*`.
    Exec,
    /// `environment/info`.
    EnvironmentInfo,
    /// `environment/status`.
    EnvironmentStatus,
    /// `fs/*`.
    Filesystem,
    /// `http/*`.
    Http,
    /// `plugin/list` and methods claimed by plugins.
    Plugin,
}

impl Family {
    /// The `<family>` of the gating texts.
    pub fn name(self) -> &'static str {
        match self {
            Self::Exec => "exec",
            Self::EnvironmentInfo => "environment info",
            Self::EnvironmentStatus => "environment status",
            Self::Filesystem => "filesystem",
            Self::Http => "http",
            Self::Plugin => "plugin",
        }
    }
}

/// Which params member orders a method's requests, and in which role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Unordered.
    None,
    /// Ordered per `processId`.
    Process(LaneRole),
    /// Ordered per `handleId`.
    Handle(LaneRole),
}

impl Lane {
    /// The lane key and role of a request, if its params name one.
    pub fn key(self, params: &Value) -> Option<(LaneKey, LaneRole)> {
        let member = |name| params.get(name).and_then(Value::as_str).map(str::to_owned);
        match self {
            Self::None => None,
            Self::Process(role) => member("processId").map(|id| (LaneKey::Process(id), role)),
            Self::Handle(role) => member("handleId").map(|id| (LaneKey::Handle(id), role)),
        }
    }
}

/// A handler's future.
pub type HandlerFuture = Pin<Box<dyn Future<Output = RpcResult> + Send>>;

/// A request handler: the connection's context and the request's params (`null` if absent).
pub type Handler = fn(RequestContext, Value) -> HandlerFuture;

/// One method's entry in the table.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// Gating family.
    pub family: Family,
    /// Never waits for an execution slot.
    pub exempt: bool,
    /// Ordering.
    pub lane: Lane,
    /// Where its job runs.
    pub runs: Runs,
    /// The handler.
    pub handler: Handler,
}

fn exec(exempt: bool, lane: Lane, handler: Handler) -> Route {
    Route {
        family: Family::Exec,
        exempt,
        lane,
        runs: Runs::Native,
        handler,
    }
}

/// The route of `method`, if wexec serves it: its own methods first, then plugin-claimed
/// ones.
pub fn route(method: &str, server: &ServerState) -> Option<Route> {
    let route = match method {
        protocol::ENVIRONMENT_STATUS => Route {
            family: Family::EnvironmentStatus,
            exempt: true,
            lane: Lane::None,
            runs: Runs::Native,
            handler: |ctx, params| Box::pin(handlers::environment_status(ctx, params)),
        },
        protocol::PROCESS_START => exec(false, Lane::Process(LaneRole::Barrier), |ctx, params| {
            Box::pin(handlers::process::start(ctx, params))
        }),
        // Reads are exempt from ordering so a long poll never holds up writes to its process.
        protocol::PROCESS_READ => exec(false, Lane::None, |ctx, params| {
            Box::pin(handlers::process::read(ctx, params))
        }),
        protocol::PROCESS_WRITE => exec(false, Lane::Process(LaneRole::Ordered), |ctx, params| {
            Box::pin(handlers::process::write(ctx, params))
        }),
        protocol::PROCESS_SIGNAL => exec(true, Lane::Process(LaneRole::Control), |ctx, params| {
            Box::pin(handlers::process::signal(ctx, params))
        }),
        protocol::PROCESS_TERMINATE => {
            exec(true, Lane::Process(LaneRole::Control), |ctx, params| {
                Box::pin(handlers::process::terminate(ctx, params))
            })
        }
        protocol::PLUGIN_LIST => Route {
            family: Family::Plugin,
            exempt: true,
            lane: Lane::None,
            runs: Runs::Native,
            handler: |ctx, params| Box::pin(handlers::plugin::list(ctx, params)),
        },
        _ => return plugin_route(method, server),
    };
    Some(route)
}

/// A plugin-claimed method. The protocol methods the bundled plugins serve keep the family,
/// exemption and ordering docs/protocol.md §5.2 and §6 give them.
fn plugin_route(method: &str, server: &ServerState) -> Option<Route> {
    server.runtime.plugin_for(method)?;
    let (family, exempt, lane) = match method {
        protocol::ENVIRONMENT_INFO => (Family::EnvironmentInfo, true, Lane::None),
        "fs/open" => (Family::Filesystem, false, Lane::Handle(LaneRole::Barrier)),
        "fs/readBlock" | "fs/writeBlock" => {
            (Family::Filesystem, false, Lane::Handle(LaneRole::Ordered))
        }
        "fs/close" => (Family::Filesystem, true, Lane::Handle(LaneRole::Control)),
        _ if method.starts_with("fs/") => (Family::Filesystem, false, Lane::None),
        _ if method.starts_with("http/") => (Family::Http, false, Lane::None),
        _ => (Family::Plugin, false, Lane::None),
    };
    Some(Route {
        family,
        exempt,
        lane,
        runs: Runs::Guest,
        handler: |ctx, params| Box::pin(handlers::plugin::call(ctx, params)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lane_keys_come_from_params() {
        let ordered = Lane::Process(LaneRole::Ordered);
        assert_eq!(
            ordered.key(&json!({"processId": "p1"})),
            Some((LaneKey::Process("p1".into()), LaneRole::Ordered))
        );
        assert_eq!(
            Lane::Handle(LaneRole::Barrier).key(&json!({"handleId": "h"})),
            Some((LaneKey::Handle("h".into()), LaneRole::Barrier))
        );
        assert_eq!(ordered.key(&json!({"processId": 5})), None);
        assert_eq!(ordered.key(&Value::Null), None);
        assert_eq!(Lane::None.key(&json!({"processId": "p1"})), None);
    }
}
