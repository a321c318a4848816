//! Parsing one inbound message: strict JSON (a cap on the number of values, no duplicate object
//! keys), then classification into the shapes of docs/protocol.md §4.1.
//!
//! serde_json accepts duplicate keys (the last wins) and has no cap on the number of values, so
//! the document is built by our own visitor that counts every value and checks every key as it
//! goes: an oversized message is refused as soon as its 262,145th value is seen, before the rest
//! is allocated.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use super::RequestId;

/// Most JSON values (scalars, arrays and objects each count once) in one message.
pub const MAX_JSON_VALUES: usize = 262_144;

/// A well-formed inbound message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: has `id` and `method`.
    Request(Request),
    /// A notification: has `method`, no `id`.
    Notification {
        /// The method name.
        method: String,
        /// `params`, `null` when absent.
        params: Value,
    },
    /// A response or error sent by the client (wexec sends no requests, so this is a protocol
    /// violation the caller acts on).
    Response {
        /// The id the client answered.
        id: RequestId,
    },
}

/// An inbound request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Echoed verbatim in the reply.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// `params`, `null` when absent.
    pub params: Value,
    /// W3C trace context, if the client sent one; it only feeds logs.
    pub trace: Option<Value>,
}

/// Why a message is malformed; the text becomes the `<detail>` of the -32600 reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// The bytes are not UTF-8.
    #[error("message is not valid UTF-8: {0}")]
    Utf8(String),
    /// The message holds more than [`MAX_JSON_VALUES`] values.
    #[error("JSON-RPC message exceeds the limit of {MAX_JSON_VALUES} JSON values")]
    TooManyValues,
    /// An object repeats a key.
    #[error("duplicate JSON object key `{0}`")]
    DuplicateKey(String),
    /// The text is not JSON.
    #[error("{0}")]
    Syntax(String),
    /// The JSON fits none of the message shapes.
    #[error("{0}")]
    Shape(&'static str),
}

/// Parses and classifies one message.
pub fn parse_message(bytes: &[u8]) -> Result<Incoming, Malformed> {
    let text = std::str::from_utf8(bytes).map_err(|err| Malformed::Utf8(err.to_string()))?;
    let value = parse_strict(text)?;
    classify(value)
}

/// The `id` of a message that is not otherwise parsed (one refused for its size), if it has
/// one that fits the shapes of docs/protocol.md §4.1. Skips everything else without building it.
pub fn peek_id(bytes: &[u8]) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        id: Option<RequestId>,
    }
    serde_json::from_slice::<Peek>(bytes).ok()?.id
}

