//! Processes (docs/protocol.md §8): the session's process table, each process's event log, stdin,
//! signals and termination. Spawning lives in [`spawn`], on the [`supervisor`] that keeps
//! every descendant within its session; reading a child's output and its exit, in `pump`.

pub mod cgroup;
pub mod descriptors;
pub mod env;
pub mod output;
pub mod pty;
mod pump;
mod retention;
pub mod spawn;
pub mod supervisor;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::unix::pipe;
use tokio::sync::watch;

use self::output::{OutputLog, Snapshot};
use self::pty::PtyMaster;
use self::spawn::{ChildIo, Spawned};
use self::supervisor::wire::{INTERRUPT, KILL, TERMINATE};
use crate::limits::{Counter, Token};
use crate::protocol::WriteStatus;
use crate::transport::Outbound;

/// Between SIGTERM and SIGKILL to a process group.
pub const TERMINATE_GRACE: Duration = Duration::from_secs(2);

/// `writeId`s remembered per process for de-duplication.
pub const REMEMBERED_WRITE_IDS: usize = 4_096;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections only assign plain values; a panic cannot leave them half-done.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A process event as data: what the pump reports, before any face encodes it. Its seq is
/// the Codex face's ordering key, left out: a port receives events in order.
#[derive(Debug, Clone)]
pub enum ProcessEvent {
    /// A chunk of output (`process/output`).
    Output {
        /// The process.
        process_id: String,
        /// Which stream.
        stream: crate::protocol::OutputStream,
        /// The bytes.
        chunk: bytes::Bytes,
    },
    /// The program exited (`process/exited`).
    Exited {
        /// The process.
        process_id: String,
        /// The exit code (128 + signal when killed).
        exit_code: i32,
        /// The sandbox refused something the program tried.
        sandbox_denied: bool,
        /// Why it failed, when wexec knows.
        failure: Option<String>,
    },
    /// Every stream reached end of file after the exit (`process/closed`).
    Closed {
        /// The process.
        process_id: String,
    },
}

/// Where a session's process events go: a Codex connection's outbound queue, which gets them
/// as JSON-RPC notifications, or a face that takes them as data ([`ProcessEvent`]).
#[derive(Debug, Clone)]
pub enum EventPort {
    /// Encoded as `process/*` notifications onto a connection.
    Wire(Outbound),
    /// Sent as data; a full channel slows the child, as a slow connection does.
    Events(tokio::sync::mpsc::Sender<ProcessEvent>),
}

/// Where a session's notifications go: its connection's port while attached, nowhere while
/// detached.
#[derive(Debug, Default)]
pub struct EventSink(Mutex<Option<EventPort>>);

impl EventSink {
    /// Points the sink at a port, or at nothing.
    pub fn set(&self, port: Option<EventPort>) {
        *lock(&self.0) = port;
    }

    /// The port notifications go to now.
    pub fn current(&self) -> Option<EventPort> {
        lock(&self.0).clone()
    }
}

/// A session's processes, live and retained.
#[derive(Debug)]
pub struct ProcessTable {
    processes: Mutex<HashMap<String, Arc<Process>>>,
    /// Live processes of this session (started, not yet gone with all they forked).
    session_live: Arc<Counter>,
    /// Live processes of every session.
    host_live: Arc<Counter>,
    /// Processes no longer retained whose descendants still run (a daemon that closed its
    /// output): held, so that they end with the session.
    lingering: Mutex<Vec<Arc<Process>>>,
    sink: Arc<EventSink>,
    /// The session's pids cgroup, made at its first start (with `--session-processes`).
    cgroup: Mutex<Option<Arc<cgroup::SessionCgroup>>>,
    /// How long a closed process stays readable, and its id taken (`--closed-retention`).
    closed_retention: Duration,
}

/// Why a `process/start` could not register its id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReserveError {
    /// The id is live or retained.
    #[error("process {0} already exists")]
    AlreadyExists(String),
    /// The session has `--session-processes` live processes.
    #[error("session process limit of {0} reached")]
    SessionLimit(usize),
    /// The host has `--max-processes` live processes.
    #[error("host process limit of {0} reached")]
    HostLimit(usize),
}

impl ProcessTable {
    /// An empty table, counting its live processes in `session_live` and `host_live`, keeping
    /// each closed process for `closed_retention`.
    pub fn new(
        session_live: Arc<Counter>,
        host_live: Arc<Counter>,
        closed_retention: Duration,
    ) -> Self {
        Self {
            processes: Mutex::default(),
            session_live,
            host_live,
            lingering: Mutex::default(),
            sink: Arc::default(),
            cgroup: Mutex::default(),
            closed_retention,
        }
    }

