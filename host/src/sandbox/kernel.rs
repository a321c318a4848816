//! Whether this kernel can confine processes, as found by the startup probe: a confined
//! no-op through the real supervisor (user, mount, PID and network namespaces, the view,
//! `/proc`, `pivot_root`, seccomp), so that what is reported is what a start would meet.
//!
//! When the namespace tier fails, the probe tries the Landlock tier the same way. The probe
//! takes several milliseconds (most of a start's), so wexec serves while it runs: a
//! `process/start` waits for its verdict ([`settled`]) before its policy is decided.

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

/// A way of confining processes (docs/sandbox.md, "Tiers"), strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// User, mount, PID, IPC and network namespaces, seccomp.
    Namespaces,
    /// Landlock and seccomp, for kernels without usable user namespaces.
    Landlock,
}

impl Tier {
    /// As reported (`sandboxTier`, `environment/info`, `wexec doctor`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Namespaces => "namespaces",
            Self::Landlock => "landlock",
        }
    }
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The strongest tier that works, or what the weakest one lacks.
    pub tier: Result<Tier, Unavailable>,
    /// Why the namespace tier does not, when it does not.
    pub namespaces: Option<Unavailable>,
}

static AVAILABILITY: OnceLock<Verdict> = OnceLock::new();

/// Wakes [`settled`] waiters once the outcome is recorded.
static SETTLED: Notify = Notify::const_new();

/// Records the probe's outcome (once).
pub fn record(verdict: Verdict) {
    let _ = AVAILABILITY.set(verdict);
    SETTLED.notify_waiters();
}

/// Records that no tier can be used, for `missing`.
pub fn record_missing(missing: Unavailable) {
    record(Verdict {
        tier: Err(missing.clone()),
        namespaces: Some(missing),
    });
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

/// The tier in force; before any probe, unavailable.
pub fn available() -> Result<Tier, Unavailable> {
    match AVAILABILITY.get() {
        Some(verdict) => verdict.tier.clone(),
        None => Err(not_run()),
    }
}

/// What `environment/info` says of the sandbox: the verdict once known; before, once
/// `startup_over` (the probe runs: a few milliseconds), after waiting for it, else nothing (the
/// copy `initialize` embeds is taken before the probe, and refreshed after it).
pub async fn facts(
    accepted: Vec<String>,
    startup_over: bool,
) -> Option<wexec_runtime::facts::SandboxFacts> {
    if AVAILABILITY.get().is_none() {
        if !startup_over {
            return None;
        }
        settled().await;
    }
    let verdict = AVAILABILITY.get()?;
    Some(wexec_runtime::facts::SandboxFacts {
        tier: verdict
            .tier
            .as_ref()
            .map_or("none", |tier| tier.name())
            .to_owned(),
        namespaces_missing: verdict
            .namespaces
            .as_ref()
            .map(|missing| format!("{missing} ({})", missing.detail)),
        accepted,
    })
}

/// Why the namespace tier is not in force (`None` when it is).
pub fn namespaces_missing() -> Option<Unavailable> {
    match AVAILABILITY.get() {
        Some(verdict) => verdict.namespaces.clone(),
        None => Some(not_run()),
    }
}

fn not_run() -> Unavailable {
    Unavailable {
        mechanism: "the sandbox probe".to_owned(),
        detail: "not run".to_owned(),
    }
}

/// Landlock's ABI version on this kernel, or why it has none.
pub fn landlock_abi() -> Result<u32, std::io::ErrorKind> {
    static ABI: OnceLock<Result<u32, std::io::ErrorKind>> = OnceLock::new();
    *ABI.get_or_init(|| {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
        // SAFETY: with a null attribute, size 0 and the version flag, the call reads no
        // memory and only returns the ABI version (or an error).
        #[expect(unsafe_code, reason = "a raw system call the C library does not wrap")]
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0_usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        u32::try_from(abi)
            .ok()
            .filter(|abi| *abi >= 1)
            .ok_or_else(|| std::io::Error::last_os_error().kind())
    })
}

/// The oldest Landlock ABI the Landlock tier runs on: 3 (Linux 6.2), the first that stops a
/// process truncating a file it may only read.
pub const LANDLOCK_MIN_ABI: u32 = 3;

/// The Landlock ABI that scopes signals and abstract unix sockets: 6 (Linux 6.12).
pub const LANDLOCK_SCOPES_ABI: u32 = 6;

/// Whether this kernel's Landlock scopes signals and abstract unix sockets.
pub fn landlock_scopes() -> bool {
    landlock_abi().is_ok_and(|abi| abi >= LANDLOCK_SCOPES_ABI)
}
