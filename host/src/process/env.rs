//! The child's environment (docs/protocol.md §8.7): exactly `env`, or built from wexec's own
//! environment by an `envPolicy`.

use std::collections::BTreeMap;

use crate::protocol::{EnvInherit, EnvPolicy};

/// Names `inherit: "core"` keeps.
const CORE_NAMES: [&str; 11] = [
    "HOME", "LANG", "LC_ALL", "LC_CTYPE", "LOGNAME", "PATH", "SHELL", "TEMP", "TMP", "TMPDIR",
    "USER",
];

/// Names dropped unless `ignoreDefaultExcludes`: likely secrets.
const DEFAULT_EXCLUDES: [&str; 3] = ["*KEY*", "*SECRET*", "*TOKEN*"];

/// wexec's own credentials and identity hints, never inherited by children.
const NEVER_INHERITED: [&str; 3] = [
    "WEXEC_TOKEN",
    "OPENAI_IDENTITY_TOKEN_FILE",
    "OPENAI_FEDERATION_RULE_ID",
];

/// Builds the child's environment from `host` (wexec's variables), `env` and `policy`.
pub fn child_env(
    host: impl IntoIterator<Item = (String, String)>,
    env: &BTreeMap<String, String>,
    policy: Option<&EnvPolicy>,
) -> BTreeMap<String, String> {
    let Some(policy) = policy else {
        return env.clone();
    };
    let mut vars: BTreeMap<String, String> = host
        .into_iter()
        .filter(|(name, _)| !NEVER_INHERITED.contains(&name.as_str()))
        .filter(|(name, _)| match policy.inherit {
            EnvInherit::All => true,
            EnvInherit::Core => CORE_NAMES.contains(&name.as_str()),
            EnvInherit::None => false,
        })
        .collect();
    if !policy.ignore_default_excludes {
        vars.retain(|name, _| !DEFAULT_EXCLUDES.iter().any(|glob| glob_matches(glob, name)));
    }
    vars.retain(|name, _| !policy.exclude.iter().any(|glob| glob_matches(glob, name)));
    vars.extend(policy.set.iter().map(|(k, v)| (k.clone(), v.clone())));
    if !policy.include_only.is_empty() {
        vars.retain(|name, _| {
            policy
                .include_only
                .iter()
                .any(|glob| glob_matches(glob, name))
        });
    }
    vars.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    vars
}

/// `*` and `?` globs, ASCII case-insensitive.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().map(|c| c.to_ascii_lowercase()).collect();
    let name: Vec<char> = name.chars().map(|c| c.to_ascii_lowercase()).collect();
    // Iterative wildcard matching with single-star backtracking: linear in practice, no recursion.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn host() -> Vec<(String, String)> {
        map(&[
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("API_KEY", "k"),
            ("my_secret_x", "s"),
            ("GITHUB_TOKEN", "t"),
            ("WEXEC_TOKEN", "w"),
            ("LANG", "C"),
            ("EDITOR", "vi"),
        ])
        .into_iter()
        .collect()
    }

    fn policy(inherit: EnvInherit) -> EnvPolicy {
        EnvPolicy {
            inherit,
            ignore_default_excludes: false,
            exclude: Vec::new(),
            set: BTreeMap::new(),
            include_only: Vec::new(),
        }
    }

    #[test]
    fn without_a_policy_the_environment_is_exactly_env() {
        let env = map(&[("A", "1")]);
        assert_eq!(child_env(host(), &env, None), env);
    }

    #[test]
    fn inherit_modes_and_default_excludes() {
        let none = BTreeMap::new();
        assert_eq!(
            child_env(host(), &none, Some(&policy(EnvInherit::All))),
            map(&[
                ("EDITOR", "vi"),
                ("HOME", "/h"),
                ("LANG", "C"),
                ("PATH", "/bin")
            ])
        );
        assert_eq!(
            child_env(host(), &none, Some(&policy(EnvInherit::Core))),
            map(&[("HOME", "/h"), ("LANG", "C"), ("PATH", "/bin")])
        );
        assert_eq!(
            child_env(host(), &none, Some(&policy(EnvInherit::None))),
            none
        );
        let keep_secrets = EnvPolicy {
            ignore_default_excludes: true,
            ..policy(EnvInherit::All)
        };
        let vars = child_env(host(), &none, Some(&keep_secrets));
        assert!(vars.contains_key("API_KEY") && vars.contains_key("GITHUB_TOKEN"));
        assert!(!vars.contains_key("WEXEC_TOKEN"), "never inherited");
    }

    #[test]
    fn steps_apply_in_order_and_env_wins() {
        let full = EnvPolicy {
            inherit: EnvInherit::All,
            ignore_default_excludes: false,
            exclude: vec!["ed*".into()],
            set: map(&[("NEW", "n"), ("LANG", "set")]),
            include_only: vec!["LANG".into(), "NEW".into(), "PATH".into(), "EXTRA".into()],
        };
        let env = map(&[("LANG", "env"), ("EXTRA", "e"), ("OUTSIDE", "o")]);
        assert_eq!(
            child_env(host(), &env, Some(&full)),
            map(&[
                ("EXTRA", "e"),
                ("LANG", "env"),
                ("NEW", "n"),
                ("OUTSIDE", "o"),
                ("PATH", "/bin")
            ])
        );
    }

    #[test]
    fn globs() {
        let cases = [
            ("*KEY*", "api_key", true),
            ("*KEY*", "KEYRING", true),
            ("*KEY*", "KE", false),
            ("A?C", "abc", true),
            ("A?C", "ac", false),
            ("*", "", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("", "", true),
            ("", "a", false),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(glob_matches(pattern, name), expected, "{pattern} vs {name}");
        }
    }
}
