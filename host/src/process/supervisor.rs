//! The process supervisor: how wexec starts programs so that nothing they start outlives
//! their session or wexec, however wexec ends (docs/protocol.md §8.8).
//!
//! At startup, while wexec is still single-threaded, [`start`] forks the zygote
//! ([`zygote`]). Each `process/start` sends a control socket and the program's stdio to one of
//! the helpers ([`helper`]) the zygote keeps forked, which starts the program as its child
//! ([`exec`]; confined, under its PID namespace's init: [`confine`]), is the subreaper
//! of everything the program forks, and reports on the control socket. wexec keeps its end of
//! that socket for as long as the session holds the process: dropping it, or wexec dying by
//! any signal (the kernel closes a dead process's descriptors), makes the helper SIGKILL the
//! program and all its descendants, `setsid` ones included, and exit.

mod child;
mod confine;
mod exec;
mod helper;
mod ports;
pub mod wire;
mod zygote;

use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Mutex, OnceLock, PoisonError};

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use self::wire::{Launch, Report};

/// wexec's ends of the zygote's sockets, one per [`helper::Kind`].
static ZYGOTE: OnceLock<[Mutex<OwnedFd>; 3]> = OnceLock::new();

/// Where wexec tells the zygote the ports it listens on ([`guard_listeners`]), once.
static LISTENERS: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// Closed to let the zygote fork its spares ([`warm_up`]).
static WARM_UP: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// Why the supervisor could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Called twice, or after a thread was started.
    #[error("the process supervisor must be started once, before any thread")]
    Misplaced,
    /// The socket or the fork failed.
    #[error("cannot start the process supervisor: {0}")]
    Os(#[from] std::io::Error),
}

/// Forks the zygote. Call it once, at the start of `main`, before any thread exists (the
/// `wexec` binary does; an embedder serving with [`crate::run`] must too).
pub fn start() -> Result<(), StartError> {
    if ZYGOTE.get().is_some() || threads() != Some(1) {
        return Err(StartError::Misplaced);
    }
    let pair = || {
        rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(std::io::Error::from)
    };
    let pairs = [pair()?, pair()?, pair()?];
    let pipe =
        || rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(std::io::Error::from);
    let (listeners, tell) = pipe()?;
    let (warm, warm_up) = pipe()?;
    match child::fork() {
        Some(0) => {
            drop((tell, warm_up));
            zygote::serve(
                pairs.map(|(ours, theirs)| {
                    drop(ours);
                    theirs
                }),
                listeners,
                warm,
            )
        }
        Some(_) => {
            *LISTENERS.lock().unwrap_or_else(PoisonError::into_inner) = Some(tell);
            *WARM_UP.lock().unwrap_or_else(PoisonError::into_inner) = Some(warm_up);
            ZYGOTE
                .set(pairs.map(|(ours, _)| Mutex::new(ours)))
                .map_err(|_| StartError::Misplaced)
        }
        None => Err(StartError::Os(std::io::Error::last_os_error())),
    }
}

/// Tells the supervisor the TCP ports wexec listens on (none over stdio), so that no confined
/// process with network can connect to them ([`ports`]). Confined starts with network wait
/// for it; the first call counts.
pub fn guard_listeners(listening: &[u16]) {
    let Some(tell) = LISTENERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    let mut line: String = listening.iter().map(|port| format!("{port} ")).collect();
    line.push('\n');
    if let Err(err) = std::io::Write::write_all(&mut std::fs::File::from(tell), line.as_bytes()) {
        tracing::warn!("cannot tell the process supervisor wexec's ports: {err}");
    }
}

/// Lets the zygote fork its spare helpers. Until then it forks nothing: forking them all and
/// building their namespaces, on a small machine, held up wexec's first answer by as much CPU
/// as it took. A start that comes earlier still gets its helper: the zygote
/// wakes for any request waiting on its sockets.
pub fn warm_up() {
    drop(
        WARM_UP
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(),
    );
}

/// Whether [`start`] ran.
pub fn started() -> bool {
    ZYGOTE.get().is_some()
}

/// Threads of this process, from `/proc/self/status`.
fn threads() -> Option<usize> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()
}

/// A program running under its helper.
pub struct Supervised {
    /// Its process id.
    pub pid: i32,
    /// The helper's reports after `Spawned`.
    pub reports: Reports,
    /// Where commands go.
    pub commands: OwnedWriteHalf,
}

