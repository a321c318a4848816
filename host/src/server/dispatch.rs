//! Concurrent dispatch after the handshake (docs/protocol.md §6).
//!
//! Invariants:
//! - Requests sharing a lane key (a `processId` for process control, a `handleId` for file
//!   handles) apply in arrival order, as their [`LaneRole`] defines. The lane position is taken
//!   when the request is read, so arrival order is wire order.
//! - At most [`MAX_EXECUTING`] requests execute per connection. Later ones wait, in arrival
//!   order, in a queue of [`MAX_WAITING`]; when that is full the processor stops reading the
//!   connection. Exempt (control) methods never wait for a slot.
//! - A request holds its slot while it waits in its lane. Slots are granted in arrival order, so
//!   a request's lane predecessor always got its slot first: lanes cannot deadlock on slots.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

/// Requests executing at once on one connection.
pub const MAX_EXECUTING: usize = 1_024;

/// Requests read and waiting for a slot before the processor stops reading.
pub const MAX_WAITING: usize = 1_024;

/// What orders a request relative to others.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LaneKey {
    /// Process control for one `processId`.
    Process(String),
    /// File-handle operations for one `handleId`.
    Handle(String),
    /// The connection's `fs/watchMissing` requests.
    Watch,
}

/// How a request takes its place in its lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneRole {
    /// Creates the object (`process/start`, `fs/open`): runs after everything before it, and
    /// everything after it waits for it.
    Barrier,
    /// Uses the object (`process/write`, block reads and writes): runs after everything before
    /// it.
    Ordered,
    /// Controls the object (`process/signal`, `process/terminate`, `fs/close`): runs as soon as
    /// every earlier barrier has finished, without waiting for earlier ordered requests (a
    /// write blocked on a child that does not read must not hold up its terminate), and holds
    /// its successors until its own predecessors are done, so they keep arrival order.
    Control,
}

type Job = crate::fast_path::Job;

/// Where a request's job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// On wexec's runtime, beside the connections: native handlers, which never block.
    Native,
    /// On the guest runtime: plugin calls, which run guest code and filesystem work
    /// ([`crate::runtime::threads`]). Inline only on a thread that serves nothing but its own
    /// connection (stdio's).
    Guest,
}

impl Runs {
    fn spawn(self, job: Job) {
        match self {
            Self::Native => drop(tokio::spawn(job)),
            Self::Guest => crate::runtime::threads::spawn_guest(job, Duration::ZERO),
        }
    }

    /// Whether the job may first be polled on the calling thread.
    fn inline_here(self) -> bool {
        match self {
            Self::Native => true,
            Self::Guest => crate::fast_path::on_claimed_thread(),
        }
    }
}

/// The dispatcher of one connection.
pub struct Dispatcher {
    lanes: Arc<Lanes>,
    slots: Arc<Semaphore>,
    /// Jobs handed to the granter and not yet started: while any is, no job may start on the
    /// fast path (it would overtake them).
    queued: Arc<AtomicUsize>,
    /// Set when the connection is gone: jobs still waiting for a slot are dropped unrun.
    abandoned: Arc<AtomicBool>,
    waiting: mpsc::Sender<(Job, Runs)>,
    /// Every job holds a clone; [`Dispatcher::drain`] waits for them all to drop.
    in_flight: mpsc::Sender<()>,
    all_done: mpsc::Receiver<()>,
}

impl Dispatcher {
    /// A dispatcher with its slot-granting task.
    pub fn new() -> Self {
        let slots = Arc::new(Semaphore::new(MAX_EXECUTING));
        let (waiting, mut queue) = mpsc::channel::<(Job, Runs)>(MAX_WAITING);
        let abandoned = Arc::new(AtomicBool::new(false));
        let queued = Arc::new(AtomicUsize::new(0));
        let (granter_abandoned, granter_slots, granter_queued) = (
            Arc::clone(&abandoned),
            Arc::clone(&slots),
            Arc::clone(&queued),
        );
        tokio::spawn(async move {
            while let Some((job, runs)) = queue.recv().await {
                let Ok(slot) = Arc::clone(&granter_slots).acquire_owned().await else {
                    return;
                };
                if !granter_abandoned.load(Ordering::Acquire) {
                    runs.spawn(Box::pin(run_with_slot(job, slot)));
                }
                granter_queued.fetch_sub(1, Ordering::AcqRel);
            }
        });
        let (in_flight, all_done) = mpsc::channel(1);
        Self {
            lanes: Arc::new(Lanes::default()),
            slots,
            queued,
            abandoned,
            waiting,
            in_flight,
            all_done,
        }
    }

