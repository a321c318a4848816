//! Output kept by closed processes, host-wide. A closed process keeps its newest output for
//! `--closed-retention` ([`crate::limits::DEFAULT_CLOSED_RETENTION`]) so that a late
//! `process/read` finds it; without a bound across processes, a client that kept starting short
//! processes held a megabyte per process closed within the retention (3.5 GB after 16 s, found
//! attacking the release binary). Past
//! [`CLOSED_OUTPUT_BYTES`], the output of the processes that closed first is let go early: a
//! `process/read` of them still gets their exit and close, without the chunks (as for any
//! chunk evicted from a log, docs/protocol.md §8.9).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::Process;

/// Most bytes of output all closed, still retained processes keep together.
pub const CLOSED_OUTPUT_BYTES: usize = 256 * 1024 * 1024;

/// Closed processes in the order they closed, with the bytes each still counts for.
static LEDGER: Mutex<Ledger> = Mutex::new(Ledger {
    entries: VecDeque::new(),
    total: 0,
});

struct Ledger {
    entries: VecDeque<Weak<Process>>,
    total: usize,
}

/// What a process counts for in the ledger (0 once let go or forgotten).
#[derive(Debug, Default)]
pub struct Counted(AtomicUsize);

/// `process` closed: its retained output counts from now on, and the oldest closed processes'
/// output goes while all of it is over [`CLOSED_OUTPUT_BYTES`].
pub fn closed(process: &Arc<Process>) {
    let bytes = process.retained_bytes();
    let mut ledger = LEDGER.lock().unwrap_or_else(PoisonError::into_inner);
    process.counted_output.0.store(bytes, Ordering::SeqCst);
    ledger.total += bytes;
    ledger.entries.push_back(Arc::downgrade(process));
    while ledger.total > CLOSED_OUTPUT_BYTES {
        let Some(oldest) = ledger.entries.pop_front() else {
            break;
        };
        if let Some(oldest) = oldest.upgrade() {
            let bytes = oldest.counted_output.0.swap(0, Ordering::SeqCst);
            ledger.total -= bytes;
            if bytes > 0 {
                oldest.release_output();
            }
        }
    }
    // Processes forgotten meanwhile leave only stale entries at the front.
    while ledger.entries.front().is_some_and(|entry| {
        entry
            .upgrade()
            .is_none_or(|p| p.counted_output.0.load(Ordering::SeqCst) == 0)
    }) {
        ledger.entries.pop_front();
    }
}

/// `process`'s retention is over: it no longer counts.
pub fn forgotten(process: &Process) {
    let mut ledger = LEDGER.lock().unwrap_or_else(PoisonError::into_inner);
    ledger.total -= process.counted_output.0.swap(0, Ordering::SeqCst);
}
