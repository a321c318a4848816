//! The seccomp profiles wexec ships for containers (docs/deploy.md), tested without a container
//! runtime: each profile is read as dockerd and runc read it ([`docker`]), installed on the real
//! `wexec` binary before its `exec`, and the binary then asked whether its sandbox works.
//!
//! - `packaging/docker/seccomp.json` is Docker's default profile plus one entry, the calls the
//!   process sandbox makes. Under it `wexec doctor` finds confined processes possible and a
//!   confined process runs; under Docker's own default profile, vendored unmodified in
//!   `tests/fixtures/seccomp/docker-default.json` (moby/profiles `seccomp/default.json` at tag
//!   `seccomp/v0.2.3`, commit 836ae4d37ef2ec995c77c99fc55f5b5f3af3a897, the version Docker
//!   29.7.2 vendors; Apache-2.0, as wexec), the probe fails on user namespaces. Without any one of
//!   the added calls a confined start fails: the entry holds nothing the sandbox does not use.
//! - `packaging/kubernetes/seccomp.json` is the same profile in the runtime spec's form, for a
//!   pod without capabilities: containerd reads a `Localhost` profile as that form and ignores
//!   Docker's `includes` and `excludes`, which would otherwise allow every call Docker reserves
//!   for `CAP_SYS_ADMIN`.
//! - Docker's default profile lets a process restrict itself with Landlock and add seccomp
//!   filters of its own, as a namespace-less tier would.
//!
//! The capability set is Docker's default one: dockerd matches `includes.caps` against the
//! container's bounding set, which `USER` does not change. wexec runs as the test's user: the
//! filters decide by call and arguments, not by who calls.

#![expect(
    clippy::expect_used,
    reason = "test helpers: a failed expectation is a failed test"
)]

#[path = "seccomp_profile/docker.rs"]
mod docker;

use std::path::Path;

use pretty_assertions::assert_eq;
use seccompiler::BpfProgram;
use serde_json::{Value, json};
use wexec_tests::{TempDir, command, spawn_stdio_with};

use docker::{Container, DOCKER_DEFAULT_CAPABILITIES, Profile};

/// The calls the shipped profile adds to Docker's default, each refused there without
/// `CAP_SYS_ADMIN` (`pivot_root` always): new namespaces (`unshare`); the view's mounts, old
/// API (`mount`, `umount2`, `pivot_root`) and new (`open_tree`, `move_mount`, `mount_setattr`,
/// and `fsopen`, `fsconfig`, `fsmount` for the tmpfs that hides denied paths).
const SANDBOX_CALLS: [&str; 10] = [
    "fsconfig",
    "fsmount",
    "fsopen",
    "mount",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "pivot_root",
    "umount2",
    "unshare",
];

/// The oldest kernel the sandbox runs on (`mount_setattr`): the runtime-spec profile keeps
/// Docker's entries for older ones out.
const OLDEST_KERNEL: (u32, u32) = (5, 12);

use wexec_tests::repository_file as read;

fn docker_default() -> Profile {
    Profile::parse(&read("tests/fixtures/seccomp/docker-default.json"))
}

fn shipped() -> Profile {
    Profile::parse(&read("packaging/docker/seccomp.json"))
}

fn kubernetes() -> Profile {
    Profile::parse(&read("packaging/kubernetes/seccomp.json"))
}

/// A container on this machine with Docker's default capabilities.
fn docker_container() -> Container<'static> {
    Container {
        arch: docker::native_arch(),
        bounding: &DOCKER_DEFAULT_CAPABILITIES,
        kernel: docker::kernel_version(),
    }
}

/// A pod's container: every capability dropped.
fn pod_container() -> Container<'static> {
    Container {
        arch: docker::native_arch(),
        bounding: &[],
        kernel: docker::kernel_version(),
    }
}

/// Whether `profile` allows `call` (by name, whatever its arguments) to `container`.
fn allows(profile: &Profile, container: &Container<'_>, call: &str) -> bool {
    (profile.syscalls.iter()).any(|entry| {
        entry.applies(container)
            && entry.action == "SCMP_ACT_ALLOW"
            && entry.names.iter().any(|name| name == call)
    })
}

