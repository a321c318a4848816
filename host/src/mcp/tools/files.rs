//! File tools, with the names, arguments and answers of `@modelcontextprotocol/server-filesystem`
//! so that prompts and habits carry over. Every one is served by the plugin that serves `fs/*`
//! (the bundled `fs` plugin, or the operator's), through its grants: a path outside them is
//! refused by the plugin, and the refusal is the tool's error.

mod edit;
pub mod tree;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use super::{Answer, Call, Failure, Outcome, definition, hints, object, string, unsigned};
use crate::mcp::door::Door;

/// What every file tool's structured content is: its text, as server-filesystem gives it.
fn content_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
    })
}

/// A file tool's answer: `text`, also as `{"content": text}`.
fn answer(text: String) -> Answer {
    Answer::text_and_structured(text.clone(), json!({"content": text}))
}

/// The tools' definitions.
pub fn definitions() -> Vec<Value> {
    let path = json!({"type": "string", "description": "Absolute, or relative to the first allowed directory."});
    let patterns = json!({"type": "array", "items": {"type": "string"}, "description": "Glob patterns of paths to leave out."});
    let reading = hints(true, false, true, false);
    let tool = |name: &str, title: &str, description: &str, input: Value, annotations: &Value| {
        definition(
            name,
            title,
            description,
            input,
            Some(content_schema()),
            annotations.clone(),
        )
    };
    vec![
        tool(
            "read_text_file",
            "Read a text file",
            "Reads a file as UTF-8 text; `head` or `tail` keeps only its first or last N lines.",
            object(
                json!({"path": path, "head": {"type": "integer", "minimum": 0}, "tail": {"type": "integer", "minimum": 0}}),
                &["path"],
            ),
            &reading,
        ),
        definition(
            "read_media_file",
            "Read an image or audio file",
            "Reads an image or audio file and returns it as base64 with its MIME type.",
            object(json!({"path": path}), &["path"]),
            None,
            reading.clone(),
        ),
        tool(
            "read_multiple_files",
            "Read several files",
            "Reads several text files at once; a file that cannot be read is reported in place.",
            object(
                json!({"paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}}),
                &["paths"],
            ),
            &reading,
        ),
        tool(
            "write_file",
            "Write a file",
            "Creates a file or replaces its contents with `content`.",
            object(
                json!({"path": path, "content": {"type": "string"}}),
                &["path", "content"],
            ),
            &hints(false, true, true, false),
        ),
        tool(
            "edit_file",
            "Edit a file",
            "Replaces exact text in a file, edit by edit (each `oldText` must occur once; \
             whitespace at line starts may differ), and returns a git-style diff. With \
             `dryRun`, only shows the diff.",
            object(
                json!({
                    "path": path,
                    "edits": {"type": "array", "minItems": 1, "items": object(
                        json!({"oldText": {"type": "string"}, "newText": {"type": "string"}}),
                        &["oldText", "newText"],
                    )},
                    "dryRun": {"type": "boolean"},
                }),
                &["path", "edits"],
            ),
            &hints(false, true, false, false),
        ),
        tool(
            "create_directory",
            "Create a directory",
            "Creates a directory and any missing parents; an existing one is fine.",
            object(json!({"path": path}), &["path"]),
            &hints(false, false, true, false),
        ),
        tool(
            "list_directory",
            "List a directory",
            "Lists a directory's entries, each marked [FILE] or [DIR].",
            object(json!({"path": path}), &["path"]),
            &reading,
        ),
        tool(
            "list_directory_with_sizes",
            "List a directory with sizes",
            "Lists a directory's entries with file sizes, sorted by name or size, and totals.",
            object(
                json!({"path": path, "sortBy": {"type": "string", "enum": ["name", "size"]}}),
                &["path"],
            ),
            &reading,
        ),
        tool(
            "directory_tree",
            "Directory tree",
            "Returns a directory's tree as JSON: entries with `name`, `type` and, for \
             directories, `children`.",
            object(
                json!({"path": path, "excludePatterns": patterns}),
                &["path"],
            ),
            &reading,
        ),
        tool(
            "move_file",
            "Move a file",
            "Moves or renames a file or directory; the destination must not exist.",
            object(
                json!({"source": {"type": "string"}, "destination": {"type": "string"}}),
                &["source", "destination"],
            ),
            &hints(false, true, false, false),
        ),
        tool(
            "search_files",
            "Search for files",
            "Finds files and directories under a path whose path relative to it (or, for a \
             pattern without `/`, whose name) matches a glob pattern.",
            object(
                json!({"path": path, "pattern": {"type": "string"}, "excludePatterns": patterns}),
                &["path", "pattern"],
            ),
            &reading,
        ),
        tool(
            "get_file_info",
            "File information",
            "Returns a file's or directory's size, times and type.",
            object(json!({"path": path}), &["path"]),
            &reading,
        ),
        tool(
            "list_allowed_directories",
            "Allowed directories",
            "Lists the directories the file tools may use.",
            object(json!({}), &[]),
            &reading,
        ),
    ]
}

/// Runs file tool `name`, if it is one.
pub async fn call(name: &str, call: &Call, arguments: &Value) -> Option<Outcome> {
    let door = &*call.door;
    Some(match name {
        "read_text_file" => read_text_file(door, arguments).await,
        "read_media_file" => read_media_file(door, arguments).await,
        "read_multiple_files" => read_multiple_files(door, arguments).await,
        "write_file" => write_file(door, arguments).await,
        "edit_file" => edit::edit_file(door, arguments).await,
        "create_directory" => create_directory(door, arguments).await,
        "list_directory" => list_directory(door, arguments).await,
        "list_directory_with_sizes" => list_with_sizes(door, arguments).await,
        "directory_tree" => tree::directory_tree(door, arguments).await,
        "move_file" => move_file(door, arguments).await,
        "search_files" => tree::search_files(door, arguments).await,
        "get_file_info" => get_file_info(door, arguments).await,
        "list_allowed_directories" => Ok(list_allowed(door)),
        _ => return None,
    })
}

/// The argument `name`, resolved to an absolute path.
fn path_of(door: &Door, arguments: &Value, name: &str) -> Result<String, Failure> {
    let path =
        string(arguments, name).ok_or_else(|| format!("missing required argument `{name}`"))?;
    door.resolve(path).map_err(Failure)
}

/// Reads the file at `path` (absolute).
pub(super) async fn read_bytes(door: &Door, path: &str) -> Result<Vec<u8>, Failure> {
    let read = door
        .call("fs/readFile", json!({"path": path}))
        .await
        .map_err(|error| Failure::of(path, &error))?;
    let data = read
        .get("dataBase64")
        .and_then(Value::as_str)
        .unwrap_or_default();
    wexec_base64::decode(data).map_err(|err| Failure(format!("{path}: unreadable contents: {err}")))
}

/// Reads the file at `path` as text.
pub(super) async fn read_text(door: &Door, path: &str) -> Result<String, Failure> {
    let bytes = read_bytes(door, path).await?;
    String::from_utf8(bytes).map_err(|_| {
        Failure(format!(
            "{path}: not UTF-8 text (use read_media_file for images and audio)"
        ))
    })
}

/// Writes `text` to `path`.
pub(super) async fn write_text(door: &Door, path: &str, text: &str) -> Result<(), Failure> {
    door.call(
        "fs/writeFile",
        json!({"path": path, "dataBase64": BASE64.encode(text)}),
    )
    .await
    .map(drop)
    .map_err(|error| Failure::of(path, &error))
}

/// `fs/getMetadata` of `path`.
pub(super) async fn metadata(door: &Door, path: &str) -> Result<Value, Failure> {
    door.call("fs/getMetadata", json!({"path": path}))
        .await
        .map_err(|error| Failure::of(path, &error))
}

async fn read_text_file(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    let (head, tail) = (unsigned(arguments, "head"), unsigned(arguments, "tail"));
    if head.is_some() && tail.is_some() {
        return Err("give `head` or `tail`, not both".into());
    }
    let text = read_text(door, &path).await?;
    let text = match (head, tail) {
        (Some(head), _) => text
            .split_inclusive('\n')
            .take(usize::try_from(head).unwrap_or(usize::MAX))
            .collect::<String>(),
        (_, Some(tail)) => {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let skip = lines
                .len()
                .saturating_sub(usize::try_from(tail).unwrap_or(usize::MAX));
            lines[skip..].concat()
        }
        (None, None) => text,
    };
    Ok(answer(text))
}

/// The MIME type of a media file, by its extension.
fn media_type(path: &str) -> &'static str {
    let extension = path
        .rsplit_once('.')
        .map_or("", |(_, ext)| ext)
        .to_ascii_lowercase();
    match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "mp3" => "audio/mpeg",
        "wav" => "audio/wav",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        "m4a" => "audio/mp4",
        _ => "application/octet-stream",
    }
}

