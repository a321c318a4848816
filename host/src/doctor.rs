//! `wexec doctor` (docs/sandbox.md, "Kernel requirements"): what this machine gives the process
//! sandbox, whether confined processes can run, and for each missing piece the fix on the
//! platform it looks like (Ubuntu's AppArmor restriction, a container's seccomp profile or
//! masked `/proc`, a Kubernetes pod).
//!
//! The decisive check is the sandbox probe itself: a confined no-op through the real
//! supervisor, as every start meets it. The others say why it failed and what would help.

use std::path::Path;

use serde::Serialize;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Present and usable.
    Ok,
    /// Missing, or refused by the kernel.
    Missing,
    /// Not needed by default, or not determinable here.
    Note,
}

/// One check: what was looked at, what was found, and the fix when something is missing.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What is checked.
    pub name: &'static str,
    /// The outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it, when something is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// What `wexec doctor` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Whether confined processes can run here (the default ceiling needs them).
    pub confined_processes: bool,
    /// The sandbox tier in force: `namespaces`, `landlock`, or `none` (processes only with
    /// `--sandbox danger-full-access`, and no client `sandbox` honoured).
    pub tier: &'static str,
    /// What each `--sandbox` mode gets here.
    pub modes: Vec<ModeSupport>,
    /// Where wexec seems to run: `host`, `docker`, `podman`, `kubernetes` or `container`.
    pub environment: &'static str,
    /// Every check, the probes first.
    pub checks: Vec<Check>,
}

/// What one `--sandbox` mode (as ceiling or as a client's request) gets under the tier.
#[derive(Debug, Clone, Serialize)]
pub struct ModeSupport {
    /// The mode.
    pub mode: &'static str,
    /// Whether its processes run.
    pub available: bool,
    /// What holds, or what is refused and why.
    pub detail: &'static str,
}

