//! Processes (PROTOCOL §8): the session's process table, each process's event log, stdin,
//! signals and termination. Spawning lives in [`spawn`]; reading a child's output and reaping
//! it, in `pump`.

pub mod env;
pub mod output;
pub mod pty;
mod pump;
pub mod spawn;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::watch;

use self::output::{OutputLog, Snapshot};
use self::pty::PtyMaster;
use self::spawn::{ChildIo, Spawned};
use crate::protocol::WriteStatus;
use crate::transport::Outbound;

/// Between SIGTERM and SIGKILL to a process group.
pub const TERMINATE_GRACE: Duration = Duration::from_secs(2);

/// How long a closed process stays readable (and its id taken).
pub const CLOSED_RETENTION: Duration = Duration::from_secs(30);

/// `writeId`s remembered per process for de-duplication.
pub const REMEMBERED_WRITE_IDS: usize = 4_096;

/// How often shutdown checks whether a terminated group has emptied (group members other than
/// the leader send wexec no event when they die). Only used while wexec exits or a session ends.
const GROUP_POLL: Duration = Duration::from_millis(20);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only assign plain values; a panic cannot leave them half-done.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a session's notifications go: its connection's outbound queue while attached,
/// nowhere while detached.
#[derive(Debug, Default)]
pub struct EventSink(Mutex<Option<Outbound>>);

impl EventSink {
    /// Points the sink at a connection, or at nothing.
    pub fn set(&self, outbound: Option<Outbound>) {
        *lock(&self.0) = outbound;
    }

    /// The connection notifications go to now.
    pub fn current(&self) -> Option<Outbound> {
        lock(&self.0).clone()
    }
}

/// A session's processes, live and retained.
#[derive(Debug, Default)]
pub struct ProcessTable {
    processes: Mutex<HashMap<String, Arc<Process>>>,
    sink: Arc<EventSink>,
}

/// Why a `process/start` could not register its id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("process {0} already exists")]
pub struct AlreadyExists(pub String);

impl ProcessTable {
    /// The sink notifications of this table's processes go to.
    pub fn sink(&self) -> &Arc<EventSink> {
        &self.sink
    }

    /// Registers `id` as starting.
    pub fn reserve(&self, id: &str) -> Result<Arc<Process>, AlreadyExists> {
        let mut processes = lock(&self.processes);
        if processes.contains_key(id) {
            return Err(AlreadyExists(id.to_owned()));
        }
        let process = Arc::new(Process::new(id.to_owned()));
        processes.insert(id.to_owned(), Arc::clone(&process));
        Ok(process)
    }

    /// The process named `id`, if any.
    pub fn get(&self, id: &str) -> Option<Arc<Process>> {
        lock(&self.processes).get(id).cloned()
    }

    /// Forgets `process` (a failed start, or retention over), unless the id was reused.
    pub fn remove(&self, process: &Arc<Process>) {
        let mut processes = lock(&self.processes);
        if processes
            .get(&process.id)
            .is_some_and(|current| Arc::ptr_eq(current, process))
        {
            processes.remove(&process.id);
        }
    }

    /// Records a successful spawn and starts the process's pump.
    pub fn started(self: &Arc<Self>, process: &Arc<Process>, spawned: Spawned) {
        let Spawned { child, pgid, io } = spawned;
        let (stdin, output) = match io {
            ChildIo::Pipes {
                stdin,
                stdout,
                stderr,
            } => (
                stdin.map(Stdin::Pipe),
                pump::Output::Pipes { stdout, stderr },
            ),
            ChildIo::Pty(master) => (
                Some(Stdin::Pty(Arc::clone(&master))),
                pump::Output::Pty(master),
            ),
        };
        if let Some(stdin) = stdin
            && let Ok(mut slot) = process.stdin.try_lock()
        {
            *slot = Some(stdin);
        }
        let cancelled = {
            let mut phase = lock(&process.phase);
            let cancelled = matches!(*phase, Phase::Starting { cancelled: true });
            *phase = Phase::Running { pgid };
            cancelled
        };
        tokio::spawn(pump::run(
            Arc::clone(process),
            Arc::clone(self),
            child,
            output,
        ));
        if cancelled {
            process.terminate();
        }
    }

