//! `process/*` handlers: protocol mapping onto [`crate::process`].

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::path_uri::{self, PathUriError};
use crate::process::Process;
use crate::process::env::child_env;
use crate::process::spawn::{SpawnSpec, spawn};
use crate::protocol::{
    ProcessChunk, ProcessReadParams, ProcessReadResponse, ProcessSignalParams, ProcessStartParams,
    ProcessStartResponse, ProcessTerminateParams, ProcessTerminateResponse, ProcessWriteParams,
    ProcessWriteResponse, WriteStatus,
};
use crate::rpc::{RpcError, RpcResult, to_result};
use crate::sandbox;
use crate::server::context::RequestContext;

const RESUMED_ELSEWHERE: &str = "session has been resumed by another connection";

/// Runs `work` on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, RpcError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| RpcError::internal_error(format!("process/start setup failed: {err}")))
}

/// Checks 6 to 8 of `process/start` (docs/protocol.md §8.1): the params alone.
fn check_params(params: &ProcessStartParams) -> Result<(), RpcError> {
    for (field, value) in [
        ("networkProxy", &params.network_proxy),
        ("shellSnapshot", &params.shell_snapshot),
    ] {
        if value.as_ref().is_some_and(|value| !value.is_null()) {
            return Err(RpcError::invalid_params(format!(
                "{field} is not supported by this executor"
            )));
        }
    }
    if params.argv.is_empty() {
        return Err(RpcError::invalid_params("argv must not be empty"));
    }
    if params.timeout_ms == Some(0) {
        return Err(RpcError::invalid_params(
            "timeoutMs must be greater than zero",
        ));
    }
    Ok(())
}

/// `process/start` (docs/protocol.md §8.1). Checks run in the specified order; nothing is spawned
/// when one fails.
pub async fn start(ctx: RequestContext, params: ProcessStartParams) -> RpcResult {
    enabled(&ctx)?;
    crate::limits::check_id("processId", &params.process_id)?;
    let cwd =
        path_uri::parse(&params.cwd).map_err(|err| RpcError::invalid_params(cwd_error(err)))?;
    let host_env = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)));
    let env = child_env(host_env, &params.env, params.env_policy.as_ref());
    let tmpdir = env.get("TMPDIR").map(std::path::PathBuf::from);
    // The startup probe may still be running (its verdict decides whether confinement is
    // possible): wait for it, a few milliseconds at most after wexec started.
    sandbox::kernel::settled().await;
    // Checks 6 to 8 look at nothing but the params; they are made now and reported after the
    // sandbox's (check 5, in the specified order).
    let params_checked = check_params(&params);
    // The policy looks at the disk (canonical paths, `.git` files, placeholders), and holding
    // the placeholders makes directories: on the blocking pool, never on a thread that serves
    // connections, in one trip there (each trip costs a switch between threads).
    let table = Arc::clone(ctx.session.session().processes());
    let (policy, process, held) = {
        let (server, request) = (Arc::clone(&ctx.server), params.sandbox.clone());
        let (no_network, cwd) = (params.enforce_managed_network, cwd.clone());
        let (table, id) = (Arc::clone(&table), params.process_id.clone());
        blocking(move || {
            let policy = sandbox::process_policy(
                &server.processes.ceiling,
                request.as_ref(),
                no_network,
                &sandbox::canonical(&cwd),
                tmpdir.as_deref(),
            )?;
            params_checked?;
            let process = table
                .reserve(&id)
                .map_err(|err| RpcError::invalid_request(err.to_string()))?;
            match sandbox::hold(&policy.placeholders) {
                Ok(held) => Ok((policy, process, held)),
                Err(err) => {
                    table.remove(&process);
                    Err(RpcError::internal_error(err.to_string()))
                }
            }
        })
        .await??
    };
    let limits = ctx.server.processes.limits;
    let cgroup = match ctx.server.processes.session_tasks {
        Some(tasks) => match table.cgroup(tasks) {
            Ok(group) => Some(group),
            Err(err) => {
                table.remove(&process);
                return Err(RpcError::internal_error(format!(
                    "cannot make the session's pids cgroup: {err}"
                )));
            }
        },
        None => None,
    };
    process.set_sandbox(
        policy.sandbox_type != sandbox::UNSANDBOXED,
        limits.cpu_seconds,
        Some(held),
    );
    let tier = policy.tier;
    let spec = SpawnSpec {
        argv: &params.argv,
        arg0: params.arg0.as_deref(),
        cwd: &cwd,
        env: &env,
        tty: params.tty,
        pipe_stdin: params.pipe_stdin,
        confinement: policy.confinement,
        limits,
        cgroup: cgroup.as_ref().map(|group| group.procs()),
    };
    match spawn(&spec).await {
        Ok(spawned) => table.started(&process, spawned),
        Err(err) => {
            table.remove(&process);
            // A confinement step the kernel refused: never less than was asked.
            if let Some(setup) = crate::process::spawn::setup_failure(&err) {
                tracing::warn!("process/start refused: cannot confine it: {setup}");
                return Err(RpcError::invalid_params(sandbox::REFUSAL));
            }
            return Err(RpcError::internal_error(err.to_string()));
        }
    }
    if let Some(timeout) = params.timeout_ms {
        let process = Arc::clone(&process);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(timeout)).await;
            if process.terminate() {
                process.set_failure(format!("process timed out after {timeout} ms"));
            }
        });
    }
    let (sandbox_tier, sandbox_accepted) = match tier {
        Some((tier, relied)) => (
            Some(tier.name().to_owned()),
            relied
                .iter()
                .map(|weaker| weaker.name().to_owned())
                .collect(),
        ),
        None => (None, Vec::new()),
    };
    to_result(&ProcessStartResponse {
        process_id: params.process_id,
        sandbox_type: policy.sandbox_type.into(),
        sandbox_tier,
        sandbox_accepted,
    })
}

