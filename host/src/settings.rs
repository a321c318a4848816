//! The command line checked into what the server runs with ([`Settings`]): the listener and
//! its credential (`listen.rs`, `credential.rs`), the plugins with their grants, the process
//! sandbox's ceiling (`ceiling.rs`) and the limits. Refusals are [`StartupError`]s with the texts
//! of docs/protocol.md §3.1.

mod ceiling;
mod credential;
mod error;
mod listen;

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::ServeOptions;
use crate::grants::{Grants, HostPattern};
use crate::process::supervisor::wire::Rlimits;
use crate::runtime::{Limits, PluginSpec, read_plugin_file};
use crate::sandbox::Ceiling;
use crate::transport::websocket::credential::Credential;

pub use error::StartupError;
pub use listen::{Face, Listen, parse_listen};

/// The validated command line.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where to serve.
    pub listen: Listen,
    /// Which protocol it speaks.
    pub face: Face,
    /// What WebSocket upgrades and HTTP requests must present, if anything.
    pub credential: Option<Credential>,
    /// Detached-session lifetime.
    pub detach_ttl: Duration,
    /// Canonical `fs` plugin roots.
    pub fs_roots: Vec<PathBuf>,
    /// `http` plugin targets.
    pub allow_hosts: Vec<HostPattern>,
    /// Plugins to load, in order.
    pub plugins: Vec<PluginSpec>,
    /// With `--config`: how to rebuild the plugin list when files change or on SIGHUP.
    pub reload: Option<ReloadSource>,
    /// What this wexec serves at most.
    pub limits: crate::limits::ServerLimits,
    /// The process sandbox ceiling.
    pub ceiling: Ceiling,
    /// Per-process kernel limits.
    pub process_limits: Rlimits,
    /// With `--session-processes` given: the tasks each session's pids cgroup holds.
    pub session_tasks: Option<usize>,
    /// Pretend the kernel cannot confine processes (tests).
    pub simulate_missing_sandbox: bool,
    /// Stop before serving when the kernel cannot confine processes (`--require-sandbox`).
    pub require_sandbox: bool,
    /// Over stdio, look for a quick client's next request before sleeping (not
    /// `--no-stdio-spin`).
    pub stdio_spin: bool,
    /// This user's state directory (the compile cache's key, the placeholder logs), when it
    /// can be used.
    pub state: Option<std::sync::Arc<crate::state::State>>,
}

/// What a reload re-reads: the config file and every plugin file, as at startup.
#[derive(Debug, Clone)]
pub struct ReloadSource {
    options: ServeOptions,
    fs_roots: Vec<PathBuf>,
    allow_hosts: Vec<HostPattern>,
}

impl ReloadSource {
    /// The plugin list as the files say now.
    pub fn specs(&self) -> Result<Vec<PluginSpec>, StartupError> {
        self.options.plugin_specs(&self.fs_roots, &self.allow_hosts)
    }

    /// Files whose change triggers a reload: the config, the plugins it lists (as it lists
    /// them now), and `--plugin` files.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        self.options.own_files()
    }
}

impl ServeOptions {
    /// Validates the command line of `face`.
    pub fn settings(&self, face: Face) -> Result<Settings, StartupError> {
        let listen = parse_listen(&self.listen, face)?;
        let credential = self.credential(&listen)?;
        if let Some(addr) = listen.addr()
            && credential.is_none()
            && !addr.ip().is_loopback()
        {
            return Err(StartupError::TokenRequired(self.listen.clone()));
        }
        let allow_hosts = self
            .allow_hosts
            .iter()
            .map(|pattern| HostPattern::parse(pattern))
            .collect::<Result<Vec<_>, _>>()?;
        let fs_roots = self.canonical_fs_roots()?;
        let plugins = self.plugin_specs(&fs_roots, &allow_hosts)?;
        let reload = self.config.as_ref().map(|_| ReloadSource {
            options: self.clone(),
            fs_roots: fs_roots.clone(),
            allow_hosts: allow_hosts.clone(),
        });
        let inbound_bytes =
            usize::try_from(self.max_inbound_mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX);
        // One message of the largest size must always be admissible.
        if inbound_bytes < crate::rpc::MAX_MESSAGE_BYTES {
            return Err(StartupError::Limit(format!(
                "--max-inbound-mib {} is below the 64 MiB a single message may have",
                self.max_inbound_mib
            )));
        }
        for (option, value) in [
            ("--max-connections", self.max_connections),
            (
                "--session-processes",
                self.session_processes
                    .unwrap_or(crate::limits::DEFAULT_SESSION_PROCESSES),
            ),
            ("--max-processes", self.max_processes),
        ] {
            if value == 0 {
                return Err(StartupError::Limit(format!("{option} must be at least 1")));
            }
        }
        // Without a moment's retention, a client told of a close could not read the exit.
        if self.closed_retention == 0 {
            return Err(StartupError::Limit(
                "--closed-retention must be at least 1".to_owned(),
            ));
        }
        let crate::config::HostSettings {
            sandbox,
            process_limits: limits,
            http: _,
        } = match &self.config {
            Some(config) => crate::config::load_host_settings(config)?,
            None => Default::default(),
        };
        let mut ceiling = self.ceiling(&fs_roots, &sandbox)?;
        let state = crate::state::State::open_default().map(std::sync::Arc::new);
        // Its key must stay secret from every plugin and every confined process.
        ceiling
            .secrets
            .extend(state.iter().map(|state| state.dir().to_path_buf()));
        let mib = |value: Option<u64>| value.map(|mib| mib.saturating_mul(1024 * 1024));
        let cpu_seconds = self.process_cpu_seconds.or(limits.cpu_seconds);
        let memory_mib = self.process_memory_mib.or(limits.memory_mib);
        let open_files = self.process_open_files.or(limits.open_files);
        let file_size_mib = self.process_file_size_mib.or(limits.file_size_mib);
        let process_limits = Rlimits {
            cpu_seconds,
            address_space: mib(memory_mib),
            open_files,
            file_size: mib(file_size_mib),
        };
        for (option, value) in [
            ("--process-cpu-seconds", cpu_seconds),
            ("--process-memory-mib", memory_mib),
            ("--process-open-files", open_files),
            ("--process-file-size-mib", file_size_mib),
        ] {
            if value == Some(0) {
                return Err(StartupError::Limit(format!("{option} must be at least 1")));
            }
        }
        Ok(Settings {
            ceiling,
            process_limits,
            session_tasks: self.session_processes,
            simulate_missing_sandbox: self.simulate_missing_sandbox,
            require_sandbox: self.require_sandbox,
            stdio_spin: !self.no_stdio_spin,
            state,
            listen,
            face,
            credential,
            detach_ttl: Duration::from_secs(self.detach_ttl),
            fs_roots,
            allow_hosts,
            plugins,
            reload,
            limits: crate::limits::ServerLimits {
                max_connections: self.max_connections,
                session_processes: self
                    .session_processes
                    .unwrap_or(crate::limits::DEFAULT_SESSION_PROCESSES),
                max_processes: self.max_processes,
                inbound_bytes,
                closed_retention: Duration::from_secs(self.closed_retention),
            },
        })
    }