/// The reports a helper sends after the start.
pub struct Reports {
    reader: BufReader<OwnedReadHalf>,
    /// A line read in part: kept when [`Reports::next`] is cancelled (it is a `select!` arm).
    line: Vec<u8>,
}

impl Reports {
    /// The next report; `None` once the helper is gone (the program and everything it forked
    /// have ended). Cancel-safe.
    pub async fn next(&mut self) -> Option<Report> {
        loop {
            match self.reader.read_until(b'\n', &mut self.line).await {
                Ok(0) | Err(_) => return None,
                Ok(_) if self.line.last() != Some(&b'\n') => return None,
                Ok(_) => {
                    let report = serde_json::from_slice(&self.line).ok();
                    self.line.clear();
                    if report.is_some() {
                        return report;
                    }
                }
            }
        }
    }
}

/// Starts `launch` with `stdio` (stdin, stdout, stderr) under a new helper. Errors are the
/// OS's, as the start failed in the helper (e.g. `No such file or directory (os error 2)`).
pub async fn launch(launch: &Launch, stdio: [OwnedFd; 3]) -> std::io::Result<Supervised> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    let mut line = serde_json::to_vec(launch).map_err(std::io::Error::other)?;
    line.push(b'\n');
    // Written before the helper is woken, so that it finds the line waiting; one too long
    // for the socket's buffer is finished below.
    let written = match std::io::Write::write(&mut &ours, &line) {
        Ok(written) => written,
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => 0,
        Err(err) => return Err(err),
    };
    send_to_zygote(helper::Kind::of(launch), theirs.as_fd(), &stdio).await?;
    drop(theirs);
    drop(stdio);
    let (reads, mut commands) = tokio::net::UnixStream::from_std(ours)?.into_split();
    commands.write_all(&line[written..]).await?;
    let mut reports = Reports {
        reader: BufReader::new(reads),
        line: Vec::new(),
    };
    match reports.next().await {
        Some(Report::Spawned { pid }) => Ok(Supervised {
            pid,
            reports,
            commands,
        }),
        Some(Report::Failed {
            errno,
            mechanism: None,
        }) => Err(std::io::Error::from_raw_os_error(errno)),
        Some(Report::Failed {
            errno,
            mechanism: Some(mechanism),
        }) => Err(std::io::Error::new(
            std::io::Error::from_raw_os_error(errno).kind(),
            SandboxSetupError {
                mechanism,
                source: std::io::Error::from_raw_os_error(errno),
            },
        )),
        Some(Report::Exited { .. } | Report::Emptied) | None => Err(std::io::Error::other(
            "the process supervisor ended before the program started",
        )),
    }
}

/// A confined start that failed in the sandbox's setup: the mechanism and the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{mechanism}: {source}")]
pub struct SandboxSetupError {
    /// The kernel mechanism whose setup failed (`user namespaces`, `seccomp`...).
    pub mechanism: String,
    /// What the kernel said.
    pub source: std::io::Error,
}

/// How long a start waits before it offers its request to a zygote whose queue was full.
const ZYGOTE_RETRY: std::time::Duration = std::time::Duration::from_millis(1);

/// Hands a helper's control end and the program's stdio to a spare helper of `kind`. The send
/// never blocks a thread: while the socket's queue is full (all spares busy and the zygote
/// forking more), the start waits and tries again.
async fn send_to_zygote(
    kind: helper::Kind,
    control: std::os::fd::BorrowedFd<'_>,
    stdio: &[OwnedFd; 3],
) -> std::io::Result<()> {
    let zygote = &ZYGOTE.get().ok_or_else(|| {
        std::io::Error::other("the process supervisor was not started (see wexec::prepare)")
    })?[kind.index()];
    let fds = [
        control,
        stdio[0].as_fd(),
        stdio[1].as_fd(),
        stdio[2].as_fd(),
    ];
    loop {
        let sent = {
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
            let mut ancillary = SendAncillaryBuffer::new(&mut space);
            ancillary.push(SendAncillaryMessage::ScmRights(&fds));
            let socket = zygote.lock().unwrap_or_else(PoisonError::into_inner);
            rustix::net::sendmsg(
                &*socket,
                &[IoSlice::new(b"L")],
                &mut ancillary,
                SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
            )
        };
        match sent {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => tokio::time::sleep(ZYGOTE_RETRY).await,
            Err(err) => {
                return Err(std::io::Error::other(format!(
                    "the process supervisor is gone: {err}"
                )));
            }
        }
    }
}
