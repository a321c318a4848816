//! The method table: for each method wexec serves, its gating family (docs/protocol.md §5.2),
//! whether it is exempt from the in-flight limit, which params member orders it and in which
//! role (§6), what it must reserve on arrival, where it runs, and its handler with the type of
//! its params. Params are decoded here, in one place ([`decode`]), so every -32602 text comes
//! from the same serde error; a plugin-served method gets its params as JSON and decodes them
//! itself. The processor knows no method by name: it asks [`lookup`].

use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ServerState;
use super::context::{ConnectionContext, RequestContext};
use super::dispatch::{LaneKey, LaneRole, Runs};
use super::handlers;
use crate::protocol::{self, HTTP_REQUEST};
use crate::protocol::{FS_CLOSE, FS_OPEN, FS_READ_BLOCK, FS_WATCH_MISSING, FS_WRITE_BLOCK};
use crate::rpc::{RpcError, RpcResult};

/// Method families named in gating errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `process/*`.
    Exec,
    /// `environment/info`.
    EnvironmentInfo,
    /// `environment/status`.
    EnvironmentStatus,
    /// `environmentConfig/read`.
    EnvironmentConfig,
    /// `capabilityRoots/*`, `capabilities/*`.
    CapabilityDiscovery,
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
            Self::EnvironmentConfig => "environment config",
            Self::CapabilityDiscovery => "capability discovery",
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
    /// One lane for the connection (its watch).
    Watch,
}

impl Lane {
    /// The lane key and role of a request, if its params name one.
    pub fn key(self, params: &Value) -> Option<(LaneKey, LaneRole)> {
        let member = |name| params.get(name).and_then(Value::as_str).map(str::to_owned);
        match self {
            Self::None => None,
            Self::Process(role) => member("processId").map(|id| (LaneKey::Process(id), role)),
            Self::Handle(role) => member("handleId").map(|id| (LaneKey::Handle(id), role)),
            Self::Watch => Some((LaneKey::Watch, LaneRole::Ordered)),
        }
    }
}

/// A handler's future.
pub type HandlerFuture = Pin<Box<dyn Future<Output = RpcResult> + Send>>;

/// A request handler: the connection's context and the request's params (`null` if absent).
pub type Handler = fn(RequestContext, Value) -> HandlerFuture;

/// What a request holds from its arrival until it is answered (a stream's `requestId`).
pub type Admission = Box<dyn Send>;

/// Takes, on arrival and so in wire order, what a request must hold while it runs; refuses
/// the request if it cannot.
pub type Admit = fn(&ConnectionContext, &Value) -> Result<Option<Admission>, RpcError>;

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
    /// What it reserves on arrival.
    pub admit: Option<Admit>,
    /// The handler.
    pub handler: Handler,
}

/// What a method name means.
#[derive(Debug, Clone, Copy)]
pub enum Method {
    /// `initialize`: the handshake, run by the processor itself.
    Initialize,
    /// A method served through the table.
    Serve(Route),
}

/// A notification clients may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notification {
    /// `initialized`: the handshake is complete.
    Initialized,
}

/// Decodes `params` (absent = `null`) into the handler's params type; a failure is -32602 with
/// serde's text, for example ``missing field `processId` ``.
pub fn decode<P: DeserializeOwned>(params: Value) -> Result<P, RpcError> {
    serde_json::from_value(params).map_err(|err| RpcError::invalid_params(err.to_string()))
}

/// A handler taking typed params: decoded by [`decode`] before it runs.
macro_rules! typed {
    ($handler:path) => {
        |ctx, params| Box::pin(async move { $handler(ctx, decode(params)?).await })
    };
}

/// wexec's own methods.
const NATIVE: [(&str, Route); 7] = [
    (
        protocol::ENVIRONMENT_STATUS,
        Route {
            family: Family::EnvironmentStatus,
            exempt: true,
            lane: Lane::None,
            runs: Runs::Native,
            admit: None,
            handler: typed!(handlers::environment_status),
        },
    ),
    (
        protocol::PLUGIN_LIST,
        Route {
            family: Family::Plugin,
            exempt: true,
            lane: Lane::None,
            runs: Runs::Native,
            admit: None,
            handler: typed!(handlers::plugin::list),
        },
    ),
    (
        protocol::PROCESS_START,
        exec(
            false,
            Lane::Process(LaneRole::Barrier),
            typed!(handlers::process::start),
        ),
    ),
    // Reads are exempt from ordering so a long poll never holds up writes to its process.
    (
        protocol::PROCESS_READ,
        exec(false, Lane::None, typed!(handlers::process::read)),
    ),
    (
        protocol::PROCESS_WRITE,
        exec(
            false,
            Lane::Process(LaneRole::Ordered),
            typed!(handlers::process::write),
        ),
    ),
    (
        protocol::PROCESS_SIGNAL,
        exec(
            true,
            Lane::Process(LaneRole::Control),
            typed!(handlers::process::signal),
        ),
    ),
    (
        protocol::PROCESS_TERMINATE,
        exec(
            true,
            Lane::Process(LaneRole::Control),
            typed!(handlers::process::terminate),
        ),
    ),
];

const fn exec(exempt: bool, lane: Lane, handler: Handler) -> Route {
    Route {
        family: Family::Exec,
        exempt,
        lane,
        runs: Runs::Native,
        admit: None,
        handler,
    }
}