    /// The session's pids cgroup holding at most `tasks` tasks, made on first use.
    pub fn cgroup(&self, tasks: usize) -> std::io::Result<Arc<cgroup::SessionCgroup>> {
        let mut slot = lock(&self.cgroup);
        if let Some(group) = slot.as_ref() {
            return Ok(Arc::clone(group));
        }
        let group = Arc::new(cgroup::SessionCgroup::new(tasks)?);
        *slot = Some(Arc::clone(&group));
        Ok(group)
    }

    /// The sink notifications of this table's processes go to.
    pub fn sink(&self) -> &Arc<EventSink> {
        &self.sink
    }

    /// Registers `id` as starting, within the session's and the host's process limits.
    pub fn reserve(&self, id: &str) -> Result<Arc<Process>, ReserveError> {
        let mut processes = lock(&self.processes);
        if processes.contains_key(id) {
            return Err(ReserveError::AlreadyExists(id.to_owned()));
        }
        let session = (self.session_live.take())
            .ok_or(ReserveError::SessionLimit(self.session_live.limit()))?;
        let host =
            (self.host_live.take()).ok_or(ReserveError::HostLimit(self.host_live.limit()))?;
        let process = Arc::new(Process::new(id.to_owned(), [session, host]));
        processes.insert(id.to_owned(), Arc::clone(&process));
        Ok(process)
    }

    /// The process named `id`, if any.
    pub fn get(&self, id: &str) -> Option<Arc<Process>> {
        lock(&self.processes).get(id).cloned()
    }

    /// Forgets `process` (a failed start, or retention over), unless the id was reused. One
    /// whose descendants still run stays held until they end or the session does.
    pub fn remove(&self, process: &Arc<Process>) {
        retention::forgotten(process);
        let mut processes = lock(&self.processes);
        if processes
            .get(&process.id)
            .is_some_and(|current| Arc::ptr_eq(current, process))
        {
            processes.remove(&process.id);
        }
        drop(processes);
        if process.never_started() {
            // A failed start: nothing runs, nothing counts.
            process.set_gone();
            return;
        }
        let mut lingering = lock(&self.lingering);
        lingering.retain(|process| !process.is_gone());
        if !process.is_gone() {
            lingering.push(Arc::clone(process));
        }
    }

    /// Records a successful spawn and starts the process's pump.
    pub fn started(self: &Arc<Self>, process: &Arc<Process>, spawned: Spawned) {
        let Spawned { supervised, io } = spawned;
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
        *lock(&process.commands) = Some(supervised.commands);
        let cancelled = {
            let mut phase = lock(&process.phase);
            let cancelled = matches!(*phase, Phase::Starting { cancelled: true });
            *phase = Phase::Running {
                pid: supervised.pid,
            };
            cancelled
        };
        tokio::spawn(pump::run(
            Arc::clone(process),
            Arc::clone(self),
            supervised.reports,
            output,
        ));
        if cancelled {
            process.terminate();
        }
    }

