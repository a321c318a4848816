//! `wexec doctor`: what this machine gives the sandbox, and the fix for what it lacks.

use serde_json::Value;
use wexec_tests::{command, command_under};

async fn report(mut doctor: tokio::process::Command) -> (bool, Value) {
    let output = doctor.output().await.expect("run wexec doctor");
    let report = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "not JSON ({err}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    (output.status.success(), report)
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    (report["checks"].as_array().expect("checks").iter())
        .find(|check| check["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

#[tokio::test]
async fn where_the_sandbox_works_the_doctor_says_so() {
    let (success, report) = report(command(&["doctor", "--json"])).await;
    assert!(success, "{report}");
    assert_eq!(report["confined_processes"], true, "{report}");
    assert_eq!(report["tier"], "namespaces", "{report}");
    assert_eq!(check(&report, "namespace tier")["status"], "ok", "{report}");
    let landlock = check(&report, "Landlock");
    assert_eq!(landlock["status"], "ok", "{report}");
    assert!(
        landlock["detail"]
            .as_str()
            .is_some_and(|abi| abi.starts_with("ABI "))
    );
}

#[tokio::test]
async fn without_user_namespaces_the_doctor_names_the_knob_the_fix_and_the_landlock_tier() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let (success, report) = report(command_under(&launcher, &["doctor", "--json"])).await;
    // This kernel's Landlock (ABI 6 or later) holds the Landlock tier.
    assert!(success, "{report}");
    assert_eq!(report["confined_processes"], true, "{report}");
    assert_eq!(report["tier"], "landlock", "{report}");
    let probe = check(&report, "namespace tier");
    assert_eq!(probe["status"], "missing", "{report}");
    assert!(
        probe["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("user namespaces")),
        "{report}"
    );
    assert_eq!(check(&report, "Landlock tier")["status"], "ok", "{report}");
    let modes: Vec<(String, bool)> = (report["modes"].as_array().expect("modes").iter())
        .map(|mode| {
            (
                mode["mode"].as_str().expect("mode").to_owned(),
                mode["available"] == true,
            )
        })
        .collect();
    assert_eq!(
        modes,
        [
            ("read-only".to_owned(), true),
            ("workspace-write".to_owned(), false),
            ("danger-full-access".to_owned(), true)
        ],
        "{report}"
    );
    let knob = check(&report, "user namespaces");
    assert_eq!(knob["status"], "missing", "{report}");
    assert_eq!(knob["detail"], "user.max_user_namespaces is 0", "{report}");
    assert!(
        knob["fix"]
            .as_str()
            .is_some_and(|fix| fix.contains("sysctl -w user.max_user_namespaces=")),
        "{report}"
    );
}
