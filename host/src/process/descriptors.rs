//! The descriptor limit: raised for wexec itself, given back to every program it starts.

/// Most descriptors wexec asks for: every process holds a few, every connection one.
const WANTED_DESCRIPTORS: u64 = 1 << 20;

/// The descriptor limit wexec started with, which every program it starts gets back.
static STARTING_DESCRIPTOR_LIMIT: std::sync::OnceLock<rustix::process::Rlimit> =
    std::sync::OnceLock::new();

/// The descriptor limit programs start with: the one wexec itself started with (some programs
/// loop over every possible descriptor, or use `select`, which breaks above 1,024).
pub fn starting_limit() -> Option<rustix::process::Rlimit> {
    STARTING_DESCRIPTOR_LIMIT.get().copied()
}

/// Raises the soft limit on open descriptors to the hard one (bounded), as servers do: the
/// default soft limit of 1,024 would run out long before `--max-processes` does.
pub fn raise_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    let _ = STARTING_DESCRIPTOR_LIMIT.set(limit);
    let wanted = limit
        .maximum
        .map_or(WANTED_DESCRIPTORS, |hard| hard.min(WANTED_DESCRIPTORS));
    if limit.current.is_some_and(|soft| soft >= wanted) {
        return;
    }
    limit.current = Some(wanted);
    if let Err(err) = setrlimit(Resource::Nofile, limit) {
        tracing::debug!("cannot raise the descriptor limit: {err}");
    }
}
