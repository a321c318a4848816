//! The layering rule of the crates (README, "Layout"): no cycle between the modules of one
//! crate, and the runtime and the client know nothing of the server. Module edges are read
//! from the sources: every `crate::`, `super::` and `self::` path (braces expanded), and the
//! crate root's own `use child::...`. A child using its parent's items is the parent's facade
//! and not an edge; anything reaching the crate root (other than an extern crate alias such as
//! `crate::protocol`) is.

#![allow(
    clippy::unwrap_used,
    reason = "a source that cannot be read fails the test"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every module of the crate whose sources are in `src`, with its file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Module = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts == ["main"] && src.join("lib.rs").exists() {
                continue; // the binary is a crate of its own
            }
            if matches!(
                parts.last().map(String::as_str),
                Some("lib" | "main" | "mod")
            ) {
                parts.pop();
            }
            found.insert(parts, path);
        }
    }
    found
}

/// The source without comments and without its `#[cfg(test)] mod tests`.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `a::{b, c::{d}}` as `a::b`, `a::c::d`; other paths as they are.
fn expand(path: &str, out: &mut Vec<String>) {
    let Some(open) = path.find("::{") else {
        out.push(path.to_owned());
        return;
    };
    let (prefix, rest) = (&path[..open], &path[open + 3..]);
    let (mut depth, mut part, mut parts) = (0, String::new(), Vec::new());
    for c in rest.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut part));
                continue;
            }
            _ => {}
        }
        part.push(c);
    }
    parts.push(part);
    for part in parts {
        let part = part.split(" as ").next().unwrap_or_default().trim();
        if !part.is_empty() && part != "self" {
            expand(&format!("{prefix}::{part}"), out);
        }
    }
}

/// The paths starting with `crate`, `super` or `self` in `code`, braces expanded.
fn paths(code: &str) -> Vec<String> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for keyword in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(keyword) {
            let start = from + at;
            from = start + keyword.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let mut end = from;
            let mut depth = 0;
            while end < bytes.len() {
                let c = bytes[end];
                let path_char = c.is_ascii_alphanumeric() || matches!(c, b'_' | b':');
                if c == b'{' {
                    depth += 1;
                } else if c == b'}' {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                } else if depth == 0 && !path_char {
                    break;
                }
                end += 1;
            }
            let text: String = code[start..end].split_whitespace().collect();
            expand(text.trim_end_matches(':'), &mut found);
        }
    }
    found
}

/// The module-level edges of a crate, modules cut to `depth` components.
fn edges(src: &Path, depth: usize) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules(src);
    let cut = |module: &[String]| module[..module.len().min(depth)].to_vec();
    let root: Module = vec!["<root>".to_owned()];
    let node = |module: Module| {
        if module.is_empty() {
            root.clone()
        } else {
            module
        }
    };
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, file) in &modules {
        let code = code(file);
        let from = node(cut(module));
        if module.is_empty() {
            for line in code.lines() {
                let line = line.trim_start().trim_start_matches("pub ");
                if let Some(rest) = line.strip_prefix("use ")
                    && let Some((child, _)) = rest.split_once("::")
                    && modules.contains_key(&vec![child.to_owned()])
                {
                    edges
                        .entry(root.clone())
                        .or_default()
                        .insert(vec![child.to_owned()]);
                }
            }
        }
        for path in paths(&code) {
            let mut segments: Vec<&str> = path.split("::").collect();
            let mut base: Module = match segments.remove(0) {
                "crate" => Vec::new(),
                "self" => module.clone(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            while segments.first() == Some(&"super") {
                segments.remove(0);
                base.pop();
            }
            let is_crate = path.starts_with("crate::");
            if is_crate
                && let Some(first) = segments.first()
                && !modules.contains_key(&vec![(*first).to_owned()])
                && first.starts_with(|c: char| c.is_ascii_lowercase())
            {
                continue; // an extern crate alias, or a macro's path
            }
            let target: Module = base
                .into_iter()
                .chain(segments.iter().map(|s| (*s).to_owned()))
                .collect();
            let owner = (0..=target.len())
                .rev()
                .map(|n| target[..n].to_vec())
                .find(|prefix| prefix.is_empty() || modules.contains_key(prefix))
                .unwrap_or_default();
            let to = node(cut(&owner));
            let ancestor = to != root && from.starts_with(&to);
            if to != from && !ancestor {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// The cycles (strongly connected components of more than one module).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&Module> = edges.keys().chain(edges.values().flatten()).collect();
    let reaches = |from: &Module, to: &Module| {
        let (mut seen, mut stack) = (BTreeSet::new(), vec![from]);
        while let Some(next) = stack.pop() {
            for target in edges.get(next).into_iter().flatten() {
                if target == to {
                    return true;
                }
                if seen.insert(target) {
                    stack.push(target);
                }
            }
        }
        false
    };
    let mut found: Vec<Vec<String>> = Vec::new();
    for &node in &nodes {
        let component: Vec<String> = nodes
            .iter()
            .filter(|&&other| other == node || (reaches(node, other) && reaches(other, node)))
            .map(|module| module.join("::"))
            .collect();
        if component.len() > 1 && !found.contains(&component) {
            found.push(component);
        }
    }
    found
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn no_crate_has_a_module_cycle() {
    let crates = [
        "host/src",
        "host/runtime/src",
        "host/client/src",
        "host/protocol/src",
        "host/wasm-build/src",
        "host/base64/src",
        "guest-sdk/src",
    ];
    let mut failures = Vec::new();
    for krate in crates {
        for depth in [1, 2, 3] {
            for cycle in cycles(&edges(&workspace().join(krate), depth)) {
                failures.push(format!("{krate} (depth {depth}): {}", cycle.join(" <-> ")));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "module cycles:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_check_sees_a_cycle() {
    let dir = std::env::temp_dir().join(format!("wexec-layering-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(
        dir.join("a.rs"),
        "mod inner;\nuse crate::b::{B, other::{C}};\n",
    )
    .unwrap();
    std::fs::write(dir.join("a/inner.rs"), "use super::super::b::B;\n").unwrap();
    std::fs::write(
        dir.join("b.rs"),
        "pub struct B;\nfn f() { crate::a::g(); }\n",
    )
    .unwrap();
    let found = cycles(&edges(&dir, 1));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, vec![vec!["a".to_owned(), "b".to_owned()]]);
}

#[test]
fn the_runtime_and_the_client_know_nothing_of_the_server() {
    for (krate, forbidden) in [
        (
            "host/runtime",
            ["tokio-tungstenite", "wexec\"", "clap"].as_slice(),
        ),
        (
            "host/client",
            ["wasmtime", "wexec-runtime", "wexec\""].as_slice(),
        ),
        (
            "host/protocol",
            ["tokio", "wasmtime", "wexec-runtime"].as_slice(),
        ),
        (
            "host/base64",
            [
                "tokio",
                "wasmtime",
                "wexec-protocol",
                "wexec-runtime",
                "wexec\"",
            ]
            .as_slice(),
        ),
    ] {
        let manifest = std::fs::read_to_string(workspace().join(krate).join("Cargo.toml")).unwrap();
        let dependencies = manifest
            .split("[dependencies]")
            .nth(1)
            .and_then(|rest| rest.split("\n[").next())
            .unwrap_or_default();
        for name in forbidden {
            let name = name.trim_end_matches('"');
            let listed = dependencies.lines().any(|line| {
                line.split(['.', ' ', '='])
                    .next()
                    .is_some_and(|dependency| dependency == name)
            });
            assert!(!listed, "{krate} depends on {name}");
        }
    }
}
