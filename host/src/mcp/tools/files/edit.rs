//! `edit_file`: exact text replacements, edit by edit, answered with a git-style diff.

use serde_json::Value;

use super::{Door, Failure, Outcome, answer, path_of, read_text, write_text};

/// Applies `edits` (`oldText` → `newText`, in order) to `text`. Each `oldText` must occur
/// exactly once, or, failing that, match exactly one run of lines when whitespace at their
/// starts and ends is ignored (the new lines then take the matched lines' indentation).
pub fn apply(text: &str, edits: &[(String, String)]) -> Result<String, String> {
    let mut text = text.replace("\r\n", "\n");
    for (index, (old, new)) in edits.iter().enumerate() {
        let (old, new) = (old.replace("\r\n", "\n"), new.replace("\r\n", "\n"));
        let which = || format!("edit {} (`{}`)", index + 1, excerpt(&old));
        if old.is_empty() {
            return Err(format!("{}: oldText is empty", which()));
        }
        match text.matches(old.as_str()).count() {
            1 => {
                text = text.replacen(old.as_str(), &new, 1);
                continue;
            }
            0 => {}
            many => {
                return Err(format!(
                    "{}: oldText occurs {many} times; include more context to make it unique",
                    which()
                ));
            }
        }
        text =
            replace_lines(&text, &old, &new).map_err(|reason| format!("{}: {reason}", which()))?;
    }
    Ok(text)
}

fn excerpt(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut shown: String = first.chars().take(40).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

/// The whitespace-tolerant match of [`apply`].
fn replace_lines(text: &str, old: &str, new: &str) -> Result<String, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let wanted: Vec<&str> = old
        .trim_end_matches('\n')
        .split('\n')
        .map(str::trim)
        .collect();
    let found: Vec<usize> = (0..lines.len().saturating_sub(wanted.len() - 1))
        .filter(|&start| {
            (lines[start..start + wanted.len()].iter())
                .map(|line| line.trim())
                .eq(wanted.iter().copied())
        })
        .collect();
    let start = match found.as_slice() {
        [one] => *one,
        [] => return Err("oldText was not found in the file".to_owned()),
        many => {
            return Err(format!(
                "oldText matches {} places (ignoring indentation); include more context",
                many.len()
            ));
        }
    };
    let indent = |line: &str| line.len() - line.trim_start().len();
    let original = &lines[start][..indent(lines[start])];
    let new_lines: Vec<&str> = new.trim_end_matches('\n').split('\n').collect();
    let first = new_lines.first().map_or("", |line| &line[..indent(line)]);
    let replaced = new_lines.iter().map(|line| match line.strip_prefix(first) {
        Some(rest) => format!("{original}{rest}"),
        None => (*line).to_owned(),
    });
    let mut result: Vec<String> = lines[..start]
        .iter()
        .map(|line| (*line).to_owned())
        .collect();
    result.extend(replaced);
    result.extend(
        lines[start + wanted.len()..]
            .iter()
            .map(|line| (*line).to_owned()),
    );
    Ok(result.join("\n"))
}

/// A unified diff of `old` and `new`, fenced as server-filesystem fences it.
pub fn diff(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string();
    let mut fence = "```".to_owned();
    while diff.contains(&fence) {
        fence.push('`');
    }
    format!("{fence}diff\n{diff}{fence}\n\n")
}

pub(super) async fn edit_file(door: &Door, arguments: &Value) -> Outcome {
    let path = path_of(door, arguments, "path")?;
    let edits: Vec<(String, String)> = (arguments.get("edits").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .map(|edit| {
            let text = |name: &str| {
                edit.get(name)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            (text("oldText"), text("newText"))
        })
        .collect();
    let dry_run = arguments.get("dryRun").and_then(Value::as_bool) == Some(true);
    let original = read_text(door, &path).await?;
    let edited = apply(&original, &edits).map_err(|reason| Failure(format!("{path}: {reason}")))?;
    let shown = diff(&path, &original.replace("\r\n", "\n"), &edited);
    if !dry_run {
        write_text(door, &path, &edited).await?;
    }
    Ok(answer(shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str) -> (String, String) {
        (old.to_owned(), new.to_owned())
    }

    #[test]
    fn exact_edits_apply_in_order() {
        let text = "fn a() {\n    one();\n}\n";
        let edited = apply(text, &[edit("one", "two"), edit("two()", "three()")]).unwrap();
        assert_eq!(edited, "fn a() {\n    three();\n}\n");
    }

    #[test]
    fn ambiguous_and_missing_text_is_refused() {
        let text = "x\nx\n";
        let err = apply(text, &[edit("x", "y")]).unwrap_err();
        assert!(err.contains("occurs 2 times"), "{err}");
        let err = apply(text, &[edit("zzz", "y")]).unwrap_err();
        assert!(err.contains("not found"), "{err}");
    }

    #[test]
    fn indentation_may_differ_and_is_kept() {
        let text = "if x {\n        call(a);\n        call(b);\n}\n";
        let edited = apply(text, &[edit("call(a);\ncall(b);", "call(c);\n  nested();")]).unwrap();
        assert_eq!(edited, "if x {\n        call(c);\n          nested();\n}\n");
    }

    #[test]
    fn diffs_are_unified_and_fenced() {
        let shown = diff("/w/a.txt", "a\nb\n", "a\nc\n");
        assert_eq!(
            shown,
            "```diff\n--- /w/a.txt\n+++ /w/a.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n```\n\n"
        );
    }
}
