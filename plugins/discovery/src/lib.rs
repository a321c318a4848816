//! The bundled `discovery` plugin: `capabilityRoots/discoverV1` and `capabilities/discoverV2`
//! (docs/protocol.md §7.6), Codex's plugin and skill discovery, through read-only filesystem
//! grants (the fs roots, the Codex home, `$HOME/.agents`, `/etc/codex`): what lies outside them
//! reads as absent, and each request's `sandbox` narrows them further (the host applies it).

mod files;
mod installed;
mod paths;
mod roots;
mod skills;

use wexec_guest::protocol::{
    self, CAPABILITIES_DISCOVER_V2, CAPABILITY_ROOTS_DISCOVER_V1, CapabilitiesDiscoverParams,
    CapabilityRootsDiscoverParams, CapabilityRootsDiscoverResponse,
};
use wexec_guest::{Call, Capability, Info, Plugin, Response, RpcError, env, path as uri};

use crate::files::ReplyBudget;

/// Codex's bound on one request.
const MAX_ROOTS: usize = 128;

struct Discovery;

impl Plugin for Discovery {
    fn info() -> Info {
        Info::new("discovery", env!("CARGO_PKG_VERSION"))
            .method(CAPABILITY_ROOTS_DISCOVER_V1)
            .method(CAPABILITIES_DISCOVER_V2)
            .capability(Capability::Filesystem)
            .capability(Capability::EnvironmentVars)
            .env_var("CODEX_HOME")
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        match call.method() {
            CAPABILITY_ROOTS_DISCOVER_V1 => Response::json(&discover_roots(call.params()?)?),
            CAPABILITIES_DISCOVER_V2 => {
                let params: CapabilitiesDiscoverParams = call.params()?;
                uri::decode(&params.cwd)?;
                let home =
                    (env::host_info().user_home_dir).and_then(|home| uri::decode(&home).ok());
                let codex_home = protocol::codex_home(
                    env::var("CODEX_HOME").ok().flatten().as_deref(),
                    home.as_deref(),
                );
                Response::json(&installed::discover(codex_home.as_deref(), home.as_deref()))
            }
            other => Err(RpcError::method_not_found(other)),
        }
    }
}

fn discover_roots(
    params: CapabilityRootsDiscoverParams,
) -> Result<CapabilityRootsDiscoverResponse, RpcError> {
    if params.roots.len() > MAX_ROOTS {
        return Err(RpcError::invalid_request(format!(
            "capability root discovery accepts at most {MAX_ROOTS} roots"
        )));
    }
    // Every path is checked before any root is scanned: one bad path fails the request.
    let natives = (params.roots.iter())
        .map(|root| uri::decode(&root.path))
        .collect::<Result<Vec<_>, _>>()?;
    let mut reply = ReplyBudget::default();
    let roots = (params.roots.into_iter().zip(natives))
        .map(
            |(root, native)| match paths::without_dot_segments(&native) {
                // Answered for the path as Codex's URL type resolves it.
                Some(normal) => roots::discover(root.id, uri::encode(&normal), &normal, &mut reply),
                None => roots::discover(root.id, root.path, &native, &mut reply),
            },
        )
        .collect();
    Ok(CapabilityRootsDiscoverResponse { roots })
}

wexec_guest::export_plugin!(Discovery);
