//! The configuration file (`--config wexec.toml`): plugins to load, what each is granted, and
//! its limits. Relative paths are relative to the file's directory.
//!
//! ```toml
//! # Defaults for every plugin of this file.
//! [limits]
//! time-limit-ms = 30000
//! memory-limit-mib = 512
//! log-limit-kib = 64           # log output per call
//!
//! [[plugins]]
//! file = "plugins/search.wasm"
//! read-only-roots = ["/srv/docs"]
//! read-write-roots = ["/srv/scratch"]
//! allow-hosts = ["api.example.com", "*.internal:8443"]
//! env-vars = ["LANG"]
//! time-limit-ms = 2000          # overrides [limits] for this plugin
//! memory-limit-mib = 64
//!
//! # The process sandbox ceiling and limits (docs/sandbox.md); the command line wins. Read at
//! # startup only.
//! [sandbox]
//! mode = "workspace-write"       # read-only | workspace-write | danger-full-access
//! writable-roots = ["/srv/work"]
//! readable-roots = ["/srv"]
//! process-network = false
//! processes = true
//!
//! [process-limits]
//! cpu-seconds = 600
//! memory-mib = 4096
//! open-files = 1024
//! file-size-mib = 1024
//! ```

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::grants::{FsRoot, Grants, HostPattern};
use crate::runtime::Limits;

/// The file's schema.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    limits: LimitSettings,
    #[serde(default)]
    plugins: Vec<PluginEntry>,
    #[serde(default)]
    sandbox: SandboxSettings,
    #[serde(default)]
    process_limits: ProcessLimitSettings,
    #[serde(default)]
    http: HttpSettings,
}

/// `[http]`: the bundled `http` plugin's options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HttpSettings {
    /// `--allow-header-env`: variables `valueEnvVar` headers may read.
    #[serde(default)]
    pub header_env: Vec<String>,
}

/// What the file says beside its plugins: the process ceiling and limits, and the `http`
/// options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostSettings {
    /// `[sandbox]`.
    pub sandbox: SandboxSettings,
    /// `[process-limits]`.
    pub process_limits: ProcessLimitSettings,
    /// `[http]`.
    pub http: HttpSettings,
}

/// `[sandbox]`: the process ceiling, as the command line's options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SandboxSettings {
    /// `--sandbox`.
    pub mode: Option<crate::sandbox::Mode>,
    /// `--writable-root`, relative to the file.
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    /// `--readable-root`, relative to the file.
    #[serde(default)]
    pub readable_roots: Vec<PathBuf>,
    /// `--sandbox-accept`.
    #[serde(default)]
    pub accept: Vec<crate::sandbox::Weaker>,
    /// `--process-network`.
    pub process_network: Option<bool>,
    /// `false`: `--no-processes`.
    pub processes: Option<bool>,
}

/// `[process-limits]`: as the `--process-*` options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ProcessLimitSettings {
    /// `--process-cpu-seconds`.
    pub cpu_seconds: Option<u64>,
    /// `--process-memory-mib`.
    pub memory_mib: Option<u64>,
    /// `--process-open-files`.
    pub open_files: Option<u64>,
    /// `--process-file-size-mib`.
    pub file_size_mib: Option<u64>,
}

