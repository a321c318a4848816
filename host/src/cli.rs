//! The command line (docs/protocol.md §3.1) and its validation into [`Settings`].

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::config::ConfigError;
use crate::grants::{Grants, HostPattern, PatternError};
use crate::process::supervisor::wire::Rlimits;
use crate::runtime::{Limits, LoadError, PluginSpec, read_plugin_file};
use crate::sandbox::{Ceiling, Mode};
use crate::transport::websocket::credential::Credential;

/// Shown after the options.
const EXAMPLES: &str = "\
Examples:
  wexec --fs-root .                       the Codex face on stdio, as Codex launches it
  WEXEC_TOKEN=... wexec --listen ws://0.0.0.0:8765 --fs-root /workspace
                                          the Codex face for remote clients
  wexec mcp --fs-root .                   the MCP face on stdio, as MCP clients launch it
  wexec doctor                            can processes be confined here, and if not, why

Docs: README.md, docs/protocol.md, docs/mcp.md, docs/sandbox.md, docs/plugins.md";

/// wexec: an exec host for AI agents and remote tools.
///
/// A client drives wexec with JSON-RPC (the Codex exec-server protocol) to run processes and to
/// reach files and the network through sandboxed WebAssembly plugins that only act within what
/// the operator granted.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "wexec",
    version,
    about,
    long_about,
    args_conflicts_with_subcommands = true,
    after_help = EXAMPLES
)]
pub struct Options {
    /// What to serve and under which grants and ceiling.
    #[command(flatten)]
    pub serve: ServeOptions,

