//! The seccomp filters of a confined program (docs/sandbox.md), compiled by `seccompiler`
//! (pure Rust, the crate Codex uses) before the program is forked and installed between fork
//! and exec. Denied calls fail with `EPERM`; `clone3`, whose flags a filter cannot read, fails
//! with `ENOSYS` so that libc falls back to `clone`, whose flags it can.
//!
//! With network, `socket` takes an allow-list of families and protocols ([`socket_filters`]):
//! Landlock's TCP rules, which keep such a process off wexec's own listener, see only
//! `AF_INET`/`AF_INET6` stream sockets of `IPPROTO_TCP`, and the kernel offers other sockets
//! that make a TCP connection of their own (MPTCP, which falls back to plain TCP; SMC, over
//! its internal TCP socket). A family or protocol the list leaves out fails as on a kernel
//! without it (`EAFNOSUPPORT`, `EPROTONOSUPPORT`), so that programs that probe for one (Go
//! tries MPTCP) take their fallback.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use super::SetupError;

const SECCOMP: &str = "seccomp";

/// Calls no confined program may make: debugging other processes, changing the view or the
/// namespaces, loading kernel code, and io_uring (whose operations bypass seccomp).
const ALWAYS_DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_kexec_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
];

/// Without network: every socket call that could reach anything but the program's own
/// `AF_UNIX` pairs.
const NETWORK_DENIED: &[libc::c_long] = &[
    libc::SYS_connect,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_sendmmsg,
];

/// `clone` flags that make namespaces.
const NAMESPACE_FLAGS: [u64; 8] = [
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

/// With network: the socket families a process may open. `AF_NETLINK` for its routing
/// protocol only: the C library asks it for the host's addresses (`getaddrinfo`,
/// `getifaddrs`).
const NETWORK_FAMILIES: [u64; 4] = [
    libc::AF_UNIX as u64,
    libc::AF_INET as u64,
    libc::AF_INET6 as u64,
    libc::AF_NETLINK as u64,
];

/// `socket`'s type without its flags (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`): the kernel's
/// `SOCK_TYPE_MASK`.
const SOCKET_TYPE_MASK: u64 = 0xf;

/// Rules of one filter, by system call.
type Rules = BTreeMap<i64, Vec<SeccompRule>>;

/// Both sets of filters (without, with network), compiled once.
static COMPILED: OnceLock<Result<[Vec<BpfProgram>; 2], SetupError>> = OnceLock::new();

/// SysV IPC: its objects are found by key in an IPC namespace, which a process of the
/// Landlock tier shares with the host (the namespace tier gives each process its own).
const SYSV_IPC: [libc::c_long; 12] = [
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semctl,
    libc::SYS_semtimedop,
];

/// Calls that act on another process named by its pid (arg 0, or arg 1 for `setpriority` and
/// `ioprio_set`): without a PID namespace, a process of the Landlock tier finds wexec's and
/// its helper's pids in `/proc`, and Landlock's scopes do not cover these (an open-file limit
/// of 0 on its helper would leave its descendants unkillable). Only pid 0, the caller, stays
/// allowed; and of `setpriority` and `ioprio_set` only the forms that name one process
/// ([`ONE_PROCESS`]): the others name a process group or every process of a user.
const OTHER_PROCESS: [(libc::c_long, u8); 7] = [
    (libc::SYS_prlimit64, 0),
    (libc::SYS_setpriority, 1),
    (libc::SYS_sched_setaffinity, 0),
    (libc::SYS_sched_setscheduler, 0),
    (libc::SYS_sched_setparam, 0),
    (libc::SYS_sched_setattr, 0),
    (libc::SYS_ioprio_set, 1),
];

/// `setpriority`'s `PRIO_PROCESS` and `ioprio_set`'s `IOPRIO_WHO_PROCESS` (arg 0).
const ONE_PROCESS: [(libc::c_long, u64); 2] =
    [(libc::SYS_setpriority, 0), (libc::SYS_ioprio_set, 1)];

/// `setxattrat` and `removexattrat` (Linux 6.13), numbered alike on every architecture.
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_REMOVEXATTRAT: libc::c_long = 466;

/// Calls that change a file's mode, owner, times or extended attributes: Landlock does not
/// handle them, so without read-only mounts a process could change them on any file its user
/// owns (a root-owned program made setuid, wexec's own files made world-readable).
const METADATA: &[libc::c_long] = &[
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
];

/// The Landlock tier's extra filters (metadata calls refused, allowed), compiled once.
static LANDLOCK_TIER: OnceLock<Result<[Vec<BpfProgram>; 2], SetupError>> = OnceLock::new();

/// Compiles the filters; the zygote calls it before it forks helpers, which then share them.
pub fn prepare() {
    COMPILED.get_or_init(|| Ok([compile(false)?, compile(true)?]));
    LANDLOCK_TIER.get_or_init(|| Ok([compile_landlock_tier(false)?, compile_landlock_tier(true)?]));
}

/// The filters for a process with or without `network`, in installation order.
pub fn filters(network: bool) -> Result<&'static [BpfProgram], SetupError> {
    prepare();
    match COMPILED.get() {
        Some(Ok(sets)) => Ok(&sets[usize::from(network)]),
        Some(Err(err)) => Err(*err),
        None => Err(SetupError::new(rustix::io::Errno::INVAL, SECCOMP)),
    }
}

