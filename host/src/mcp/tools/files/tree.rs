//! `directory_tree` and `search_files`: one bounded `fs/walk` each, shaped as
//! server-filesystem answers.

use std::collections::BTreeMap;

use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};
use serde_json::{Value, json};

use super::{Door, Failure, Outcome, answer, path_of, string};
use crate::protocol::limits::{MAX_WALK_DEPTH, MAX_WALK_DIRECTORIES, MAX_WALK_ENTRIES};

/// A walked entry: its path relative to the walk's root, its `file:` URI, and whether it is a
/// directory.
pub struct Walked {
    /// Below the root, without a leading `/`.
    pub relative: String,
    /// As `fs/walk` gives it.
    pub uri: String,
    /// A directory (not entered if hidden and `prune_hidden`).
    pub directory: bool,
}

/// Everything under `root`, within `fs/walk`'s largest bounds, dot-directories listed but not
/// entered with `prune_hidden`; `truncated` when a bound stopped it.
pub async fn walk(
    door: &Door,
    root: &str,
    prune_hidden: bool,
) -> Result<(Vec<Walked>, bool), Failure> {
    let params = json!({
        "path": root,
        "options": {
            "maxDepth": MAX_WALK_DEPTH,
            "maxDirectories": MAX_WALK_DIRECTORIES,
            "maxEntries": MAX_WALK_ENTRIES,
            "followDirectorySymlinks": false,
            "pruneHiddenDirectories": prune_hidden,
        },
    });
    let walked = door
        .call("fs/walk", params)
        .await
        .map_err(|error| Failure::of(root, &error))?;
    let prefix = format!("{}/", root.trim_end_matches('/'));
    let entries = (walked.get("entries").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let uri = entry.get("path")?.as_str()?;
            let path = crate::path_uri::parse_utf8(uri).ok()?;
            let relative = path.strip_prefix(&prefix)?.to_owned();
            let directory = entry.get("kind").and_then(Value::as_str) == Some("directory");
            Some(Walked {
                relative,
                uri: uri.to_owned(),
                directory,
            })
        })
        .collect();
    let truncated = walked.get("truncated").and_then(Value::as_bool) == Some(true);
    Ok((entries, truncated))
}

fn glob(pattern: &str) -> Result<GlobMatcher, Failure> {
    check_pattern(pattern)?;
    Glob::new(pattern)
        .map(|glob| glob.compile_matcher())
        .map_err(|err| Failure(format!("invalid pattern `{pattern}`: {err}")))
}

/// Runs `compile` (glob compilation: CPU proportional to the patterns) on the blocking pool,
/// not on a thread serving requests.
async fn off_runtime<T: Send + 'static>(
    compile: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(compile)
        .await
        .map_err(|err| Failure(format!("the patterns could not be compiled: {err}")))?
}

/// Most `excludePatterns` one call may give: compiling globs costs CPU on the server.
pub const MAX_EXCLUDE_PATTERNS: usize = 64;

/// The longest glob pattern, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;

fn check_pattern(pattern: &str) -> Result<(), Failure> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(Failure(format!(
            "a pattern of {} bytes is longer than the {MAX_PATTERN_BYTES} allowed",
            pattern.len()
        )));
    }
    Ok(())
}

/// The `excludePatterns` argument as one set; a pattern without `/` also matches any name.
fn excludes(arguments: &Value) -> Result<GlobSet, Failure> {
    let patterns: Vec<&str> = (arguments.get("excludePatterns").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if patterns.len() > MAX_EXCLUDE_PATTERNS {
        return Err(Failure(format!(
            "{} excludePatterns are more than the {MAX_EXCLUDE_PATTERNS} allowed",
            patterns.len()
        )));
    }
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        check_pattern(pattern)?;
        for form in [
            pattern.to_owned(),
            format!("**/{pattern}"),
            format!("{pattern}/**"),
            format!("**/{pattern}/**"),
        ] {
            let glob = Glob::new(&form)
                .map_err(|err| Failure(format!("invalid exclude pattern `{pattern}`: {err}")))?;
            set.add(glob);
        }
    }
    set.build()
        .map_err(|err| Failure(format!("invalid exclude patterns: {err}")))
}

#[derive(Default)]
struct Node {
    directory: bool,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn to_json(&self, name: &str) -> Value {
        if self.directory {
            let children: Vec<Value> = (self.children.iter())
                .map(|(name, child)| child.to_json(name))
                .collect();
            json!({"name": name, "type": "directory", "children": children})
        } else {
            json!({"name": name, "type": "file"})
        }
    }
}

pub(super) async fn directory_tree(door: &Door, arguments: &Value) -> Outcome {
    let root = path_of(door, arguments, "path")?;
    let given = arguments.clone();
    let excluded = off_runtime(move || excludes(&given)).await?;
    let (entries, truncated) = walk(door, &root, false).await?;
    let mut tree = Node {
        directory: true,
        ..Node::default()
    };
    for entry in entries
        .iter()
        .filter(|entry| !excluded.is_match(&entry.relative))
    {
        let mut node = &mut tree;
        let mut parts = entry.relative.split('/').peekable();
        while let Some(part) = parts.next() {
            node = node.children.entry(part.to_owned()).or_default();
            if parts.peek().is_some() {
                node.directory = true;
            }
        }
        node.directory |= entry.directory;
    }
    let children: Vec<Value> = (tree.children.iter())
        .map(|(name, child)| child.to_json(name))
        .collect();
    let mut text = serde_json::to_string_pretty(&children).unwrap_or_default();
    if truncated {
        text.push_str("\n(truncated: the tree is larger than one walk may list)");
    }
    Ok(answer(text))
}

pub(super) async fn search_files(door: &Door, arguments: &Value) -> Outcome {
    let root = path_of(door, arguments, "path")?;
    let pattern = string(arguments, "pattern").unwrap_or_default();
    let by_name = !pattern.contains('/');
    let given = arguments.clone();
    let (matcher, excluded) = off_runtime(move || {
        let pattern = string(&given, "pattern").unwrap_or_default();
        Ok((glob(pattern)?, excludes(&given)?))
    })
    .await?;
    let (entries, truncated) = walk(door, &root, false).await?;
    let base = root.trim_end_matches('/');
    let found: Vec<String> = entries
        .iter()
        .filter(|entry| !excluded.is_match(&entry.relative))
        .filter(|entry| {
            let name = entry.relative.rsplit('/').next().unwrap_or_default();
            matcher.is_match(&entry.relative) || (by_name && matcher.is_match(name))
        })
        .map(|entry| format!("{base}/{}", entry.relative))
        .collect();
    let mut text = if found.is_empty() {
        "No matches found".to_owned()
    } else {
        found.join("\n")
    };
    if truncated {
        text.push_str("\n(truncated: more files exist than one walk may list)");
    }
    Ok(answer(text))
}
