//! Starting a program under the Landlock tier (docs/sandbox.md, "Tiers"): no namespaces. The
//! helper builds the program's Landlock ruleset from the plan's grants
//! ([`crate::sandbox::confinement::Landlock`]) before it forks, opening each path without
//! following a symbolic link; the program, between fork and exec, drops its capabilities,
//! restricts itself to the ruleset, installs the seccomp filters (with SysV IPC refused: it
//! shares the host's IPC namespace) and execs. The helper stays its parent and subreaper,
//! and kills everything the program forked when the program exits (as a PID namespace's end
//! does in the namespace tier).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};

use super::SetupError;
use crate::process::supervisor::wire::{GrantAccess, Landlock};
use crate::sandbox::kernel;

const MECHANISM: &str = "Landlock";

/// The ruleset, built and ready for [`restrict`].
pub struct Prepared {
    ruleset: OwnedFd,
}

/// Builds the ruleset of `plan`: every right this kernel's Landlock handles is handled (so
/// denied unless granted), and signals and abstract unix sockets are scoped where the kernel
/// can, and must be unless the plan says otherwise. A grant whose path is missing, or is
/// reached through a symbolic link since the plan was made, is left out: narrower, never
/// wider.
pub fn prepare(plan: &Landlock) -> Result<Prepared, SetupError> {
    let landlock_err = |errno: rustix::io::Errno| SetupError::new(errno, MECHANISM);
    let abi = kernel::landlock_abi().map_err(|_| landlock_err(rustix::io::Errno::NOSYS))?;
    if abi < kernel::LANDLOCK_MIN_ABI {
        return Err(SetupError::new(
            rustix::io::Errno::NOSYS,
            "Landlock ABI 3 (Linux 6.2)",
        ));
    }
    if plan.scoped && abi < kernel::LANDLOCK_SCOPES_ABI {
        return Err(SetupError::new(
            rustix::io::Errno::NOSYS,
            "Landlock ABI 6 (Linux 6.12), to scope signals",
        ));
    }
    let abi = ABI::from(i32::try_from(abi).unwrap_or(i32::MAX));
    let handled = AccessFs::from_all(abi);
    let failed = |err: landlock::RulesetError| {
        tracing::debug!("Landlock: {err}");
        landlock_err(rustix::io::Errno::PERM)
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(failed)?;
    if kernel::landlock_scopes() {
        ruleset = ruleset
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .map_err(failed)?;
    }
    let mut created = ruleset.create().map_err(failed)?;
    for grant in &plan.grants {
        let Some(path) = open_path(&grant.path) else {
            continue;
        };
        let access = match grant.access {
            GrantAccess::Read => AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute,
            GrantAccess::List => AccessFs::ReadDir.into(),
            GrantAccess::Write => handled,
            GrantAccess::Device => {
                AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev
            }
        } & handled;
        // A rule on a file may only hold the rights that apply to files.
        let directory = rustix::fs::fstat(&path)
            .is_ok_and(|stat| rustix::fs::FileType::from_raw_mode(stat.st_mode).is_dir());
        let access = if directory {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        if access.is_empty() {
            continue;
        }
        created = created
            .add_rule(PathBeneath::new(path, access))
            .map_err(failed)?;
    }
    let ruleset: Option<OwnedFd> = created.into();
    let ruleset = ruleset.ok_or_else(|| landlock_err(rustix::io::Errno::NOSYS))?;
    Ok(Prepared { ruleset })
}

/// `path` opened for a rule, without following any symbolic link on the way (a canonical
/// path has none: one met now was put there since).
fn open_path(path: &str) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .ok()
}

/// Restricts the calling process to `prepared` (with `no_new_privs`, which Landlock needs
/// without `CAP_SYS_ADMIN`). Runs in the program's child before its exec: system calls only.
pub fn restrict(prepared: &Prepared) -> std::io::Result<()> {
    rustix::thread::set_no_new_privs(true)?;
    #[expect(unsafe_code, reason = "a raw system call the C library does not wrap")]
    // SAFETY: the descriptor is a live Landlock ruleset owned by `prepared`; flags 0.
    let restricted = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            prepared.ruleset.as_fd().as_raw_fd(),
            0_u32,
        )
    };
    if restricted != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