    /// Ends every process: a running one is terminated, whatever an exited one left running
    /// is killed; then waits until each is gone with everything it forked (bounded by the grace
    /// period plus a margin).
    pub async fn shutdown(&self) {
        let mut processes: Vec<Arc<Process>> = lock(&self.processes).values().cloned().collect();
        processes.extend(lock(&self.lingering).drain(..));
        let waits = processes.into_iter().map(|process| async move {
            if !process.terminate() {
                process.kill();
            }
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
        pid: i32,
    },
    /// Exited (its descendants may still run).
    Exited,
}

enum Stdin {
    Pipe(pipe::Sender),
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
    /// Commands to the process's helper; dropping it kills whatever is left.
    commands: Mutex<Option<OwnedWriteHalf>>,
    /// Its places in the session's and the host's live-process counts, until it is gone.
    counted: Mutex<Option<[Token; 2]>>,
    /// Set once the helper is gone: the process and everything it forked have ended.
    gone: watch::Sender<bool>,
    /// How it was confined, for `sandboxDenied` and `failure`.
    sandbox: Mutex<SandboxState>,
    /// Its retained output's place in the host-wide count of closed processes' output.
    counted_output: retention::Counted,
}

/// A process's sandbox facts and what wexec did to it.
#[derive(Debug, Default)]
struct SandboxState {
    /// `sandboxType` was not `none`.
    sandboxed: bool,
    /// The operator's CPU limit, to name it when the process dies of it.
    cpu_seconds: Option<u64>,
    /// `sandboxDenied`, decided at the exit.
    denied: bool,
    /// Why wexec ended it.
    failure: Option<String>,
    /// Its placeholders, released when it is gone.
    held: Option<crate::sandbox::Held>,
}

/// Failures of stdin writes and signals, mapped to -32603 by the handler.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Writing to stdin failed (e.g. the child closed it).
    #[error("failed to write to process stdin")]
    Stdin(#[source] std::io::Error),
    /// The signal could not be handed to the process's helper.
    #[error("failed to signal process: {0}")]
    Signal(std::io::Error),
}

impl Process {
    fn new(id: String, counted: [Token; 2]) -> Self {
        Self {
            id_json: serde_json::Value::String(id.clone()).to_string(),
            id,
            log: Mutex::new(OutputLog::default()),
            events: watch::Sender::new(0),
            phase: Mutex::new(Phase::Starting { cancelled: false }),
            stdin: tokio::sync::Mutex::new(None),
            write_ids: Mutex::new(WriteIds::default()),
            terminating: std::sync::atomic::AtomicBool::new(false),
            commands: Mutex::new(None),
            counted: Mutex::new(Some(counted)),
            gone: watch::Sender::new(false),
            sandbox: Mutex::new(SandboxState::default()),
            counted_output: retention::Counted::default(),
        }
    }

    /// Bytes of output its log retains.
    fn retained_bytes(&self) -> usize {
        lock(&self.log).retained_bytes()
    }

    /// Lets go of its retained output (a closed process, over the host-wide budget).
    fn release_output(&self) {
        lock(&self.log).release_chunks();
    }

    /// Sends a command to the process's helper. Commands are single bytes on a socket the
    /// helper drains, so the write never has to wait.
    fn command(&self, command: u8) -> std::io::Result<()> {
        let Some(commands) = lock(&self.commands)
            .as_ref()
            .map(|commands| commands.try_write(&[command]))
        else {
            return Ok(());
        };
        match commands {
            // The helper closed its end: it is gone and the process with it, though its exit
            // has not been read yet. A process that has exited takes a command as a no-op
            // (docs/protocol.md §8.4), as when the helper is known to be gone.
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                Ok(())
            }
            other => other.map(drop),
        }
    }

    /// Whether the helper is gone.
    fn is_gone(&self) -> bool {
        *self.gone.borrow()
    }

    /// The helper is gone: nothing the process started runs any more.
    fn set_gone(&self) {
        self.gone.send_replace(true);
        *lock(&self.commands) = None;
        *lock(&self.counted) = None;
        lock(&self.sandbox).held = None;
    }

    /// Its placeholders in the host's tree, if it holds any, taken from it: they are removed
    /// when what is returned is dropped.
    fn take_placeholders(&self) -> Option<crate::sandbox::Held> {
        let mut state = lock(&self.sandbox);
        match &state.held {
            Some(held) if !held.is_empty() => state.held.take(),
            _ => None,
        }
    }

    /// Records how the process is confined, before it starts.
    pub fn set_sandbox(
        &self,
        sandboxed: bool,
        cpu_seconds: Option<u64>,
        held: Option<crate::sandbox::Held>,
    ) {
        let mut state = lock(&self.sandbox);
        state.sandboxed = sandboxed;
        state.cpu_seconds = cpu_seconds;
        state.held = held;
    }

    /// Records why wexec ends the process (the first reason wins).
    pub fn set_failure(&self, failure: String) {
        lock(&self.sandbox).failure.get_or_insert(failure);
    }

    /// Decides `sandboxDenied` and the CPU-limit `failure` for an exit with `code`; returns
    /// both as the exit reports them.
    fn judge_exit(&self, code: i32) -> (bool, Option<String>) {
        let mut state = lock(&self.sandbox);
        // SIGXCPU: the soft CPU limit.
        if code == 128 + 24
            && let Some(seconds) = state.cpu_seconds
        {
            state.failure.get_or_insert(format!(
                "process exceeded its CPU time limit of {seconds} s"
            ));
        }
        // The output is only scanned when it can matter.
        state.denied =
            state.sandboxed && code != 0 && (code == 128 + 31 || lock(&self.log).mentions_denial());
        (state.denied, state.failure.clone())
    }

    /// `sandboxDenied` and `failure` as `process/read` reports them.
    pub fn verdict(&self) -> (bool, Option<String>) {
        let state = lock(&self.sandbox);
        (state.denied, state.failure.clone())
    }

    /// SIGKILLs whatever the process left running.
    fn kill(&self) {
        let _ = self.command(KILL);
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
        matches!(*lock(&self.phase), Phase::Exited)
    }

    /// Writes `data` to stdin (docs/protocol.md §8.3), then, with `close`, closes it.
    pub async fn write(
        &self,
        data: &[u8],
        write_id: Option<&str>,
        close: bool,
    ) -> Result<WriteStatus, ProcessError> {
        match *lock(&self.phase) {
            Phase::Starting { .. } => return Ok(WriteStatus::Starting),
            Phase::Exited => return Ok(WriteStatus::StdinClosed),
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
                if close {
                    if let Some(Stdin::Pty(master)) = stdin.as_mut() {
                        // A terminal's end of input is its EOF character at a line's start;
                        // after a partial line, the first one only hands that line over.
                        let at_line_start = data.is_empty() || data.ends_with(b"\n");
                        let eof: &[u8] = if at_line_start { b"\x04" } else { b"\x04\x04" };
                        master.write_all(eof).await.map_err(ProcessError::Stdin)?;
                    }
                    *stdin = None;
                }
                Ok(WriteStatus::Accepted)
            }
        }
    }

