//! Where guest code and filesystem work run, so that neither holds a thread that serves
//! connections (docs/plugins.md, "Threads").
//!
//! - wexec's own runtime serves the connections and the native methods; it never runs guest
//!   code or filesystem work.
//! - Plugin calls run on the guest runtime ([`spawn_guest`]). The server may first poll one in
//!   place on a thread that serves nothing but its own connection (its stdio fast path); one
//!   that has to wait goes on here, its first poll counted.
//! - A call that has kept a thread busy for [`DEMOTE_AFTER`] in all (a busy guest yields at
//!   every epoch tick) moves to the busy-guest runtime, whose threads run at a lower OS
//!   priority: spinning guests cannot hold up calls that would finish at once, and the kernel
//!   prefers the threads serving connections when all want a CPU.
//! - Filesystem work that takes long by nature (copies, removals, listings, large writes) runs
//!   under [`long_blocking`]: tokio first hands the guest worker's other tasks to another
//!   thread, so it delays only its own request.

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::Poll;
use std::time::{Duration, Instant};

/// Thread time after which a call moves to the busy-guest runtime.
pub const DEMOTE_AFTER: Duration = Duration::from_millis(10);

/// How much lower the busy-guest runtime's threads run (`nice`).
const BUSY_NICENESS: i32 = 10;

/// A request's job.
pub type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs a request's job on the guest runtime, moving it to the busy-guest runtime once it has
/// kept threads busy for [`DEMOTE_AFTER`] in all, `busy` already included (a first poll in
/// place). Falls back to the current runtime where one cannot be built.
pub fn spawn_guest(job: Job, busy: Duration) {
    let demotable = Demotable {
        job: Some(job),
        busy,
    };
    match runtime(&GUESTS, "wexec-guest", 0) {
        Some(guests) => drop(guests.spawn(demotable)),
        None => drop(tokio::spawn(demotable)),
    }
}

/// A job that measures the time its polls take, and moves on once that is too much.
struct Demotable {
    /// Taken when the job moves.
    job: Option<Job>,
    busy: Duration,
}

impl Future for Demotable {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, context: &mut std::task::Context<'_>) -> Poll<()> {
        let Some(job) = self.job.as_mut() else {
            return Poll::Ready(());
        };
        let started = Instant::now();
        let poll = job.as_mut().poll(context);
        self.busy += started.elapsed();
        if poll.is_ready() || self.busy < DEMOTE_AFTER {
            return poll;
        }
        if let (Some(job), Some(busy_guests)) = (
            self.job.take(),
            runtime(&BUSY, "wexec-busy-guest", BUSY_NICENESS),
        ) {
            tracing::debug!("a busy plugin call moves to the busy-guest runtime");
            drop(busy_guests.spawn(job));
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// Runs `work`, filesystem work that may take long, without holding up the other tasks of the
/// runtime worker it is on (tokio's `block_in_place` moves them to another thread). On a thread
/// that only entered a multi-thread runtime (`Handle::block_on`: the server's stdio thread),
/// `block_in_place` runs `work` in place; outside a multi-thread runtime, `work` just runs.
pub fn long_blocking<T>(work: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

static GUESTS: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
static BUSY: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();

/// A runtime of as many threads as CPUs, named `name`, at `niceness`; built on first use.
/// `None` (work then stays on the current runtime) if it cannot be built.
fn runtime(
    cell: &'static OnceLock<Option<tokio::runtime::Runtime>>,
    name: &'static str,
    niceness: i32,
) -> Option<&'static tokio::runtime::Handle> {
    cell.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let built = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name(name)
            .on_thread_start(move || {
                // On Linux a priority set with `who = 0` applies to the calling thread.
                if niceness != 0
                    && let Err(err) = rustix::process::setpriority_process(None, niceness)
                {
                    tracing::debug!("cannot lower the priority of a {name} thread: {err}");
                }
            })
            .enable_all()
            .build();
        match built {
            Ok(runtime) => Some(runtime),
            Err(err) => {
                tracing::error!(
                    "cannot start the {name} runtime; its work stays on wexec's own: {err}"
                );
                None
            }
        }
    })
    .as_ref()
    .map(tokio::runtime::Runtime::handle)
}
