//! `wexec plugin …`: the plugin author's tools — scaffold a crate, inspect a built component.

mod scaffold;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::runtime::inspect::{Inspection, inspect};
use crate::runtime::read_plugin_file;

pub use scaffold::{ScaffoldError, scaffold};

/// `wexec plugin` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum PluginCommand {
    /// Create a plugin crate (built on the wexec-guest SDK) that builds on the first try.
    New {
        /// The plugin's name: `[a-z][a-z0-9-]{0,31}`; its methods are `<name>/<method>`.
        name: String,
        /// Where to create the crate (default: `./<name>`).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The `guest-sdk` directory of a wexec checkout (default: the one this wexec was built
        /// from).
        #[arg(long, value_name = "DIR")]
        sdk: Option<PathBuf>,
    },
    /// Print a plugin's name, version, contract, methods and requested capabilities, and
    /// whether this wexec can load it (exit status 1 if not).
    Inspect {
        /// The component (`.wasm`).
        file: PathBuf,
    },
}

/// Runs a `wexec plugin` subcommand, printing to stdout; errors go to stderr.
pub async fn run(command: PluginCommand) -> ExitCode {
    match command {
        PluginCommand::New { name, dir, sdk } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            match scaffold(&name, &dir, sdk.as_deref()) {
                Ok(()) => {
                    let text = format!(
                        "created plugin `{name}` in {dir}\nbuild it:   cd {dir} && cargo build --release --target wasm32-wasip2\ninspect it: wexec plugin inspect {dir}/target/wasm32-wasip2/release/{file}.wasm\n",
                        dir = dir.display(),
                        file = name.replace('-', "_"),
                    );
                    print(&text);
                    ExitCode::SUCCESS
                }
                Err(err) => {
                    eprintln!("wexec plugin new: {err}");
                    ExitCode::from(2)
                }
            }
        }
        PluginCommand::Inspect { file } => inspect_file(&file).await,
    }
}

async fn inspect_file(file: &Path) -> ExitCode {
    let origin = file.display().to_string();
    let bytes = match read_plugin_file(file) {
        Ok(bytes) => bytes,
        Err(err) => {
            eprintln!("wexec plugin inspect: {err}");
            return ExitCode::from(2);
        }
    };
    let size = bytes.len();
    match inspect(&origin, bytes).await {
        Ok(report) => {
            print(&render(&origin, size, &report));
            if report.verdict.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("wexec plugin inspect: {err}");
            ExitCode::from(2)
        }
    }
}

/// The report as aligned `key: value` lines.
pub fn render(origin: &str, size: usize, report: &Inspection) -> String {
    let mut out = String::new();
    let mut line = |key: &str, value: &str| {
        let _ = writeln!(out, "{key:<13} {value}");
    };
    line("file:", &format!("{origin} ({size} bytes)"));
    if let Some(described) = &report.described {
        line("name:", &described.name);
        line("version:", &described.version);
        line("contract:", &described.contract);
        line("methods:", &described.methods.join(", "));
        let capabilities = if described.capabilities.is_empty() {
            "none".to_owned()
        } else {
            described.capabilities.join(", ")
        };
        line("capabilities:", &capabilities);
        if !described.env_vars.is_empty() {
            line("env vars:", &described.env_vars.join(", "));
        }
        if !described.tools.is_empty() {
            line("mcp tools:", &described.tools.join(", "));
        }
    }
    let wit: Vec<&str> = report.packages.iter().map(String::as_str).collect();
    line(
        "wit:",
        &if wit.is_empty() {
            "none".to_owned()
        } else {
            wit.join(", ")
        },
    );
    match &report.verdict {
        Ok(()) => line(
            "loadable:",
            &format!("yes, by wexec {}", crate::environment::VERSION),
        ),
        Err(reason) => line("loadable:", &format!("no: {reason}")),
    }
    out
}

#[expect(clippy::print_stdout, reason = "the tool's output")]
fn print(text: &str) {
    print!("{text}");
}
