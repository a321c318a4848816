//! Where guest code and blocking host work run, so that neither holds a thread that serves
//! connections (docs/plugins.md, "Calls, limits and failures").
//!
//! - A plugin call starts where its request is handled: inline on the stdio thread, or on a
//!   runtime worker. Most calls finish there in microseconds.
//! - A call that has kept its thread busy for [`DEMOTE_AFTER`] in all (a busy guest yields
//!   at every epoch tick) moves to the guest runtime, whose threads run at a lower OS priority:
//!   however many guests spin, the threads serving connections stay free, and the kernel
//!   prefers them when both want a CPU.
//! - Blocking filesystem work runs under [`blocking`]: on a runtime worker, tokio first hands
//!   the worker's other tasks to another thread, so one slow or stuck disk operation delays
//!   only its own request.

use std::future::Future;
use std::sync::OnceLock;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::rpc::{RpcResult, internal_error};

/// Thread time after which a call moves to the guest runtime.
pub const DEMOTE_AFTER: Duration = Duration::from_millis(10);

/// How much lower the guest runtime's threads run (`nice`).
const GUEST_NICENESS: i32 = 10;

/// Runs `work`, which may block on the disk, without holding up the tasks of a runtime worker:
/// on a multi-thread runtime's worker they move to another thread first (tokio's
/// `block_in_place`); on the stdio thread, which serves only its own connection, or outside any
/// runtime, `work` just runs.
pub fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// Runs a plugin call in place until it has been busy for [`DEMOTE_AFTER`], then on the guest
/// runtime. Dropping the returned future (the connection went away) ends the call.
pub async fn call(call: impl Future<Output = RpcResult> + Send + 'static) -> RpcResult {
    let mut call = Box::pin(call);
    let mut busy = Duration::ZERO;
    let in_place = std::future::poll_fn(|context| {
        let started = Instant::now();
        let poll = call.as_mut().poll(context);
        busy += started.elapsed();
        match poll {
            Poll::Ready(outcome) => Poll::Ready(Some(outcome)),
            Poll::Pending if busy >= DEMOTE_AFTER => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    if let Some(outcome) = in_place {
        return outcome;
    }
    let Some(guests) = guest_runtime() else {
        return call.await;
    };
    tracing::debug!("a busy plugin call moves to the guest runtime");
    match AbortOnDrop(guests.spawn(call)).await {
        Ok(outcome) => outcome,
        Err(err) => Err(internal_error(format!("plugin call failed: {err}"))),
    }
}

/// Aborts a spawned call when its request is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<RpcResult>);

impl Future for AbortOnDrop {
    type Output = Result<RpcResult, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(context)
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The runtime busy calls move to: as many threads as CPUs, each at a lower priority. Built on
/// first use; `None` (calls then stay where they are) if it cannot be.
fn guest_runtime() -> Option<&'static tokio::runtime::Handle> {
    static GUESTS: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    GUESTS
        .get_or_init(|| {
            let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
            let built = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("wexec-guest")
                .on_thread_start(|| {
                    // On Linux a priority set with `who = 0` applies to the calling thread.
                    if let Err(err) = rustix::process::setpriority_process(None, GUEST_NICENESS) {
                        tracing::debug!("cannot lower a guest thread's priority: {err}");
                    }
                })
                .enable_all()
                .build();
            match built {
                Ok(runtime) => Some(runtime),
                Err(err) => {
                    tracing::error!("cannot start the guest runtime; busy plugin calls stay on the connection threads: {err}");
                    None
                }
            }
        })
        .as_ref()
        .map(tokio::runtime::Runtime::handle)
}
