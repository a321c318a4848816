//! wexec: an exec host for AI agents and remote tools.
//!
//! A client drives wexec with JSON-RPC — the Codex exec-server protocol — over stdio or a
//! WebSocket, to run processes and to reach files and the network. The host owns transports,
//! sessions and processes; filesystem, HTTP and environment handlers run as sandboxed
//! WebAssembly components that act only through capabilities the operator granted.
//!
//! The `wexec` binary is a thin wrapper over [`run`]:
//!
//! ```no_run
//! use clap::Parser;
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let options = wexec::Options::parse_from(["wexec", "--listen", "ws://127.0.0.1:0"]);
//!     let settings = options.serve.settings(wexec::Face::Codex)?;
//!     // While single-threaded: hide the token, start the process supervisor.
//!     wexec::prepare()?;
//!     let runtime = tokio::runtime::Runtime::new()?;
//!     runtime.block_on(wexec::run(settings))?;
//!     Ok(())
//! }
//! ```

mod builtin;
mod cli;
mod config;
pub mod doctor;
mod fast_path;
mod limits;
mod mcp;
pub mod plugin_tool;
mod process;
mod rpc;
mod sandbox;
mod server;
mod settings;
mod startup;
pub mod state;
mod transport;

use std::future::Future;
use std::sync::Arc;

use wexec_protocol::{self as protocol, path_uri};
use wexec_runtime::{self as runtime, facts as environment, grants};

pub use cli::{Command, Options, ServeOptions};
pub use environment::{EnvironmentFacts, ReportedFacts, VERSION};
pub use rpc::parse::{MAX_JSON_VALUES, Malformed, parse_message};
pub use rpc::{MAX_MESSAGE_BYTES, RequestId, RpcError};
pub use server::ListenError;
pub use settings::{Face, Listen, Settings, StartupError};
pub use startup::{PrepareError, prepare};

/// Serves as `settings` say until the client leaves (stdio) or SIGINT/SIGTERM arrives, then ends
/// every session.
pub async fn run(settings: Settings) -> Result<(), RunError> {
    if !startup::prepared() {
        return Err(RunError::NotPrepared);
    }
    let shutdown = shutdown_signal()?;
    // The probe runs a confined process through the supervisor (several ms, mostly in other
    // processes) once startup is over: wexec loads and serves meanwhile, and `process/start`
    // waits for the verdict (`sandbox/kernel.rs`). A failed probe makes each process request
    // that needs confinement a refusal naming what is missing, from the first answer on;
    // with `--require-sandbox` the probe runs first and a failure stops wexec before it
    // answers anything.
    tokio::spawn(async {
        tokio::time::sleep(startup::SETTLE_AFTER).await;
        startup::settle();
    });
    let probe = probe_sandbox(
        &settings.ceiling,
        settings.simulate_missing_sandbox,
        settings.require_sandbox,
    );
    let verdict = if settings.require_sandbox {
        probe.await?;
        tokio::spawn(async { Ok(()) })
    } else {
        tokio::spawn(probe)
    };
    let verdict = async move {
        verdict.await.map_err(|err| {
            // Nothing waiting for the verdict may wait forever.
            sandbox::kernel::record_missing(sandbox::kernel::Unavailable {
                mechanism: "the sandbox probe".to_owned(),
                detail: err.to_string(),
            });
            RunError::Sandbox(format!("the sandbox probe failed: {err}"))
        })?
    };
    let accepted: Vec<String> = (settings.ceiling.accepted.iter())
        .map(|weaker| weaker.name().to_owned())
        .collect();
    // With `--no-processes` there is nothing to confine, and nothing to report.
    let processes = settings.ceiling.processes;
    wexec_runtime::facts::report_sandbox_with(Box::new(move || {
        if !processes {
            return Box::pin(std::future::ready(None));
        }
        Box::pin(sandbox::kernel::facts(
            accepted.clone(),
            startup::is_settled(),
        ))
    }));
    let cgroups = settings.session_tasks.is_some() && settings.ceiling.processes;
    let (listen, credential, face) = (
        settings.listen.clone(),
        settings.credential.clone(),
        settings.face,
    );
    let stdio_spin = settings.stdio_spin;
    let serving = async move {
        let server = server::ServerState::new(settings).await?;
        let warming = Arc::clone(&server);
        tokio::spawn(async move {
            startup::settled().await;
            warming.runtime.warm_up();
        });
        // What `initialize` embeds was taken before the sandbox probe answered.
        let informed = Arc::clone(&server);
        tokio::spawn(async move {
            sandbox::kernel::settled().await;
            if let Err(err) = informed.refresh_environment_info().await {
                tracing::warn!("cannot refresh environment/info after the sandbox probe: {err}");
            }
        });
        if cgroups {
            process::cgroup::prepare().map_err(|reason| {
                RunError::Sandbox(format!(
                    "cannot enforce --session-processes on this host: {reason}"
                ))
            })?;
        }
        // What loads after the first answers (the engine, bundled plugins linked in the
        // background) stops wexec if it fails, as it would have before serving.
        let failed = Arc::clone(&server);
        let serve = async move {
            match (listen, face) {
                (Listen::Stdio, Face::Codex) => {
                    process::supervisor::guard_listeners(&[]);
                    server::serve_stdio(server, stdio_spin, server::processor::serve, shutdown)
                        .await
                        .map_err(RunError::Stdio)
                }
                (Listen::Stdio, Face::Mcp) => {
                    process::supervisor::guard_listeners(&[]);
                    mcp::serve_stdio(server, stdio_spin, shutdown)
                        .await
                        .map_err(RunError::Stdio)
                }
                (Listen::WebSocket(addr), _) => {
                    server::serve_websocket(server, addr, credential, shutdown)
                        .await
                        .map_err(RunError::from)
                }
                (Listen::Http(addr, path), _) => {
                    mcp::serve_http(server, addr, path, credential, shutdown)
                        .await
                        .map_err(RunError::from)
                }
            }
        };
        tokio::select! {
            failure = failed.runtime.failure() => Err(RunError::from(failure)),
            served = serve => served,
        }
    };
    let (mut verdict, mut serving) = (std::pin::pin!(verdict), std::pin::pin!(serving));
    let served = tokio::select! {
        biased;
        verdict = &mut verdict => match verdict {
            Ok(()) => serving.await,
            Err(refused) => Err(refused),
        },
        served = &mut serving => verdict.await.and(served),
    };
    // Every process is gone: nothing of the sandbox stays on disk.
    sandbox::release_all();
    process::cgroup::release();
    served
}

