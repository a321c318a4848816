//! The zygote: a small process forked from wexec before wexec starts any thread, which forks
//! one helper per `process/start`. Forking a single-threaded process is safe (the child may
//! allocate, lock and run ordinary code), cheap (its address space is small) and inherits
//! nothing wexec opened later: no other process's pipes, no listening socket.
//!
//! Requests arrive on its socket: one byte and four descriptors (the control socket's helper
//! end, then stdin, stdout, stderr for the program), taken by spare helpers it keeps forked.
//! It ends when the socket hangs up, when wexec is gone. Helpers are reaped by the kernel
//! (SIGCHLD ignored here).

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

use super::helper;

/// Helpers kept forked and waiting, so that a start does not wait for a fork of the zygote.
const SPARES: usize = 2;

/// Serves until wexec is gone; never returns. The zygote itself only forks: [`SPARES`]
/// spare helpers wait on the socket, and each that takes a request asks for a replacement.
pub fn serve(socket: OwnedFd) -> ! {
    quiet_stdio();
    ignore_children(true);
    super::confine::filter::prepare();
    let Ok((wake_read, wake_write)) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
    else {
        exit(1)
    };
    for _ in 0..SPARES {
        fork_spare(&socket, &wake_read, &wake_write);
    }
    loop {
        // No events asked on the socket (the spares read it): only its hang-up wakes us.
        let mut fds = [
            rustix::event::PollFd::new(&wake_read, rustix::event::PollFlags::IN),
            rustix::event::PollFd::new(&socket, rustix::event::PollFlags::empty()),
        ];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => exit(0),
        }
        if !fds[1].revents().is_empty() {
            exit(0);
        }
        if fds[0].revents().contains(rustix::event::PollFlags::IN) {
            let mut taken = [0u8; 16];
            let count = rustix::io::read(&wake_read, &mut taken).unwrap_or(0);
            for _ in 0..count {
                fork_spare(&socket, &wake_read, &wake_write);
            }
        }
    }
}

/// Forks a spare helper: it waits for one request, asks the zygote for a replacement and
/// becomes that request's helper.
fn fork_spare(socket: &OwnedFd, wake_read: &OwnedFd, wake_write: &OwnedFd) {
    if fork() != Some(0) {
        return;
    }
    let _ = wake_read;
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
        let _ = rustix::io::write(wake_write, b"s");
        ignore_children(false);
        exit(helper::run(control, [stdin, stdout, stderr]));
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

/// `fork`: `Some(0)` in the child, `Some(pid)` in the parent, `None` on failure.
pub fn fork() -> Option<i32> {
    #[expect(unsafe_code, reason = "fork is unsafe in libc")]
    // SAFETY: called only in a single-threaded process (the zygote, or wexec before it starts
    // any thread), so the child's copy of every lock and allocator is in a consistent state.
    let pid = unsafe { libc::fork() };
    (pid >= 0).then_some(pid)
}

/// Ends the process at once, without unwinding or running destructors meant for the parent.
pub fn exit(status: i32) -> ! {
    #[expect(unsafe_code, reason = "_exit is unsafe in libc")]
    // SAFETY: `_exit` ends the process; nothing runs after it.
    unsafe {
        libc::_exit(status)
    }
}
