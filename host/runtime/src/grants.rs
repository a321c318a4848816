//! What the operator granted a plugin, as typed values with `allows` checks. A plugin receives
//! the intersection of what it declared and what was granted; everything else is denied.

use std::collections::BTreeSet;
use std::path::PathBuf;

pub use wexec_protocol::ANY_GRANTED_VAR;

/// One filesystem root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsRoot {
    /// Canonical absolute path.
    pub path: PathBuf,
    /// Whether writes (create, change, remove) are allowed under it.
    pub writable: bool,
}

/// An `--allow-host` pattern (docs/protocol.md §10.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    host: HostMatch,
    port: PortMatch,
    /// The pattern as written, for `plugin/list`.
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    /// `*`: every host.
    Any,
    /// `example.com` (lowercase).
    Exact(String),
    /// `*.example.com`: strict subdomains of the suffix (lowercase, without the dot).
    Subdomains(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortMatch {
    /// The scheme's default port.
    Default,
    Exact(u16),
    Any,
}

/// An invalid `--allow-host` pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --allow-host pattern `{pattern}`: {reason}")]
pub struct PatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What is wrong.
    pub reason: &'static str,
}

impl HostPattern {
    /// Parses `example.com`, `example.com:8443`, `example.com:*`, `*.example.com[:PORT|:*]`,
    /// `[::1]:8080` or `*`.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let fail = |reason| PatternError {
            pattern: text.to_owned(),
            reason,
        };
        if text == "*" {
            return Ok(Self {
                host: HostMatch::Any,
                port: PortMatch::Any,
                text: text.to_owned(),
            });
        }
        let (host, port) =
            split_host_port(text).ok_or_else(|| fail("expected HOST, HOST:PORT or HOST:*"))?;
        let port = match port {
            None => PortMatch::Default,
            Some("*") => PortMatch::Any,
            Some(port) => PortMatch::Exact(
                port.parse()
                    .map_err(|_| fail("the port must be 0-65535 or *"))?,
            ),
        };
        let host = host.to_ascii_lowercase();
        let host = match host.strip_prefix("*.") {
            Some(suffix) if valid_host(suffix) => HostMatch::Subdomains(suffix.to_owned()),
            Some(_) => return Err(fail("a wildcard must be followed by a host name")),
            None if valid_host(&host) => HostMatch::Exact(host),
            None => return Err(fail("not a valid host name or IP literal")),
        };
        Ok(Self {
            host,
            port,
            text: text.to_owned(),
        })
    }

    /// Whether the pattern admits `host` (as written in the URL, IPv6 bracketed) on `port`,
    /// where `default_port` is the scheme's.
    pub fn allows(&self, host: &str, port: u16, default_port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        let host_ok = match &self.host {
            HostMatch::Any => true,
            HostMatch::Exact(exact) => *exact == host,
            // IP literals have no subdomains: `*.0.0.1` must not admit `127.0.0.1`.
            HostMatch::Subdomains(suffix) => {
                !is_ip_literal(&host)
                    && host
                        .strip_suffix(suffix.as_str())
                        .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
            }
        };
        let port_ok = match self.port {
            PortMatch::Any => true,
            PortMatch::Default => port == default_port,
            PortMatch::Exact(exact) => port == exact,
        };
        host_ok && port_ok
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        let host = &text[..inside.len() + 2];
        return match after {
            "" => Some((host, None)),
            after => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match text.split_once(':') {
        None => Some((text, None)),
        Some((host, port)) if !port.contains(':') => Some((host, Some(port))),
        Some(_) => None,
    }
}

fn is_ip_literal(host: &str) -> bool {
    host.parse::<std::net::Ipv4Addr>().is_ok() || host.starts_with('[')
}

fn valid_host(host: &str) -> bool {
    if let Some(inside) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inside.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Everything one plugin may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Filesystem roots; empty = no filesystem.
    pub fs_roots: Vec<FsRoot>,
    /// Reachable hosts; empty = no network.
    pub allow_hosts: Vec<HostPattern>,
    /// Readable environment variables.
    pub env_vars: BTreeSet<String>,
}

impl Grants {
    /// Whether any pattern admits `host:port`.
    pub fn allows_host(&self, host: &str, port: u16, default_port: u16) -> bool {
        self.allow_hosts
            .iter()
            .any(|pattern| pattern.allows(host, port, default_port))
    }

    /// Whether `name` may be read.
    pub fn allows_var(&self, name: &str) -> bool {
        self.env_vars.contains(name)
    }

    /// Keeps only what the plugin declared: capabilities it did not request are dropped, and
    /// so are variables it did not list. A plugin that lists [`ANY_GRANTED_VAR`] takes every
    /// variable the operator grants it (the `http` plugin: the operator names the header
    /// variables).
    pub fn restrict_to(
        mut self,
        wants_fs: bool,
        wants_http: bool,
        wants_vars: &BTreeSet<String>,
    ) -> Self {
        if !wants_fs {
            self.fs_roots.clear();
        }
        if !wants_http {
            self.allow_hosts.clear();
        }
        if !wants_vars.contains(ANY_GRANTED_VAR) {
            self.env_vars = self.env_vars.intersection(wants_vars).cloned().collect();
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn host_patterns() {
        // (pattern, host, port, default port, allowed)
        let cases = [
            ("example.com", "example.com", 443, 443, true),
            ("example.com", "EXAMPLE.com", 80, 80, true),
            ("example.com", "example.com", 8443, 443, false),
            ("example.com", "api.example.com", 443, 443, false),
            ("example.com:8443", "example.com", 8443, 443, true),
            ("example.com:8443", "example.com", 443, 443, false),
            ("example.com:*", "example.com", 1, 443, true),
            ("*.example.com", "api.example.com", 443, 443, true),
            ("*.example.com", "a.b.example.com", 443, 443, true),
            ("*.example.com", "example.com", 443, 443, false),
            ("*.example.com", "evilexample.com", 443, 443, false),
            ("*.0.0.1:*", "127.0.0.1", 80, 80, false),
            ("*.example.com:*", "x.example.com", 9, 443, true),
            ("*.example.com:8080", "x.example.com", 443, 443, false),
            ("*", "anything.at.all", 1234, 80, true),
            ("127.0.0.1:*", "127.0.0.1", 4000, 80, true),
            ("127.0.0.1:*", "127.0.0.2", 4000, 80, false),
            ("[::1]:8080", "[::1]", 8080, 80, true),
            ("[::1]:8080", "[::1]", 8081, 80, false),
            ("[::1]", "[::1]", 80, 80, true),
        ];
        for (pattern, host, port, default_port, allowed) in cases {
            let parsed = HostPattern::parse(pattern).unwrap();
            assert_eq!(
                parsed.allows(host, port, default_port),
                allowed,
                "{pattern} vs {host}:{port}"
            );
        }
    }

    #[test]
    fn invalid_patterns_name_the_problem() {
        for (pattern, reason) in [
            ("", "not a valid host name or IP literal"),
            ("exa mple.com", "not a valid host name or IP literal"),
            ("example.com:99999", "the port must be 0-65535 or *"),
            ("example.com:", "the port must be 0-65535 or *"),
            ("*.", "a wildcard must be followed by a host name"),
            ("a:b:c", "expected HOST, HOST:PORT or HOST:*"),
            ("[::1", "expected HOST, HOST:PORT or HOST:*"),
            ("[nope]:80", "not a valid host name or IP literal"),
        ] {
            assert_eq!(
                HostPattern::parse(pattern),
                Err(PatternError {
                    pattern: pattern.into(),
                    reason
                }),
                "{pattern}"
            );
        }
    }

    #[test]
    fn grants_are_intersected_with_declarations() {
        let granted = Grants {
            fs_roots: vec![FsRoot {
                path: "/srv".into(),
                writable: false,
            }],
            allow_hosts: vec![HostPattern::parse("*").unwrap()],
            env_vars: ["A", "B"].iter().map(|s| (*s).to_owned()).collect(),
        };
        let wants: BTreeSet<String> = ["B", "C"].iter().map(|s| (*s).to_owned()).collect();
        let effective = granted.clone().restrict_to(false, true, &wants);
        assert!(effective.fs_roots.is_empty(), "not declared, not granted");
        assert!(effective.allows_host("x", 1, 80));
        assert!(effective.allows_var("B"));
        assert!(!effective.allows_var("A"), "granted but not declared");
        assert!(!effective.allows_var("C"), "declared but not granted");

        let any = Grants {
            env_vars: ["A", "B"].iter().map(|s| (*s).to_owned()).collect(),
            ..Grants::default()
        }
        .restrict_to(false, false, &BTreeSet::from([ANY_GRANTED_VAR.to_owned()]));
        assert!(any.allows_var("A") && any.allows_var("B"));
        assert!(!any.allows_var("C"), "not granted");
        assert!(
            !any.allows_var(ANY_GRANTED_VAR),
            "the wildcard is no variable"
        );
        assert!(
            !Grants::default().allows_host("127.0.0.1", 80, 80),
            "nothing by default"
        );
    }
}