    /// A tool to run, or the MCP face to serve, instead of the Codex face.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The options of both faces: the listener, the grants, the process ceiling and the limits.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeOptions {
    /// Where to serve: `stdio://` (newline-delimited JSON on stdin/stdout); for the Codex face
    /// `ws://IP:PORT`, for `wexec mcp` `http://IP:PORT/PATH` (Streamable HTTP), each with a
    /// literal IP (port 0 picks a free port; the bound URL is printed as the first stdout line).
    #[arg(
        help_heading = "Serving",
        long,
        value_name = "URL",
        default_value = "stdio://"
    )]
    pub listen: String,

    /// A directory the `fs` plugin may use (repeatable; default: the working directory). Must
    /// exist; canonicalized at startup.
    #[arg(help_heading = "Grants", long = "fs-root", value_name = "DIR")]
    pub fs_roots: Vec<PathBuf>,

    /// A host the `http` plugin may reach (repeatable; default: none): `example.com`,
    /// `example.com:8443`, `example.com:*`, `*.example.com`, or `*` for everything.
    #[arg(help_heading = "Grants", long = "allow-host", value_name = "PATTERN")]
    pub allow_hosts: Vec<String>,

    /// An environment variable of wexec's that `http/request` headers may append with
    /// `valueEnvVar` (repeatable; default: none), e.g. a bearer token kept on the executor.
    #[arg(
        help_heading = "Grants",
        long = "allow-header-env",
        value_name = "NAME"
    )]
    pub allow_header_env: Vec<String>,

    /// Bearer token required on WebSocket upgrades (with `wexec mcp`, on every HTTP request).
    /// Mandatory when listening off loopback.
    /// Prefer the environment variable: command lines are visible to other users.
    #[arg(
        help_heading = "Serving",
        long,
        env = "WEXEC_TOKEN",
        value_name = "T",
        hide_env_values = true
    )]
    pub token: Option<String>,

    /// WebSocket authentication as Codex's exec-server spells it: `capability-token`, with
    /// `--ws-token-file` or `--ws-token-sha256` (the same bearer check as --token).
    #[arg(
        help_heading = "Serving",
        long = "ws-auth",
        value_name = "MODE",
        value_enum
    )]
    pub ws_auth: Option<WsAuth>,

    /// A file holding the capability token (surrounding whitespace ignored).
    #[arg(help_heading = "Serving", long = "ws-token-file", value_name = "PATH")]
    pub ws_token_file: Option<PathBuf>,

    /// The hex SHA-256 digest of the capability token: wexec then never holds the token.
    #[arg(help_heading = "Serving", long = "ws-token-sha256", value_name = "HEX")]
    pub ws_token_sha256: Option<String>,

    /// How long a session whose WebSocket dropped stays resumable, in seconds; its processes
    /// keep running meanwhile and are terminated when it expires.
    #[arg(
        help_heading = "Serving",
        long,
        value_name = "SECONDS",
        default_value_t = 30
    )]
    pub detach_ttl: u64,

    /// Load another WebAssembly plugin (repeatable). It gets no filesystem, network or
    /// environment grants; use --config to grant them.
    #[arg(help_heading = "Plugins", long = "plugin", value_name = "FILE")]
    pub plugins: Vec<PathBuf>,

    /// A configuration file (TOML) listing plugins with their grants and limits; see
    /// docs/plugins.md.
    #[arg(help_heading = "Plugins", long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Execution time allowed per plugin call, in milliseconds (time blocked in host I/O does
    /// not count).
    #[arg(
        help_heading = "Plugins",
        long,
        value_name = "N",
        default_value_t = 30_000
    )]
    pub plugin_time_limit_ms: u64,

    /// Memory allowed per plugin instance, in MiB.
    #[arg(
        help_heading = "Plugins",
        long,
        value_name = "N",
        default_value_t = 512
    )]
    pub plugin_memory_limit_mib: u64,

    /// Log output allowed per plugin call, in KiB; later lines are dropped and counted.
    #[arg(help_heading = "Plugins", long, value_name = "N", default_value_t = 64)]
    pub plugin_log_limit_kib: u64,

    /// WebSocket connections served at once, further upgrades get 503 (with `wexec mcp`, HTTP
    /// connections, further ones are closed).
    #[arg(help_heading = "Limits", long, value_name = "N", default_value_t = crate::limits::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,

    /// Live processes one session may have (started and not yet ended with all they forked;
    /// default 256). Set explicitly, it also caps the session's tasks with a pids cgroup, so a
    /// fork bomb gets EAGAIN (wexec refuses to start if it cannot make one).
    #[arg(help_heading = "Limits", long, value_name = "N")]
    pub session_processes: Option<usize>,

    /// Live processes across every session.
    #[arg(help_heading = "Limits", long, value_name = "N", default_value_t = crate::limits::DEFAULT_MAX_PROCESSES)]
    pub max_processes: usize,

    /// MiB of inbound messages wexec holds at once (read and not yet answered), across
    /// connections; a message that does not fit is refused with an error.
    #[arg(help_heading = "Limits", long, value_name = "N", default_value_t = (crate::limits::DEFAULT_INBOUND_BYTES >> 20) as u64)]
    pub max_inbound_mib: u64,

    /// How long a closed process stays readable with process/read, its id taken, in seconds
    /// (at least 1).
    #[arg(help_heading = "Limits", long, value_name = "SECONDS", default_value_t = crate::limits::DEFAULT_CLOSED_RETENTION.as_secs())]
    pub closed_retention: u64,

    /// The process sandbox ceiling: what any process may do at most (a client's `sandbox` can
    /// only narrow it); default workspace-write. See docs/sandbox.md.
    #[arg(
        help_heading = "Process sandbox",
        long = "sandbox",
        value_name = "MODE",
        value_enum
    )]
    pub sandbox_mode: Option<Mode>,

    /// A directory processes may write under workspace-write (repeatable; default: the fs
    /// roots and the temp dir). Must exist.
    #[arg(
        help_heading = "Process sandbox",
        long = "writable-root",
        value_name = "DIR"
    )]
    pub writable_roots: Vec<PathBuf>,

    /// Confine process reads to these directories (repeatable), the writable roots and the
    /// minimal system set programs need; default: the whole disk is readable.
    #[arg(
        help_heading = "Process sandbox",
        long = "readable-root",
        value_name = "DIR"
    )]
    pub readable_roots: Vec<PathBuf>,

    /// Let processes use the network (default: only AF_UNIX socket pairs).
    #[arg(help_heading = "Process sandbox", long)]
    pub process_network: bool,

    /// Refuse to start when this kernel cannot confine processes as the ceiling needs. By
    /// default wexec then serves everything else (files, fetches, plugins, the MCP file
    /// tools) and refuses each process request that needs confinement with an error naming
    /// what the kernel lacks; it never runs a process less confined than asked.
    #[arg(help_heading = "Process sandbox", long)]
    pub require_sandbox: bool,

    /// Without user namespaces, processes run under the Landlock tier, which cannot give
    /// everything the namespace tier gives; each request that needs what is missing is
    /// refused, unless this accepts the weaker guarantee by name (repeatable or
    /// comma-separated): `carve-outs` leaves read-only paths inside writable roots (.git,
    /// .codex) writable; `signals`, on Landlock below ABI 6, lets processes signal any
    /// process of wexec's user; `metadata` lets them chmod, chown, touch and set xattrs on
    /// any file their user owns (refused otherwise, even in writable roots). Reported in
    /// environment/info and in each process/start result. See docs/sandbox.md, "Tiers".
    #[arg(
        help_heading = "Process sandbox",
        long = "sandbox-accept",
        value_name = "WEAKER",
        value_enum,
        value_delimiter = ','
    )]
    pub sandbox_accept: Vec<crate::sandbox::Weaker>,

    /// Refuse every process/* request.
    #[arg(help_heading = "Process sandbox", long)]
    pub no_processes: bool,

    /// CPU seconds each process (and each descendant) may use (RLIMIT_CPU).
    #[arg(help_heading = "Limits", long, value_name = "N")]
    pub process_cpu_seconds: Option<u64>,

    /// Address space per process, in MiB (RLIMIT_AS).
    #[arg(help_heading = "Limits", long, value_name = "N")]
    pub process_memory_mib: Option<u64>,

    /// Open files per process (RLIMIT_NOFILE).
    #[arg(help_heading = "Limits", long, value_name = "N")]
    pub process_open_files: Option<u64>,

    /// Largest file a process may write, in MiB (RLIMIT_FSIZE).
    #[arg(help_heading = "Limits", long, value_name = "N")]
    pub process_file_size_mib: Option<u64>,

    /// Over stdio, never look for the next request before sleeping. By default, while a client
    /// sends requests quickly, wexec looks for its next one for up to 50 µs (at most half its
    /// time) before it sleeps, which lowers latency for a client on another CPU at some CPU
    /// time's cost (docs/protocol.md §6, "Latency").
    #[arg(help_heading = "Serving", long)]
    pub no_stdio_spin: bool,

    /// Testing aid: behave as on a kernel without the sandbox's mechanisms.
    #[arg(long, hide = true)]
    pub simulate_missing_sandbox: bool,
}