async fn read_media_file(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    let data = BASE64.encode(read_bytes(door, &path).await?);
    let mime = media_type(&path);
    let block = match mime.split_once('/').map(|(kind, _)| kind) {
        Some(kind @ ("image" | "audio")) => json!({"type": kind, "data": data, "mimeType": mime}),
        _ => json!({"type": "resource", "resource": {
            "uri": crate::path_uri::to_uri(std::path::Path::new(&path)),
            "mimeType": mime,
            "blob": data,
        }}),
    };
    Ok(Answer {
        content: vec![block],
        structured: None,
    })
}

async fn read_multiple_files(door: &Door, arguments: &Value) -> Outcome {
    let paths: Vec<&str> = (arguments.get("paths").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let reads = paths.iter().map(|path| async move {
        let read = match door.resolve(path) {
            Ok(resolved) => read_text(door, &resolved).await,
            Err(reason) => Err(Failure(reason)),
        };
        match read {
            Ok(text) => format!("{path}:\n{text}\n"),
            Err(Failure(reason)) => format!("{path}: Error - {reason}"),
        }
    });
    let texts = futures_util::future::join_all(reads).await;
    Ok(answer(texts.join("\n---\n")))
}

async fn write_file(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    let content = string(arguments, "content").unwrap_or_default();
    write_text(door, &path, content).await?;
    Ok(answer(format!("Successfully wrote to {path}")))
}

async fn create_directory(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    door.call(
        "fs/createDirectory",
        json!({"path": path, "recursive": true}),
    )
    .await
    .map_err(|error| Failure::of(&path, &error))?;
    Ok(answer(format!("Successfully created directory {path}")))
}

/// A directory's entries: name, and whether each is a directory.
async fn entries(door: &Door, path: &str) -> Result<Vec<(String, bool)>, Failure> {
    let listed = door
        .call("fs/readDirectory", json!({"path": path}))
        .await
        .map_err(|error| Failure::of(path, &error))?;
    let mut entries: Vec<(String, bool)> = (listed.get("entries").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.get("fileName")?.as_str()?.to_owned();
            let directory = entry.get("isDirectory").and_then(Value::as_bool) == Some(true);
            Some((name, directory))
        })
        .collect();
    entries.sort();
    Ok(entries)
}

