//! The MCP face's tools (docs/mcp.md, "Tools"): their definitions, and calling one. Each tool
//! is a sequence of requests through the [`Door`]; its failures are tool results with
//! `isError: true` whose text names what failed, as agents expect, never protocol errors.

pub mod fetch;
pub mod files;
pub mod plugin;
pub mod process;
pub mod schema;

use std::sync::Arc;

use serde_json::{Value, json};

use super::door::Door;
use super::progress::Progress;
use crate::rpc::RpcError;

/// What a tool answers: text for the model, and the same as structured content when the tool
/// declares an output schema.
#[derive(Debug)]
pub struct Answer {
    /// Content blocks (MCP `ContentBlock` JSON).
    pub content: Vec<Value>,
    /// `structuredContent`, matching the tool's `outputSchema`.
    pub structured: Option<Value>,
}

impl Answer {
    /// A structured answer, with its JSON as the text block older clients read.
    pub fn structured(value: Value) -> Self {
        Self {
            content: vec![text_block(value.to_string())],
            structured: Some(value),
        }
    }

    /// A text answer without structured content (a tool without an output schema).
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![text_block(text.into())],
            structured: None,
        }
    }

    /// Structured content beside a text of the tool's own.
    pub fn text_and_structured(text: impl Into<String>, value: Value) -> Self {
        Self {
            content: vec![text_block(text.into())],
            structured: Some(value),
        }
    }
}

/// A text content block.
pub fn text_block(text: String) -> Value {
    json!({"type": "text", "text": text})
}

/// Why a tool failed, as the model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(pub String);

impl Failure {
    /// A failure of `what` (a path, a process, a URL) that the server refused or could not do.
    pub fn of(what: impl std::fmt::Display, error: &RpcError) -> Self {
        Self(format!("{what}: {}", error.message))
    }
}

impl From<String> for Failure {
    fn from(text: String) -> Self {
        Self(text)
    }
}

impl From<&str> for Failure {
    fn from(text: &str) -> Self {
        Self(text.to_owned())
    }
}

/// A tool's outcome.
pub type Outcome = Result<Answer, Failure>;

/// What a call may use.
pub struct Call {
    /// The session's way in.
    pub door: Arc<Door>,
    /// Progress reporting, when the client asked for it.
    pub progress: Option<Progress>,
    /// Cancelled when the client cancels the request (or closes its HTTP stream).
    pub cancelled: tokio_util::sync::CancellationToken,
}

/// Annotations: `readOnlyHint`, `destructiveHint`, `idempotentHint`, `openWorldHint`.
pub fn hints(read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> Value {
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": open_world,
    })
}

/// A tool's definition, as `tools/list` gives it.
pub fn definition(
    name: &str,
    title: &str,
    description: &str,
    input: Value,
    output: Option<Value>,
    annotations: Value,
) -> Value {
    let mut tool = json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input,
        "annotations": annotations,
    });
    if let Some(output) = output {
        tool["outputSchema"] = output;
    }
    tool
}

/// An object schema with these properties, the `required` ones required, nothing else allowed.
pub fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The tool's arguments member `name` as a string, if present.
pub fn string<'a>(arguments: &'a Value, name: &str) -> Option<&'a str> {
    arguments.get(name).and_then(Value::as_str)
}

/// The tool's arguments member `name` as an unsigned integer, if present.
pub fn unsigned(arguments: &Value, name: &str) -> Option<u64> {
    let value = arguments.get(name)?;
    value
        .as_u64()
        .or_else(|| value.as_f64().filter(|n| *n >= 0.0).map(|n| n as u64))
}