/// Tools run instead of serving, and the MCP face.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Serve the Model Context Protocol (docs/mcp.md) instead of the Codex exec-server
    /// protocol: the same plugins, grants and process sandbox as tools and resources.
    Mcp(Box<ServeOptions>),
    /// Tools for plugin authors: scaffold a plugin crate, inspect a built plugin.
    #[command(subcommand)]
    Plugin(crate::plugin_tool::PluginCommand),
    /// Check what this machine gives the process sandbox, and how to get what is missing
    /// (exit status 0 when confined processes can run, 1 when they cannot).
    Doctor {
        /// The report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which protocol wexec speaks to its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// The Codex exec-server protocol (docs/protocol.md).
    Codex,
    /// The Model Context Protocol (docs/mcp.md).
    Mcp,
}

/// Where wexec serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// One connection on stdin/stdout.
    Stdio,
    /// A WebSocket server on this address (the Codex face).
    WebSocket(SocketAddr),
    /// A Streamable HTTP endpoint: this address, this path (the MCP face).
    Http(SocketAddr, String),
}

impl Listen {
    /// The address a network listener binds, if any.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            Self::Stdio => None,
            Self::WebSocket(addr) | Self::Http(addr, _) => Some(*addr),
        }
    }
}

/// `--ws-auth` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WsAuth {
    /// A bearer token known to the executor (`--ws-token-file`) or by digest
    /// (`--ws-token-sha256`).
    CapabilityToken,
    /// Codex's signed bearer tokens: not supported by wexec (refused at startup).
    SignedBearerToken,
}

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

