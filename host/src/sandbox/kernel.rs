//! Whether this kernel can confine processes, as found by the startup probe: a confined
//! no-op through the real supervisor (user, mount, PID and network namespaces, the view,
//! `/proc`, `pivot_root`, seccomp), so that what is reported is what a start would meet.

use std::sync::OnceLock;

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

/// Records the probe's outcome (once).
pub fn record(outcome: Result<(), Unavailable>) {
    let _ = AVAILABILITY.set(outcome);
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
