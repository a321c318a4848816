//! Per-plugin limits (docs/protocol.md §11.3, §12).

use std::time::Duration;

/// Execution time per call when none is configured.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Memory per instance when none is configured: 512 MiB.
pub const DEFAULT_MEMORY_LIMIT_BYTES: usize = 512 * 1024 * 1024;

/// Log output per call when none is configured: 64 KiB, far more than diagnostics need, far
/// less than a plugin flooding wexec's log could write.
pub const DEFAULT_LOG_LIMIT_BYTES: usize = 64 * 1024;

/// What one plugin may consume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Guest execution time per call (time blocked in host I/O does not count).
    pub time: Duration,
    /// Linear memory per instance.
    pub memory_bytes: usize,
    /// Bytes of log messages per call; lines past it are dropped, and counted.
    pub log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            time: DEFAULT_TIME_LIMIT,
            memory_bytes: DEFAULT_MEMORY_LIMIT_BYTES,
            log_bytes: DEFAULT_LOG_LIMIT_BYTES,
        }
    }
}

impl Limits {
    /// Limits from milliseconds, MiB and KiB, as the command line and config file give them.
    pub fn from_settings(time_limit_ms: u64, memory_limit_mib: u64, log_limit_kib: u64) -> Self {
        let bytes = |value: u64, unit: u64| {
            usize::try_from(value.saturating_mul(unit)).unwrap_or(usize::MAX)
        };
        Self {
            time: Duration::from_millis(time_limit_ms),
            memory_bytes: bytes(memory_limit_mib, 1024 * 1024),
            log_bytes: bytes(log_limit_kib, 1024),
        }
    }
}
