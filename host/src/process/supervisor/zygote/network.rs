//! One network namespace (with only a loopback that is down) for every confined process
//! without network, made once by the zygote: creating a network namespace per process costs
//! about 0.7 ms here, half the sandbox's setup. Sharing it opens nothing: such processes may
//! create no socket but `AF_UNIX` ones and may neither bind nor connect (seccomp), so they
//! cannot reach each other through it.
//!
//! The namespace is owned by a user namespace made with it (the user mapped to itself), which
//! a helper enters first: it then holds the capability `setns` needs, root or not.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::OnceLock;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use rustix::thread::{LinkNameSpaceType, UnshareFlags};

/// The namespaces: (user, network).
static SHARED: OnceLock<Option<(OwnedFd, OwnedFd)>> = OnceLock::new();

/// Makes the namespaces (in a child that sends them back and exits). Called once by the
/// zygote before it forks helpers; on any failure confined processes make their own.
pub fn prepare() {
    let _ = SHARED.set(make());
}

/// Enters the shared network namespace (and its owner), if there is one. `false`: the caller
/// must make its own.
pub fn enter() -> bool {
    let Some(Some((user, net))) = SHARED.get() else {
        return false;
    };
    rustix::thread::move_into_link_name_space(user.as_fd(), Some(LinkNameSpaceType::User))
        .and_then(|()| {
            rustix::thread::move_into_link_name_space(net.as_fd(), Some(LinkNameSpaceType::Network))
        })
        .is_ok()
}

fn make() -> Option<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .ok()?;
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    match super::fork()? {
        0 => {
            drop(ours);
            let sent = namespaces(uid, gid).and_then(|(user, net)| {
                let fds = [user.as_fd(), net.as_fd()];
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
                let mut ancillary = SendAncillaryBuffer::new(&mut space);
                ancillary.push(SendAncillaryMessage::ScmRights(&fds));
                rustix::net::sendmsg(
                    &theirs,
                    &[std::io::IoSlice::new(b"n")],
                    &mut ancillary,
                    SendFlags::NOSIGNAL,
                )
                .ok()
            });
            super::exit(i32::from(sent.is_none()))
        }
        _ => {
            drop(theirs);
            let mut byte = [0u8; 1];
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            rustix::net::recvmsg(
                &ours,
                &mut [IoSliceMut::new(&mut byte)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            )
            .ok()?;
            let mut fds: Vec<OwnedFd> = Vec::new();
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = message {
                    fds.extend(received);
                }
            }
            let [user, net] = <[OwnedFd; 2]>::try_from(fds).ok()?;
            Some((user, net))
        }
    }
}

/// In the child: a new user namespace (mapped to itself) and network namespace.
fn namespaces(uid: u32, gid: u32) -> Option<(OwnedFd, OwnedFd)> {
    #[expect(
        unsafe_code,
        reason = "unshare is unsafe in rustix (for CLONE_FILES only)"
    )]
    // SAFETY: the child is single-threaded and the flags do not include `FILES`.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWNET) }.ok()?;
    std::fs::write("/proc/self/setgroups", "deny").ok()?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).ok()?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).ok()?;
    let open = |path: &str| {
        rustix::fs::open(
            path,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .ok()
    };
    Some((open("/proc/self/ns/user")?, open("/proc/self/ns/net")?))
}