async fn list_directory(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    let lines: Vec<String> = entries(door, &path)
        .await?
        .into_iter()
        .map(|(name, directory)| format!("{} {name}", if directory { "[DIR]" } else { "[FILE]" }))
        .collect();
    Ok(answer(lines.join("\n")))
}

/// A size as server-filesystem writes it: `0 B`, `1.50 KB`, `2.00 MB`.
fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    if bytes == 0 {
        return "0 B".to_owned();
    }
    let exponent = ((bytes as f64).ln() / 1024f64.ln()).floor().min(4.0) as usize;
    if exponent == 0 {
        return format!("{bytes} B");
    }
    format!(
        "{:.2} {}",
        bytes as f64 / 1024f64.powi(exponent as i32),
        UNITS[exponent]
    )
}

async fn list_with_sizes(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    let listed = entries(door, &path).await?;
    let sizes = listed.iter().map(|(name, directory)| {
        let child = format!("{}/{name}", path.trim_end_matches('/'));
        async move {
            match directory {
                true => 0,
                false => metadata(door, &child)
                    .await
                    .ok()
                    .and_then(|meta| meta.get("size").and_then(Value::as_u64))
                    .unwrap_or(0),
            }
        }
    });
    let sizes = futures_util::future::join_all(sizes).await;
    let mut rows: Vec<(String, bool, u64)> = listed
        .into_iter()
        .zip(sizes)
        .map(|((name, directory), size)| (name, directory, size))
        .collect();
    if string(arguments, "sortBy") == Some("size") {
        rows.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    }
    let mut lines: Vec<String> = rows
        .iter()
        .map(|(name, directory, size)| match directory {
            true => format!("[DIR] {name:<30}"),
            false => format!("[FILE] {name:<30} {:>10}", human_size(*size)),
        })
        .collect();
    let files = rows.iter().filter(|row| !row.1).count();
    let total: u64 = rows.iter().map(|row| row.2).sum();
    lines.push(String::new());
    lines.push(format!(
        "Total: {files} files, {} directories",
        rows.len() - files
    ));
    lines.push(format!("Combined size: {}", human_size(total)));
    Ok(answer(lines.join("\n")))
}