/// Parses JSON text, refusing duplicate keys and documents of more than [`MAX_JSON_VALUES`]
/// values.
pub fn parse_strict(text: &str) -> Result<Value, Malformed> {
    let checks = Checks {
        remaining: Cell::new(MAX_JSON_VALUES),
        violation: Cell::new(None),
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = StrictValue(&checks)
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    // A violation found by the visitor surfaces from serde_json as a custom error decorated with a
    // position; report the violation itself.
    if let Some(violation) = checks.violation.take() {
        return Err(violation);
    }
    parsed.map_err(|err| Malformed::Syntax(err.to_string()))
}

fn classify(value: Value) -> Result<Incoming, Malformed> {
    let Value::Object(mut object) = value else {
        return Err(Malformed::Shape("a JSON-RPC message must be a JSON object"));
    };
    let id = match object.remove("id") {
        None => None,
        Some(Value::String(id)) => Some(RequestId::String(id)),
        Some(Value::Number(number)) => match number.as_i64() {
            Some(id) => Some(RequestId::Integer(id)),
            None => {
                return Err(Malformed::Shape(
                    "`id` must be an integer (i64) or a string",
                ));
            }
        },
        Some(_) => {
            return Err(Malformed::Shape(
                "`id` must be an integer (i64) or a string",
            ));
        }
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    match (object.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => Ok(Incoming::Request(Request {
            id,
            method,
            params,
            trace: object.remove("trace"),
        })),
        (Some(Value::String(method)), None) => Ok(Incoming::Notification { method, params }),
        (Some(_), _) => Err(Malformed::Shape("`method` must be a string")),
        (None, Some(id)) if object.contains_key("result") || object.contains_key("error") => {
            Ok(Incoming::Response { id })
        }
        (None, _) => Err(Malformed::Shape(
            "message is neither a request, a notification nor a response",
        )),
    }
}

/// Shared state of one parse: the value budget left and the first violation seen.
struct Checks {
    remaining: Cell<usize>,
    violation: Cell<Option<Malformed>>,
}

impl Checks {
    fn count_one<E: de::Error>(&self) -> Result<(), E> {
        match self.remaining.get().checked_sub(1) {
            Some(left) => {
                self.remaining.set(left);
                Ok(())
            }
            None => Err(self.fail(Malformed::TooManyValues)),
        }
    }

    fn fail<E: de::Error>(&self, violation: Malformed) -> E {
        let error = E::custom(&violation);
        self.violation.set(Some(violation));
        error
    }
}

/// Deserializes one value (recursively) under the checks.
struct StrictValue<'a>(&'a Checks);

impl<'de> DeserializeSeed<'de> for StrictValue<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.count_one()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        self.0.count_one()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.count_one()?;
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.count_one()?;
        // JSON text cannot spell NaN or infinity, so this is always Some.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.count_one()?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        self.0.count_one()?;
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.0.count_one()?;
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.count_one()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue(self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.count_one()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(self.0.fail(Malformed::DuplicateKey(key)));
            }
            let value = map.next_value_seed(StrictValue(self.0))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn accepts_requests_with_and_without_jsonrpc() {
        for text in [
            r#"{"id":1,"method":"m","params":{"a":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}"#,
        ] {
            assert_eq!(
                parse_message(text.as_bytes()),
                Ok(Incoming::Request(Request {
                    id: RequestId::Integer(1),
                    method: "m".into(),
                    params: json!({"a": 1}),
                    trace: None,
                }))
            );
        }
    }

    #[test]
    fn classifies_every_shape() {
        let cases: Vec<(&str, Result<Incoming, Malformed>)> = vec![
            (
                r#"{"id":"x","method":"m"}"#,
                Ok(Incoming::Request(Request {
                    id: RequestId::String("x".into()),
                    method: "m".into(),
                    params: Value::Null,
                    trace: None,
                })),
            ),
            (
                r#"{"method":"initialized"}"#,
                Ok(Incoming::Notification {
                    method: "initialized".into(),
                    params: Value::Null,
                }),
            ),
            (
                r#"{"id":3,"result":{}}"#,
                Ok(Incoming::Response {
                    id: RequestId::Integer(3),
                }),
            ),
            (
                r#"{"id":3,"error":{"code":1,"message":"m"}}"#,
                Ok(Incoming::Response {
                    id: RequestId::Integer(3),
                }),
            ),
            (
                "[]",
                Err(Malformed::Shape("a JSON-RPC message must be a JSON object")),
            ),
            (
                r#"{"id":1.5,"method":"m"}"#,
                Err(Malformed::Shape(
                    "`id` must be an integer (i64) or a string",
                )),
            ),
            (
                r#"{"id":null,"method":"m"}"#,
                Err(Malformed::Shape(
                    "`id` must be an integer (i64) or a string",
                )),
            ),
            (
                r#"{"id":{},"method":"m"}"#,
                Err(Malformed::Shape(
                    "`id` must be an integer (i64) or a string",
                )),
            ),
            (
                r#"{"id":18446744073709551615,"method":"m"}"#,
                Err(Malformed::Shape(
                    "`id` must be an integer (i64) or a string",
                )),
            ),
            (
                r#"{"id":1,"method":7}"#,
                Err(Malformed::Shape("`method` must be a string")),
            ),
            (
                r#"{"id":1}"#,
                Err(Malformed::Shape(
                    "message is neither a request, a notification nor a response",
                )),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_message(text.as_bytes()), expected, "{text}");
        }
    }

    #[test]
    fn refuses_duplicate_keys_at_any_depth() {
        assert_eq!(
            parse_message(br#"{"id":1,"method":"m","id":2}"#),
            Err(Malformed::DuplicateKey("id".into()))
        );
        assert_eq!(
            parse_message(br#"{"id":1,"method":"m","params":{"a":{"b":1,"b":2}}}"#),
            Err(Malformed::DuplicateKey("b".into()))
        );
        // The same key in sibling objects is fine.
        assert!(parse_message(br#"{"id":1,"method":"m","params":[{"a":1},{"a":2}]}"#).is_ok());
    }

    #[test]
    fn value_limit_counts_every_value_and_allows_exactly_the_limit() {
        // The object, "id" value, "method" value and the "params" array are 4 values.
        let fits = MAX_JSON_VALUES - 4;
        let make = |n: usize| {
            let items = vec!["0"; n].join(",");
            format!(r#"{{"id":1,"method":"m","params":[{items}]}}"#)
        };
        assert!(parse_message(make(fits).as_bytes()).is_ok());
        assert_eq!(
            parse_message(make(fits + 1).as_bytes()),
            Err(Malformed::TooManyValues)
        );
        assert_eq!(
            Malformed::TooManyValues.to_string(),
            "JSON-RPC message exceeds the limit of 262144 JSON values"
        );
        // Object members count through their values too.
        let members: Vec<String> = (0..MAX_JSON_VALUES)
            .map(|i| format!(r#""k{i}":null"#))
            .collect();
        let object = format!("{{{}}}", members.join(","));
        assert_eq!(parse_strict(&object), Err(Malformed::TooManyValues));
    }

    #[test]
    fn reports_syntax_and_utf8_errors() {
        assert!(matches!(
            parse_message(b"{not json"),
            Err(Malformed::Syntax(_))
        ));
        assert!(matches!(
            parse_message(b"{} trailing"),
            Err(Malformed::Syntax(_))
        ));
        assert!(matches!(
            parse_message(b"\xff\xfe"),
            Err(Malformed::Utf8(_))
        ));
        assert!(matches!(parse_message(b""), Err(Malformed::Syntax(_))));
    }

    #[test]
    fn nested_depth_is_bounded_without_overflowing_the_stack() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(parse_strict(&deep), Err(Malformed::Syntax(_))));
    }
}
