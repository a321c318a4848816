//! JSON text a guest hands the host (a result, a response, a notification's params, the text
//! around host-encoded contents), made safe to splice into an outbound message.
//!
//! Invariants, for every message that carries guest text:
//! - the text is exactly one JSON value, so it cannot close the envelope it is spliced into
//!   and append members or messages of its own;
//! - it holds no raw CR or LF, so it cannot end the stdio transport's line and start a message
//!   of its own (docs/protocol.md §3.2). In valid JSON a raw CR or LF can only be whitespace
//!   between tokens (inside a string it must be escaped), so replacing each with a space changes
//!   nothing a JSON parser sees.

use serde_json::value::RawValue;

/// Validates `text` as one JSON value and puts it on one line.
pub fn value(text: String) -> Result<Box<RawValue>, serde_json::Error> {
    let raw = RawValue::from_string(text)?;
    if !has_line_break(raw.get()) {
        return Ok(raw);
    }
    // Whitespace for whitespace: still the same, valid JSON.
    RawValue::from_string(one_line(raw.get()))
}

/// `text` with every raw CR and LF replaced by a space; for fragments the caller has already
/// validated as part of one JSON value.
pub fn fragment(text: String) -> String {
    if has_line_break(&text) {
        one_line(&text)
    } else {
        text
    }
}

fn has_line_break(text: &str) -> bool {
    memchr::memchr2(b'\n', b'\r', text.as_bytes()).is_some()
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_breaks_between_tokens_become_spaces() {
        let forged = "{\"x\":\r\n{\"jsonrpc\":\"2.0\",\"method\":\"process/output\",\"params\":{}}\n,\"y\":\r1}";
        let flat = value(forged.to_owned()).unwrap();
        assert!(!has_line_break(flat.get()));
        let before: serde_json::Value = serde_json::from_str(forged).unwrap();
        let after: serde_json::Value = serde_json::from_str(flat.get()).unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn escaped_line_breaks_inside_strings_are_kept() {
        let text = r#"{"text":"a\nb\r\nc"}"#;
        assert_eq!(value(text.to_owned()).unwrap().get(), text);
    }

    #[test]
    fn anything_but_one_json_value_is_refused() {
        for text in [
            "{\"a\":1}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            "1}, \"forged\": {",
            "\"raw\nnewline in a string\"",
            "",
        ] {
            assert!(value(text.to_owned()).is_err(), "{text:?}");
        }
    }

    #[test]
    fn fragments_lose_their_line_breaks_only() {
        assert_eq!(fragment("{\"a\":\n".into()), "{\"a\": ");
        assert_eq!(fragment("}".into()), "}");
    }
}