/// The filters the Landlock tier adds to [`filters`]: SysV IPC refused (`ENOSYS`, as on a
/// kernel built without it, so that programs that probe for it fall back), calls on other
/// processes by pid refused, and unless `metadata` (the operator accepted it) the metadata
/// calls refused (`EPERM`).
pub fn landlock_tier(metadata: bool) -> Result<&'static [BpfProgram], SetupError> {
    prepare();
    match LANDLOCK_TIER.get() {
        Some(Ok(sets)) => Ok(&sets[usize::from(metadata)]),
        Some(Err(err)) => Err(*err),
        None => Err(SetupError::new(rustix::io::Errno::INVAL, SECCOMP)),
    }
}

fn compile_landlock_tier(metadata: bool) -> Result<Vec<BpfProgram>, SetupError> {
    let backend = |failure: seccompiler::BackendError| {
        SetupError::from_io(&std::io::Error::other(failure.to_string()), SECCOMP)
    };
    let arch = std::env::consts::ARCH.try_into().map_err(backend)?;
    let filter = |rules: Rules, errno: i32| program(rules, errno, arch);
    let ipc = SYSV_IPC.iter().map(|&call| (call, Vec::new())).collect();
    let mut denied: Rules = BTreeMap::new();
    for (call, arg) in OTHER_PROCESS {
        let other = condition_int(arg, SeccompCmpOp::Ne, 0).map_err(backend)?;
        denied.insert(call, vec![SeccompRule::new(vec![other]).map_err(backend)?]);
    }
    for (call, one) in ONE_PROCESS {
        let many = condition_int(0, SeccompCmpOp::Ne, one).map_err(backend)?;
        if let Some(rules) = denied.get_mut(&call) {
            rules.push(SeccompRule::new(vec![many]).map_err(backend)?);
        }
    }
    if !metadata {
        for &call in METADATA {
            denied.insert(call, Vec::new());
        }
    }
    Ok(vec![
        filter(ipc, libc::ENOSYS)?,
        filter(denied, libc::EPERM)?,
    ])
}