    /// Schedules `job` as a task. Its lane position is taken now; `exempt` jobs start at once,
    /// others wait for a slot (and this call waits while the waiting queue is full:
    /// back-pressure).
    #[cfg(test)]
    pub async fn dispatch<F>(&self, lane: Option<(LaneKey, LaneRole)>, exempt: bool, job: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.dispatch_with(lane, exempt, job, false, Runs::Native)
            .await;
    }

    /// Like [`Dispatcher::dispatch`]; with `inline`, a job that can start at once is first
    /// polled on the calling task (see [`crate::fast_path::start_inline`]). The processor asks for it when no other
    /// message is waiting: a lone request is answered without a task switch, while a burst of
    /// pipelined requests still spreads over the runtime's threads.
    pub async fn dispatch_with<F>(
        &self,
        lane: Option<(LaneKey, LaneRole)>,
        exempt: bool,
        job: F,
        inline: bool,
        runs: Runs,
    ) where
        F: Future<Output = ()> + Send + 'static,
    {
        let turn = lane.map(|(key, role)| self.lanes.enqueue(key, role));
        let in_flight = self.in_flight.clone();
        let job: Job = Box::pin(async move {
            let _in_flight = in_flight;
            match turn {
                Some(turn) => turn.run(job).await,
                None => job.await,
            }
        });
        let inline = inline && runs.inline_here();
        let start = |job: Job| {
            if inline {
                crate::fast_path::start_inline(job, |job, took| match runs {
                    Runs::Native => drop(tokio::spawn(job)),
                    Runs::Guest => crate::runtime::threads::spawn_guest(job, took),
                });
            } else {
                runs.spawn(job);
            }
        };
        if exempt {
            start(job);
            return;
        }
        // Fast path: nothing waits at the granter and a slot is free, so starting now
        // overtakes no one. (Only this task adds to `queued`, so it cannot rise meanwhile.)
        if self.queued.load(Ordering::Acquire) == 0
            && let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned()
        {
            start(Box::pin(run_with_slot(job, slot)));
            return;
        }
        // Every other slot is granted by the one granter task, in queue order. The granter
        // lives as long as `waiting`, so this send only fails while the runtime shuts down,
        // when the job can be dropped.
        self.queued.fetch_add(1, Ordering::AcqRel);
        if self.waiting.send((job, runs)).await.is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The connection is gone: jobs already running finish, jobs still waiting never start.
    pub fn abandon(self) {
        self.abandoned.store(true, Ordering::Release);
    }

    /// Waits until every dispatched job has finished.
    pub async fn drain(self) {
        let Self {
            in_flight,
            mut all_done,
            ..
        } = self;
        drop(in_flight);
        // Returns `None` once the last job's clone of the sender is gone.
        let _ = all_done.recv().await;
    }
}

async fn run_with_slot(job: Job, slot: OwnedSemaphorePermit) {
    job.await;
    drop(slot);
}

/// The tails of all lanes of a connection.
#[derive(Default)]
struct Lanes {
    tails: Mutex<HashMap<LaneKey, Tail>>,
}

/// Completion signals of a lane's latest requests. A request signals completion by dropping
/// its `watch::Sender`; waiters see `changed()` fail. Receivers are cloneable, so any number of
/// requests can wait for the same predecessor.
struct Tail {
    /// The ticket of the latest request, to forget idle lanes.
    ticket: u64,
    /// Completion of the latest request of any role.
    last: Option<watch::Receiver<()>>,
    /// Completion of the latest barrier.
    last_barrier: Option<watch::Receiver<()>>,
}

/// A request's place in its lane.
struct Turn {
    lanes: Arc<Lanes>,
    key: LaneKey,
    ticket: u64,
    /// What must finish before the request runs.
    run_after: Option<watch::Receiver<()>>,
    /// What must finish before the request releases its successors.
    release_after: Option<watch::Receiver<()>>,
    /// Dropped to release the successors.
    done: watch::Sender<()>,
}

impl Lanes {
    fn enqueue(self: &Arc<Self>, key: LaneKey, role: LaneRole) -> Turn {
        static TICKETS: AtomicU64 = AtomicU64::new(0);
        let ticket = TICKETS.fetch_add(1, Ordering::Relaxed);
        let (done, done_rx) = watch::channel(());
        let mut tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner);
        let tail = tails.entry(key.clone()).or_insert(Tail {
            ticket,
            last: None,
            last_barrier: None,
        });
        let previous = tail.last.replace(done_rx.clone());
        tail.ticket = ticket;
        let (run_after, release_after) = match role {
            LaneRole::Barrier => {
                tail.last_barrier = Some(done_rx);
                (previous, None)
            }
            LaneRole::Ordered => (previous, None),
            LaneRole::Control => (tail.last_barrier.clone(), previous),
        };
        Turn {
            lanes: Arc::clone(self),
            key,
            ticket,
            run_after,
            release_after,
            done,
        }
    }
}

