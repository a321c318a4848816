//! Tools plugins declare (contract 0.2.0): each is served by one of its plugin's methods,
//! called through the door like any other request, so it runs with that plugin's grants only.

use serde_json::Value;

use super::{Answer, Call, Failure, Outcome};

/// What serves a plugin's tool.
#[derive(Debug, Clone)]
pub struct PluginTool {
    /// The plugin's name, for error texts.
    pub plugin: String,
    /// The method serving it.
    pub method: String,
    /// It declared an output schema: its result is structured content.
    pub structured: bool,
}

/// Calls a plugin's tool: its method with the arguments as params. The method's result is
/// the structured content when the tool declared an output schema (then it must be an object),
/// and the text otherwise (a string as it is, anything else as JSON).
pub async fn call(tool: &PluginTool, call: &Call, arguments: &Value) -> Outcome {
    let plugin = &tool.plugin;
    let result = tokio::select! {
        result = call.door.call(&tool.method, arguments.clone()) => result,
        () = call.cancelled.cancelled() => return Err("the call was cancelled".into()),
    };
    let result = result.map_err(|error| {
        Failure(format!(
            "plugin `{}` ({}): {}",
            plugin, tool.method, error.message
        ))
    })?;
    if tool.structured {
        if !result.is_object() {
            return Err(Failure(format!(
                "plugin `{}` ({}) returned {result}, not the object its output schema describes",
                plugin, tool.method
            )));
        }
        return Ok(Answer::structured(result));
    }
    let text = match result {
        Value::String(text) => text,
        other => other.to_string(),
    };
    Ok(Answer::text(text))
}
