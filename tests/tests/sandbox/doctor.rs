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
    assert_eq!(check(&report, "sandbox probe")["status"], "ok", "{report}");
    let landlock = check(&report, "Landlock");
    assert_eq!(landlock["status"], "ok", "{report}");
    assert!(
        landlock["detail"]
            .as_str()
            .is_some_and(|abi| abi.starts_with("ABI "))
    );
}

#[tokio::test]
async fn without_user_namespaces_the_doctor_names_the_knob_and_its_fix() {
    let Some(launcher) = super::without_user_namespaces() else {
        return;
    };
    let (success, report) = report(command_under(&launcher, &["doctor", "--json"])).await;
    assert!(!success, "{report}");
    assert_eq!(report["confined_processes"], false, "{report}");
    assert_eq!(report["tier"], "none", "{report}");
    let probe = check(&report, "sandbox probe");
    assert_eq!(probe["status"], "missing", "{report}");
    assert!(
        probe["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("user namespaces")),
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
