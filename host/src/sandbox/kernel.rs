//! Whether this kernel can confine processes, as found by the startup probe: a confined
//! no-op through the real supervisor (user, mount, PID and network namespaces, the view,
//! `/proc`, `pivot_root`, seccomp), so that what is reported is what a start would meet.
//!
//! The probe takes several milliseconds (most of a start's), so wexec serves while it runs:
//! a `process/start` waits for its verdict ([`settled`]) before its policy is decided, and a
//! failed probe under a ceiling that needs confinement ends wexec with the startup error.

use std::sync::OnceLock;

use tokio::sync::Notify;

/// What the kernel lacks, for the startup error and the -32602 refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{mechanism} is unavailable")]
pub struct Unavailable {
    /// The mechanism, e.g. `user namespaces`.
    pub mechanism: String,
    /// The OS error, for the log.
    pub detail: String,
}

static AVAILABILITY: OnceLock<Result<(), Unavailable>> = OnceLock::new();

/// Wakes [`settled`] waiters once the outcome is recorded.
static SETTLED: Notify = Notify::const_new();

/// Records the probe's outcome (once).
pub fn record(outcome: Result<(), Unavailable>) {
    let _ = AVAILABILITY.set(outcome);
    SETTLED.notify_waiters();
}

/// Returns once the probe's outcome is recorded.
pub async fn settled() {
    loop {
        let notified = SETTLED.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the check, so a `record` in between is not missed.
        notified.as_mut().enable();
        if AVAILABILITY.get().is_some() {
            return;
        }
        notified.await;
    }
}

/// The probe's outcome; before any probe, unavailable.
pub fn available() -> Result<(), Unavailable> {
    AVAILABILITY.get().cloned().unwrap_or_else(|| {
        Err(Unavailable {
            mechanism: "the sandbox probe".to_owned(),
            detail: "not run".to_owned(),
        })
    })
}
