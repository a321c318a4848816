//! Parsing a skill as Codex does (its `codex_skills` front matter rules, and what its server
//! 0.169 makes of `agents/openai.yaml`, probed): YAML front matter between `---` lines with a
//! `description` and, optionally, a `name` (else the directory's) and
//! `metadata.short-description`; values on one line, whitespace collapsed.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use wexec_guest::protocol::{SkillDependencies, SkillPolicy, SkillToolDependency};

const MAX_NAME_CHARS: usize = 64;

/// A skill's front matter, validated.
#[derive(Debug, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    pub description: String,
    pub short_description: Option<String>,
}

/// The front matter of `contents`; `default_name` when it names none. `None` when it is
/// missing, not YAML, or lacks a description or a valid name.
pub fn front_matter(contents: &str, default_name: &str) -> Option<FrontMatter> {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        metadata: RawMetadata,
    }
    #[derive(Default, Deserialize)]
    struct RawMetadata {
        #[serde(default, rename = "short-description")]
        short_description: Option<String>,
    }
    let raw: Raw = yaml(&extract(contents)?)?;
    let name = raw
        .name
        .as_deref()
        .map(one_line)
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| one_line(default_name))
        .to_owned();
    let name = if name.is_empty() {
        "skill".to_owned()
    } else {
        name
    };
    let description = raw.description.as_deref().map(one_line).unwrap_or_default();
    if name.chars().count() > MAX_NAME_CHARS || description.is_empty() {
        return None;
    }
    Some(FrontMatter {
        name,
        description,
        short_description: raw
            .metadata
            .short_description
            .as_deref()
            .map(one_line)
            .filter(|short| !short.is_empty()),
    })
}

/// What `agents/openai.yaml` adds: tool dependencies (those with a type and a value; none is
/// `null`) and the policy. A file that does not parse adds nothing.
pub fn metadata(contents: &str) -> (Option<SkillDependencies>, Option<SkillPolicy>) {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        dependencies: Option<RawDependencies>,
        #[serde(default)]
        policy: Option<RawPolicy>,
    }
    #[derive(Deserialize)]
    struct RawDependencies {
        #[serde(default)]
        tools: Vec<RawTool>,
    }
    #[derive(Deserialize)]
    struct RawTool {
        #[serde(default, rename = "type")]
        kind: Option<String>,
        #[serde(default)]
        value: Option<String>,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        transport: Option<String>,
        #[serde(default)]
        command: Option<String>,
        #[serde(default)]
        url: Option<String>,
    }
    #[derive(Deserialize)]
    struct RawPolicy {
        #[serde(default)]
        allow_implicit_invocation: Option<bool>,
        #[serde(default)]
        products: Vec<Product>,
    }
    /// Codex's products, in either case.
    #[derive(Deserialize)]
    enum Product {
        #[serde(rename = "codex", alias = "CODEX")]
        Codex,
        #[serde(rename = "chatgpt", alias = "CHATGPT")]
        Chatgpt,
        #[serde(rename = "atlas", alias = "ATLAS")]
        Atlas,
    }
    let Some(raw) = yaml::<Raw>(contents) else {
        return (None, None);
    };
    let tools: Vec<SkillToolDependency> = (raw.dependencies.map(|deps| deps.tools))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|tool| {
            Some(SkillToolDependency {
                kind: tool.kind?,
                value: tool.value?,
                description: tool.description,
                transport: tool.transport,
                command: tool.command,
                url: tool.url,
                oauth_callback_port: None,
            })
        })
        .collect();
    let dependencies = (!tools.is_empty()).then_some(SkillDependencies { tools });
    let policy = raw.policy.map(|policy| SkillPolicy {
        allow_implicit_invocation: policy.allow_implicit_invocation,
        products: (policy.products.iter())
            .map(|product| match product {
                Product::Codex => "codex",
                Product::Chatgpt => "chatgpt",
                Product::Atlas => "atlas",
            })
            .map(str::to_owned)
            .collect(),
    });
    (dependencies, policy)
}

/// The lines between a first `---` line and the next, if any are.
fn extract(contents: &str) -> Option<String> {
    let mut lines = contents.lines();
    if lines.next()?.trim() != "---" {
        return None;
    }
    let mut front = Vec::new();
    for line in lines {
        if line.trim() == "---" {
            return (!front.is_empty()).then(|| front.join("\n"));
        }
        front.push(line);
    }
    None
}

/// YAML as Codex reads it: when the text does not parse, once more with the plain scalars that
/// hold `: ` (prose such as `description: Build for AWS: ECS`) quoted. Text nested deeper than
/// [`MAX_FLOW_DEPTH`] brackets is refused unparsed: the parser takes time quadratic in the
/// nesting (120,000 `[` took it past the plugin's 30 s; Codex too takes 52 s), so one such
/// file would cost the whole request.
fn yaml<T: DeserializeOwned>(text: &str) -> Option<T> {
    if flow_depth(text) > MAX_FLOW_DEPTH {
        return None;
    }
    match serde_yaml_ng::from_str(text) {
        Ok(value) => Some(value),
        Err(_) => serde_yaml_ng::from_str(&repair_scalars(text)?).ok(),
    }
}