/// `process/*` are refused with `--no-processes` (docs/protocol.md §8.1).
fn enabled(ctx: &RequestContext) -> Result<(), RpcError> {
    if ctx.server.processes.ceiling.processes {
        Ok(())
    } else {
        Err(RpcError::invalid_request(
            "process execution is disabled on this executor",
        ))
    }
}

/// Codex's texts: a URI naming another machine or platform is "not valid on this exec-server
/// host"; the other refusals are those of any path (docs/protocol.md §7.2).
fn cwd_error(err: PathUriError) -> String {
    match err {
        PathUriError::ForeignPath(ref uri) | PathUriError::NulByte(ref uri) => {
            format!("cwd URI `{uri}` is not valid on this exec-server host: {err}")
        }
        other => other.to_string(),
    }
}

/// The process a read names: unknown and starting ids are errors.
fn readable_process(ctx: &RequestContext, id: &str) -> Result<Arc<Process>, RpcError> {
    let process = ctx
        .session
        .session()
        .processes()
        .get(id)
        .ok_or_else(|| RpcError::invalid_request(format!("unknown process id {id}")))?;
    if process.is_starting() {
        return Err(RpcError::invalid_request(format!(
            "process id {id} is starting"
        )));
    }
    Ok(process)
}

/// `process/read` (docs/protocol.md §8.2), with an event-driven long poll.
pub async fn read(ctx: RequestContext, params: ProcessReadParams) -> RpcResult {
    enabled(&ctx)?;
    let process = readable_process(&ctx, &params.process_id)?;
    let after_seq = params.after_seq.unwrap_or(0);
    let wait = Duration::from_millis(params.wait_ms.unwrap_or(0));
    if !wait.is_zero() {
        let mut events = process.subscribe();
        tokio::select! {
            _ = events.wait_for(|_| process.is_ready(after_seq)) => {}
            () = tokio::time::sleep(wait) => {}
            // The client is gone: answer now rather than hold up shutdown.
            () = ctx.connection.closing() => {}
            () = ctx.session.taken_over() => return Err(RpcError::invalid_request(RESUMED_ELSEWHERE)),
        }
    }
    if !ctx.session.is_current() {
        return Err(RpcError::invalid_request(RESUMED_ELSEWHERE));
    }
    let snapshot = process.read(after_seq, params.max_bytes);
    // Room for the output before it is encoded: a client that stops reading its replies
    // holds a bounded amount of wexec's memory (docs/protocol.md §12).
    let bytes: u64 = (snapshot.chunks.iter())
        .map(|chunk| chunk.data.len() as u64)
        .sum();
    if bytes > 0 {
        let outbound = &ctx.connection.outbound;
        let room = match outbound.try_reserve(bytes) {
            Some(room) => Some(room),
            None => outbound.reserve(bytes).await.ok(),
        };
        ctx.reply.hold_room(room.unwrap_or_default());
    }
    let (sandbox_denied, failure) = if snapshot.exit.is_some() {
        process.verdict()
    } else {
        (false, None)
    };
    to_result(&ProcessReadResponse {
        chunks: snapshot
            .chunks
            .iter()
            .map(|chunk| ProcessChunk {
                seq: chunk.seq,
                stream: chunk.stream,
                chunk: STANDARD.encode(&chunk.data),
            })
            .collect(),
        next_seq: snapshot.next_seq,
        exited: snapshot.exit.is_some(),
        exit_code: snapshot.exit,
        closed: snapshot.closed,
        failure,
        sandbox_denied,
    })
}

/// `process/write` (docs/protocol.md §8.3).
pub async fn write(ctx: RequestContext, params: ProcessWriteParams) -> RpcResult {
    enabled(&ctx)?;
    if params.write_id.as_deref() == Some("") {
        return Err(RpcError::invalid_params("writeId must not be empty"));
    }
    if let Some(write_id) = &params.write_id {
        crate::limits::check_id("writeId", write_id)?;
    }
    let data = STANDARD
        .decode(&params.chunk)
        .map_err(|err| RpcError::invalid_params(format!("chunk is not valid base64: {err}")))?;
    let status = match ctx.session.session().processes().get(&params.process_id) {
        None => WriteStatus::UnknownProcess,
        Some(process) => process
            .write(&data, params.write_id.as_deref(), params.close_stdin)
            .await
            .map_err(|err| RpcError::internal_error(err.to_string()))?,
    };
    to_result(&ProcessWriteResponse { status })
}

/// `process/signal` (docs/protocol.md §8.4).
pub async fn signal(ctx: RequestContext, params: ProcessSignalParams) -> RpcResult {
    enabled(&ctx)?;
    if let Some(process) = ctx.session.session().processes().get(&params.process_id) {
        process
            .interrupt()
            .map_err(|err| RpcError::internal_error(err.to_string()))?;
    }
    to_result(&serde_json::json!({}))
}

/// `process/terminate` (docs/protocol.md §8.5).
pub async fn terminate(ctx: RequestContext, params: ProcessTerminateParams) -> RpcResult {
    enabled(&ctx)?;
    let running = ctx
        .session
        .session()
        .processes()
        .get(&params.process_id)
        .is_some_and(|process| process.terminate());
    to_result(&ProcessTerminateResponse { running })
}