/// wexec with `args` under `filters`, installed just before its `exec`.
fn wexec_under(filters: Vec<BpfProgram>, args: &[&str]) -> tokio::process::Command {
    let mut wexec = command(args);
    #[expect(unsafe_code, reason = "pre_exec runs between fork and exec")]
    // SAFETY: the closure only makes system calls (prctl, seccomp) on values built before the
    // fork: no allocation, no lock.
    unsafe {
        wexec.pre_exec(move || {
            for filter in &filters {
                seccompiler::apply_filter(filter).map_err(|_| std::io::Error::last_os_error())?;
            }
            Ok(())
        });
    }
    wexec
}

/// `wexec doctor --json` under `filters`: whether it found confined processes possible, and
/// its report.
async fn doctor_under(filters: Vec<BpfProgram>) -> (bool, Value) {
    let output = wexec_under(filters, &["doctor", "--json"])
        .output()
        .await
        .expect("run wexec doctor");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "not JSON ({err}): {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), report)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    (report["checks"].as_array().expect("checks").iter())
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

#[test]
fn the_shipped_profile_is_dockers_default_and_the_sandboxs_calls() {
    let as_json = |relative: &str| -> Value {
        serde_json::from_str(&read(relative)).expect("a JSON profile")
    };
    let mut shipped_json = as_json("packaging/docker/seccomp.json");
    let added = (shipped_json["syscalls"].as_array_mut())
        .and_then(Vec::pop)
        .expect("an entry");
    assert_eq!(
        shipped_json,
        as_json("tests/fixtures/seccomp/docker-default.json"),
        "all but the last entry is Docker's default profile"
    );
    assert_eq!(added["names"], json!(SANDBOX_CALLS));
    assert_eq!(added["action"], "SCMP_ACT_ALLOW");
    let keys: Vec<&str> = (added.as_object().expect("an entry").keys())
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["action", "comment", "names"],
        "unconditional: no arguments, includes or excludes"
    );
    // Each is one Docker refuses: none is there already for the container.
    let default = docker_default();
    for call in SANDBOX_CALLS {
        assert!(!allows(&default, &docker_container(), call), "{call}");
        assert!(allows(&shipped(), &docker_container(), call), "{call}");
        assert!(allows(&shipped(), &pod_container(), call), "{call}");
    }
}

#[test]
fn the_kubernetes_profile_is_the_shipped_one_for_a_pod_without_capabilities() {
    let expected = shipped().runtime_spec(&["amd64", "arm64"], &[], OLDEST_KERNEL);
    let actual: Value =
        serde_json::from_str(&read("packaging/kubernetes/seccomp.json")).expect("JSON");
    assert_eq!(
        actual,
        expected,
        "packaging/kubernetes/seccomp.json should be:\n{}",
        serde_json::to_string_pretty(&expected).expect("JSON")
    );
    // Nothing Docker reserves for a capability is left in it.
    let text = read("packaging/kubernetes/seccomp.json");
    for reserved in ["includes", "excludes", "archMap", "CAP_"] {
        assert!(!text.contains(reserved), "{reserved}");
    }
    for call in ["bpf", "setns", "perf_event_open", "chroot", "clone3"] {
        assert!(!allows(&kubernetes(), &pod_container(), call), "{call}");
    }
}

#[tokio::test]
async fn under_dockers_default_profile_the_namespace_tier_fails_and_the_landlock_tier_holds() {
    let filters = docker_default().compile(&docker_container());
    // wexec runs at all: its threads' `clone3` gets Docker's `ENOSYS`, not the default's
    // `EPERM`, and the C library falls back to `clone`.
    let (success, report) = doctor_under(filters).await;
    assert!(success, "{report}");
    assert_eq!(report["confined_processes"], true, "{report}");
    assert_eq!(report["tier"], "landlock", "{report}");
    assert_eq!(check(&report, "Landlock tier")["status"], "ok", "{report}");
    let probe = check(&report, "namespace tier");
    assert_eq!(probe["status"], "missing", "{report}");
    let detail = probe["detail"].as_str().expect("a detail");
    assert!(
        detail.contains("user namespaces") && detail.contains("Operation not permitted"),
        "{report}"
    );
    // What the profile leaves: Landlock, and seccomp (this process runs under the profile).
    assert_eq!(check(&report, "Landlock")["status"], "ok", "{report}");
    let seccomp = check(&report, "seccomp");
    assert_eq!(seccomp["status"], "ok", "{report}");
    assert!(
        (seccomp["detail"].as_str()).is_some_and(|detail| detail.contains("already filtered")),
        "{report}"
    );
}

