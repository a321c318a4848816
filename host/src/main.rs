//! The `wexec` command: parse the command line, set up logging, run.

use std::io::IsTerminal;
use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of glibc's allocator: replies are built on one thread and freed on another
/// (a runtime worker builds, the stdout writer frees), which glibc serializes on an arena lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let options = wexec::Options::parse();
    // Logs go to stderr: stdout carries protocol lines only. By default an operator sees what
    // went wrong, and that a plugin reload took effect (a reload that failed is an error).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,wexec::server::reload=info,rmcp=error")
            }),
        )
        .init();
    let (serve, face) = match options.command {
        Some(wexec::Command::Plugin(command)) => return plugin_tool(command),
        Some(wexec::Command::Doctor { json }) => return doctor(json),
        Some(wexec::Command::Mcp(serve)) => (*serve, wexec::Face::Mcp),
        None => (options.serve, wexec::Face::Codex),
    };
    let settings = match serve.settings(face) {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("wexec: {err}");
            return ExitCode::from(2);
        }
    };
    // Before the runtime starts any thread.
    if let Err(err) = wexec::prepare() {
        eprintln!("wexec: {err}");
        return ExitCode::FAILURE;
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(wexec::run(settings));
    // A blocking read of stdin may still be parked in the runtime's thread pool; do not wait
    // for it.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("wexec: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `wexec plugin ...`.
fn plugin_tool(command: wexec::plugin_tool::PluginCommand) -> ExitCode {
    match runtime() {
        Ok(runtime) => runtime.block_on(wexec::plugin_tool::run(command)),
        Err(code) => code,
    }
}

/// The async runtime, or the exit status after saying why there is none.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| {
            eprintln!("wexec: cannot start the async runtime: {err}");
            ExitCode::FAILURE
        })
}

/// `wexec doctor`.
fn doctor(json: bool) -> ExitCode {
    // The probe goes through the process supervisor, forked before any thread.
    if let Err(err) = wexec::prepare() {
        eprintln!("wexec: {err}");
        return ExitCode::FAILURE;
    }
    let report = match runtime() {
        Ok(runtime) => runtime.block_on(wexec::doctor::examine()),
        Err(code) => return code,
    };
    let printed = if json {
        serde_json::to_string_pretty(&report).unwrap_or_default()
    } else {
        wexec::doctor::text(&report)
    };
    // A reader that went away (`| head`) is no failure of the check.
    let _ = writeln!(std::io::stdout().lock(), "{}", printed.trim_end());
    if report.confined_processes {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
