//! `fs/walk` (docs/protocol.md §9.4): breadth-first, bounded by depth, directories, entries and a
//! response budget; symlinked directories entered only when asked, never twice.

use std::collections::{HashSet, VecDeque};

use serde::Deserialize;
use serde_json::{Value, json};

use wexec_guest::RpcError;
use wexec_guest::fs;
use wexec_guest::path as uri;

const MAX_DEPTH: u64 = 64;
const MAX_DIRECTORIES: u64 = 10_000;
const MAX_ENTRIES: u64 = 50_000;
/// About 4 MiB of response, at 64 bytes of overhead per item.
const RESPONSE_BUDGET: usize = 4 * 1024 * 1024;
const ITEM_OVERHEAD: usize = 64;

/// `options` of `fs/walk`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Options {
    max_depth: u64,
    max_directories: u64,
    max_entries: u64,
    follow_directory_symlinks: bool,
    #[serde(default)]
    prune_hidden_directories: bool,
}

/// Walks `root` (a native path).
pub fn walk(root: &str, options: &Options) -> Result<Value, RpcError> {
    if options.max_directories == 0 || options.max_entries == 0 {
        return Err(RpcError::invalid_request(
            "filesystem walk limits must be greater than zero",
        ));
    }
    if options.max_depth > MAX_DEPTH
        || options.max_directories > MAX_DIRECTORIES
        || options.max_entries > MAX_ENTRIES
    {
        return Err(RpcError::invalid_request(
            "filesystem walk limits exceed maximums: depth=64, directories=10000, entries=50000",
        ));
    }
    let meta = fs::metadata(root, true).map_err(RpcError::from)?;
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    let mut truncated = false;
    if !meta.is_directory {
        return Ok(json!({"entries": entries, "errors": errors, "truncated": truncated}));
    }
    let mut visited: HashSet<String> = HashSet::new();
    if let Ok(canonical) = fs::canonicalize(root) {
        visited.insert(canonical);
    }
    let mut queue: VecDeque<(String, u64)> =
        VecDeque::from([(root.trim_end_matches('/').to_owned(), 0)]);
    let (mut directories, mut examined, mut budget) = (0u64, 0u64, 0usize);
    'walk: while let Some((dir, depth)) = queue.pop_front() {
        if directories >= options.max_directories {
            truncated = true;
            break;
        }
        directories += 1;
        let listing = match fs::read_directory(if dir.is_empty() { "/" } else { &dir }) {
            Ok(listing) => listing,
            Err(error) => {
                errors.push(json!({"path": uri::encode(&dir), "message": error.message}));
                continue;
            }
        };
        for entry in listing {
            if examined >= options.max_entries {
                truncated = true;
                break 'walk;
            }
            examined += 1;
            let path = format!("{dir}/{}", entry.name);
            let uri = uri::encode(&path);
            budget += uri.len() + ITEM_OVERHEAD;
            if budget > RESPONSE_BUDGET {
                truncated = true;
                break 'walk;
            }
            if entry.target_missing {
                errors.push(json!({"path": uri, "message": "symlink target is missing or outside the allowed roots"}));
                continue;
            }
            let kind = if entry.is_directory {
                "directory"
            } else {
                "file"
            };
            entries.push(json!({"path": uri, "kind": kind}));
            if !entry.is_directory || depth >= options.max_depth {
                continue;
            }
            if options.prune_hidden_directories && entry.name.starts_with('.') {
                continue;
            }
            if options.follow_directory_symlinks {
                // Links can lead back to any directory: remember every one entered.
                match fs::canonicalize(&path) {
                    Ok(canonical) => {
                        if !visited.insert(canonical) {
                            continue;
                        }
                    }
                    Err(error) => {
                        errors.push(json!({"path": uri, "message": error.message}));
                        continue;
                    }
                }
            } else if entry.is_symlink {
                continue;
            }
            queue.push_back((path, depth + 1));
        }
    }
    Ok(json!({"entries": entries, "errors": errors, "truncated": truncated}))
}