/// A command line wexec refuses to start with. Messages are docs/protocol.md §3.1's texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupError {
    /// `ws://` with something other than a literal IP and port.
    #[error("invalid websocket --listen URL `{0}`; expected `ws://IP:PORT`")]
    InvalidWebSocketUrl(String),
    /// Neither stdio nor ws.
    #[error("unsupported --listen URL `{0}`; expected `ws://IP:PORT` or `stdio`")]
    UnsupportedListenUrl(String),
    /// `wexec mcp` with an `http://` URL that is not `http://IP:PORT/PATH`.
    #[error("invalid --listen URL `{0}`; expected `http://IP:PORT/PATH` with a literal IP")]
    InvalidHttpUrl(String),
    /// `wexec mcp` with something other than stdio or `http://IP:PORT/PATH`.
    #[error(
        "unsupported --listen URL `{0}` for wexec mcp; expected `http://IP:PORT/PATH` or `stdio`"
    )]
    UnsupportedMcpListenUrl(String),
    /// A non-loopback address without a token.
    #[error("refusing to listen on {0} without a token; set --token or WEXEC_TOKEN")]
    TokenRequired(String),
    /// `--token ""`.
    #[error("--token (or WEXEC_TOKEN) must not be empty")]
    EmptyToken,
    /// Inconsistent `--ws-auth` options (Codex's texts where it has them).
    #[error("{0}")]
    WsAuth(String),
    /// An `--fs-root` that does not exist or is not a directory.
    #[error("--fs-root `{path}` is not usable: {reason}")]
    BadFsRoot {
        /// The root as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// A bad `--allow-host` pattern.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// A bad configuration file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A plugin file that cannot be read.
    #[error(transparent)]
    Plugin(#[from] LoadError),
    /// A limit that cannot work.
    #[error("{0}")]
    Limit(String),
    /// A `--writable-root` or `--readable-root` that is not a directory.
    #[error("{option} `{path}` is not usable: {reason}")]
    BadRoot {
        /// The option.
        option: &'static str,
        /// The root as given.
        path: String,
        /// Why.
        reason: String,
    },
}

impl ServeOptions {
    /// The WebSocket credential: `--token`, or `--ws-auth capability-token` with a token file
    /// or digest (docs/protocol.md §3.1).
    fn credential(&self, listen: &Listen) -> Result<Option<Credential>, StartupError> {
        let refuse = |text: &str| Err(StartupError::WsAuth(text.to_owned()));
        let codex_flags = self.ws_token_file.is_some() || self.ws_token_sha256.is_some();
        let Some(mode) = self.ws_auth else {
            if codex_flags {
                return refuse("websocket auth flags require `--ws-auth capability-token`");
            }
            return match self.token.as_deref() {
                Some("") => Err(StartupError::EmptyToken),
                token => Ok(token.map(|token| Credential::Token(token.to_owned()))),
            };
        };
        if mode == WsAuth::SignedBearerToken {
            return refuse(
                "--ws-auth signed-bearer-token is not supported by wexec; use --ws-auth capability-token",
            );
        }
        if self.token.is_some() {
            return refuse("--token (or WEXEC_TOKEN) and --ws-auth are mutually exclusive");
        }
        if *listen == Listen::Stdio {
            return refuse("WebSocket auth requires a WebSocket listener, not stdio");
        }
        match (&self.ws_token_file, &self.ws_token_sha256) {
            (Some(_), Some(_)) => {
                refuse("`--ws-token-file` and `--ws-token-sha256` are mutually exclusive")
            }
            (None, None) => refuse(
                "`--ws-token-file` or `--ws-token-sha256` is required when `--ws-auth capability-token` is set",
            ),
            (None, Some(hex)) => match Credential::from_hex_digest(hex) {
                Some(credential) => Ok(Some(credential)),
                None => refuse("--ws-token-sha256 must be a 64-character hex SHA-256 digest"),
            },
            (Some(file), None) => {
                let text = std::fs::read_to_string(file).map_err(|err| {
                    StartupError::WsAuth(format!(
                        "failed to read websocket auth secret {}: {err}",
                        file.display()
                    ))
                })?;
                let token = text.trim();
                if token.is_empty() {
                    return Err(StartupError::WsAuth(format!(
                        "websocket auth secret {} must not be empty",
                        file.display()
                    )));
                }
                Ok(Some(Credential::Token(token.to_owned())))
            }
        }
    }

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

    /// The sandbox ceiling: roots must exist; writable roots default to the fs roots and the
    /// temp dir.
    fn ceiling(
        &self,
        fs_roots: &[PathBuf],
        config: &crate::config::SandboxSettings,
    ) -> Result<Ceiling, StartupError> {
        let directories = |option: &'static str, paths: &[PathBuf]| {
            paths
                .iter()
                .map(|path| {
                    let bad = |reason: String| StartupError::BadRoot {
                        option,
                        path: path.display().to_string(),
                        reason,
                    };
                    let canonical =
                        std::fs::canonicalize(path).map_err(|err| bad(err.to_string()))?;
                    if !canonical.is_dir() {
                        return Err(bad("not a directory".to_owned()));
                    }
                    Ok(canonical)
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let given = |cli: &[PathBuf], file: &[PathBuf]| -> Vec<PathBuf> {
            if cli.is_empty() {
                file.to_vec()
            } else {
                cli.to_vec()
            }
        };
        let writable_roots = given(&self.writable_roots, &config.writable_roots);
        let readable_roots = given(&self.readable_roots, &config.readable_roots);
        let writable = if writable_roots.is_empty() {
            let mut writable = fs_roots.to_vec();
            writable.push(crate::sandbox::canonical(&std::env::temp_dir()));
            writable
        } else {
            directories("--writable-root", &writable_roots)?
        };
        let readable = if readable_roots.is_empty() {
            None
        } else {
            Some(directories("--readable-root", &readable_roots)?)
        };
        Ok(Ceiling {
            mode: self
                .sandbox_mode
                .or(config.mode)
                .unwrap_or(Mode::WorkspaceWrite),
            writable,
            readable,
            process_network: self.process_network || config.process_network == Some(true),
            processes: !self.no_processes && config.processes != Some(false),
            // wexec's own files: a process (or a plugin) that rewrote the config or a plugin
            // would choose what the next start or reload runs. The compile cache joins them
            // once the runtime has opened it.
            protected: self
                .own_files()
                .iter()
                .map(|file| crate::sandbox::canonical(file))
                .collect(),
            secrets: self
                .ws_token_file
                .iter()
                .map(|file| crate::sandbox::canonical(file))
                .collect(),
            accepted: {
                let mut accepted = if self.sandbox_accept.is_empty() {
                    config.accept.clone()
                } else {
                    self.sandbox_accept.clone()
                };
                accepted.sort();
                accepted.dedup();
                accepted
            },
        })
    }

    fn canonical_fs_roots(&self) -> Result<Vec<PathBuf>, StartupError> {
        let roots = if self.fs_roots.is_empty() {
            vec![PathBuf::from(".")]
        } else {
            self.fs_roots.clone()
        };
        roots
            .into_iter()
            .map(|root| {
                let bad = |reason: String| StartupError::BadFsRoot {
                    path: root.display().to_string(),
                    reason,
                };
                let canonical = std::fs::canonicalize(&root).map_err(|err| bad(err.to_string()))?;
                if !canonical.is_dir() {
                    return Err(bad("not a directory".to_owned()));
                }
                Ok(canonical)
            })
            .collect()
    }
}

/// Parses `--listen` for `face`: `stdio://` or `stdio`; for the Codex face `ws://IP:PORT`, for
/// the MCP face `http://IP:PORT/PATH` (default path `/mcp`); each with a literal IP (IPv6
/// bracketed).
pub fn parse_listen(url: &str, face: Face) -> Result<Listen, StartupError> {
    if url == "stdio" || url == "stdio://" {
        return Ok(Listen::Stdio);
    }
    let (scheme, unsupported): (_, fn(String) -> StartupError) = match face {
        Face::Codex => ("ws://", StartupError::UnsupportedListenUrl),
        Face::Mcp => ("http://", StartupError::UnsupportedMcpListenUrl),
    };
    let Some(rest) = url.strip_prefix(scheme) else {
        return Err(unsupported(url.to_owned()));
    };
    let (authority, path) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let invalid = || match face {
        Face::Codex => StartupError::InvalidWebSocketUrl(url.to_owned()),
        Face::Mcp => StartupError::InvalidHttpUrl(url.to_owned()),
    };
    let addr: SocketAddr = authority.parse().map_err(|_| invalid())?;
    // `SocketAddr` also parses forms like `[::1%eth0]:80`; insist on a plain literal IP.
    let host = authority.rsplit_once(':').map_or("", |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<IpAddr>().ok() != Some(addr.ip()) {
        return Err(invalid());
    }
    match face {
        Face::Codex if path.is_empty() || path == "/" => Ok(Listen::WebSocket(addr)),
        Face::Codex => Err(invalid()),
        Face::Mcp => {
            let path = if path.is_empty() || path == "/" {
                "/mcp"
            } else {
                path
            };
            if path.contains(['?', '#']) {
                return Err(unsupported(url.to_owned()));
            }
            Ok(Listen::Http(addr, path.to_owned()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn listen_urls() {
        let ok = [
            ("stdio", Listen::Stdio),
            ("stdio://", Listen::Stdio),
            (
                "ws://127.0.0.1:0",
                Listen::WebSocket("127.0.0.1:0".parse().unwrap()),
            ),
            (
                "ws://[::1]:80",
                Listen::WebSocket("[::1]:80".parse().unwrap()),
            ),
            (
                "ws://0.0.0.0:8080/",
                Listen::WebSocket("0.0.0.0:8080".parse().unwrap()),
            ),
        ];
        for (url, listen) in ok {
            assert_eq!(parse_listen(url, Face::Codex), Ok(listen), "{url}");
        }
        for url in [
            "ws://localhost:80",
            "ws://127.0.0.1",
            "ws://127.0.0.1:99999",
            "ws://::1:80",
            "ws://",
        ] {
            assert_eq!(
                parse_listen(url, Face::Codex),
                Err(StartupError::InvalidWebSocketUrl(url.to_owned())),
                "{url}"
            );
        }
        for url in ["http://127.0.0.1:80", "wss://127.0.0.1:1", "", "stdio:/"] {
            assert_eq!(
                parse_listen(url, Face::Codex),
                Err(StartupError::UnsupportedListenUrl(url.to_owned())),
                "{url}"
            );
        }
    }

    #[test]
    fn mcp_listen_urls() {
        let http = |addr: &str, path: &str| Listen::Http(addr.parse().unwrap(), path.to_owned());
        for (url, listen) in [
            ("stdio://", Listen::Stdio),
            ("http://127.0.0.1:0", http("127.0.0.1:0", "/mcp")),
            ("http://127.0.0.1:0/", http("127.0.0.1:0", "/mcp")),
            (
                "http://[::1]:8080/tools/mcp",
                http("[::1]:8080", "/tools/mcp"),
            ),
        ] {
            assert_eq!(parse_listen(url, Face::Mcp), Ok(listen), "{url}");
        }
        for url in [
            "ws://127.0.0.1:0",
            "https://127.0.0.1:1/mcp",
            "http://127.0.0.1:0/a?b",
        ] {
            assert_eq!(
                parse_listen(url, Face::Mcp),
                Err(StartupError::UnsupportedMcpListenUrl(url.to_owned())),
                "{url}"
            );
        }
        assert_eq!(
            parse_listen("http://localhost:80/mcp", Face::Mcp),
            Err(StartupError::InvalidHttpUrl(
                "http://localhost:80/mcp".to_owned()
            ))
        );
        assert!(parse_listen("ws://127.0.0.1:80/path", Face::Codex).is_err());
        let mcp = Options::try_parse_from(["wexec", "mcp", "--fs-root", "/tmp", "--no-processes"]);
        match mcp.unwrap().command {
            Some(Command::Mcp(serve)) => assert!(serve.no_processes),
            other => panic!("{other:?}"),
        }
        assert!(Options::try_parse_from(["wexec", "--no-processes", "mcp"]).is_err());
    }

    fn options(args: &[&str]) -> ServeOptions {
        Options::try_parse_from(std::iter::once("wexec").chain(args.iter().copied()))
            .unwrap()
            .serve
    }

    #[test]
    fn non_loopback_needs_a_token() {
        for url in ["ws://0.0.0.0:80", "ws://192.0.2.1:80", "ws://[::]:80"] {
            let err = options(&["--listen", url])
                .settings(Face::Codex)
                .unwrap_err();
            assert_eq!(err, StartupError::TokenRequired(url.to_owned()));
            assert_eq!(
                err.to_string(),
                format!("refusing to listen on {url} without a token; set --token or WEXEC_TOKEN")
            );
            assert!(
                options(&["--listen", url, "--token", "t"])
                    .settings(Face::Codex)
                    .is_ok()
            );
        }
        for url in ["ws://127.0.0.1:0", "ws://127.8.9.10:0", "ws://[::1]:0"] {
            assert!(
                options(&["--listen", url]).settings(Face::Codex).is_ok(),
                "{url}"
            );
        }
        assert_eq!(
            options(&["--token", ""]).settings(Face::Codex).unwrap_err(),
            StartupError::EmptyToken
        );
    }

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
