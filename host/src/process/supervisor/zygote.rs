//! The zygote: a small process forked from wexec before wexec starts any thread, which forks
//! one helper per `process/start`. Forking a single-threaded process is safe (the child may
//! allocate, lock and run ordinary code), cheap (its address space is small) and inherits
//! nothing wexec opened later: no other process's pipes, no listening socket.
//!
//! It keeps spare helpers forked and waiting, [`SPARES`] of each [`Kind`], so that a start
//! waits for neither a fork nor the namespaces a confined helper needs. Each kind takes its
//! requests on its own socket: one byte and four descriptors (the control socket's helper end,
//! then stdin, stdout, stderr for the program). The zygote ends when a socket hangs up, when
//! wexec is gone. Helpers are reaped by the kernel (SIGCHLD ignored here).

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

use super::child::{exit, fork};
use super::confine;
use super::helper::{self, Kind};

/// Helpers of each kind kept forked and waiting.
const SPARES: usize = 2;

/// Serves until wexec is gone; never returns. The zygote itself only forks: spare helpers
/// wait on the sockets, and each that takes a request asks for a replacement of its kind.
/// Spares for confined starts with network come from a zygote of their own, forked first,
/// which waits for the ports wexec listens on (`listeners`) and restricts itself once so that
/// nothing it forks can connect to them ([`super::ports`]). Nothing is forked before wexec
/// closes `warm` or a request waits on a socket ([`super::warm_up`]).
pub fn serve(sockets: [OwnedFd; 3], listeners: OwnedFd, warm: OwnedFd) -> ! {
    quiet_stdio();
    ignore_children(true);
    wait_for_warm_up(&warm, &sockets);
    drop(warm);
    confine::filter::prepare();
    // Replacing a spare (a fork, and a confined one's namespaces: kernel work) runs
    // while the start that took it goes on, and must not delay it: a batch task does not
    // preempt the task that woke it. (`SCHED_IDLE` would yield even more, but a process may
    // leave it only with CAP_SYS_NICE in the initial user namespace, which a confined spare
    // has left.) Spares return to the normal policy once prepared, which needs no privilege.
    set_policy(libc::SCHED_BATCH);
    if fork() == Some(0) {
        let guarded = super::ports::guard(listeners);
        serve_kinds(&[Kind::ConfinedNetwork], &sockets, guarded)
    }
    drop(listeners);
    // The confined one before the other: wexec's startup probe takes one, and the first start
    // of each kind should not wait for a second of another.
    serve_kinds(&[Kind::Confined, Kind::Plain], &sockets, Ok(()))
}

/// Returns once `warm` is closed or a request waits on one of `sockets`; ends the zygote when
/// wexec is gone.
fn wait_for_warm_up(warm: &OwnedFd, sockets: &[OwnedFd; 3]) {
    use rustix::event::{PollFd, PollFlags};
    loop {
        let mut fds = vec![PollFd::new(warm, PollFlags::IN)];
        fds.extend(
            sockets
                .iter()
                .map(|socket| PollFd::new(socket, PollFlags::IN)),
        );
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => exit(0),
        }
        // wexec gone closes both the pipe and the sockets; a socket's peer closed is the sign.
        if fds[1..]
            .iter()
            .any(|fd| fd.revents().intersects(PollFlags::HUP | PollFlags::ERR))
        {
            exit(0);
        }
        if fds.iter().any(|fd| !fd.revents().is_empty()) {
            return;
        }
    }
}