    /// Terminates every running process and waits until each has closed and its group is
    /// empty (bounded by the grace period plus a margin).
    pub async fn shutdown(&self) {
        let processes: Vec<Arc<Process>> = lock(&self.processes).values().cloned().collect();
        let waits = processes.into_iter().map(|process| async move {
            process.terminate();
            process.wait_gone().await;
        });
        futures_util::future::join_all(waits).await;
    }
}

#[derive(Debug)]
enum Phase {
    /// Spawning; `cancelled` if a terminate arrived meanwhile.
    Starting {
        cancelled: bool,
    },
    Running {
        pgid: Pid,
    },
    /// Reaped (the group may still have members).
    Exited {
        pgid: Pid,
    },
}

enum Stdin {
    Pipe(ChildStdin),
    Pty(Arc<PtyMaster>),
}

impl std::fmt::Debug for Stdin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Pipe(_) => "Stdin::Pipe",
            Self::Pty(_) => "Stdin::Pty",
        })
    }
}

/// One process of a session.
#[derive(Debug)]
pub struct Process {
    id: String,
    /// `id` encoded as a JSON string, once, for the per-chunk notification.
    id_json: String,
    log: Mutex<OutputLog>,
    /// Bumped on every event, so long polls wake without polling.
    events: watch::Sender<u64>,
    phase: Mutex<Phase>,
    stdin: tokio::sync::Mutex<Option<Stdin>>,
    write_ids: Mutex<WriteIds>,
    terminating: std::sync::atomic::AtomicBool,
}

/// Failures of stdin writes and signals, mapped to -32603 by the handler.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Writing to stdin failed (e.g. the child closed it).
    #[error("failed to write to process stdin")]
    Stdin(#[source] std::io::Error),
    /// `kill` failed.
    #[error("failed to signal process: {0}")]
    Signal(std::io::Error),
}

impl Process {
    fn new(id: String) -> Self {
        Self {
            id_json: serde_json::Value::String(id.clone()).to_string(),
            id,
            log: Mutex::new(OutputLog::default()),
            events: watch::Sender::new(0),
            phase: Mutex::new(Phase::Starting { cancelled: false }),
            stdin: tokio::sync::Mutex::new(None),
            write_ids: Mutex::new(WriteIds::default()),
            terminating: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether the start is still in progress.
    pub fn is_starting(&self) -> bool {
        matches!(*lock(&self.phase), Phase::Starting { .. })
    }

    /// Retained events after `after_seq` within `max_bytes`.
    pub fn read(&self, after_seq: u64, max_bytes: Option<u64>) -> Snapshot {
        lock(&self.log).read(after_seq, max_bytes)
    }

    /// Whether a long poll from `after_seq` should answer now.
    pub fn is_ready(&self, after_seq: u64) -> bool {
        lock(&self.log).is_ready(after_seq)
    }

    /// A receiver that changes on every event. Subscribe before checking readiness so no
    /// event is missed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.events.subscribe()
    }

    fn is_exited(&self) -> bool {
        matches!(*lock(&self.phase), Phase::Exited { .. })
    }

    /// Writes `data` to stdin (PROTOCOL §8.3).
    pub async fn write(
        &self,
        data: &[u8],
        write_id: Option<&str>,
    ) -> Result<WriteStatus, ProcessError> {
        match *lock(&self.phase) {
            Phase::Starting { .. } => return Ok(WriteStatus::Starting),
            Phase::Exited { .. } => return Ok(WriteStatus::StdinClosed),
            Phase::Running { .. } => {}
        }
        if let Some(write_id) = write_id
            && lock(&self.write_ids).contains(write_id)
        {
            return Ok(WriteStatus::Accepted);
        }
        let mut exited = self.subscribe();
        let mut stdin = self.stdin.lock().await;
        let written = {
            let Some(sink) = stdin.as_mut() else {
                return Ok(WriteStatus::StdinClosed);
            };
            let write = async {
                match sink {
                    Stdin::Pipe(pipe) => {
                        pipe.write_all(data).await?;
                        pipe.flush().await
                    }
                    Stdin::Pty(master) => master.write_all(data).await,
                }
            };
            // A child that stopped reading must not hold this write (and its lane) forever
            // once it has exited.
            tokio::select! {
                written = write => Some(written),
                _ = exited.wait_for(|_| self.is_exited()) => None,
            }
        };
        match written {
            None => {
                *stdin = None;
                Ok(WriteStatus::StdinClosed)
            }
            Some(Err(err)) => {
                // The pipe is dead (the child closed it or died): later writes see stdinClosed.
                *stdin = None;
                Err(ProcessError::Stdin(err))
            }
            Some(Ok(())) => {
                if let Some(write_id) = write_id {
                    lock(&self.write_ids).insert(write_id);
                }
                Ok(WriteStatus::Accepted)
            }
        }
    }

    /// SIGINT to the group if running; nothing otherwise.
    pub fn interrupt(&self) -> Result<(), ProcessError> {
        let Phase::Running { pgid } = *lock(&self.phase) else {
            return Ok(());
        };
        match rustix::process::kill_process_group(pgid, Signal::INT) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(err) => Err(ProcessError::Signal(err.into())),
        }
    }

