//! `environmentInfo` for `initialize` and for new sessions after a reload (docs/protocol.md
//! §7.4): what the bundled `env` plugin's `environment/info` returns. It is a function of the
//! plugin, the host facts and the loaded plugins, so the compile cache remembers it under a key
//! of all three (the runtime's memo `<env key>.environment.json`), and a start whose inputs are
//! unchanged answers without waiting for the plugin to be linked. The process sandbox's verdict
//! is found anew at every start: it is never remembered, and once it is known the plugin is
//! asked.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::protocol::ENVIRONMENT_INFO;
use crate::runtime::{CallError, Memo, Runtime};

/// The memo's name beside the `env` plugin.
const MEMO: &str = "environment.json";

/// The `environmentInfo` object, as compact JSON.
pub async fn environment_info(runtime: &Runtime) -> Result<Box<RawValue>, CallError> {
    let Some(plugin) = runtime.plugin_for(ENVIRONMENT_INFO) else {
        return Err(CallError::NoPlugin {
            method: ENVIRONMENT_INFO.to_owned(),
        });
    };
    let unusable = |err: serde_json::Error| CallError::Failed {
        plugin: plugin.name.clone(),
        reason: format!("its {ENVIRONMENT_INFO} result is unusable: {err}"),
    };
    let sandbox_known = crate::runtime::facts::sandbox().await.is_some();
    let facts = format!("{:?}", runtime.facts());
    let plugins = serde_json::to_vec(&runtime.summaries()).unwrap_or_default();
    let memo = runtime.memo(&plugin, MEMO, &[facts.as_bytes(), &plugins]);
    let remembered = (memo.as_ref().and_then(Memo::recall)).filter(Value::is_object);
    if let Some(info) = remembered.as_ref().filter(|_| !sandbox_known) {
        // Re-encoded: what goes on the wire is compact JSON whatever the file holds.
        return serde_json::value::to_raw_value(info).map_err(unusable);
    }
    let info = runtime.call_internal(ENVIRONMENT_INFO).await?;
    // Through a `Value` either way, so a remembered answer is the same text as a fresh one.
    let info: Value = serde_json::from_str(info.get()).map_err(unusable)?;
    let text = serde_json::value::to_raw_value(&info).map_err(unusable)?;
    // Written once per change of its inputs, not at every refresh after the probe.
    if let (Some(memo), None) = (memo, remembered) {
        // What a start knows before its probe: without the verdict.
        let mut info = info;
        if let Some(wexec) = info.get_mut("wexec").and_then(Value::as_object_mut) {
            wexec.remove("sandbox");
        }
        memo.remember(info);
    }
    Ok(text)
}