/// Keeps [`SPARES`] helpers of each of `kinds` forked until wexec is gone. `guarded` is how
/// this zygote's restriction went; a spare of a zygote that could not restrict itself fails
/// every start with it.
fn serve_kinds(
    kinds: &[Kind],
    sockets: &[OwnedFd; 3],
    guarded: Result<(), confine::SetupError>,
) -> ! {
    let Ok((wake_read, wake_write)) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
    else {
        exit(1)
    };
    for _ in 0..SPARES {
        for &kind in kinds {
            fork_spare(kind, &sockets[kind.index()], &wake_write, guarded);
        }
    }
    loop {
        // No events asked on the sockets (the spares read them): only a hang-up wakes us.
        let mut fds = vec![rustix::event::PollFd::new(
            &wake_read,
            rustix::event::PollFlags::IN,
        )];
        fds.extend(kinds.iter().map(|kind| {
            rustix::event::PollFd::new(&sockets[kind.index()], rustix::event::PollFlags::empty())
        }));
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => exit(0),
        }
        if fds[1..].iter().any(|fd| !fd.revents().is_empty()) {
            exit(0);
        }
        if fds[0].revents().contains(rustix::event::PollFlags::IN) {
            let mut taken = [0u8; 16];
            let count = rustix::io::read(&wake_read, &mut taken).unwrap_or(0);
            for &index in &taken[..count] {
                if let Some(&kind) = Kind::ALL.get(usize::from(index)) {
                    fork_spare(kind, &sockets[kind.index()], &wake_write, guarded);
                }
            }
        }
    }
}

/// Forks a spare helper of `kind`: it prepares what its kind needs, waits for one request on
/// `socket`, asks the zygote for a replacement and becomes that request's helper.
fn fork_spare(
    kind: Kind,
    socket: &OwnedFd,
    wake_write: &OwnedFd,
    guarded: Result<(), confine::SetupError>,
) {
    if fork() != Some(0) {
        return;
    }
    // Kept for the request, whose start reports a failure here with what the kernel lacks.
    let entered = guarded.and_then(|()| match kind {
        Kind::Plain => Ok(()),
        Kind::Confined => confine::enter_namespaces(false),
        Kind::ConfinedNetwork => confine::enter_namespaces(true),
    });
    helper::warm_up(kind);
    set_policy(libc::SCHED_OTHER);
    loop {
        let mut byte = [0u8; 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        let received = match received {
            Ok(received) => received,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => exit(0),
        };
        if received.bytes == 0 {
            exit(0);
        }
        let mut fds: Vec<OwnedFd> = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = message {
                fds.extend(received);
            }
        }
        // A malformed request closes its descriptors here: wexec's end of the control socket
        // then reads end of file, and the start fails.
        let Ok([control, stdin, stdout, stderr]) = <[OwnedFd; 4]>::try_from(fds) else {
            continue;
        };
        let _ = rustix::io::write(wake_write, &[kind.byte()]);
        ignore_children(false);
        let spare = helper::Spare {
            kind,
            guarded,
            entered,
        };
        exit(helper::run(&spare, control, [stdin, stdout, stderr]));
    }
}

/// Points stdin and stdout at `/dev/null`: wexec's protocol stream must end when wexec does.
/// stderr stays, for whatever a helper reports there.
fn quiet_stdio() {
    if let Ok(null) = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
    }
}

/// Ignores SIGCHLD (the kernel then reaps children itself), or restores the default, which a
/// helper needs to wait for its program and which the program inherits through `exec`.
fn ignore_children(ignore: bool) {
    #[expect(unsafe_code, reason = "setting a signal disposition is unsafe in libc")]
    // SAFETY: SIG_IGN and SIG_DFL are dispositions, not handlers: no code runs on the signal.
    unsafe {
        libc::signal(
            libc::SIGCHLD,
            if ignore { libc::SIG_IGN } else { libc::SIG_DFL },
        );
    }
}

/// Sets this process's scheduling policy (one of the normal ones, priority 0); best effort.
fn set_policy(policy: libc::c_int) {
    let param = libc::sched_param { sched_priority: 0 };
    #[expect(unsafe_code, reason = "sched_setscheduler is unsafe in libc")]
    // SAFETY: `param` is a valid sched_param for the normal policies.
    unsafe {
        libc::sched_setscheduler(0, policy, &raw const param);
    }
}