#[tokio::test]
async fn under_the_shipped_profile_the_probe_passes() {
    for (profile, container) in [
        (shipped(), docker_container()),
        // As containerd loads it: nothing left to select.
        (kubernetes(), pod_container()),
    ] {
        let (success, report) = doctor_under(profile.compile(&container)).await;
        assert!(success, "{report}");
        assert_eq!(report["confined_processes"], true, "{report}");
        assert_eq!(report["tier"], "namespaces", "{report}");
        assert_eq!(check(&report, "namespace tier")["status"], "ok", "{report}");
    }
}

/// Starts wexec over stdio under `profile` and runs, confined, a program that writes in the
/// workspace, then, with network, one that reads a file the sandbox hides: each run's exit code
/// and output, or the start's error.
async fn confined_runs(
    profile: &Profile,
    container: &Container<'_>,
) -> Vec<Result<(i64, String), Value>> {
    let work = TempDir::new();
    std::fs::write(work.path().join("secret"), "s").expect("write the hidden file");
    let root = work.path().display().to_string();
    let wexec = wexec_under(
        profile.compile(container),
        &["--fs-root", &root, "--process-network"],
    );
    let (_server, mut client) = spawn_stdio_with(wexec);
    client.handshake().await;
    let path = |path: &Path, access: &str| {
        let uri = format!("file://{}", path.display());
        json!({"path": {"type": "path", "path": uri}, "access": access})
    };
    let mut runs = Vec::new();
    for (id, network, script) in [
        ("write", "restricted", "echo y > ok.txt && cat ok.txt"),
        ("hidden", "enabled", "cat secret 2>&1 || echo hidden"),
    ] {
        let sandbox = wexec_tests::managed(
            work.path(),
            vec![
                wexec_tests::special("root", None, "read"),
                path(work.path(), "write"),
                path(&work.path().join("secret"), "none"),
            ],
            network,
        );
        let reply = client
            .request(
                "process/start",
                json!({
                    "processId": id,
                    "argv": ["sh", "-c", script],
                    "cwd": root,
                    "env": {"PATH": "/usr/bin:/bin"},
                    "tty": false,
                    "sandbox": sandbox,
                }),
            )
            .await;
        match reply.get("result") {
            Some(start) => {
                assert_eq!(start["sandboxType"], "linuxSeccomp", "{start}");
                let (read, output) = wexec_tests::read_to_close(&mut client, id).await;
                let code = read["exitCode"].as_i64().unwrap_or(-1);
                runs.push(Ok((code, String::from_utf8_lossy(&output).into_owned())));
            }
            None => runs.push(Err(reply["error"].clone())),
        }
    }
    runs
}

#[tokio::test]
async fn under_the_shipped_profile_a_confined_process_runs() {
    let runs = confined_runs(&shipped(), &docker_container()).await;
    assert_eq!(
        runs,
        [
            Ok((0, "y\n".to_owned())),
            Ok((0, "cat: secret: Permission denied\nhidden\n".to_owned()))
        ]
    );
}

#[tokio::test]
async fn without_any_one_of_the_added_calls_a_confined_start_fails() {
    for call in SANDBOX_CALLS {
        let mut profile = shipped();
        let added = profile.syscalls.last_mut().expect("the added entry");
        added.names.retain(|name| name != call);
        let runs = confined_runs(&profile, &docker_container()).await;
        assert!(
            runs.iter()
                .any(|run| run.as_ref().is_err_and(|error| error["code"] == -32602)),
            "without {call}: {runs:?}"
        );
    }
}

