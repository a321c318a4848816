//! The stdio fast path: how a request that arrives on stdio is read, run and answered on one
//! thread, without a switch between threads, when nothing is in its way. On a small machine a
//! switch costs more than a file read through a warm plugin instance (docs/performance.md,
//! `fs_vs_mcp` and `status_rtt`). Every part is switched on here, by [`claim_thread`], for the
//! one thread that reads stdin ([`crate::server`] starts it); every other thread takes the
//! ordinary path (queues, tasks, the writer thread), which is always correct, only slower.
//!
//! The parts, each a mechanism of its own layer, and each falling back to the ordinary path:
//!
//! - **Reading.** The claimed thread reads stdin itself ([`crate::transport::Inbound::Lines`]),
//!   spinning briefly first while the client is quick (`transport/stdio/spin.rs`, with its
//!   bounds).
//! - **Running.** A request that can start at once (no request waiting before it, its lane
//!   free) is first polled in place ([`start_inline`]); one that has to wait continues as a
//!   task. Guest work is polled in place only on the claimed thread ([`on_claimed_thread`]):
//!   elsewhere it would hold a thread that serves other connections. With one CPU every
//!   request is started in place ([`one_cpu`]).
//! - **Answering.** A reply made on the claimed thread is written to stdout by that thread when
//!   that cannot overtake or block on anything (`transport/stdio/direct.rs`, with its
//!   invariants).
//!
//! Invariants, tested here and in those modules:
//!
//! 1. **One thread.** Only a thread that called [`claim_thread`] polls guest work in place or
//!    writes around the outbound queue; the claim belongs to the thread.
//! 2. **Same outcome.** A job polled in place and finished is answered as it would have been
//!    from a task; a job that has to wait is handed on with the time it already took, so the
//!    busy-guest demotion counts it (`wexec_runtime::threads`).
//! 3. **A panic ends only its request**, as it would in a task.
//! 4. **Order.** Nothing in place overtakes what is queued: the dispatcher starts a job in place
//!    only when none is waiting for a slot, and a direct write only when nothing queued is
//!    unwritten.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

thread_local! {
    static CLAIMED: Cell<bool> = const { Cell::new(false) };
}

/// A request's job.
pub type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Claims the calling thread for the fast path: stdio's reading thread, which serves nothing
/// but its own connection, so work that holds it delays nothing else.
pub fn claim_thread() {
    CLAIMED.with(|claimed| claimed.set(true));
}

/// Whether the calling thread was claimed (invariant 1).
pub fn on_claimed_thread() -> bool {
    CLAIMED.with(Cell::get)
}

/// Whether wexec may use a single CPU (affinity and cgroup quota count). With one there is
/// nothing to gain from handing queued requests to the runtime's workers: every hand-off is a
/// switch between threads on that CPU, and replies made in place ride along in one write. With
/// more, requests that arrive together run in parallel. Asked once: the answer reads cgroup
/// files.
pub fn one_cpu() -> bool {
    static ONE_CPU: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONE_CPU.get_or_init(|| std::thread::available_parallelism().is_ok_and(|cpus| cpus.get() == 1))
}

/// Starts `job` on the calling thread: most requests (a status, a file read through a warm
/// plugin instance) finish in their first poll, and then cost no task switch at all. A job that
/// has to wait goes to `continue_with` with the time its first poll took (invariant 2), which
/// polls it again at once with a waker that works. A panic ends only the job (invariant 3).
pub fn start_inline(mut job: Job, continue_with: impl FnOnce(Job, Duration)) {
    let mut context = Context::from_waker(Waker::noop());
    let started = Instant::now();
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        job.as_mut().poll(&mut context)
    }));
    match polled {
        Ok(Poll::Pending) => continue_with(job, started.elapsed()),
        Ok(Poll::Ready(())) => {}
        Err(_) => tracing::error!("a request handler panicked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_claim_belongs_to_its_thread() {
        std::thread::spawn(|| {
            assert!(!on_claimed_thread());
            claim_thread();
            assert!(on_claimed_thread());
        })
        .join()
        .unwrap();
        std::thread::spawn(|| assert!(!on_claimed_thread()))
            .join()
            .unwrap();
    }

    #[test]
    fn a_job_that_can_finish_does_so_in_place_and_one_that_waits_is_handed_on() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let job: Job = Box::pin(async move { flag.store(true, Ordering::SeqCst) });
        start_inline(job, |_, _| panic!("a finished job is not handed on"));
        assert!(done.load(Ordering::SeqCst));

        let mut handed = None;
        let job: Job = Box::pin(std::future::pending());
        start_inline(job, |job, took| handed = Some((job, took)));
        let (mut job, took) = handed.expect("a waiting job is handed on");
        assert!(took < Duration::from_secs(1));
        let mut context = Context::from_waker(Waker::noop());
        assert!(job.as_mut().poll(&mut context).is_pending());
    }

    #[test]
    fn a_panicking_job_ends_only_itself() {
        let job: Job = Box::pin(async { panic!("handler bug") });
        start_inline(job, |_, _| panic!("a panicked job is not handed on"));
    }
}
