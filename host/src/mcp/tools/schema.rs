//! Checks a tool's arguments against its `inputSchema` before the tool runs, so that a model
//! that got an argument wrong reads which one and why (a tool error, as the MCP specification
//! asks since 2025-11-25) instead of a failure from deep inside.
//!
//! The keywords checked are the ones wexec's own schemas use and the common core of plugin
//! schemas: `type` (one or a list), `properties`, `required`, `additionalProperties: false`,
//! `items`, `anyOf`, `oneOf`, `enum`, `const`, `minimum`, `maximum`, `minLength`, `maxLength`, `minItems`,
//! `maxItems`. Other keywords are accepted unchecked: the tool still validates what it uses.

use serde_json::Value;

/// Schemas nest at most this deep before checking stops (a plugin's schema is untrusted).
const MAX_DEPTH: usize = 32;

/// Why `arguments` do not match `schema`: the first mismatch, naming the field by its path.
pub fn check(schema: &Value, arguments: &Value) -> Result<(), String> {
    check_at(schema, arguments, "", 0)
}

fn check_at(schema: &Value, value: &Value, at: &str, depth: usize) -> Result<(), String> {
    let Some(schema) = schema.as_object() else {
        return Ok(());
    };
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let field = || {
        if at.is_empty() {
            "the arguments".to_owned()
        } else {
            format!("`{at}`")
        }
    };
    if let Some(types) = schema.get("type") {
        let allowed: Vec<&str> = match types {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|kind| is_type(value, kind)) {
            return Err(format!(
                "{} must be {}, not {}",
                field(),
                allowed
                    .iter()
                    .map(|kind| article(kind))
                    .collect::<Vec<_>>()
                    .join(" or "),
                describe(value)
            ));
        }
    }
    for (keyword, exactly_one) in [("anyOf", false), ("oneOf", true)] {
        if let Some(branches) = schema.get(keyword).and_then(Value::as_array) {
            let matching = (branches.iter())
                .filter(|branch| check_at(branch, value, at, depth + 1).is_ok())
                .count();
            if matching == 0 || (exactly_one && matching > 1) {
                return Err(format!("{}: none of the allowed forms matches", field()));
            }
        }
    }
    if let Some(choices) = schema.get("enum").and_then(Value::as_array)
        && !choices.contains(value)
    {
        let names: Vec<String> = choices.iter().map(Value::to_string).collect();
        return Err(format!("{} must be one of {}", field(), names.join(", ")));
    }
    if let Some(constant) = schema.get("const")
        && constant != value
    {
        return Err(format!("{} must be {constant}", field()));
    }
    match value {
        Value::Number(number) => {
            let number = number.as_f64().unwrap_or(f64::NAN);
            if let Some(minimum) = schema.get("minimum").and_then(Value::as_f64)
                && number < minimum
            {
                return Err(format!("{} must be at least {minimum}", field()));
            }
            if let Some(maximum) = schema.get("maximum").and_then(Value::as_f64)
                && number > maximum
            {
                return Err(format!("{} must be at most {maximum}", field()));
            }
        }
        Value::String(text) => {
            let length = text.chars().count() as u64;
            if let Some(minimum) = schema.get("minLength").and_then(Value::as_u64)
                && length < minimum
            {
                return Err(format!(
                    "{} must have at least {minimum} characters",
                    field()
                ));
            }
            if let Some(maximum) = schema.get("maxLength").and_then(Value::as_u64)
                && length > maximum
            {
                return Err(format!(
                    "{} must have at most {maximum} characters",
                    field()
                ));
            }
        }
        Value::Array(items) => {
            let length = items.len() as u64;
            if let Some(minimum) = schema.get("minItems").and_then(Value::as_u64)
                && length < minimum
            {
                return Err(format!("{} must have at least {minimum} items", field()));
            }
            if let Some(maximum) = schema.get("maxItems").and_then(Value::as_u64)
                && length > maximum
            {
                return Err(format!("{} must have at most {maximum} items", field()));
            }
            if let Some(item) = schema.get("items") {
                for (index, value) in items.iter().enumerate() {
                    check_at(item, value, &format!("{at}[{index}]"), depth + 1)?;
                }
            }
        }
        Value::Object(members) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            for name in (schema.get("required").and_then(Value::as_array))
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !members.contains_key(name) {
                    return Err(format!("missing required argument `{}`", join(at, name)));
                }
            }
            for (name, value) in members {
                match properties.and_then(|properties| properties.get(name)) {
                    Some(property) => check_at(property, value, &join(at, name), depth + 1)?,
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            return Err(format!("unknown argument `{}`", join(at, name)));
                        }
                        Some(other @ Value::Object(_)) => {
                            check_at(other, value, &join(at, name), depth + 1)?;
                        }
                        _ => {}
                    },
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    Ok(())
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_owned()
    } else {
        format!("{at}.{name}")
    }
}

fn is_type(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64()
                || value.is_u64()
                || value
                    .as_f64()
                    .is_some_and(|n| n.fract() == 0.0 && n.is_finite())
        }
        // An unknown type name constrains nothing rather than refusing every call.
        _ => true,
    }
}

fn article(kind: &str) -> String {
    match kind {
        "object" | "array" | "integer" => format!("an {kind}"),
        "null" => "null".to_owned(),
        _ => format!("a {kind}"),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "head": {"type": "integer", "minimum": 1},
                "edits": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"oldText": {"type": "string"}},
                    "required": ["oldText"],
                }},
                "sortBy": {"enum": ["name", "size"]},
            },
            "required": ["path"],
            "additionalProperties": false,
        })
    }

    #[test]
    fn mismatches_name_the_field() {
        let cases = [
            (json!({}), "missing required argument `path`"),
            (json!({"path": 3}), "`path` must be a string, not a number"),
            (
                json!({"path": ""}),
                "`path` must have at least 1 characters",
            ),
            (
                json!({"path": "a", "head": 1.5}),
                "`head` must be an integer, not a number",
            ),
            (json!({"path": "a", "head": 0}), "`head` must be at least 1"),
            (json!({"path": "a", "nope": 1}), "unknown argument `nope`"),
            (
                json!({"path": "a", "edits": [{"oldText": "x"}, {}]}),
                "missing required argument `edits[1].oldText`",
            ),
            (
                json!({"path": "a", "sortBy": "date"}),
                "`sortBy` must be one of \"name\", \"size\"",
            ),
            (json!([1]), "the arguments must be an object, not an array"),
        ];
        for (arguments, expected) in cases {
            assert_eq!(
                check(&schema(), &arguments),
                Err(expected.to_owned()),
                "{arguments}"
            );
        }
        assert_eq!(check(&schema(), &json!({"path": "a", "head": 2.0})), Ok(()));
        let nullable = json!({"anyOf": [{"type": "integer"}, {"type": "null"}]});
        assert_eq!(check(&nullable, &Value::Null), Ok(()));
        assert_eq!(
            check(&nullable, &json!("x")),
            Err("the arguments: none of the allowed forms matches".to_owned())
        );
    }

    #[test]
    fn deep_schemas_stop_checking_instead_of_recursing_forever() {
        let mut schema = json!({"type": "string"});
        let mut value = json!(1);
        for _ in 0..200 {
            schema = json!({"type": "array", "items": schema});
            value = json!([value]);
        }
        assert_eq!(check(&schema, &value), Ok(()));
    }
}