/// `struct landlock_ruleset_attr` as of Landlock ABI 1.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_ACCESS_FS_EXECUTE: u64 = 1;
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

/// Under Docker's default profile, in the child before `exec`: a Landlock ruleset that handles
/// `execute`, with a rule allowing it beneath `/` if `allow_execute`, enforced on the process;
/// then a seccomp filter added through `seccomp(2)` and one through `prctl(PR_SET_SECCOMP)`.
/// Returns the program's output, or the error of the first step that failed (or of the `exec`).
async fn restricted_under_dockers_default(allow_execute: bool) -> std::io::Result<String> {
    let docker = docker_default().compile(&docker_container());
    // A filter of the process's own: `kexec_load` refused, everything else left to the others.
    let own: BpfProgram = seccompiler::SeccompFilter::new(
        std::collections::BTreeMap::from([(libc::SYS_kexec_load, Vec::new())]),
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        std::env::consts::ARCH.try_into().expect("an architecture"),
    )
    .and_then(BpfProgram::try_from)
    .expect("a filter");
    let attr = RulesetAttr {
        handled_access_fs: LANDLOCK_ACCESS_FS_EXECUTE,
    };
    let mut program = tokio::process::Command::new("grep");
    program.args(["^Seccomp_filters:", "/proc/self/status"]);
    #[expect(
        unsafe_code,
        reason = "pre_exec runs between fork and exec; raw system calls"
    )]
    // SAFETY: the closure makes system calls only, on values built before the fork (the
    // filters, the ruleset attribute, a static path); the kernel copies what it reads.
    unsafe {
        program.pre_exec(move || {
            let fails = |result: libc::c_long| result < 0;
            for filter in &docker {
                seccompiler::apply_filter(filter).map_err(|_| std::io::Error::last_os_error())?;
            }
            let ruleset = libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &raw const attr,
                std::mem::size_of::<RulesetAttr>(),
                0,
            );
            if fails(ruleset) {
                return Err(std::io::Error::last_os_error());
            }
            let ruleset = ruleset as libc::c_int;
            if allow_execute {
                let root = libc::open(c"/".as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                if root < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let beneath = PathBeneathAttr {
                    allowed_access: LANDLOCK_ACCESS_FS_EXECUTE,
                    parent_fd: root,
                };
                if fails(libc::syscall(
                    libc::SYS_landlock_add_rule,
                    ruleset,
                    LANDLOCK_RULE_PATH_BENEATH,
                    &raw const beneath,
                    0,
                )) {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if fails(libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0)) {
                return Err(std::io::Error::last_os_error());
            }
            // Through seccomp(2) ...
            seccompiler::apply_filter(&own).map_err(|_| std::io::Error::last_os_error())?;
            // ... and through prctl.
            let fprog = libc::sock_fprog {
                len: u16::try_from(own.len()).unwrap_or(u16::MAX),
                filter: own.as_ptr().cast_mut().cast(),
            };
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &raw const fprog,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = program.output().await?;
    assert!(output.status.success(), "{output:?}");
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The number of seccomp filters on this process.
fn own_filters() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    (status.lines())
        .find_map(|line| line.strip_prefix("Seccomp_filters:"))
        .map_or(0, |count| count.trim().parse().expect("a count"))
}

#[tokio::test]
async fn dockers_default_profile_lets_a_process_use_landlock_and_seccomp() {
    let docker = docker_default().compile(&docker_container()).len();
    // With a rule for `/`, the program runs: every step passed; four filters were added.
    let output = restricted_under_dockers_default(true)
        .await
        .expect("restricted and started");
    assert_eq!(
        output,
        format!("Seccomp_filters:\t{}\n", own_filters() + docker + 2)
    );
    // Without one, Landlock refuses its `exec`: the ruleset was in force.
    let refused = restricted_under_dockers_default(false)
        .await
        .expect_err("exec refused");
    assert_eq!(refused.raw_os_error(), Some(libc::EACCES), "{refused}");
}