/// Compiles the filters, in installation order.
fn compile(network: bool) -> Result<Vec<BpfProgram>, SetupError> {
    let err = |err: seccompiler::Error| {
        SetupError::from_io(&std::io::Error::other(err.to_string()), SECCOMP)
    };
    let backend = |failure: seccompiler::BackendError| err(seccompiler::Error::Backend(failure));
    let arch = std::env::consts::ARCH.try_into().map_err(backend)?;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &call in ALWAYS_DENIED {
        denied.insert(call, Vec::new());
    }
    let condition = |arg, op, value| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(backend)
    };
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        clone_rules.push(
            SeccompRule::new(vec![condition(0, SeccompCmpOp::MaskedEq(flag), flag)?])
                .map_err(backend)?,
        );
    }
    denied.insert(libc::SYS_clone, clone_rules);
    if !network {
        for &call in NETWORK_DENIED {
            denied.insert(call, Vec::new());
        }
        let not_unix = || -> Result<Vec<SeccompRule>, SetupError> {
            Ok(vec![
                SeccompRule::new(vec![
                    SeccompCondition::new(
                        0,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::Ne,
                        libc::AF_UNIX as u64,
                    )
                    .map_err(backend)?,
                ])
                .map_err(backend)?,
            ])
        };
        denied.insert(libc::SYS_socket, not_unix()?);
        denied.insert(libc::SYS_socketpair, not_unix()?);
        // `send` is `sendto` without an address: only an address (a path to connect to) is
        // refused.
        denied.insert(
            libc::SYS_sendto,
            vec![SeccompRule::new(vec![condition(4, SeccompCmpOp::Ne, 0)?]).map_err(backend)?],
        );
    }
    let filter = |rules: Rules, errno: i32| program(rules, errno, arch);
    if network {
        for (call, rule) in tcp_side_doors().map_err(backend)? {
            // A call already denied outright (no rules) stays so.
            match denied.entry(call) {
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(vec![rule]);
                }
                std::collections::btree_map::Entry::Occupied(mut entry) => {
                    if !entry.get().is_empty() {
                        entry.get_mut().push(rule);
                    }
                }
            }
        }
    }
    let mut programs = vec![
        filter(denied, libc::EPERM)?,
        filter(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            libc::ENOSYS,
        )?,
    ];
    if network {
        let (families, protocols) = socket_filters().map_err(backend)?;
        programs.push(filter(families, libc::EAFNOSUPPORT)?);
        programs.push(filter(protocols, libc::EPROTONOSUPPORT)?);
    }
    programs.extend(foreign_calls());
    Ok(programs)
}

/// A filter that fails the calls `rules` match with `errno` and allows every other.
fn program(
    rules: Rules,
    errno: i32,
    arch: seccompiler::TargetArch,
) -> Result<BpfProgram, SetupError> {
    let backend = |failure: seccompiler::BackendError| {
        SetupError::from_io(&std::io::Error::other(failure.to_string()), SECCOMP)
    };
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(backend)?;
    BpfProgram::try_from(filter).map_err(backend)
}