    /// SIGINT to the group if running; nothing otherwise (docs/protocol.md §8.4).
    pub fn interrupt(&self) -> Result<(), ProcessError> {
        let Phase::Running { .. } = *lock(&self.phase) else {
            return Ok(());
        };
        self.command(INTERRUPT).map_err(ProcessError::Signal)
    }

    /// Starts termination (SIGTERM to the group; after the grace, SIGKILL to the process and
    /// everything it forked if any of it is left). Returns whether the process was running (or
    /// starting, which cancels the start).
    pub fn terminate(self: &Arc<Self>) -> bool {
        let pid = match &mut *lock(&self.phase) {
            Phase::Starting { cancelled } => {
                *cancelled = true;
                return true;
            }
            Phase::Running { pid } => *pid,
            Phase::Exited => return false,
        };
        if self
            .terminating
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return true;
        }
        tracing::debug!(process = self.id, pid, "terminating");
        let _ = self.command(TERMINATE);
        let process = Arc::clone(self);
        tokio::spawn(async move {
            let mut gone = process.gone.subscribe();
            let grace = tokio::time::timeout(TERMINATE_GRACE, gone.wait_for(|gone| *gone)).await;
            if grace.is_err() {
                process.kill();
            }
        });
        true
    }

    /// Waits until the process and everything it forked are gone, at most the grace period
    /// plus a second (a helper that cannot be reached must not hold wexec forever).
    async fn wait_gone(&self) {
        if self.never_started() {
            return;
        }
        let deadline = tokio::time::Instant::now() + TERMINATE_GRACE + Duration::from_secs(1);
        let mut gone = self.gone.subscribe();
        if tokio::time::timeout_at(deadline, gone.wait_for(|gone| *gone))
            .await
            .is_err()
        {
            tracing::warn!(process = self.id, "process did not end in time");
        }
    }

    fn never_started(&self) -> bool {
        matches!(*lock(&self.phase), Phase::Starting { .. })
    }

    fn set_exited(&self) {
        let mut phase = lock(&self.phase);
        if let Phase::Running { .. } = *phase {
            *phase = Phase::Exited;
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
    use crate::limits::DEFAULT_CLOSED_RETENTION;

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
        let table = ProcessTable::new(Counter::new(8), Counter::new(8), DEFAULT_CLOSED_RETENTION);
        let first = table.reserve("p").unwrap();
        assert_eq!(
            table.reserve("p").unwrap_err(),
            ReserveError::AlreadyExists("p".into())
        );
        table.remove(&first);
        assert!(table.reserve("p").is_ok());
    }

    #[test]
    fn live_processes_are_capped_per_session_and_per_host() {
        let host = Counter::new(3);
        let (a, b) = (
            ProcessTable::new(Counter::new(2), Arc::clone(&host), DEFAULT_CLOSED_RETENTION),
            ProcessTable::new(Counter::new(2), Arc::clone(&host), DEFAULT_CLOSED_RETENTION),
        );
        let a1 = a.reserve("1").unwrap();
        let _a2 = a.reserve("2").unwrap();
        assert_eq!(a.reserve("3").unwrap_err(), ReserveError::SessionLimit(2));
        let _b1 = b.reserve("1").unwrap();
        assert_eq!(b.reserve("2").unwrap_err(), ReserveError::HostLimit(3));
        // A start that failed gives its places back.
        a.remove(&a1);
        assert!(b.reserve("2").is_ok());
    }
}