fn check(name: &'static str, status: Status, detail: String, fix: Option<String>) -> Check {
    Check {
        name,
        status,
        detail,
        fix,
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
}

/// Looks at this machine. Runs the sandbox probes, so call it after [`crate::prepare`].
pub async fn examine() -> Report {
    use crate::process::spawn::probe;
    use crate::sandbox::kernel::Tier;
    // Nothing listens: the supervisor need not wait for ports to keep processes off.
    crate::process::supervisor::guard_listeners(&[]);
    let environment = environment();
    let namespaces = probe(Tier::Namespaces, true).await;
    let mut checks = vec![match &namespaces {
        Ok(()) => check(
            "namespace tier",
            Status::Ok,
            "a confined process starts (user, mount, PID and network namespaces, a private /proc, seccomp)".to_owned(),
            None,
        ),
        Err(missing) => check(
            "namespace tier",
            Status::Missing,
            format!("{missing} ({})", missing.detail),
            Some(format!(
                "see the checks below{}",
                match environment {
                    "docker" | "podman" | "container" =>
                        "; in a container, the runtime's default seccomp profile refuses unshare and the mounts: --security-opt seccomp=packaging/docker/seccomp.json (Docker's default plus the sandbox's calls; docs/deploy.md)",
                    "kubernetes" =>
                        "; in a pod, set hostUsers: false, securityContext.procMount: Unmasked and seccompProfile {type: Localhost, localhostProfile: wexec.json} with packaging/kubernetes/seccomp.json installed as the kubelet's seccomp/wexec.json (docs/deploy.md)",
                    _ => "",
                }
            )),
        ),
    }];
    let landlock = if namespaces.is_ok() {
        None
    } else {
        let scoped = probe(Tier::Landlock, true).await;
        let unscoped = match scoped {
            Ok(()) => Ok(()),
            Err(_) => probe(Tier::Landlock, false).await,
        };
        checks.push(match (&scoped, &unscoped) {
            (Ok(()), _) => check(
                "Landlock tier",
                Status::Ok,
                "a process confined by Landlock and seccomp alone starts; it holds everything but read-only paths inside writable roots, a private /proc and PID isolation (docs/sandbox.md, \"Tiers\")".to_owned(),
                None,
            ),
            (Err(missing), Ok(())) => check(
                "Landlock tier",
                Status::Missing,
                format!("{missing}: processes could signal outside their sandbox"),
                Some("Linux 6.12 or later; or accept it: --sandbox-accept signals".to_owned()),
            ),
            (_, Err(missing)) => check(
                "Landlock tier",
                Status::Missing,
                format!("{missing} ({})", missing.detail),
                Some("Linux 6.2 or later with Landlock enabled (CONFIG_SECURITY_LANDLOCK, landlock in lsm=) and seccomp".to_owned()),
            ),
        });
        Some((scoped.is_ok(), unscoped.is_ok()))
    };
    checks.extend(user_namespaces());
    checks.push(proc_visibility(environment));
    checks.push(self::landlock());
    checks.push(seccomp());
    checks.push(cgroups());
    let tier = match (namespaces.is_ok(), landlock) {
        (true, _) => Some(Tier::Namespaces),
        (false, Some((true, _))) => Some(Tier::Landlock),
        _ => None,
    };
    Report {
        confined_processes: tier.is_some(),
        tier: tier.map_or("none", Tier::name),
        modes: modes(tier, landlock.is_some_and(|(_, unscoped)| unscoped)),
        environment,
        checks,
    }
}

/// What each mode gets under `tier` (`None`: no tier works); `unscoped`: the Landlock tier
/// would run if its missing signal scope were accepted.
fn modes(tier: Option<crate::sandbox::kernel::Tier>, unscoped: bool) -> Vec<ModeSupport> {
    use crate::sandbox::kernel::Tier;
    let support = |mode, available, detail| ModeSupport {
        mode,
        available,
        detail,
    };
    let (read_only, workspace_write) = match tier {
        Some(Tier::Namespaces) => (
            support("read-only", true, "confined: nothing writable"),
            support(
                "workspace-write",
                true,
                "confined: writable roots, .git, .codex, .agents and .aws kept read-only",
            ),
        ),
        Some(Tier::Landlock) => (
            support(
                "read-only",
                true,
                "confined by Landlock: nothing writable but /dev/null and the like",
            ),
            support(
                "workspace-write",
                false,
                "refused: .git, .codex, .agents and .aws cannot be kept read-only inside a writable root without mount namespaces (--sandbox-accept carve-outs leaves them writable)",
            ),
        ),
        None if unscoped => (
            support(
                "read-only",
                false,
                "refused unless --sandbox-accept signals",
            ),
            support(
                "workspace-write",
                false,
                "refused unless --sandbox-accept signals (and carve-outs)",
            ),
        ),
        None => {
            let none = "refused: no tier can confine processes here";
            (
                support("read-only", false, none),
                support("workspace-write", false, none),
            )
        }
    };
    vec![
        read_only,
        workspace_write,
        support(
            "danger-full-access",
            true,
            "unconfined, with wexec's user and rights",
        ),
    ]
}

/// The knobs that switch unprivileged user namespaces off, each with its fix.
fn user_namespaces() -> Vec<Check> {
    let mut checks = Vec::new();
    match read("/proc/sys/user/max_user_namespaces").map(|max| max.parse::<u64>()) {
        Some(Ok(0)) => checks.push(check(
            "user namespaces",
            Status::Missing,
            "user.max_user_namespaces is 0".to_owned(),
            Some(
                "sudo sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/ to keep it)"
                    .to_owned(),
            ),
        )),
        Some(Ok(max)) => checks.push(check(
            "user namespaces",
            Status::Ok,
            format!("user.max_user_namespaces is {max}"),
            None,
        )),
        _ => checks.push(check(
            "user namespaces",
            Status::Missing,
            "the kernel has no user namespaces (CONFIG_USER_NS)".to_owned(),
            Some("a kernel built with CONFIG_USER_NS".to_owned()),
        )),
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        checks.push(check(
            "unprivileged user namespaces",
            Status::Missing,
            "kernel.unprivileged_userns_clone is 0".to_owned(),
            Some("sudo sysctl -w kernel.unprivileged_userns_clone=1".to_owned()),
        ));
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        checks.push(check(
            "AppArmor user namespace restriction",
            Status::Note,
            "kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 23.10 and later): a new user namespace has no capabilities unless an AppArmor profile allows it".to_owned(),
            Some("install the profile wexec ships: sudo install -m 644 packaging/apparmor/wexec /etc/apparmor.d/wexec (edit the path in it to where wexec is), then sudo apparmor_parser -r /etc/apparmor.d/wexec".to_owned()),
        ));
    }
    checks
}

/// A container runtime masks parts of `/proc` with mounts over them; the kernel then refuses
/// a new `/proc` in a user namespace (it would reveal what is masked).
fn proc_visibility(environment: &str) -> Check {
    let masked: Vec<String> = read("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_whitespace().nth(4))
        .filter(|point| point.starts_with("/proc/") && *point != "/proc/sys/fs/binfmt_misc")
        .map(str::to_owned)
        .collect();
    if masked.is_empty() {
        return check(
            "/proc fully visible",
            Status::Ok,
            "nothing is mounted over /proc's entries".to_owned(),
            None,
        );
    }
    let fix = match environment {
        "kubernetes" => {
            "set securityContext.procMount: Unmasked in the pod (with hostUsers: false)"
        }
        _ => "run the container with --security-opt systempaths=unconfined (Docker, Podman)",
    };
    check(
        "/proc fully visible",
        Status::Missing,
        format!(
            "{} entries of /proc are masked ({}...): a private /proc cannot be mounted",
            masked.len(),
            masked
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some(fix.to_owned()),
    )
}

/// Landlock's ABI version, from the kernel itself.
fn landlock() -> Check {
    use crate::sandbox::kernel::{LANDLOCK_MIN_ABI, LANDLOCK_SCOPES_ABI, landlock_abi};
    match landlock_abi() {
        Ok(abi) => check(
            "Landlock",
            if abi >= LANDLOCK_MIN_ABI {
                Status::Ok
            } else {
                Status::Missing
            },
            format!("ABI {abi}"),
            if abi < LANDLOCK_MIN_ABI {
                Some("Linux 6.2 or later (ABI 3), for the Landlock tier".to_owned())
            } else if abi < 4 {
                Some("Linux 6.7 or later (ABI 4): confined processes with network are then kept off wexec's own port".to_owned())
            } else if abi < LANDLOCK_SCOPES_ABI {
                Some("Linux 6.12 or later (ABI 6): the Landlock tier then keeps processes from signalling outside their sandbox".to_owned())
            } else {
                None
            },
        ),
        Err(kind) => check(
            "Landlock",
            Status::Missing,
            format!("unavailable: {}", std::io::Error::from(kind)),
            Some("a kernel with CONFIG_SECURITY_LANDLOCK and landlock in its lsm= list".to_owned()),
        ),
    }
}

/// Seccomp filters, and whether a runtime already filters this process.
fn seccomp() -> Check {
    let status = read("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|value| value.trim().to_owned())
    };
    match field("Seccomp:") {
        None => check(
            "seccomp",
            Status::Missing,
            "the kernel has no seccomp (CONFIG_SECCOMP_FILTER)".to_owned(),
            Some("a kernel built with CONFIG_SECCOMP_FILTER".to_owned()),
        ),
        Some(mode) if mode == "2" => check(
            "seccomp",
            Status::Ok,
            format!(
                "available; this process is already filtered ({} filters, a container runtime's profile), which may refuse unshare and mount",
                field("Seccomp_filters:").unwrap_or_else(|| "some".to_owned())
            ),
            None,
        ),
        Some(_) => check("seccomp", Status::Ok, "available".to_owned(), None),
    }
}

/// The pids cgroup `--session-processes` uses (cgroup v1 only, for now).
fn cgroups() -> Check {
    match crate::process::cgroup::find_hierarchy() {
        Ok(path) => {
            let writable = rustix::fs::access(&path, rustix::fs::Access::WRITE_OK).is_ok();
            check(
                "pids cgroup (--session-processes)",
                if writable { Status::Ok } else { Status::Note },
                format!(
                    "cgroup v1 pids hierarchy at {}{}",
                    path.display(),
                    if writable {
                        ""
                    } else {
                        ", not writable by this user"
                    }
                ),
                (!writable).then(|| {
                    "run wexec as root, or delegate its cgroup to wexec's user".to_owned()
                }),
            )
        }
        Err(reason) => check(
            "pids cgroup (--session-processes)",
            Status::Note,
            if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
                format!("cgroup v2: {reason}")
            } else {
                reason
            },
            Some("only needed for --session-processes; cgroup v2 is not supported yet".to_owned()),
        ),
    }
}

/// Where wexec runs, by the marks container runtimes leave.
fn environment() -> &'static str {
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return "kubernetes";
    }
    if Path::new("/.dockerenv").exists() {
        return "docker";
    }
    if Path::new("/run/.containerenv").exists() {
        return "podman";
    }
    let init = read("/proc/1/cgroup").unwrap_or_default();
    if ["docker", "kubepods", "containerd", "libpod", "lxc"]
        .iter()
        .any(|mark| init.contains(mark))
    {
        return "container";
    }
    "host"
}

/// The report as people read it.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "environment: {}\nsandbox tier: {}\nconfined processes: {}\n\n",
        report.environment,
        report.tier,
        if report.confined_processes {
            "yes"
        } else {
            "no (wexec serves everything else and refuses each process that needs confinement)"
        }
    ));
    for mode in &report.modes {
        out.push_str(&format!(
            "{} {}: {}\n",
            if mode.available { "ok     " } else { "REFUSED" },
            mode.mode,
            mode.detail
        ));
    }
    out.push('\n');
    for check in &report.checks {
        let mark = match check.status {
            Status::Ok => "ok     ",
            Status::Missing => "MISSING",
            Status::Note => "note   ",
        };
        out.push_str(&format!("{mark} {}: {}\n", check.name, check.detail));
        if let Some(fix) = &check.fix {
            out.push_str(&format!("        fix: {fix}\n"));
        }
    }
    out
}
