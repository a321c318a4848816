//! `hostile`: a test guest that attacks the host through everything it hands back. The client
//! chooses the payload, so one test can try every placement:
//! - `hostile/result`, `hostile/respond`, `hostile/error`, `hostile/base64`, `hostile/notify`:
//!   the given JSON text (with raw line breaks, say) as a result, an early response, an error's
//!   data, the text around host-encoded contents, a notification's params;
//! - `hostile/handle`: the filesystem handle imports on a handle id it did not open;
//! - `hostile/fs`: any other filesystem import, to see what its grants allow;
//! - `hostile/log`: many log lines in one call;
//! - `hostile/watch`: the watch import, with or without a filesystem grant.

#![allow(
    unsafe_code,
    reason = "wit-bindgen's generated import and export glue is unsafe code"
)]

wit_bindgen::generate!({ world: "plugin", path: "../../../wit" });

use exports::wexec::plugin::handler::{Guest, PluginInfo};
use serde_json::Value;
use wexec::plugin::filesystem::{self, OpenMode};
use wexec::plugin::types::{Capability, RpcError};
use wexec::plugin::{log, responder, watch};

struct Hostile;

fn error(code: i64, message: impl Into<String>) -> RpcError {
    RpcError {
        code,
        message: message.into(),
        data: None,
    }
}

fn text(params: &Value, name: &str) -> Result<String, RpcError> {
    params
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| error(-32602, format!("missing field `{name}`")))
}

fn number(params: &Value, name: &str) -> u64 {
    params.get(name).and_then(Value::as_u64).unwrap_or(0)
}

/// A filesystem failure as `{"kind": ..., "message": ...}`, so tests can tell `denied` from
/// `not-found`.
fn fs_error(err: filesystem::Error) -> RpcError {
    use filesystem::ErrorKind;
    let kind = match err.kind {
        ErrorKind::NotFound => "not-found",
        ErrorKind::OutsideRoots => "outside-roots",
        ErrorKind::Denied => "denied",
        ErrorKind::PermissionDenied => "permission-denied",
        ErrorKind::Invalid => "invalid",
        ErrorKind::TooLarge => "too-large",
        ErrorKind::Other => "other",
    };
    RpcError {
        code: -32000,
        message: err.message,
        data: Some(serde_json::json!({ "kind": kind }).to_string()),
    }
}

impl Guest for Hostile {
    fn describe() -> PluginInfo {
        PluginInfo {
            name: "hostile".into(),
            version: "0.1.0".into(),
            contract: "0.1.0".into(),
            methods: [
                "result", "respond", "error", "base64", "notify", "handle", "fs", "log", "watch",
            ]
            .iter()
            .map(|method| format!("hostile/{method}"))
            .collect(),
            capabilities: vec![Capability::Filesystem],
            env_vars: Vec::new(),
        }
    }

