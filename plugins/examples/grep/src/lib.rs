//! `grep/search`: regex search over the filesystem roots the operator granted, returning the
//! path, line number and text of each matching line, within limits on results, files, depth
//! and file size. Everything it reads goes through wexec's filesystem capability, so a path
//! outside the grants is refused before any I/O, like `fs/*`.

use std::collections::VecDeque;

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use wexec_guest::{Call, Capability, Info, Plugin, Response, RpcError, Tool, fs, path};

/// Most results a call may ask for.
const MAX_RESULTS: usize = 10_000;
/// Most files examined per call.
const MAX_FILES: usize = 20_000;
/// Deepest directory level entered below the start.
const MAX_DEPTH: usize = 32;
/// A matched line is cut to this many characters.
const MAX_LINE_CHARS: usize = 1_000;
/// Files that look binary (a NUL in their first bytes) are skipped.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

struct Grep;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SearchParams {
    /// A regular expression (Rust `regex` syntax).
    pattern: String,
    /// A directory (searched recursively) or a file: a `file://` URI or an absolute path.
    path: String,
    #[serde(default)]
    case_insensitive: bool,
    /// Default 100, at most 10,000.
    #[serde(default)]
    max_results: Option<usize>,
    /// Files larger than this are skipped; default 4 MiB.
    #[serde(default)]
    max_file_bytes: Option<u64>,
    /// Enter directories whose names start with `.`; default false.
    #[serde(default)]
    include_hidden: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SearchResult {
    matches: Vec<Match>,
    /// A limit stopped the search early.
    truncated: bool,
    files_searched: usize,
    /// Files and directories that could not be read, and skipped files.
    skipped: Vec<Skipped>,
}

#[derive(Serialize)]
struct Match {
    path: String,
    line: usize,
    text: String,
}

#[derive(Serialize)]
struct Skipped {
    path: String,
    reason: String,
}

impl Plugin for Grep {
    fn info() -> Info {
        Info::new("grep", env!("CARGO_PKG_VERSION"))
            .method("grep/search")
            .capability(Capability::Filesystem)
            .tool(
                Tool::new("grep", "grep/search")
                    .title("Search file contents")
                    .description(
                        "Searches files under a directory (or one file) for lines matching a \
                         regular expression (Rust regex syntax) and returns each match's path, \
                         line number and text.",
                    )
                    .input_schema(serde_json::json!({
                        "type": "object",
                        "properties": {
                            "pattern": {"type": "string", "description": "A regular expression."},
                            "path": {"type": "string", "description": "An absolute path or file:// URI."},
                            "caseInsensitive": {"type": "boolean"},
                            "maxResults": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS},
                            "maxFileBytes": {"type": "integer", "minimum": 0},
                            "includeHidden": {"type": "boolean"},
                        },
                        "required": ["pattern", "path"],
                        "additionalProperties": false,
                    }))
                    .output_schema(serde_json::json!({
                        "type": "object",
                        "properties": {
                            "matches": {"type": "array", "items": {"type": "object", "properties": {
                                "path": {"type": "string"},
                                "line": {"type": "integer"},
                                "text": {"type": "string"},
                            }}},
                            "truncated": {"type": "boolean"},
                            "filesSearched": {"type": "integer"},
                            "skipped": {"type": "array"},
                        },
                        "required": ["matches", "truncated", "filesSearched", "skipped"],
                    }))
                    .read_only(true)
                    .idempotent(true)
                    .open_world(false),
            )
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        match call.method() {
            "grep/search" => Response::json(&search(call.params()?)?),
            other => Err(RpcError::method_not_found(other)),
        }
    }
}

fn search(params: SearchParams) -> Result<SearchResult, RpcError> {
    let max_results = params.max_results.unwrap_or(100);
    if !(1..=MAX_RESULTS).contains(&max_results) {
        return Err(RpcError::invalid_params(format!(
            "maxResults must be between 1 and {MAX_RESULTS}"
        )));
    }
    let max_file_bytes = params.max_file_bytes.unwrap_or(4 * 1024 * 1024);
    let regex = RegexBuilder::new(&params.pattern)
        .case_insensitive(params.case_insensitive)
        .size_limit(1 << 20)
        .build()
        .map_err(|err| RpcError::invalid_params(format!("invalid pattern: {err}")))?;
    let start = path::decode(&params.path)?;
    let mut search = Search {
        regex,
        max_results,
        max_file_bytes,
        include_hidden: params.include_hidden,
        result: SearchResult {
            matches: Vec::new(),
            truncated: false,
            files_searched: 0,
            skipped: Vec::new(),
        },
    };
    // The start itself must be reachable: a denied or missing path is an error, not a skip.
    let meta = fs::metadata(&start, true)?;
    if meta.is_directory {
        search.walk(start);
    } else {
        search.file(&start, meta.size);
    }
    Ok(search.result)
}

struct Search {
    regex: Regex,
    max_results: usize,
    max_file_bytes: u64,
    include_hidden: bool,
    result: SearchResult,
}

impl Search {
    /// Breadth-first; symlinked directories are not entered (no cycles, no surprises).
    fn walk(&mut self, start: String) {
        let mut queue = VecDeque::from([(start, 0usize)]);
        while let Some((dir, depth)) = queue.pop_front() {
            let mut entries = match fs::read_directory(&dir) {
                Ok(entries) => entries,
                Err(err) => {
                    self.skip(&dir, err.message);
                    continue;
                }
            };
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            for entry in entries {
                if self.stopped() {
                    return;
                }
                let child = join(&dir, &entry.name);
                if entry.is_directory && !entry.is_symlink {
                    let hidden = entry.name.starts_with('.');
                    if depth < MAX_DEPTH && (self.include_hidden || !hidden) {
                        queue.push_back((child, depth + 1));
                    }
                } else if entry.is_file {
                    match fs::metadata(&child, true) {
                        Ok(meta) => self.file(&child, meta.size),
                        Err(err) => self.skip(&child, err.message),
                    }
                }
            }
        }
    }

    fn file(&mut self, file: &str, size: u64) {
        if self.stopped() {
            return;
        }
        if size > self.max_file_bytes {
            let reason = format!("larger than {} bytes", self.max_file_bytes);
            return self.skip(file, reason);
        }
        let data = match fs::read_file(file) {
            Ok(data) => data,
            Err(err) => return self.skip(file, err.message),
        };
        self.result.files_searched += 1;
        if data[..data.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
            return self.skip(file, "binary".into());
        }
        let text = String::from_utf8_lossy(&data);
        for (index, line) in text.lines().enumerate() {
            if self.regex.is_match(line) {
                if self.result.matches.len() == self.max_results {
                    self.result.truncated = true;
                    return;
                }
                self.result.matches.push(Match {
                    path: path::encode(file),
                    line: index + 1,
                    text: line.chars().take(MAX_LINE_CHARS).collect(),
                });
            }
        }
    }

    /// Whether a limit was reached (then `truncated` is set).
    fn stopped(&mut self) -> bool {
        if self.result.files_searched >= MAX_FILES {
            self.result.truncated = true;
        }
        self.result.truncated
    }

    fn skip(&mut self, file: &str, reason: String) {
        self.result.skipped.push(Skipped {
            path: path::encode(file),
            reason,
        });
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

wexec_guest::export_plugin!(Grep);