/// Quotes `key: value` lines whose plain value holds `: ` or starts like an invalid flow
/// collection; `None` when no line needed it.
fn repair_scalars(text: &str) -> Option<String> {
    let mut changed = false;
    let mut block_indent: Option<usize> = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        let indent = line.chars().take_while(|c| *c == ' ').count();
        if let Some(block) = block_indent {
            if line.trim().is_empty() || indent > block {
                lines.push(line.to_owned());
                continue;
            }
            block_indent = None;
        }
        let Some((key, value)) = line.split_once(':') else {
            lines.push(line.to_owned());
            continue;
        };
        if key.trim().is_empty() || !value.chars().next().is_none_or(char::is_whitespace) {
            lines.push(line.to_owned());
            continue;
        }
        let trimmed = value.trim_start();
        let leading = &value[..value.len() - trimmed.len()];
        // A ` #` starts a comment, which stays outside the quotes.
        let (scalar, comment) = match trimmed
            .char_indices()
            .find(|&(i, c)| c == '#' && (i == 0 || trimmed[..i].ends_with(char::is_whitespace)))
        {
            Some((i, _)) => {
                let end = trimmed[..i].trim_end().len();
                (&trimmed[..end], &trimmed[end..])
            }
            None => (trimmed, ""),
        };
        let scalar = scalar.trim_end();
        let Some(first) = scalar.chars().next() else {
            lines.push(line.to_owned());
            continue;
        };
        if matches!(first, '|' | '>') {
            block_indent = Some(indent);
            lines.push(line.to_owned());
            continue;
        }
        if matches!(first, '\'' | '"') {
            lines.push(line.to_owned());
            continue;
        }
        let colon = scalar
            .char_indices()
            .any(|(i, c)| c == ':' && scalar[i + 1..].starts_with(char::is_whitespace));
        let bad_flow = matches!(first, '[' | '{' | '@' | '`')
            && serde_yaml_ng::from_str::<serde_yaml_ng::Value>(scalar).is_err();
        if !colon && !bad_flow {
            lines.push(line.to_owned());
            continue;
        }
        lines.push(format!(
            "{key}:{leading}'{}'{comment}",
            scalar.replace('\'', "''")
        ));
        changed = true;
    }
    changed.then(|| lines.join("\n"))
}

/// Deeper than any metadata needs; parsed in well under a millisecond.
const MAX_FLOW_DEPTH: usize = 64;

/// The deepest nesting of `[`/`{` in `text`, quotes not considered (a bound, not a parse).
fn flow_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0);
    for byte in text.bytes() {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Whitespace runs as single spaces, trimmed.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_as_codex_reads_it() {
        let parsed = front_matter(
            "---\nname: \"quoted: name\"\ndescription: >\n  folded\n  text\nmetadata:\n  short-description: 42\n---\nbody\n",
            "dir",
        );
        assert_eq!(
            parsed,
            Some(FrontMatter {
                name: "quoted: name".into(),
                description: "folded text".into(),
                short_description: Some("42".into()),
            })
        );
        let unnamed = front_matter("---\ndescription: d\n---\n", "my  dir").unwrap();
        assert_eq!(unnamed.name, "my dir");
        let prose = front_matter(
            "---\nname: a\ndescription: Build for AWS: ECS # c\n---\n",
            "x",
        );
        assert_eq!(prose.unwrap().description, "Build for AWS: ECS");
        for skipped in [
            "no front matter\n",
            "---\nname: a\n---\n",
            "---\nname: a\ndescription: d\n",
            "---\n---\n",
            "---\n- a\n- b\n---\n",
        ] {
            assert_eq!(front_matter(skipped, "x"), None, "{skipped:?}");
        }
        // An invalid flow scalar is prose, quoted as Codex repairs it.
        let flow = front_matter("---\nname: [a\ndescription: d\n---\n", "x");
        assert_eq!(flow.map(|parsed| parsed.name).as_deref(), Some("[a"));
        let long = format!("---\nname: {}\ndescription: d\n---\n", "n".repeat(65));
        assert_eq!(front_matter(&long, "x"), None);
        let deep = format!("---\nname: a\ndescription: d\nx: {}\n---\n", "[".repeat(65));
        assert_eq!(front_matter(&deep, "x"), None);
        let nested = format!(
            "---\nname: a\ndescription: d\nx: {}{}\n---\n",
            "[".repeat(64),
            "]".repeat(64)
        );
        assert!(front_matter(&nested, "x").is_some());
    }

    #[test]
    fn metadata_as_codex_reads_it() {
        let (deps, policy) = metadata(
            "interface:\n  display_name: A\ndependencies:\n  tools:\n    - type: mcp\n      value: foo\n      oauth_callback_port: 1234\n    - value: untyped\npolicy:\n  allow_implicit_invocation: false\n  products: [codex, CHATGPT]\n",
        );
        let tools = deps.unwrap().tools;
        assert_eq!(tools.len(), 1);
        assert_eq!(
            (tools[0].kind.as_str(), tools[0].oauth_callback_port),
            ("mcp", None)
        );
        let policy = policy.unwrap();
        assert_eq!(policy.allow_implicit_invocation, Some(false));
        assert_eq!(policy.products, ["codex", "chatgpt"]);
        // Anything invalid drops both, as Codex does.
        assert_eq!(metadata("policy:\n  products: [Codex]\n"), (None, None));
        assert_eq!(metadata("dependencies: [unclosed\n"), (None, None));
        let (deps, policy) = metadata("dependencies:\n  tools: []\npolicy: {}\n");
        assert_eq!(deps, None);
        assert_eq!(policy.unwrap().products, Vec::<String>::new());
    }
}
