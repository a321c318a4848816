//! Docker's seccomp profile format, read as the container runtimes read it, and compiled into
//! filters this test can install.
//!
//! dockerd turns a profile into the OCI runtime spec's form for one container
//! (`setupSeccomp` in moby's `profiles/seccomp`): it keeps the architectures of the host's
//! family from `archMap`, and each entry whose `includes` all hold and none of whose `excludes`
//! does, against the host's architecture, the container's *bounding* capability set and the
//! kernel's version. runc then compiles what is left with libseccomp: every entry's names
//! resolved on the architecture (a name it does not know is skipped), one rule per entry, its
//! `args` conditions all required, unless two of them compare the same argument, which runc
//! takes as alternatives (a rule each). A call no rule matches gets the default action.
//!
//! A profile already in the runtime spec's form (the Kubernetes one, read as containerd reads a
//! `Localhost` profile: no `includes`, no `excludes`, no `archMap`) is the same format with
//! nothing to select.
//!
//! Compiled here with `seccompiler`, whose filter has one action on a match and one otherwise,
//! the profile becomes stacked filters ([`Profile::compile`]). Only the native architecture is
//! compiled: the calls of its other ABIs (x86 and x32 on x86-64) end the process or meet the
//! default action, which wexec, a native binary, never makes.

use std::collections::BTreeMap;
use std::str::FromStr;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use serde::Deserialize;

/// A profile, in Docker's format or the runtime spec's. Unknown fields are refused: a field
/// this reader would ignore could change what the profile allows.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    default_action: String,
    default_errno_ret: Option<u32>,
    #[serde(default)]
    arch_map: Vec<ArchMap>,
    #[serde(default)]
    architectures: Vec<String>,
    pub syscalls: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ArchMap {
    architecture: String,
    /// `null` for an architecture without any.
    sub_architectures: Option<Vec<String>>,
}

/// One entry of `syscalls`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Entry {
    pub names: Vec<String>,
    pub action: String,
    pub errno_ret: Option<u32>,
    #[serde(default)]
    pub args: Vec<Arg>,
    pub comment: Option<String>,
    pub includes: Option<Conditions>,
    pub excludes: Option<Conditions>,
}

/// `includes` or `excludes`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Conditions {
    #[serde(default)]
    caps: Vec<String>,
    #[serde(default)]
    arches: Vec<String>,
    min_kernel: Option<String>,
}

/// One argument comparison. For `SCMP_CMP_MASKED_EQ`, `value` is the mask and `valueTwo` what
/// the masked argument must equal (libseccomp's order, which runc passes on).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Arg {
    index: u8,
    value: u64,
    #[serde(default)]
    value_two: u64,
    op: String,
}

/// What a container is, for `includes` and `excludes`.
pub struct Container<'a> {
    /// The host's architecture as moby names it (`amd64`, `arm64`).
    pub arch: &'a str,
    /// The container's bounding capability set: what dockerd compares `caps` with (not the
    /// effective set, which a non-root user has empty).
    pub bounding: &'a [&'a str],
    /// The kernel's version (major, minor).
    pub kernel: (u32, u32),
}

/// Docker's default capabilities (moby's `oci/caps.DefaultCapabilities`): the bounding set of
/// a container started without `--cap-add`, `--cap-drop` or `--privileged`, whatever its user.
pub const DOCKER_DEFAULT_CAPABILITIES: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// The host's architecture as moby names it.
pub fn native_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => panic!("no Docker architecture name for {other} here"),
    }
}

/// The running kernel's (major, minor).
pub fn kernel_version() -> (u32, u32) {
    let uname = rustix::system::uname();
    let release = uname.release().to_string_lossy().into_owned();
    parse_version(&release).unwrap_or_else(|| panic!("kernel release {release}"))
}

