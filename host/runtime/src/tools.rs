//! MCP tools a plugin declares (contract 0.2.0, docs/plugins.md "MCP tools"): read once at
//! load, from the plugin's answer to [`TOOLS_METHOD`], and checked here, so that a plugin with
//! a malformed declaration fails to load with a message saying which tool and why. Plain data
//! after that: the MCP face lists them and calls each through its method.

use serde_json::{Map, Value};

/// The handler method wexec calls, once at load, to read a 0.2.0 plugin's tools: not a
/// `<name>/<method>` name, so no client can call it.
pub const TOOLS_METHOD: &str = "wexec:tools";

/// Tools one plugin may declare.
pub const MAX_TOOLS: usize = 64;

/// Bytes one plugin's declaration may take.
pub const MAX_DECLARATION_BYTES: usize = 256 * 1024;

/// One declared tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDeclaration {
    /// Its MCP name.
    pub name: String,
    /// The plugin method that serves it: its arguments are the method's params, the method's
    /// result is the tool's.
    pub method: String,
    /// Whether the result is structured (an `outputSchema` was declared).
    pub structured: bool,
    /// The MCP `Tool` object `tools/list` gives (name, title, description, schemas,
    /// annotations).
    pub definition: Value,
}

/// The hints a tool may give, all booleans.
const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// Checks a plugin's declaration `text` against `methods`, the plugin's methods.
pub fn declarations(text: &str, methods: &[String]) -> Result<Vec<ToolDeclaration>, String> {
    if text.len() > MAX_DECLARATION_BYTES {
        return Err(format!(
            "its tool declaration has {} bytes, more than the {MAX_DECLARATION_BYTES} allowed",
            text.len()
        ));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|err| format!("its tool declaration is not JSON: {err}"))?;
    let Value::Array(tools) = value else {
        return Err("its tool declaration is not a JSON array".to_owned());
    };
    if tools.len() > MAX_TOOLS {
        return Err(format!(
            "it declares {} tools, more than the {MAX_TOOLS} allowed",
            tools.len()
        ));
    }
    let mut declared: Vec<ToolDeclaration> = Vec::with_capacity(tools.len());
    for (index, tool) in tools.iter().enumerate() {
        let tool =
            one(tool, methods).map_err(|reason| format!("its tool #{}: {reason}", index + 1))?;
        if declared.iter().any(|other| other.name == tool.name) {
            return Err(format!("it declares tool `{}` twice", tool.name));
        }
        declared.push(tool);
    }
    Ok(declared)
}

