//! Tools plugins declare (contract 0.2.0): each is served by one of its plugin's methods,
//! called through the door like any other request, so it runs with that plugin's grants only.

use std::sync::Arc;

use serde_json::Value;

use super::{Answer, Call, Failure, Outcome};
use crate::runtime::{LoadedPlugin, ToolDeclaration};
use crate::server::ServerState;

/// Every plugin's declared tools, in load order.
pub fn declared(server: &ServerState) -> Vec<(Arc<LoadedPlugin>, ToolDeclaration)> {
    (server.runtime.plugins().into_iter())
        .flat_map(|plugin| {
            let tools = plugin.tools.clone();
            tools
                .into_iter()
                .map(move |tool| (Arc::clone(&plugin), tool))
        })
        .collect()
}

/// Calls plugin tool `name`: its method with the arguments as params. The method's result is
/// the structured content when the tool declared an output schema (then it must be an object),
/// and the text otherwise (a string as it is, anything else as JSON).
pub async fn call(name: &str, call: &Call, arguments: &Value) -> Outcome {
    let server = call.door.server();
    let found = declared(server)
        .into_iter()
        .find(|(_, tool)| tool.name == name);
    let Some((plugin, tool)) = found else {
        return Err(Failure(format!("tool {name} has no handler")));
    };
    let result = tokio::select! {
        result = call.door.call(&tool.method, arguments.clone()) => result,
        () = call.cancelled.cancelled() => return Err("the call was cancelled".into()),
    };
    let result = result.map_err(|error| {
        Failure(format!(
            "plugin `{}` ({}): {}",
            plugin.name, tool.method, error.message
        ))
    })?;
    if tool.structured {
        if !result.is_object() {
            return Err(Failure(format!(
                "plugin `{}` ({}) returned {result}, not the object its output schema describes",
                plugin.name, tool.method
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
