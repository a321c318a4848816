//! The Codex sandbox context of a request (PROTOCOL §7.3). wexec enforces no platform sandbox,
//! so it serves a request only when the requested confinement is one it does not need to
//! enforce; anything else is refused before any side effect.

use serde_json::Value;

use crate::rpc::{RpcError, invalid_params};

/// What the request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// An `fs/*` method (confined by the roots instead).
    Filesystem,
    /// `process/start`.
    Process,
}

/// The refusal text.
pub const REFUSAL: &str = "sandbox intent cannot be enforced on this executor";

/// Accepts `sandbox` if wexec can honour it for `purpose`.
pub fn check(sandbox: Option<&Value>, purpose: Purpose) -> Result<(), RpcError> {
    let permissions = match sandbox.and_then(|sandbox| sandbox.get("permissions")) {
        None | Some(Value::Null) => return Ok(()),
        Some(permissions) => permissions,
    };
    let kind = permissions.get("type").and_then(Value::as_str);
    let allowed = match kind {
        Some("disabled" | "external") => true,
        Some("managed") => {
            let unrestricted_fs = permissions
                .get("file_system")
                .and_then(|fs| fs.get("type"))
                .and_then(Value::as_str)
                == Some("unrestricted");
            let network_enabled =
                permissions.get("network").and_then(Value::as_str) == Some("enabled");
            unrestricted_fs && (purpose == Purpose::Filesystem || network_enabled)
        }
        _ => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(invalid_params(REFUSAL))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table() {
        let managed = |fs: &str, network: Value| json!({"permissions": {"type": "managed", "file_system": {"type": fs}, "network": network}});
        let cases = [
            (None, true, true),
            (Some(json!({})), true, true),
            (Some(json!({"permissions": null})), true, true),
            (
                Some(json!({"permissions": {"type": "disabled"}})),
                true,
                true,
            ),
            (
                Some(json!({"permissions": {"type": "external", "network": "restricted"}})),
                true,
                true,
            ),
            (Some(managed("unrestricted", json!("enabled"))), true, true),
            (
                Some(managed("unrestricted", json!("restricted"))),
                true,
                false,
            ),
            (Some(managed("unrestricted", Value::Null)), true, false),
            (Some(managed("restricted", json!("enabled"))), false, false),
            (
                Some(json!({"permissions": {"type": "workspace-write"}})),
                false,
                false,
            ),
            (Some(json!({"permissions": {"type": 5}})), false, false),
            (Some(json!({"permissions": "yes"})), false, false),
        ];
        for (sandbox, fs_ok, process_ok) in cases {
            assert_eq!(
                check(sandbox.as_ref(), Purpose::Filesystem).is_ok(),
                fs_ok,
                "fs {sandbox:?}"
            );
            assert_eq!(
                check(sandbox.as_ref(), Purpose::Process).is_ok(),
                process_ok,
                "process {sandbox:?}"
            );
        }
        assert_eq!(
            check(Some(&json!({"permissions": {}})), Purpose::Process)
                .unwrap_err()
                .message,
            REFUSAL
        );
    }
}
