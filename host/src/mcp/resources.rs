//! Files inside the roots as `file://` resources: listed a page at a time from one bounded
//! walk of each root, read through the plugin serving `fs/*` (its grants decide), and named by
//! one URI template. Like the tools, every look goes through the door.

use rmcp::ErrorData as McpError;
use serde_json::{Value, json};

use super::door::Door;
use super::tools::Failure;
use super::tools::files::tree::walk;

/// Resources per `resources/list` page.
pub const PAGE: usize = 200;

/// The one template: any absolute path.
pub const TEMPLATE: &str = "file://{+path}";

fn internal(error: impl std::fmt::Display) -> McpError {
    McpError::internal_error(error.to_string(), None)
}

/// Every file under the roots, in walk order: (URI, path relative to its root).
async fn files(door: &Door) -> Result<Vec<(String, String)>, McpError> {
    let mut files = Vec::new();
    for root in door.roots() {
        let (entries, _) = walk(door, &root, true)
            .await
            .map_err(|Failure(reason)| McpError::invalid_params(reason, None))?;
        files.extend(
            (entries.into_iter())
                .filter(|entry| !entry.directory)
                .map(|entry| (entry.uri, entry.relative)),
        );
    }
    Ok(files)
}

/// `resources/list` from `cursor` (the index of the page's first file, as text).
pub async fn list(door: &Door, cursor: Option<&str>) -> Result<Value, McpError> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .map_err(|_| McpError::invalid_params(format!("invalid cursor `{cursor}`"), None))?,
    };
    let files = files(door).await?;
    let page: Vec<Value> = (files.iter().skip(start).take(PAGE))
        .map(|(uri, name)| {
            let mut resource = json!({"uri": uri, "name": name});
            if let Some(mime) = mime_type(name) {
                resource["mimeType"] = json!(mime);
            }
            resource
        })
        .collect();
    let mut result = json!({"resources": page, "resultType": "complete"});
    if start + PAGE < files.len() {
        result["nextCursor"] = json!((start + PAGE).to_string());
    }
    Ok(result)
}

/// `resources/templates/list`.
pub fn templates() -> Value {
    json!({
        "resourceTemplates": [{
            "uriTemplate": TEMPLATE,
            "name": "file",
            "title": "A file",
            "description": "Any file inside the allowed directories, by absolute path.",
        }],
        "resultType": "complete",
    })
}

/// `resources/read` of a `file://` URI: text when it is UTF-8, else a base64 blob.
pub async fn read(door: &Door, uri: &str) -> Result<Value, McpError> {
    if !uri.starts_with("file://") {
        return Err(McpError::invalid_params(
            format!("`{uri}` is not a file:// URI"),
            None,
        ));
    }
    let read = door
        .call("fs/readFile", json!({"path": uri}))
        .await
        .map_err(|error| {
            let message = format!("{uri}: {}", error.message);
            if error.code == crate::rpc::NOT_FOUND || error.message.contains("No such file") {
                McpError::resource_not_found(message, None)
            } else {
                McpError::invalid_params(message, None)
            }
        })?;
    let data = read
        .get("dataBase64")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let bytes = wexec_base64::decode(data).map_err(internal)?;
    let mime = mime_type(uri);
    let mut contents = match String::from_utf8(bytes) {
        Ok(text) => json!({"uri": uri, "text": text}),
        Err(_) => json!({"uri": uri, "blob": data}),
    };
    if let Some(mime) = mime.or_else(|| contents.get("text").map(|_| "text/plain")) {
        contents["mimeType"] = json!(mime);
    }
    Ok(json!({"contents": [contents], "resultType": "complete"}))
}

/// A MIME type from a file name's extension, for the common cases.
fn mime_type(name: &str) -> Option<&'static str> {
    let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "rs" => "text/x-rust",
        "py" => "text/x-python",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "json" => "application/json",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "html" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        _ => return None,
    })
}