async fn move_file(door: &Door, arguments: &Value) -> Outcome {
    let source = path_of(door, arguments, "source")?;
    let destination = path_of(door, arguments, "destination")?;
    let source_meta = metadata(door, &source).await?;
    if metadata(door, &destination).await.is_ok() {
        return Err(Failure(format!(
            "{destination}: the destination already exists"
        )));
    }
    let directory = source_meta.get("isDirectory").and_then(Value::as_bool) == Some(true);
    door.call(
        "fs/copy",
        json!({"sourcePath": source, "destinationPath": destination, "recursive": directory}),
    )
    .await
    .map_err(|error| Failure::of(format!("{source} -> {destination}"), &error))?;
    door.call(
        "fs/remove",
        json!({"path": source, "recursive": directory, "force": false}),
    )
    .await
    .map_err(|error| {
        Failure(format!(
            "{source} was copied to {destination} but could not be removed: {}",
            error.message
        ))
    })?;
    Ok(answer(format!(
        "Successfully moved {source} to {destination}"
    )))
}

/// A time in milliseconds since the epoch as RFC 3339 UTC.
fn timestamp(ms: u64) -> String {
    let seconds = ms / 1000;
    let days = (seconds / 86_400) as i64;
    let (h, m, s) = (seconds % 86_400 / 3600, seconds % 3600 / 60, seconds % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{:03}Z",
        ms % 1000
    )
}

async fn get_file_info(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    let meta = metadata(door, &path).await?;
    let field = |name: &str| meta.get(name).cloned().unwrap_or(Value::Null);
    let time = |name: &str| meta.get(name).and_then(Value::as_u64).map(timestamp);
    let lines = [
        format!("size: {}", field("size")),
        format!("created: {}", time("createdAtMs").unwrap_or_default()),
        format!("modified: {}", time("modifiedAtMs").unwrap_or_default()),
        format!("isDirectory: {}", field("isDirectory")),
        format!("isFile: {}", field("isFile")),
        format!("isSymlink: {}", field("isSymlink")),
    ];
    Ok(answer(lines.join("\n")))
}

fn list_allowed(door: &Door) -> Answer {
    let roots = door.roots();
    let text = if roots.is_empty() {
        "No allowed directories: the file tools have no filesystem grant.".to_owned()
    } else {
        format!("Allowed directories:\n{}", roots.join("\n"))
    };
    answer(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_read_as_server_filesystem_writes_them() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1000), "1000 B");
        assert_eq!(human_size(1536), "1.50 KB");
        assert_eq!(human_size(3 * 1024 * 1024), "3.00 MB");
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_780_000_000_123), "2026-05-28T20:26:40.123Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn media_types_come_from_extensions() {
        assert_eq!(media_type("/a/b.PNG"), "image/png");
        assert_eq!(media_type("/a/b.mp3"), "audio/mpeg");
        assert_eq!(media_type("/a/b"), "application/octet-stream");
    }
}
