//! Concurrent dispatch after the handshake (PROTOCOL §6).
//!
//! Invariants:
//! - Requests sharing a lane key (a `processId` for process control, a `handleId` for file
//!   handles) run one at a time in arrival order: each waits for its predecessor to finish. The
//!   lane position is taken when the request is read, so arrival order is wire order.
//! - At most [`MAX_EXECUTING`] requests execute per connection. Later ones wait, in arrival
//!   order, in a queue of [`MAX_WAITING`]; when that is full the processor stops reading the
//!   connection. Exempt (control) methods never wait for a slot.
//! - A request holds its slot while it waits in its lane. Slots are granted in arrival order, so
//!   a request's lane predecessor always got its slot first: lanes cannot deadlock on slots.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

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
}

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The dispatcher of one connection.
pub struct Dispatcher {
    lanes: Arc<Lanes>,
    /// Set when the connection is gone: jobs still waiting for a slot are dropped unrun.
    abandoned: Arc<AtomicBool>,
    waiting: mpsc::Sender<Job>,
    /// Every job holds a clone; [`Dispatcher::drain`] waits for them all to drop.
    in_flight: mpsc::Sender<()>,
    all_done: mpsc::Receiver<()>,
}

impl Dispatcher {
    /// A dispatcher with its slot-granting task.
    pub fn new() -> Self {
        let slots = Arc::new(Semaphore::new(MAX_EXECUTING));
        let (waiting, mut queue) = mpsc::channel::<Job>(MAX_WAITING);
        let abandoned = Arc::new(AtomicBool::new(false));
        let granter_abandoned = Arc::clone(&abandoned);
        tokio::spawn(async move {
            while let Some(job) = queue.recv().await {
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                if granter_abandoned.load(Ordering::Acquire) {
                    continue;
                }
                tokio::spawn(run_with_slot(job, slot));
            }
        });
        let (in_flight, all_done) = mpsc::channel(1);
        Self {
            lanes: Arc::new(Lanes::default()),
            abandoned,
            waiting,
            in_flight,
            all_done,
        }
    }

    /// Schedules `job`. Its lane position is taken now; `exempt` jobs start at once, others
    /// wait for a slot (and this call waits while the waiting queue is full: back-pressure).
    pub async fn dispatch<F>(&self, lane: Option<LaneKey>, exempt: bool, job: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let turn = lane.map(|key| self.lanes.enqueue(key));
        let in_flight = self.in_flight.clone();
        let job: Job = Box::pin(async move {
            let _in_flight = in_flight;
            match turn {
                Some(turn) => turn.run(job).await,
                None => job.await,
            }
        });
        if exempt {
            tokio::spawn(job);
        } else {
            // Every slot is granted by the one granter task, in queue order: no fast path may
            // overtake a job the granter already holds. The granter lives as long as `waiting`,
            // so this send only fails while the runtime shuts down, when the job can be dropped.
            let _ = self.waiting.send(job).await;
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

/// The last request enqueued in a lane: its ticket and the signal of its completion.
struct Tail {
    ticket: u64,
    finished: Option<oneshot::Receiver<()>>,
}

/// A request's place in its lane.
struct Turn {
    lanes: Arc<Lanes>,
    key: LaneKey,
    ticket: u64,
    predecessor: Option<oneshot::Receiver<()>>,
    /// Dropped when the request finishes (or is cancelled), releasing the successor.
    finished: oneshot::Sender<()>,
}

impl Lanes {
    fn enqueue(self: &Arc<Self>, key: LaneKey) -> Turn {
        static TICKETS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let ticket = TICKETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (finished, finished_rx) = oneshot::channel();
        let mut tails = self.tails.lock().unwrap_or_else(PoisonError::into_inner);
        let tail = tails.entry(key.clone()).or_insert(Tail {
            ticket,
            finished: None,
        });
        let predecessor = tail.finished.replace(finished_rx);
        tail.ticket = ticket;
        Turn {
            lanes: Arc::clone(self),
            key,
            ticket,
            predecessor,
            finished,
        }
    }
}

impl Turn {
    async fn run(self, job: impl Future<Output = ()>) {
        if let Some(predecessor) = self.predecessor {
            // Err means the predecessor finished (its sender dropped): either way, our turn.
            let _ = predecessor.await;
        }
        job.await;
        drop(self.finished);
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

    #[tokio::test]
    async fn same_lane_runs_in_arrival_order_and_other_lanes_overlap() {
        let dispatcher = Dispatcher::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        let key = || Some(LaneKey::Process("p".into()));
        let (release, released) = oneshot::channel::<()>();
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(key(), false, async move {
                    let _ = released.await;
                    log.lock().unwrap().push("first");
                })
                .await;
        }
        {
            let log = Arc::clone(&log);
            // Exempt, yet still behind its lane predecessor.
            dispatcher
                .dispatch(
                    key(),
                    true,
                    async move { log.lock().unwrap().push("second") },
                )
                .await;
        }
        {
            let log = Arc::clone(&log);
            dispatcher
                .dispatch(Some(LaneKey::Process("q".into())), false, async move {
                    log.lock().unwrap().push("other lane");
                })
                .await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
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
    async fn executing_requests_are_capped_and_exempt_ones_bypass_the_cap() {
        let dispatcher = Dispatcher::new();
        let (release, _) = tokio::sync::broadcast::channel::<()>(1);
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..MAX_EXECUTING + 10 {
            let mut released = release.subscribe();
            let running = Arc::clone(&running);
            dispatcher
                .dispatch(None, false, async move {
                    running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = released.recv().await;
                })
                .await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            running.load(std::sync::atomic::Ordering::SeqCst),
            MAX_EXECUTING
        );

        let (done, exempt_ran) = oneshot::channel();
        dispatcher
            .dispatch(None, true, async move {
                let _ = done.send(());
            })
            .await;
        tokio::time::timeout(Duration::from_secs(5), exempt_ran)
            .await
            .expect("an exempt request runs while the cap is reached")
            .unwrap();

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
