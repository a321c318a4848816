//! The command line (docs/protocol.md §3.1): the options as clap parses them, grouped as
//! `wexec --help` shows them. What they mean once checked is [`crate::settings`].

use std::path::PathBuf;

use clap::Parser;

use crate::sandbox::Mode;

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

/// `--ws-auth` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WsAuth {
    /// A bearer token known to the executor (`--ws-token-file`) or by digest
    /// (`--ws-token-sha256`).
    CapabilityToken,
    /// Codex's signed bearer tokens: not supported by wexec (refused at startup).
    SignedBearerToken,
}

/// The serve options of `wexec <args>`, for tests of what they mean; panics when clap refuses
/// them.
#[cfg(test)]
pub fn options(args: &[&str]) -> ServeOptions {
    Options::try_parse_from(std::iter::once("wexec").chain(args.iter().copied()))
        .map(|options| options.serve)
        .expect("options clap accepts")
}
