//! What wexec does to itself before it serves, while it is still single-threaded: take the
//! bearer token out of its environment, stop being dumpable, start the process supervisor.
//! The `wexec` binary calls [`prepare`] first thing; an embedder serving with [`crate::run`]
//! must too.
//!
//! And when startup is over ([`settle`]): the work a start can leave for later (the
//! supervisor's spare helpers, the sandbox probe, the plugin engine, linking the bundled
//! plugins: milliseconds of CPU) waits until the first answer is out, or [`SETTLE_AFTER`] into
//! serving. Run at once, it competed with the first answer for the CPUs of a small machine and
//! held it up. What a request needs earlier starts when it is needed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::process::supervisor;

/// When startup's deferred work begins if no answer has gone out by then.
pub const SETTLE_AFTER: Duration = Duration::from_millis(50);

static SETTLED: AtomicBool = AtomicBool::new(false);
static SETTLING: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Startup is over: lets the deferred work begin. Idempotent, and cheap after the first call.
pub fn settle() {
    if SETTLED.load(Ordering::Acquire) || SETTLED.swap(true, Ordering::AcqRel) {
        return;
    }
    supervisor::warm_up();
    SETTLING.notify_waiters();
}

/// Whether [`settle`] was called.
pub fn is_settled() -> bool {
    SETTLED.load(Ordering::Acquire)
}

/// Resolves once [`settle`] was called.
pub async fn settled() {
    let notified = SETTLING.notified();
    let mut notified = std::pin::pin!(notified);
    // Registered before the check, so a `settle` in between is not missed.
    notified.as_mut().enable();
    if SETTLED.load(Ordering::Acquire) {
        return;
    }
    notified.await;
}

/// The environment variable that may carry the WebSocket bearer token.
pub const TOKEN_VARIABLE: &str = "WEXEC_TOKEN";

/// Why wexec cannot prepare itself.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The process supervisor could not be started.
    #[error(transparent)]
    Supervisor(#[from] supervisor::StartError),
}

/// Prepares this process to serve. Call it once, after the command line is parsed (the token
/// is read from the environment then) and before any thread exists.
///
/// - `WEXEC_TOKEN` is removed from the environment, so no child can inherit it, and its value
///   is overwritten in the initial environment block, which `/proc/<pid>/environ` shows.
/// - The process is made non-dumpable: its `/proc` memory, environment and descriptors are then
///   readable only with `CAP_SYS_PTRACE`, and no process of the same user can `ptrace` it.
/// - The process supervisor is forked (it too is non-dumpable, and holds no token).
pub fn prepare() -> Result<(), PrepareError> {
    scrub_token();
    crate::process::descriptors::raise_limit();
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!("cannot make wexec non-dumpable: {err}");
    }
    supervisor::start()?;
    Ok(())
}

/// Whether [`prepare`] ran.
pub fn prepared() -> bool {
    supervisor::started()
}

/// Overwrites the token's value where the environment block holds it, then removes the
/// variable.
fn scrub_token() {
    let name = c"WEXEC_TOKEN";
    #[expect(
        unsafe_code,
        reason = "the environment block is only reachable through libc's raw pointers"
    )]
    // SAFETY: single-threaded (see `prepare`), so nothing reads or changes the environment
    // meanwhile. `getenv` returns null or a pointer to the NUL-terminated value inside the
    // environment; its `strlen` bytes are overwritten in place, the terminator kept, and the
    // variable then removed, so nothing reads the zeroed value as a token.
    unsafe {
        let value = libc::getenv(name.as_ptr());
        if !value.is_null() {
            let len = libc::strlen(value);
            std::ptr::write_bytes(value, 0, len);
        }
        std::env::remove_var(TOKEN_VARIABLE);
    }
}