/// Finds out how this kernel can confine processes (docs/protocol.md §3.1, docs/sandbox.md
/// "Tiers"): the namespace tier, else the Landlock tier. When neither can enforce the ceiling
/// (anything but `danger-full-access`), `required` (`--require-sandbox`) refuses to serve;
/// otherwise each process request that needs confinement will be refused.
fn probe_sandbox(
    ceiling: &sandbox::Ceiling,
    simulate_missing: bool,
    required: bool,
) -> impl Future<Output = Result<(), RunError>> + use<> {
    use sandbox::kernel::{Tier, Unavailable, Verdict};
    let (processes, mode) = (ceiling.processes, ceiling.mode);
    let scoped = !ceiling.accepted.contains(&sandbox::Weaker::Signals);
    async move {
        if !processes {
            // Process methods are refused before they would ask.
            sandbox::kernel::record_missing(Unavailable {
                mechanism: "processes".to_owned(),
                detail: "disabled by --no-processes".to_owned(),
            });
            return Ok(());
        }
        let verdict = if simulate_missing {
            let missing = Unavailable {
                mechanism: "user namespaces".to_owned(),
                detail: "simulated by --simulate-missing-sandbox".to_owned(),
            };
            Verdict {
                tier: Err(missing.clone()),
                namespaces: Some(missing),
            }
        } else {
            // Not before startup is over ([`startup::settle`]), unless nothing may be served
            // before the verdict; `process/start` waits for it.
            if !required {
                startup::settled().await;
            }
            match process::spawn::probe(Tier::Namespaces, scoped).await {
                Ok(()) => Verdict {
                    tier: Ok(Tier::Namespaces),
                    namespaces: None,
                },
                Err(namespaces) => match process::spawn::probe(Tier::Landlock, scoped).await {
                    Ok(()) => {
                        tracing::info!(
                            "processes run under the Landlock tier: the namespace tier needs {} ({}); requests it alone can hold are refused (docs/sandbox.md, \"Tiers\")",
                            namespaces.mechanism,
                            namespaces.detail
                        );
                        Verdict {
                            tier: Ok(Tier::Landlock),
                            namespaces: Some(namespaces),
                        }
                    }
                    Err(landlock) => Verdict {
                        tier: Err(Unavailable {
                            mechanism: namespaces.mechanism.clone(),
                            detail: format!(
                                "{}; the Landlock tier: {} is unavailable ({})",
                                namespaces.detail, landlock.mechanism, landlock.detail
                            ),
                        }),
                        namespaces: Some(namespaces),
                    },
                },
            }
        };
        if let Err(missing) = &verdict.tier {
            let needed = mode != sandbox::Mode::DangerFullAccess;
            if needed && required {
                return Err(RunError::Sandbox(format!(
                    "cannot enforce --sandbox {} on this kernel: {missing} ({}); use --sandbox danger-full-access to run unconfined, or leave out --require-sandbox to serve everything but confined processes",
                    mode.name(),
                    missing.detail
                )));
            }
            if needed {
                tracing::warn!(
                    "processes cannot be confined on this kernel: {missing} ({}); process requests that need confinement will be refused (--sandbox {})",
                    missing.detail,
                    mode.name()
                );
            } else {
                tracing::warn!(
                    "processes cannot be confined on this kernel: {missing} ({}); requests for a sandbox will be refused",
                    missing.detail
                );
            }
        }
        sandbox::kernel::record(verdict);
        Ok(())
    }
}

/// A failure that stops wexec after startup checks passed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// [`prepare`] was not called.
    #[error("wexec::prepare() must run before wexec::run(), while the process is single-threaded")]
    NotPrepared,
    /// stdin/stdout could not be set up.
    #[error("cannot use stdin/stdout: {0}")]
    Stdio(std::io::Error),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    /// A plugin could not be loaded.
    #[error(transparent)]
    Plugins(#[from] runtime::LoadError),
    /// The WebSocket listener failed.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The process sandbox ceiling cannot be enforced on this kernel.
    #[error("{0}")]
    Sandbox(String),
}

/// Resolves on the first SIGINT or SIGTERM. Installed before serving, so an early signal is not
/// lost.
fn shutdown_signal() -> Result<impl Future<Output = ()>, RunError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).map_err(RunError::Signals)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(RunError::Signals)?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
            _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
        }
    })
}