    fn handle(method: String, params: String) -> Result<String, RpcError> {
        let params: Value = serde_json::from_str(&params)
            .map_err(|err| error(-32602, format!("params are not JSON: {err}")))?;
        match method.as_str() {
            "hostile/result" => text(&params, "text"),
            "hostile/respond" => {
                responder::respond(Ok(&text(&params, "text")?));
                Ok("null".into())
            }
            "hostile/error" => Err(RpcError {
                code: -32000,
                message: text(&params, "message")?,
                data: Some(text(&params, "data")?),
            }),
            "hostile/base64" => {
                let contents = filesystem::read_file_contents(&text(&params, "path")?, true)
                    .map_err(fs_error)?;
                responder::respond_with_base64(
                    &text(&params, "before")?,
                    contents,
                    &text(&params, "after")?,
                )
                .map_err(|err| error(-32603, err))?;
                Ok("null".into())
            }
            "hostile/notify" => {
                responder::respond(Ok("{}"));
                responder::notify(&text(&params, "method")?, &text(&params, "params")?)
                    .map_err(|err| error(-32603, err))?;
                Ok("null".into())
            }
            "hostile/handle" => handle_op(&params),
            "hostile/fs" => fs_op(&params),
            "hostile/log" => {
                let line = text(&params, "text")
                    .unwrap_or_else(|_| "x".repeat(number(&params, "bytes") as usize));
                for _ in 0..number(&params, "count") {
                    log::log(log::Level::Warn, &line);
                }
                Ok("{}".into())
            }
            "hostile/watch" => {
                let missing: Vec<String> = params
                    .get("missing")
                    .and_then(Value::as_array)
                    .map(|paths| {
                        (paths.iter())
                            .filter_map(|path| path.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let present = params.get("present").and_then(Value::as_str);
                let watching = watch::watch_missing(number(&params, "watchId"), &missing, present)
                    .map_err(|err| error(-32603, err))?;
                Ok(format!(r#"{{"watching":{watching}}}"#))
            }
            other => Err(error(-32601, format!("hostile does not serve {other}"))),
        }
    }
}

/// The handle imports, on whatever id the client names.
fn handle_op(params: &Value) -> Result<String, RpcError> {
    let id = text(params, "handleId")?;
    let offset = number(params, "offset");
    match text(params, "op")?.as_str() {
        "read" => {
            let data = filesystem::read_block(&id, offset, number(params, "len") as u32)
                .map_err(fs_error)?;
            Ok(serde_json::json!({ "text": String::from_utf8_lossy(&data) }).to_string())
        }
        "read-contents" => {
            let contents =
                filesystem::read_block_contents(&id, offset, number(params, "len") as u32)
                    .map_err(fs_error)?;
            Ok(serde_json::json!({ "len": contents.len() }).to_string())
        }
        "write" => {
            filesystem::write_block(&id, offset, text(params, "data")?.as_bytes())
                .map_err(fs_error)?;
            Ok("{}".into())
        }
        "open" => {
            filesystem::open(&id, &text(params, "path")?, OpenMode::Read).map_err(fs_error)?;
            Ok("{}".into())
        }
        "close" => {
            filesystem::close(&id);
            Ok("{}".into())
        }
        other => Err(error(-32602, format!("unknown op {other}"))),
    }
}

/// The path imports, to see what the grants allow.
fn fs_op(params: &Value) -> Result<String, RpcError> {
    let path = text(params, "path")?;
    match text(params, "op")?.as_str() {
        "read" => {
            let data = filesystem::read_file(&path, true).map_err(fs_error)?;
            Ok(serde_json::json!({ "size": data.len() }).to_string())
        }
        "write" => {
            filesystem::write_file(&path, text(params, "data")?.as_bytes(), true)
                .map_err(fs_error)?;
            Ok("{}".into())
        }
        "metadata" => {
            let meta = filesystem::get_metadata(&path, true).map_err(fs_error)?;
            Ok(serde_json::json!({ "size": meta.size }).to_string())
        }
        "list" => {
            let entries = filesystem::read_directory(&path).map_err(fs_error)?;
            let names: Vec<String> = entries.into_iter().map(|entry| entry.name).collect();
            Ok(serde_json::json!({ "names": names }).to_string())
        }
        "canonicalize" => {
            let canonical = filesystem::canonicalize(&path).map_err(fs_error)?;
            Ok(serde_json::json!({ "path": canonical }).to_string())
        }
        "mkdir" => {
            filesystem::create_directory(&path, true).map_err(fs_error)?;
            Ok("{}".into())
        }
        "remove" => {
            filesystem::remove(&path, true, false).map_err(fs_error)?;
            Ok("{}".into())
        }
        "copy" => {
            filesystem::copy(&path, &text(params, "to")?, true).map_err(fs_error)?;
            Ok("{}".into())
        }
        other => Err(error(-32602, format!("unknown op {other}"))),
    }
}

export!(Hostile);
