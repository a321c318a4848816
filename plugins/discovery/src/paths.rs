//! Native absolute paths as strings, lexically: what the walk and the grants speak.

/// `dir/relative`, without doubling a separator.
pub fn join(dir: &str, relative: &str) -> String {
    format!("{}/{relative}", dir.trim_end_matches('/'))
}

/// The directory holding `path` (`""` for a child of `/`, which callers read as `/`).
pub fn parent(path: &str) -> &str {
    let path = path.trim_end_matches('/');
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// The last component of `path`.
pub fn basename(path: &str) -> &str {
    let path = path.trim_end_matches('/');
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}

/// `path` with its `.` and `..` segments resolved lexically, as a URL resolves them (`/..` is
/// `/`); a trailing separator kept. `None` when there were none.
pub fn without_dot_segments(path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').collect();
    if !segments
        .iter()
        .any(|segment| matches!(*segment, "." | ".."))
    {
        return None;
    }
    let mut kept: Vec<&str> = Vec::new();
    for segment in &segments[1..] {
        match *segment {
            "." => {}
            ".." => {
                kept.pop();
            }
            segment => kept.push(segment),
        }
    }
    let mut normal = format!("/{}", kept.join("/"));
    if matches!(segments.last(), Some(&("." | ".."))) && normal != "/" {
        normal.push('/');
    }
    Some(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_paths() {
        assert_eq!(join("/a/", "b/c"), "/a/b/c");
        assert_eq!(join("/", "b"), "/b");
        assert_eq!(parent("/a/b/"), "/a");
        assert_eq!(parent("/a"), "");
        assert_eq!(basename("/a/b/"), "b");
        assert_eq!(basename("/a/SKILL.md"), "SKILL.md");
        assert_eq!(without_dot_segments("/a/b/"), None);
        assert_eq!(
            without_dot_segments("/t/../t/q/n/").as_deref(),
            Some("/t/q/n/")
        );
        assert_eq!(without_dot_segments("/a/./b").as_deref(), Some("/a/b"));
        assert_eq!(without_dot_segments("/../x").as_deref(), Some("/x"));
        assert_eq!(without_dot_segments("/a/b/..").as_deref(), Some("/a/"));
    }
}
