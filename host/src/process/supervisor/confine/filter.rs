//! The seccomp filters of a confined program (docs/sandbox.md), compiled by `seccompiler`
//! (pure Rust, the crate Codex uses) before the program is forked and installed between fork
//! and exec. Denied calls fail with `EPERM`; `clone3`, whose flags a filter cannot read, fails
//! with `ENOSYS` so that libc falls back to `clone`, whose flags it can.

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

/// Both sets of filters (without, with network), compiled once.
static COMPILED: OnceLock<Result<[Vec<BpfProgram>; 2], SetupError>> = OnceLock::new();

/// Compiles the filters; the zygote calls it before it forks helpers, which then share them.
pub fn prepare() {
    COMPILED.get_or_init(|| Ok([compile(false)?, compile(true)?]));
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
    let eperm = SeccompFilter::new(
        denied,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(backend)?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(backend)?;
    Ok(vec![
        eperm.try_into().map_err(backend)?,
        clone3.try_into().map_err(backend)?,
    ])
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
        for network in [false, true] {
            let filters = filters(network).unwrap();
            assert_eq!(filters.len(), 2);
            assert!(filters.iter().all(|filter| !filter.is_empty()));
        }
    }
}