/// The file's host settings, paths made absolute against its directory.
pub fn load_host_settings(path: &Path) -> Result<HostSettings, ConfigError> {
    let fail = |reason: String| ConfigError {
        file: path.display().to_string(),
        reason,
    };
    let text =
        std::fs::read_to_string(path).map_err(|err| fail(format!("cannot be read: {err}")))?;
    let file: File = toml::from_str(&text).map_err(|err| fail(err.message().to_owned()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut sandbox = file.sandbox;
    for roots in [&mut sandbox.writable_roots, &mut sandbox.readable_roots] {
        for root in roots.iter_mut() {
            *root = base.join(&*root);
        }
    }
    Ok(HostSettings {
        sandbox,
        process_limits: file.process_limits,
        http: file.http,
    })
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct LimitSettings {
    time_limit_ms: Option<u64>,
    memory_limit_mib: Option<u64>,
    log_limit_kib: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct PluginEntry {
    file: PathBuf,
    #[serde(default)]
    read_only_roots: Vec<PathBuf>,
    #[serde(default)]
    read_write_roots: Vec<PathBuf>,
    #[serde(default)]
    allow_hosts: Vec<String>,
    #[serde(default)]
    env_vars: Vec<String>,
    time_limit_ms: Option<u64>,
    memory_limit_mib: Option<u64>,
    log_limit_kib: Option<u64>,
}

/// One plugin of the file, resolved: absolute file, canonical roots, parsed patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredPlugin {
    /// The component file.
    pub file: PathBuf,
    /// What the operator grants it.
    pub grants: Grants,
    /// Its limits.
    pub limits: Limits,
}

/// A configuration file wexec cannot use; the message names the file and the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config {file}: {reason}")]
pub struct ConfigError {
    /// The file.
    pub file: String,
    /// Why.
    pub reason: String,
}

/// Reads `path`; `defaults` are the command line's limits.
pub fn load(path: &Path, defaults: Limits) -> Result<Vec<ConfiguredPlugin>, ConfigError> {
    let fail = |reason: String| ConfigError {
        file: path.display().to_string(),
        reason,
    };
    let text =
        std::fs::read_to_string(path).map_err(|err| fail(format!("cannot be read: {err}")))?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, base, defaults).map_err(fail)
}

fn parse(text: &str, base: &Path, defaults: Limits) -> Result<Vec<ConfiguredPlugin>, String> {
    let file: File = toml::from_str(text).map_err(|err| match err.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {}", err.message())
        }
        None => err.message().to_owned(),
    })?;
    let file_limits = merge(defaults, &file.limits);
    file.plugins
        .into_iter()
        .map(|entry| {
            let mut fs_roots = Vec::new();
            for (roots, writable) in [
                (&entry.read_only_roots, false),
                (&entry.read_write_roots, true),
            ] {
                for root in roots {
                    let path = std::fs::canonicalize(base.join(root))
                        .map_err(|err| format!("root {} is not usable: {err}", root.display()))?;
                    if !path.is_dir() {
                        return Err(format!("root {} is not a directory", root.display()));
                    }
                    fs_roots.push(FsRoot { path, writable });
                }
            }
            let allow_hosts = entry
                .allow_hosts
                .iter()
                .map(|pattern| HostPattern::parse(pattern).map_err(|err| err.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(ConfiguredPlugin {
                file: base.join(&entry.file),
                grants: Grants {
                    fs_roots,
                    allow_hosts,
                    env_vars: entry.env_vars.iter().cloned().collect::<BTreeSet<_>>(),
                },
                limits: merge(
                    file_limits,
                    &LimitSettings {
                        time_limit_ms: entry.time_limit_ms,
                        memory_limit_mib: entry.memory_limit_mib,
                        log_limit_kib: entry.log_limit_kib,
                    },
                ),
            })
        })
        .collect()
}

fn merge(base: Limits, settings: &LimitSettings) -> Limits {
    let time_ms = (settings.time_limit_ms)
        .unwrap_or(u64::try_from(base.time.as_millis()).unwrap_or(u64::MAX));
    let memory_mib =
        (settings.memory_limit_mib).unwrap_or((base.memory_bytes / (1024 * 1024)) as u64);
    let log_kib = (settings.log_limit_kib).unwrap_or((base.log_bytes / 1024) as u64);
    Limits::from_settings(time_ms, memory_mib, log_kib)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::time::Duration;

    #[test]
    fn parses_grants_and_layers_limits() {
        let base = std::env::temp_dir();
        let tmp = std::fs::canonicalize(&base).unwrap();
        let text = r#"
            [limits]
            time-limit-ms = 5000

            [[plugins]]
            file = "a.wasm"
            read-only-roots = ["."]
            allow-hosts = ["example.com:*"]
            env-vars = ["LANG"]
            memory-limit-mib = 64

            [[plugins]]
            file = "/abs/b.wasm"
            time-limit-ms = 10
        "#;
        let plugins = parse(text, &base, Limits::default()).unwrap();
        assert_eq!(plugins.len(), 2);
        assert_eq!(plugins[0].file, base.join("a.wasm"));
        assert_eq!(
            plugins[0].grants.fs_roots,
            vec![FsRoot {
                path: tmp,
                writable: false
            }]
        );
        assert!(plugins[0].grants.allows_host("example.com", 8080, 443));
        assert!(plugins[0].grants.allows_var("LANG"));
        assert_eq!(
            plugins[0].limits,
            Limits {
                time: Duration::from_secs(5),
                memory_bytes: 64 << 20,
                log_bytes: 64 << 10,
            }
        );
        assert_eq!(plugins[1].file, PathBuf::from("/abs/b.wasm"));
        assert_eq!(plugins[1].limits.time, Duration::from_millis(10));
        assert_eq!(plugins[1].limits.memory_bytes, 512 << 20);
        assert_eq!(plugins[1].grants, Grants::default());
    }

    #[test]
    fn refusals_say_why() {
        let base = std::env::temp_dir();
        let unknown = parse(
            "[[plugins]]\nfile = \"a\"\nroots = []\n",
            &base,
            Limits::default(),
        )
        .unwrap_err();
        assert!(unknown.contains("unknown field `roots`"), "{unknown}");
        let missing = parse("[[plugins]]\n", &base, Limits::default()).unwrap_err();
        assert!(missing.contains("missing field `file`"), "{missing}");
        let pattern = parse(
            "[[plugins]]\nfile = \"a\"\nallow-hosts = [\"a b\"]\n",
            &base,
            Limits::default(),
        )
        .unwrap_err();
        assert_eq!(
            pattern,
            "invalid --allow-host pattern `a b`: not a valid host name or IP literal"
        );
        let root = parse(
            "[[plugins]]\nfile = \"a\"\nread-only-roots = [\"/nonexistent/x\"]\n",
            &base,
            Limits::default(),
        )
        .unwrap_err();
        assert!(
            root.starts_with("root /nonexistent/x is not usable"),
            "{root}"
        );
    }
}