    /// Starts termination (SIGTERM to the group, SIGKILL after the grace if a member is
    /// alive). Returns whether the process was running (or starting, which cancels the start).
    pub fn terminate(self: &Arc<Self>) -> bool {
        let pgid = match &mut *lock(&self.phase) {
            Phase::Starting { cancelled } => {
                *cancelled = true;
                return true;
            }
            Phase::Running { pgid } => *pgid,
            Phase::Exited { .. } => return false,
        };
        if self
            .terminating
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return true;
        }
        tracing::debug!(
            process = self.id,
            pgid = pgid.as_raw_nonzero().get(),
            "terminating"
        );
        let _ = rustix::process::kill_process_group(pgid, Signal::TERM);
        tokio::spawn(async move {
            tokio::time::sleep(TERMINATE_GRACE).await;
            if rustix::process::test_kill_process_group(pgid).is_ok() {
                let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
            }
        });
        true
    }

    /// Waits until the process has closed and its group is empty, at most the grace period
    /// plus a second (a member that left the group, or a zombie nobody reaps, cannot hold
    /// wexec forever).
    async fn wait_gone(&self) {
        let deadline = tokio::time::Instant::now() + TERMINATE_GRACE + Duration::from_secs(1);
        let mut events = self.subscribe();
        let closed = events.wait_for(|_| lock(&self.log).is_closed() || self.never_started());
        if tokio::time::timeout_at(deadline, closed).await.is_err() {
            tracing::warn!(process = self.id, "process did not close in time");
            return;
        }
        let pgid = match *lock(&self.phase) {
            Phase::Running { pgid } | Phase::Exited { pgid } => pgid,
            Phase::Starting { .. } => return,
        };
        while rustix::process::test_kill_process_group(pgid).is_ok() {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(process = self.id, "process group still has members");
                return;
            }
            tokio::time::sleep(GROUP_POLL).await;
        }
    }

    fn never_started(&self) -> bool {
        matches!(*lock(&self.phase), Phase::Starting { .. })
    }

    fn set_exited(&self) {
        let mut phase = lock(&self.phase);
        if let Phase::Running { pgid } = *phase {
            *phase = Phase::Exited { pgid };
        }
    }
}

/// The last [`REMEMBERED_WRITE_IDS`] accepted `writeId`s.
#[derive(Debug, Default)]
struct WriteIds {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl WriteIds {
    fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }

    fn insert(&mut self, id: &str) {
        if !self.set.insert(id.to_owned()) {
            return;
        }
        self.order.push_back(id.to_owned());
        while self.order.len() > REMEMBERED_WRITE_IDS {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_ids_remember_the_most_recent_4096() {
        let mut ids = WriteIds::default();
        for i in 0..REMEMBERED_WRITE_IDS + 1 {
            ids.insert(&i.to_string());
        }
        assert!(!ids.contains("0"));
        assert!(ids.contains("1"));
        assert!(ids.contains(&REMEMBERED_WRITE_IDS.to_string()));
        assert_eq!(ids.set.len(), REMEMBERED_WRITE_IDS);
    }

    #[test]
    fn ids_are_unique_until_removed() {
        let table = ProcessTable::default();
        let first = table.reserve("p").unwrap();
        assert_eq!(table.reserve("p").unwrap_err(), AlreadyExists("p".into()));
        table.remove(&first);
        assert!(table.reserve("p").is_ok());
    }
}