    /// The files wexec's behaviour comes from: the config, the plugins it lists (as it lists
    /// them now), and `--plugin` files.
    fn own_files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self.config.iter().cloned().collect();
        files.extend(self.plugins.iter().cloned());
        if let Some(config) = &self.config {
            let defaults = Limits::default();
            if let Ok(plugins) = crate::config::load(config, defaults) {
                files.extend(plugins.into_iter().map(|plugin| plugin.file));
            }
        }
        files
    }

    /// The bundled plugins, `--plugin` files (no grants), then `--config` plugins.
    fn plugin_specs(
        &self,
        fs_roots: &[PathBuf],
        allow_hosts: &[HostPattern],
    ) -> Result<Vec<PluginSpec>, StartupError> {
        let defaults = Limits::from_settings(
            self.plugin_time_limit_ms,
            self.plugin_memory_limit_mib,
            self.plugin_log_limit_kib,
        );
        let mut header_env: std::collections::BTreeSet<String> =
            self.allow_header_env.iter().cloned().collect();
        if let Some(config) = &self.config {
            header_env.extend(crate::config::load_host_settings(config)?.http.header_env);
        }
        let mut specs = crate::builtin::specs(fs_roots, allow_hosts, &header_env, defaults);
        for file in &self.plugins {
            specs.push(PluginSpec {
                origin: file.display().to_string(),
                bytes: read_plugin_file(file)?,
                grants: Grants::default(),
                limits: defaults,
                builtin: false,
                sha256: None,
            });
        }
        if let Some(config) = &self.config {
            for plugin in crate::config::load(config, defaults)? {
                specs.push(PluginSpec {
                    origin: plugin.file.display().to_string(),
                    bytes: read_plugin_file(&plugin.file)?,
                    grants: plugin.grants,
                    limits: plugin.limits,
                    builtin: false,
                    sha256: None,
                });
            }
        }
        Ok(specs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::options;
    use pretty_assertions::assert_eq;

    #[test]
    fn closed_retention_is_whole_seconds_from_one() {
        let retention = |args: &[&str]| {
            options(args)
                .settings(Face::Codex)
                .map(|settings| settings.limits.closed_retention)
        };
        assert_eq!(retention(&[]), Ok(Duration::from_secs(30)));
        assert_eq!(
            retention(&["--closed-retention", "2"]),
            Ok(Duration::from_secs(2))
        );
        assert_eq!(
            retention(&["--closed-retention", "0"]),
            Err(StartupError::Limit(
                "--closed-retention must be at least 1".to_owned()
            ))
        );
    }

    #[test]
    fn fs_roots_must_exist_and_are_canonicalized() {
        let settings = options(&["--fs-root", "/tmp/../tmp"])
            .settings(Face::Codex)
            .unwrap();
        assert_eq!(
            settings.fs_roots,
            vec![std::fs::canonicalize("/tmp").unwrap()]
        );
        assert!(matches!(
            options(&["--fs-root", "/nonexistent/wexec"]).settings(Face::Codex),
            Err(StartupError::BadFsRoot { .. })
        ));
        assert!(matches!(
            options(&["--fs-root", "/etc/passwd"]).settings(Face::Codex),
            Err(StartupError::BadFsRoot { .. })
        ));
    }
}