/// "major.minor[.anything]", as moby's `kernelGreaterEqualThan` reads both sides.
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.split(['.', '-', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

impl Conditions {
    /// Whether this `includes` holds for `container`: every capability, one of the
    /// architectures, at least the kernel version.
    fn all_hold(&self, container: &Container<'_>) -> bool {
        (self.arches.is_empty() || self.arches.iter().any(|arch| arch == container.arch))
            && (self.caps.iter()).all(|cap| container.bounding.contains(&cap.as_str()))
            && self.min_kernel.as_deref().is_none_or(|min| {
                container.kernel >= parse_version(min).expect("a minKernel version")
            })
    }

    /// Whether this `excludes` rules its entry out for `container`: any capability, any
    /// architecture, or a kernel at least this version.
    fn any_holds(&self, container: &Container<'_>) -> bool {
        self.arches.iter().any(|arch| arch == container.arch)
            || (self.caps.iter()).any(|cap| container.bounding.contains(&cap.as_str()))
            || self.min_kernel.as_deref().is_some_and(|min| {
                container.kernel >= parse_version(min).expect("a minKernel version")
            })
    }
}

impl Entry {
    /// Whether dockerd keeps this entry for `container`.
    pub fn applies(&self, container: &Container<'_>) -> bool {
        !(self.excludes.as_ref()).is_some_and(|excludes| excludes.any_holds(container))
            && (self.includes.as_ref()).is_none_or(|includes| includes.all_hold(container))
    }
}

/// A seccomp action as the profile names it; `errno` for `SCMP_ACT_ERRNO` (runc's default for
/// a rule without `errnoRet` is `EPERM`).
fn action(name: &str, errno: Option<u32>) -> SeccompAction {
    match name {
        "SCMP_ACT_ALLOW" => SeccompAction::Allow,
        "SCMP_ACT_ERRNO" => SeccompAction::Errno(errno.unwrap_or(libc::EPERM as u32)),
        "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" => SeccompAction::KillThread,
        "SCMP_ACT_KILL_PROCESS" => SeccompAction::KillProcess,
        "SCMP_ACT_TRAP" => SeccompAction::Trap,
        other => panic!("an action this test does not compile: {other}"),
    }
}

/// The kernel's precedence of an action among stacked filters (higher wins).
fn precedence(action: &SeccompAction) -> u8 {
    match action {
        SeccompAction::Allow => 0,
        SeccompAction::Errno(_) => 1,
        SeccompAction::Trap => 2,
        SeccompAction::KillThread => 3,
        SeccompAction::KillProcess => 4,
        other => panic!("an action this test does not compile: {other:?}"),
    }
}

fn condition(arg: &Arg) -> SeccompCondition {
    let op = match arg.op.as_str() {
        "SCMP_CMP_NE" => SeccompCmpOp::Ne,
        "SCMP_CMP_LT" => SeccompCmpOp::Lt,
        "SCMP_CMP_LE" => SeccompCmpOp::Le,
        "SCMP_CMP_EQ" => SeccompCmpOp::Eq,
        "SCMP_CMP_GE" => SeccompCmpOp::Ge,
        "SCMP_CMP_GT" => SeccompCmpOp::Gt,
        "SCMP_CMP_MASKED_EQ" => SeccompCmpOp::MaskedEq(arg.value),
        other => panic!("an argument comparison this test does not compile: {other}"),
    };
    let value = match op {
        SeccompCmpOp::MaskedEq(_) => arg.value_two,
        _ => arg.value,
    };
    // libseccomp compares all 64 bits of an argument on a 64-bit architecture.
    SeccompCondition::new(arg.index, SeccompCmpArgLen::Qword, op, value)
        .expect("a valid argument comparison")
}

/// The rules of one entry: `None` for "always", else alternatives (runc's reading of `args`).
fn rules(args: &[Arg]) -> Option<Vec<SeccompRule>> {
    if args.is_empty() {
        return None;
    }
    let mut seen = Vec::new();
    let repeated = args.iter().any(|arg| {
        let again = seen.contains(&arg.index);
        seen.push(arg.index);
        again
    });
    let rule = |conditions| SeccompRule::new(conditions).expect("a valid rule");
    Some(if repeated {
        args.iter().map(|arg| rule(vec![condition(arg)])).collect()
    } else {
        vec![rule(args.iter().map(condition).collect())]
    })
}

/// The calls of one action: for each, `None` (always) or the rules.
type Calls = BTreeMap<i64, Option<Vec<SeccompRule>>>;

impl Profile {
    /// Reads a profile.
    pub fn parse(text: &str) -> Self {
        serde_json::from_str(text).expect("a seccomp profile in Docker's format")
    }

    /// The architectures dockerd keeps for `arch`'s family (`archMap`), or the profile's own.
    pub fn architectures(&self, arch: &str) -> Vec<String> {
        let family = match arch {
            "amd64" => "SCMP_ARCH_X86_64",
            "arm64" => "SCMP_ARCH_AARCH64",
            other => panic!("no seccomp architecture for {other} here"),
        };
        let mapped = (self.arch_map.iter()).find(|map| map.architecture == family);
        match mapped {
            Some(map) => std::iter::once(map.architecture.clone())
                .chain(map.sub_architectures.iter().flatten().cloned())
                .collect(),
            None => self.architectures.clone(),
        }
    }

    /// The default action.
    fn default_action(&self) -> SeccompAction {
        action(&self.default_action, self.default_errno_ret)
    }

    /// The filters this profile makes for `container`, in installation order.
    ///
    /// One `seccompiler` filter has a single action on a match, so each action gets its own:
    /// first the calls it allows (anything else gets the default action), then one filter per
    /// other action, whose calls get that action when a rule matches (anything else is allowed
    /// there, and decided by the first). The kernel runs every filter and keeps the action of
    /// highest precedence, and between two of equal precedence that of the filter installed
    /// last: so an `ERRNO` entry's own errno (Docker's `clone3`: `ENOSYS`, so that the C
    /// library falls back to `clone`) wins over the default's `EPERM`. That holds only for an
    /// action of at least the default's precedence, which is checked.
    ///
    /// A name the native architecture does not have is skipped, as runc skips it. A call this
    /// reader cannot name at all only makes the filters stricter than Docker's when its entry
    /// allows it; for any other action that would make them laxer, and it is refused.
    pub fn compile(&self, container: &Container<'_>) -> Vec<BpfProgram> {
        let default = self.default_action();
        let mut by_action: Vec<(SeccompAction, Calls)> = Vec::new();
        let mut action_of: BTreeMap<i64, SeccompAction> = BTreeMap::new();
        for entry in self
            .syscalls
            .iter()
            .filter(|entry| entry.applies(container))
        {
            let action = action(&entry.action, entry.errno_ret);
            if action != SeccompAction::Allow {
                assert!(
                    precedence(&action) >= precedence(&default),
                    "{action:?} below the default {default:?}: the stacked filters would not give it"
                );
            }
            let index = match by_action.iter().position(|(known, _)| *known == action) {
                Some(index) => index,
                None => {
                    by_action.push((action.clone(), Calls::new()));
                    by_action.len() - 1
                }
            };
            for name in &entry.names {
                let Ok(call) = syscalls::Sysno::from_str(name) else {
                    assert!(
                        action == SeccompAction::Allow,
                        "{name} ({action:?}) has no number here, and skipping it would loosen the filter"
                    );
                    continue;
                };
                let call = i64::from(call.id());
                let previous = action_of.insert(call, action.clone());
                assert!(
                    previous.as_ref().is_none_or(|previous| *previous == action),
                    "{name}: two actions ({previous:?}, {action:?})"
                );
                let calls = &mut by_action[index].1;
                match (calls.get_mut(&call), rules(&entry.args)) {
                    // An unconditional entry: the call's rules no longer matter.
                    (_, None) => {
                        calls.insert(call, None);
                    }
                    (Some(None), Some(_)) => {}
                    (Some(Some(known)), Some(more)) => known.extend(more),
                    (None, Some(rules)) => {
                        calls.insert(call, Some(rules));
                    }
                }
            }
        }
        let arch = std::env::consts::ARCH
            .try_into()
            .expect("an architecture seccompiler compiles for");
        let compile = |calls: Calls, on_match: SeccompAction, otherwise: SeccompAction| {
            let rules = (calls.into_iter())
                .map(|(call, rules)| (call, rules.unwrap_or_default()))
                .collect();
            let filter =
                SeccompFilter::new(rules, otherwise, on_match, arch).expect("a valid filter");
            BpfProgram::try_from(filter).expect("a filter that compiles")
        };
        let mut filters = Vec::new();
        let allowed = by_action
            .iter()
            .position(|(action, _)| *action == SeccompAction::Allow);
        let allowed = allowed.map(|index| by_action.remove(index).1);
        if default != SeccompAction::Allow {
            filters.push(compile(
                allowed.unwrap_or_default(),
                SeccompAction::Allow,
                default,
            ));
        }
        for (action, calls) in by_action {
            filters.push(compile(calls, action, SeccompAction::Allow));
        }
        filters
    }
}

impl Arg {
    fn to_json(&self) -> serde_json::Value {
        let mut arg = serde_json::json!({"index": self.index, "value": self.value, "op": self.op});
        if self.value_two != 0 {
            arg["valueTwo"] = self.value_two.into();
        }
        arg
    }
}

impl Profile {
    /// This profile in the runtime spec's form, for containers with the `bounding` capabilities
    /// on any of `arches`: what dockerd would hand runc on each, in one file. An entry is kept
    /// if it applies on any of them; one that applies on some only must name calls alone (no
    /// `args`), which a runtime skips on an architecture that lacks them, as it skips Docker's
    /// own x86-only names on x86-64.
    pub fn runtime_spec(
        &self,
        arches: &[&str],
        bounding: &[&str],
        kernel: (u32, u32),
    ) -> serde_json::Value {
        let containers: Vec<Container<'_>> = (arches.iter())
            .map(|&arch| Container {
                arch,
                bounding,
                kernel,
            })
            .collect();
        let mut syscalls = Vec::new();
        for entry in &self.syscalls {
            let applies: Vec<bool> = containers.iter().map(|c| entry.applies(c)).collect();
            if !applies.contains(&true) {
                continue;
            }
            assert!(
                !applies.contains(&false) || entry.args.is_empty(),
                "{entry:?} applies on some of {arches:?} only, with arguments"
            );
            let mut spec = serde_json::json!({"names": entry.names, "action": entry.action});
            if let Some(errno) = entry.errno_ret {
                spec["errnoRet"] = errno.into();
            }
            if !entry.args.is_empty() {
                spec["args"] = entry.args.iter().map(Arg::to_json).collect();
            }
            syscalls.push(spec);
        }
        let architectures: Vec<String> = (arches.iter())
            .flat_map(|arch| self.architectures(arch))
            .collect();
        let mut spec = serde_json::json!({
            "defaultAction": self.default_action,
            "architectures": architectures,
            "syscalls": syscalls,
        });
        if let Some(errno) = self.default_errno_ret {
            spec["defaultErrnoRet"] = errno.into();
        }
        spec
    }
}