/// Waits until the request behind `signal` has finished (its sender dropped).
async fn finished(signal: Option<watch::Receiver<()>>) {
    if let Some(mut signal) = signal {
        // Nothing is ever sent: an error means the sender was dropped, i.e. finished.
        while signal.changed().await.is_ok() {}
    }
}

impl Turn {
    async fn run(self, job: impl Future<Output = ()>) {
        finished(self.run_after).await;
        job.await;
        finished(self.release_after).await;
        drop(self.done);
        let mut tails = self
            .lanes
            .tails
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Forget the lane if nobody queued behind us, so idle keys cost nothing.
        if tails
            .get(&self.key)
            .is_some_and(|tail| tail.ticket == self.ticket)
        {
            tails.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Waits for a job to signal that it ran; fails the test if it never does.
    async fn ran_in_time(ran: tokio::sync::oneshot::Receiver<()>) {
        tokio::time::timeout(Duration::from_secs(5), ran)
            .await
            .expect("the job ran in time")
            .expect("the job signals before it ends");
    }

    #[tokio::test]
    async fn an_inline_job_that_can_finish_does_so_before_dispatch_returns() {
        let dispatcher = Dispatcher::new();
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        dispatcher
            .dispatch_with(
                None,
                false,
                async move { flag.store(true, Ordering::SeqCst) },
                true,
                Runs::Native,
            )
            .await;
        assert!(done.load(Ordering::SeqCst));
        // One that must wait continues as a task and still completes.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let finished = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&finished);
        dispatcher
            .dispatch_with(
                None,
                false,
                async move {
                    let _ = rx.await;
                    flag.store(true, Ordering::SeqCst);
                },
                true,
                Runs::Native,
            )
            .await;
        assert!(!finished.load(Ordering::SeqCst));
        tx.send(()).unwrap();
        dispatcher.drain().await;
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn an_inline_job_that_panics_ends_only_itself() {
        let dispatcher = Dispatcher::new();
        dispatcher
            .dispatch_with(
                None,
                true,
                async { panic!("handler bug") },
                true,
                Runs::Native,
            )
            .await;
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        dispatcher
            .dispatch_with(
                None,
                false,
                async move { flag.store(true, Ordering::SeqCst) },
                true,
                Runs::Native,
            )
            .await;
        assert!(done.load(Ordering::SeqCst));
        dispatcher.drain().await;
    }

    #[tokio::test]
    async fn same_lane_runs_in_arrival_order_and_other_lanes_overlap() {
        let dispatcher = Dispatcher::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let key = |role| Some((LaneKey::Process("p".into()), role));
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(key(LaneRole::Barrier), false, async move {
                    let _ = released.await;
                    log.lock().unwrap().push("first");
                })
                .await;
        }
        {
            let log = Arc::clone(&log);
            // Exempt, yet still behind its lane's barrier.
            dispatcher
                .dispatch(key(LaneRole::Control), true, async move {
                    log.lock().unwrap().push("second")
                })
                .await;
        }
        let (other_ran, other_lane) = tokio::sync::oneshot::channel::<()>();
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(
                    Some((LaneKey::Process("q".into()), LaneRole::Ordered)),
                    false,
                    async move {
                        log.lock().unwrap().push("other lane");
                        let _ = other_ran.send(());
                    },
                )
                .await;
        }
        // The other lane runs while the first is held.
        ran_in_time(other_lane).await;
        assert_eq!(*log.lock().unwrap(), vec!["other lane"]);
        release.send(()).unwrap();
        let lanes = Arc::clone(&dispatcher.lanes);
        dispatcher.drain().await;
        assert_eq!(*log.lock().unwrap(), vec!["other lane", "first", "second"]);
        assert!(
            lanes.tails.lock().unwrap().is_empty(),
            "finished lanes are forgotten"
        );
    }

    #[tokio::test]
    async fn control_requests_overtake_a_stuck_ordered_request_but_keep_later_ones_in_order() {
        let dispatcher = Dispatcher::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lane = |role| Some((LaneKey::Process("p".into()), role));
        let (unstick, stuck) = tokio::sync::oneshot::channel::<()>();
        let push = |entry: &'static str| {
            let log = Arc::clone(&log);
            async move { log.lock().unwrap().push(entry) }
        };
        dispatcher
            .dispatch(lane(LaneRole::Barrier), false, push("start"))
            .await;
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(lane(LaneRole::Ordered), false, async move {
                    let _ = stuck.await;
                    log.lock().unwrap().push("stuck write");
                })
                .await;
        }
        let (terminated, terminate_ran) = tokio::sync::oneshot::channel::<()>();
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(lane(LaneRole::Control), true, async move {
                    log.lock().unwrap().push("terminate");
                    let _ = terminated.send(());
                })
                .await;
        }
        dispatcher
            .dispatch(lane(LaneRole::Ordered), false, push("later write"))
            .await;
        ran_in_time(terminate_ran).await;
        assert_eq!(*log.lock().unwrap(), vec!["start", "terminate"]);
        unstick.send(()).unwrap();
        dispatcher.drain().await;
        assert_eq!(
            *log.lock().unwrap(),
            vec!["start", "terminate", "stuck write", "later write"]
        );
    }

    #[tokio::test]
    async fn a_control_request_waits_for_an_earlier_barrier() {
        let dispatcher = Dispatcher::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let lane = |role| Some((LaneKey::Process("p".into()), role));
        let (finish_start, start_blocked) = tokio::sync::oneshot::channel::<()>();
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(lane(LaneRole::Barrier), false, async move {
                    let _ = start_blocked.await;
                    log.lock().unwrap().push("start");
                })
                .await;
        }
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(lane(LaneRole::Control), true, async move {
                    log.lock().unwrap().push("terminate")
                })
                .await;
        }
        // A job dispatched after the terminate has run: on this test's one thread, tasks start
        // in the order they were spawned, so the terminate had its turn and is waiting.
        let (witnessed, witness_ran) = tokio::sync::oneshot::channel::<()>();
        dispatcher
            .dispatch(None, false, async move {
                let _ = witnessed.send(());
            })
            .await;
        ran_in_time(witness_ran).await;
        assert!(log.lock().unwrap().is_empty());
        finish_start.send(()).unwrap();
        dispatcher.drain().await;
        assert_eq!(*log.lock().unwrap(), vec!["start", "terminate"]);
    }

    #[tokio::test]
    async fn executing_requests_are_capped_and_exempt_ones_bypass_the_cap() {
        let dispatcher = Dispatcher::new();
        let (release, _) = tokio::sync::broadcast::channel::<()>(1);
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (started, mut starts) = mpsc::unbounded_channel::<()>();
        for _ in 0..MAX_EXECUTING + 10 {
            let mut released = release.subscribe();
            let running = Arc::clone(&running);
            let started = started.clone();
            dispatcher
                .dispatch(None, false, async move {
                    running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = started.send(());
                    let _ = released.recv().await;
                })
                .await;
        }
        for _ in 0..MAX_EXECUTING {
            tokio::time::timeout(Duration::from_secs(5), starts.recv())
                .await
                .expect("requests up to the cap start");
        }

        let (done, exempt_ran) = tokio::sync::oneshot::channel();
        dispatcher
            .dispatch(None, true, async move {
                let _ = done.send(());
            })
            .await;
        tokio::time::timeout(Duration::from_secs(5), exempt_ran)
            .await
            .expect("an exempt request runs while the cap is reached")
            .unwrap();
        // Dispatched last, it started after everything that could start: the rest still wait
        // for a slot.
        assert_eq!(
            running.load(std::sync::atomic::Ordering::SeqCst),
            MAX_EXECUTING
        );

        release.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), dispatcher.drain())
            .await
            .expect("everything finishes once released");
        assert_eq!(
            running.load(std::sync::atomic::Ordering::SeqCst),
            MAX_EXECUTING + 10
        );
    }

    #[tokio::test]
    async fn a_full_waiting_queue_blocks_the_reader() {
        let dispatcher = Dispatcher::new();
        let (release, _) = tokio::sync::broadcast::channel::<()>(1);
        for _ in 0..MAX_EXECUTING + MAX_WAITING + 1 {
            let mut released = release.subscribe();
            dispatcher
                .dispatch(None, false, async move {
                    let _ = released.recv().await;
                })
                .await;
        }
        let mut released = release.subscribe();
        let blocked = tokio::time::timeout(
            Duration::from_millis(100),
            dispatcher.dispatch(None, false, async move {
                let _ = released.recv().await;
            }),
        )
        .await;
        assert!(blocked.is_err(), "dispatch waits once the queue is full");
        release.send(()).unwrap();
        dispatcher.drain().await;
    }
}