/// An `int` argument compared on its low 32 bits, as the kernel reads it (high bits set must
/// not dodge a rule).
fn condition_int(
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

/// With network, calls that would open a TCP connection past Landlock's `connect` rule: data
/// sent with `MSG_FASTOPEN` (the SYN carries it; kernels before 6.18.54 and 7.2 checked no
/// Landlock rule there) and `setsockopt(TCP_ULP)`, which turns a TCP socket into another kind
/// (SMC, which then connects through an internal TCP socket no hook sees; kernel TLS is
/// refused with it, and TLS libraries then stay in user space).
fn tcp_side_doors() -> Result<Vec<(i64, SeccompRule)>, seccompiler::BackendError> {
    let int = condition_int;
    let fast_open = libc::MSG_FASTOPEN as u64;
    let with_fast_open = |flags_arg| {
        SeccompRule::new(vec![int(
            flags_arg,
            SeccompCmpOp::MaskedEq(fast_open),
            fast_open,
        )?])
    };
    Ok(vec![
        (libc::SYS_sendto, with_fast_open(3)?),
        (libc::SYS_sendmsg, with_fast_open(2)?),
        (libc::SYS_sendmmsg, with_fast_open(3)?),
        (
            libc::SYS_setsockopt,
            SeccompRule::new(vec![
                int(1, SeccompCmpOp::Eq, libc::IPPROTO_TCP as u64)?,
                int(2, SeccompCmpOp::Eq, libc::TCP_ULP as u64)?,
            ])?,
        ),
    ])
}

/// The rules of a process with network for `socket` and `socketpair`: first those whose
/// family is not in [`NETWORK_FAMILIES`] (`socketpair`: not `AF_UNIX`), then those whose
/// protocol is not allowed in its family: TCP streams and UDP and ICMP ("ping") datagrams for
/// `AF_INET`/`AF_INET6`, `NETLINK_ROUTE` for `AF_NETLINK`. Every argument is an `int`, compared
/// on its low 32 bits as the kernel reads it (high bits set must not dodge a rule).
fn socket_filters() -> Result<(Rules, Rules), seccompiler::BackendError> {
    let int = condition_int;
    let family_unlisted = NETWORK_FAMILIES
        .iter()
        .map(|&family| int(0, SeccompCmpOp::Ne, family))
        .collect::<Result<Vec<_>, _>>()?;
    let families = BTreeMap::from([
        (libc::SYS_socket, vec![SeccompRule::new(family_unlisted)?]),
        (
            libc::SYS_socketpair,
            vec![SeccompRule::new(vec![int(
                0,
                SeccompCmpOp::Ne,
                libc::AF_UNIX as u64,
            )?])?],
        ),
    ]);
    let socket_type = |value| int(1, SeccompCmpOp::MaskedEq(SOCKET_TYPE_MASK), value);
    let mut protocols = Vec::new();
    for (family, icmp) in [
        (libc::AF_INET, libc::IPPROTO_ICMP),
        (libc::AF_INET6, libc::IPPROTO_ICMPV6),
    ] {
        let family = int(0, SeccompCmpOp::Eq, family as u64)?;
        protocols.push(SeccompRule::new(vec![
            family.clone(),
            socket_type(libc::SOCK_STREAM as u64)?,
            int(2, SeccompCmpOp::Ne, 0)?,
            int(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
        ])?);
        protocols.push(SeccompRule::new(vec![
            family.clone(),
            socket_type(libc::SOCK_DGRAM as u64)?,
            int(2, SeccompCmpOp::Ne, 0)?,
            int(2, SeccompCmpOp::Ne, libc::IPPROTO_UDP as u64)?,
            int(2, SeccompCmpOp::Ne, icmp as u64)?,
        ])?);
        // Every other type (raw, packet, SCTP's seqpacket...).
        for other in (0..=SOCKET_TYPE_MASK)
            .filter(|&kind| kind != libc::SOCK_STREAM as u64 && kind != libc::SOCK_DGRAM as u64)
        {
            protocols.push(SeccompRule::new(vec![family.clone(), socket_type(other)?])?);
        }
    }
    protocols.push(SeccompRule::new(vec![
        int(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?,
        int(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE as u64)?,
    ])?);
    Ok((families, BTreeMap::from([(libc::SYS_socket, protocols)])))
}

/// x86-64 kernels built with the x32 ABI take its calls with this bit set in the call number
/// and the same architecture in `seccomp_data`: the rules above, which match exact numbers,
/// would let `mount` or `unshare` through under their x32 numbers.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// A filter that refuses every call of another ABI that shares the architecture's audit value
/// (x32 on x86-64) with `ENOSYS`, as a kernel without that ABI does. (Other architectures'
/// calls, `int 0x80` included, end the process: every `seccompiler` filter checks the
/// architecture first.)
fn foreign_calls() -> Option<BpfProgram> {
    #[cfg(target_arch = "x86_64")]
    {
        use seccompiler::sock_filter;
        // `BPF_LD | BPF_W | BPF_ABS`, `BPF_JMP | BPF_JGE | BPF_K`, `BPF_RET | BPF_K`.
        const LD_W_ABS: u16 = 0x20;
        const JGE_K: u16 = 0x35;
        const RET_K: u16 = 0x06;
        const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
        const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
        let statement = |code, k| sock_filter {
            code,
            jt: 0,
            jf: 0,
            k,
        };
        Some(vec![
            // `seccomp_data.nr` is at offset 0.
            statement(LD_W_ABS, 0),
            sock_filter {
                code: JGE_K,
                jt: 0,
                jf: 1,
                k: X32_SYSCALL_BIT,
            },
            statement(RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            statement(RET_K, SECCOMP_RET_ALLOW),
        ])
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// Installs `filters` on the calling thread (with `no_new_privs`, which seccompiler sets).
/// Runs in the program's child before its exec: makes system calls only.
pub fn install(filters: &[BpfProgram]) -> std::io::Result<()> {
    for filter in filters {
        seccompiler::apply_filter(filter).map_err(|_| std::io::Error::last_os_error())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_this_architecture() {
        let foreign = usize::from(foreign_calls().is_some());
        for (network, count) in [(false, 2 + foreign), (true, 4 + foreign)] {
            let filters = filters(network).unwrap();
            assert_eq!(filters.len(), count);
            assert!(filters.iter().all(|filter| !filter.is_empty()));
        }
        for metadata in [false, true] {
            let extra = landlock_tier(metadata).unwrap();
            assert_eq!(extra.len(), 2);
            assert!(extra.iter().all(|filter| !filter.is_empty()));
        }
    }
}
