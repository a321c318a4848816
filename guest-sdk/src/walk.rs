//! A bounded walk of a directory tree through the [`fs`] capability, as `fs/walk`
//! answers it (docs/protocol.md §9.4): breadth-first, bounded by depth, directories, entries
//! and a response budget; symlinked directories entered only when asked, never twice. The `fs`
//! plugin serves `fs/walk` with it and the `discovery` plugin scans capability roots with it.

use std::collections::{HashSet, VecDeque};

use wexec_protocol::limits::{MAX_WALK_DEPTH, MAX_WALK_DIRECTORIES, MAX_WALK_ENTRIES};
use wexec_protocol::{FsWalkEntry, FsWalkError, FsWalkOptions, FsWalkResponse};

use crate::RpcError;
use crate::fs;
use crate::path as uri;

/// About 4 MiB of response, at 64 bytes of overhead per item.
const RESPONSE_BUDGET: usize = 4 * 1024 * 1024;
const ITEM_OVERHEAD: usize = 64;

/// Walks `root` (a native path); limits beyond the protocol's maximums are -32600.
pub fn walk(root: &str, options: &FsWalkOptions) -> Result<FsWalkResponse, RpcError> {
    if options.max_directories == 0 || options.max_entries == 0 {
        return Err(RpcError::invalid_request(
            "filesystem walk limits must be greater than zero",
        ));
    }
    if options.max_depth > MAX_WALK_DEPTH
        || options.max_directories > MAX_WALK_DIRECTORIES
        || options.max_entries > MAX_WALK_ENTRIES
    {
        return Err(RpcError::invalid_request(format!(
            "filesystem walk limits exceed maximums: depth={MAX_WALK_DEPTH}, directories={MAX_WALK_DIRECTORIES}, entries={MAX_WALK_ENTRIES}"
        )));
    }
    let meta = fs::metadata(root, true).map_err(RpcError::from)?;
    let mut entries = Vec::new();
    let mut errors = Vec::new();
    let mut truncated = false;
    // A file as the root has nothing to list, nor has a symlink unless directory links are
    // followed (as Codex).
    if !meta.is_directory || (meta.is_symlink && !options.follow_directory_symlinks) {
        return Ok(FsWalkResponse {
            entries,
            errors,
            truncated,
        });
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
        let mut listing = match fs::read_directory(if dir.is_empty() { "/" } else { &dir }) {
            Ok(listing) => listing,
            Err(error) => {
                errors.push(FsWalkError {
                    path: uri::encode(&dir),
                    message: error.message,
                });
                continue;
            }
        };
        // Each directory's entries in bytewise name order, as Codex lists them.
        listing.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
        for entry in listing {
            // A dangling link (or, in wexec, one leaving the roots) is passed over as if it did
            // not exist: Codex neither lists nor counts it.
            if entry.target_missing {
                continue;
            }
            if examined >= options.max_entries {
                truncated = true;
                break 'walk;
            }
            examined += 1;
            // Only directories and regular files are listed; FIFOs, sockets, devices and links
            // to files count against `maxEntries` but are omitted, and so are links to
            // directories unless they are followed.
            let listed = if entry.is_directory {
                !entry.is_symlink || options.follow_directory_symlinks
            } else {
                entry.is_file && !entry.is_symlink
            };
            if !listed {
                continue;
            }
            let path = format!("{dir}/{}", entry.name);
            let uri = uri::encode(&path);
            budget += uri.len() + ITEM_OVERHEAD;
            if budget > RESPONSE_BUDGET {
                truncated = true;
                break 'walk;
            }
            let kind = if entry.is_directory {
                "directory"
            } else {
                "file"
            };
            entries.push(FsWalkEntry {
                path: uri,
                kind: kind.to_owned(),
            });
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
                        errors.push(FsWalkError {
                            path: uri::encode(&path),
                            message: error.message,
                        });
                        continue;
                    }
                }
            }
            queue.push_back((path, depth + 1));
        }
    }
    Ok(FsWalkResponse {
        entries,
        errors,
        truncated,
    })
}