/// Protocol methods the bundled plugins serve, with the family, exemption, ordering and
/// arrival reservation docs/protocol.md §5.2 and §6 give them (whichever plugin serves them).
const PLUGIN_SERVED: [(&str, Family, bool, Lane, Option<Admit>); 7] = [
    (
        protocol::ENVIRONMENT_INFO,
        Family::EnvironmentInfo,
        true,
        Lane::None,
        None,
    ),
    (
        FS_OPEN,
        Family::Filesystem,
        false,
        Lane::Handle(LaneRole::Barrier),
        None,
    ),
    (
        FS_READ_BLOCK,
        Family::Filesystem,
        false,
        Lane::Handle(LaneRole::Ordered),
        None,
    ),
    (
        FS_WRITE_BLOCK,
        Family::Filesystem,
        false,
        Lane::Handle(LaneRole::Ordered),
        None,
    ),
    (
        FS_CLOSE,
        Family::Filesystem,
        true,
        Lane::Handle(LaneRole::Control),
        None,
    ),
    (
        FS_WATCH_MISSING,
        Family::Filesystem,
        false,
        Lane::Watch,
        None,
    ),
    (
        HTTP_REQUEST,
        Family::Http,
        false,
        Lane::None,
        Some(reserve_stream),
    ),
];

/// The families of the other plugin-served protocol methods, by prefix.
const PLUGIN_FAMILIES: [(&str, Family); 5] = [
    ("fs/", Family::Filesystem),
    ("http/", Family::Http),
    ("environmentConfig/", Family::EnvironmentConfig),
    ("capabilityRoots/", Family::CapabilityDiscovery),
    ("capabilities/", Family::CapabilityDiscovery),
];

/// What `method` means, if wexec serves it: the handshake, its own methods, then methods
/// claimed by plugins.
pub fn lookup(method: &str, server: &ServerState) -> Option<Method> {
    if method == protocol::INITIALIZE {
        return Some(Method::Initialize);
    }
    if let Some((_, route)) = NATIVE.iter().find(|(name, _)| *name == method) {
        return Some(Method::Serve(*route));
    }
    server.runtime.plugin_for(method)?;
    let known = PLUGIN_SERVED.iter().find(|(name, ..)| *name == method);
    let (family, exempt, lane, admit) = match known {
        Some(&(_, family, exempt, lane, admit)) => (family, exempt, lane, admit),
        None => {
            let family = PLUGIN_FAMILIES
                .iter()
                .find(|(prefix, _)| method.starts_with(prefix))
                .map_or(Family::Plugin, |&(_, family)| family);
            (family, false, Lane::None, None)
        }
    };
    Some(Method::Serve(Route {
        family,
        exempt,
        lane,
        runs: Runs::Guest,
        admit,
        // The plugin decodes its own params.
        handler: |ctx, params| Box::pin(handlers::plugin::call(ctx, params)),
    }))
}

/// What a client's notification means, if wexec accepts it.
pub fn notification(method: &str) -> Option<Notification> {
    (method == protocol::INITIALIZED).then_some(Notification::Initialized)
}

/// Reserves the `requestId` of a streaming `http/request` at arrival, so ids are taken in wire
/// order (docs/protocol.md §6); a duplicate of an active stream is refused.
fn reserve_stream(
    connection: &ConnectionContext,
    params: &Value,
) -> Result<Option<Admission>, RpcError> {
    if params.get("streamResponse") != Some(&Value::Bool(true)) {
        return Ok(None);
    }
    let Some(id) = params.get("requestId").and_then(Value::as_str) else {
        return Ok(None);
    };
    crate::limits::check_id("requestId", id)?;
    let reservation = connection.reserve_stream(id)?;
    Ok(Some(Box::new(reservation)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::NoParams;
    use serde_json::json;

    #[test]
    fn decoding_names_the_missing_field() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        #[allow(dead_code)]
        struct P {
            process_id: String,
        }
        let err = decode::<P>(json!({})).unwrap_err();
        assert_eq!(err, RpcError::invalid_params("missing field `processId`"));
    }

    #[test]
    fn methods_without_params_take_null_or_an_empty_object() {
        assert_eq!(decode::<NoParams>(Value::Null), Ok(NoParams));
        assert_eq!(decode::<NoParams>(json!({})), Ok(NoParams));
        for (params, message) in [
            (json!({"unknown": 1}), "invalid type: map, expected unit"),
            (json!([1]), "invalid type: sequence, expected unit"),
            (json!("x"), "invalid type: string \"x\", expected unit"),
            (json!(1), "invalid type: integer `1`, expected unit"),
        ] {
            let refused = decode::<NoParams>(params).unwrap_err();
            assert_eq!(refused.code, crate::rpc::INVALID_PARAMS);
            assert_eq!(refused.message, message);
        }
    }

    #[test]
    fn the_handshake_and_notifications_are_named_only_here() {
        assert_eq!(notification("initialized"), Some(Notification::Initialized));
        assert_eq!(notification("process/output"), None);
        assert!(NATIVE.iter().all(|(name, _)| *name != protocol::INITIALIZE));
    }

    #[test]
    fn every_method_named_here_is_a_method_of_the_protocol() {
        let named = NATIVE.iter().map(|(name, _)| *name);
        let plugin_served = PLUGIN_SERVED.iter().map(|(name, ..)| *name);
        for method in named.chain(plugin_served) {
            assert!(
                protocol::METHODS.contains(&method),
                "{method} is missing from wexec_protocol::METHODS"
            );
        }
    }

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