/// MCP's tool names: 1 to 128 of `A-Za-z0-9_-.`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn one(tool: &Value, methods: &[String]) -> Result<ToolDeclaration, String> {
    let Value::Object(tool) = tool else {
        return Err("not a JSON object".to_owned());
    };
    let text = |member: &str| -> Result<Option<String>, String> {
        match tool.get(member) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(format!("`{member}` must be a string")),
        }
    };
    let name = text("name")?.ok_or("`name` is missing")?;
    if !valid_tool_name(&name) {
        return Err(format!(
            "tool name `{name}` must be 1 to 128 of A-Z, a-z, 0-9, `_`, `-`, `.`"
        ));
    }
    let method = text("method")?.ok_or_else(|| format!("tool `{name}`: `method` is missing"))?;
    if !methods.contains(&method) {
        return Err(format!(
            "tool `{name}`: method `{method}` is not one the plugin serves"
        ));
    }
    let schema = |member: &str| -> Result<Option<Value>, String> {
        match tool.get(member) {
            None | Some(Value::Null) => Ok(None),
            Some(schema @ Value::Object(object))
                if object.get("type") == Some(&Value::String("object".to_owned())) =>
            {
                Ok(Some(schema.clone()))
            }
            Some(_) => Err(format!(
                "tool `{name}`: `{member}` must be a JSON Schema object with \"type\": \"object\""
            )),
        }
    };
    let input = schema("inputSchema")?.unwrap_or_else(|| serde_json::json!({"type": "object"}));
    let output = schema("outputSchema")?;
    let mut definition = Map::new();
    definition.insert("name".to_owned(), Value::String(name.clone()));
    for member in ["title", "description"] {
        if let Some(value) = text(member)? {
            definition.insert(member.to_owned(), Value::String(value));
        }
    }
    definition.insert("inputSchema".to_owned(), input);
    if let Some(output) = &output {
        definition.insert("outputSchema".to_owned(), output.clone());
    }
    match tool.get("annotations") {
        None | Some(Value::Null) => {}
        Some(Value::Object(given)) => {
            let mut annotations = Map::new();
            for (key, value) in given {
                match (key.as_str(), value) {
                    (hint, Value::Bool(_)) if HINTS.contains(&hint) => {}
                    ("title", Value::String(_)) => {}
                    _ => {
                        return Err(format!(
                            "tool `{name}`: annotation `{key}` must be one of {} (a boolean) or `title` (a string)",
                            HINTS.join(", ")
                        ));
                    }
                }
                annotations.insert(key.clone(), value.clone());
            }
            definition.insert("annotations".to_owned(), Value::Object(annotations));
        }
        Some(_) => return Err(format!("tool `{name}`: `annotations` must be an object")),
    }
    if let Some(unknown) = tool.keys().find(|key| {
        ![
            "name",
            "method",
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
        ]
        .contains(&key.as_str())
    }) {
        return Err(format!("tool `{name}`: unknown member `{unknown}`"));
    }
    Ok(ToolDeclaration {
        name,
        method,
        structured: output.is_some(),
        definition: Value::Object(definition),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn methods() -> Vec<String> {
        vec!["grep/search".to_owned()]
    }

    #[test]
    fn a_declaration_becomes_mcp_tools() {
        let text = json!([{
            "name": "grep",
            "method": "grep/search",
            "title": "Search files",
            "description": "Regex search.",
            "inputSchema": {"type": "object", "properties": {"pattern": {"type": "string"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        }])
        .to_string();
        let tools = declarations(&text, &methods()).unwrap();
        assert_eq!(tools.len(), 1);
        assert_eq!(tools[0].method, "grep/search");
        assert!(tools[0].structured);
        assert_eq!(tools[0].definition["annotations"]["readOnlyHint"], true);
        assert!(tools[0].definition.get("method").is_none());
        let minimal =
            declarations(r#"[{"name": "t", "method": "grep/search"}]"#, &methods()).unwrap();
        assert_eq!(
            minimal[0].definition["inputSchema"],
            json!({"type": "object"})
        );
    }

    #[test]
    fn malformed_declarations_say_which_tool_and_why() {
        let cases = [
            ("{}", "not a JSON array"),
            ("nope", "not JSON"),
            (
                r#"[{"method": "grep/search"}]"#,
                "tool #1: `name` is missing",
            ),
            (
                r#"[{"name": "a b", "method": "grep/search"}]"#,
                "must be 1 to 128",
            ),
            (
                r#"[{"name": "t", "method": "other/x"}]"#,
                "method `other/x` is not one the plugin serves",
            ),
            (
                r#"[{"name": "t", "method": "grep/search", "inputSchema": {"type": "string"}}]"#,
                "`inputSchema` must be",
            ),
            (
                r#"[{"name": "t", "method": "grep/search", "annotations": {"readOnlyHint": "yes"}}]"#,
                "annotation `readOnlyHint`",
            ),
            (
                r#"[{"name": "t", "method": "grep/search", "extra": 1}]"#,
                "unknown member `extra`",
            ),
            (
                r#"[{"name": "t", "method": "grep/search"}, {"name": "t", "method": "grep/search"}]"#,
                "declares tool `t` twice",
            ),
        ];
        for (text, expected) in cases {
            let err = declarations(text, &methods()).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
        let many = serde_json::to_string(&vec![json!({"name": "t", "method": "grep/search"}); 65])
            .unwrap();
        assert!(
            declarations(&many, &methods())
                .unwrap_err()
                .contains("65 tools")
        );
    }
}
