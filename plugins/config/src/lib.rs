//! The bundled `config` plugin: `environmentConfig/read` (docs/protocol.md §7.5), the executor's
//! Codex config layers as Codex's server reads them, through read-only filesystem grants
//! (`/etc/codex`, the Codex home, the fs roots): a file outside them reads as absent.

mod filter;

use std::path::{Path, PathBuf};

use wexec_guest::protocol::{
    self, ConfigLayer, ConfigLayers, ENVIRONMENT_CONFIG_READ, EnvironmentConfigReadParams,
    EnvironmentConfigReadResponse,
};
use wexec_guest::{Call, Capability, Info, Plugin, Response, RpcError, env, fs, path as uri};

const SYSTEM_DIR: &str = "/etc/codex";

struct Config;

impl Plugin for Config {
    fn info() -> Info {
        Info::new("config", env!("CARGO_PKG_VERSION"))
            .method(ENVIRONMENT_CONFIG_READ)
            .capability(Capability::Filesystem)
            .capability(Capability::EnvironmentVars)
            .env_var("CODEX_HOME")
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        if call.method() != ENVIRONMENT_CONFIG_READ {
            return Err(RpcError::method_not_found(call.method()));
        }
        Response::json(&read(call.params()?)?)
    }
}

fn read(params: EnvironmentConfigReadParams) -> Result<EnvironmentConfigReadResponse, RpcError> {
    if params.config_paths.is_empty() && params.requirements_paths.is_empty() {
        return Err(RpcError::invalid_params(
            "at least one config or requirements path is required",
        ));
    }
    let mut all_paths = params.config_paths.iter().chain(&params.requirements_paths);
    if all_paths.any(Vec::is_empty) {
        return Err(RpcError::invalid_params(
            "TOML paths must contain at least one key segment",
        ));
    }
    let cwd = PathBuf::from(uri::decode(&params.cwd)?);
    let facts = env::host_info();
    let home = facts
        .user_home_dir
        .as_deref()
        .and_then(|home| uri::decode(home).ok());
    let codex_home = protocol::codex_home(
        env::var("CODEX_HOME").ok().flatten().as_deref(),
        home.as_deref(),
    );

    let mut config = Vec::new();
    let mut system_layers = 0;
    let system = Path::new(SYSTEM_DIR).join("config.toml");
    if let Some(table) = load(&system, Style::Located)? {
        system_layers = 1;
        config.push(Layer::new(
            format!("system ({})", system.display()),
            &system,
            table,
        ));
    }
    if let Some(codex_home) = &codex_home {
        let user = codex_home.join("config.toml");
        if let Some(table) = load(&user, Style::Located)? {
            config.push(Layer::new(
                format!("user ({})", user.display()),
                &user,
                table,
            ));
        }
    }
    // The user layer, when there is one, is the last so far; it says which projects are trusted.
    let user_table = config
        .last()
        .filter(|layer| layer.source.starts_with("user ("));
    let project_dirs = trusted_project_dirs(&cwd, user_table.map(|layer| &layer.table));
    for dir in project_dirs {
        let file = dir.join(".codex").join("config.toml");
        if let Some(table) = load(&file, Style::Project)? {
            config.push(Layer::new(
                format!("project ({})", file.display()),
                &file,
                table,
            ));
        }
    }
    let requirements_file = Path::new(SYSTEM_DIR).join("requirements.toml");
    let requirements = match load(&requirements_file, Style::Located)? {
        Some(table) => vec![Layer::new(
            requirements_file.display().to_string(),
            &requirements_file,
            table,
        )],
        None => Vec::new(),
    };
    Ok(EnvironmentConfigReadResponse {
        user_home_dir: facts.user_home_dir,
        codex_home_dir: codex_home.map(|dir| uri::encode(&dir.to_string_lossy())),
        hostname: env::hostname(),
        config: filtered(config, &params.config_paths, system_layers)?,
        requirements: filtered(requirements, &params.requirements_paths, 1)?,
    })
}

/// A config file, parsed.
struct Layer {
    source: String,
    base_dir: String,
    table: toml::Table,
}

impl Layer {
    fn new(source: String, file: &Path, table: toml::Table) -> Self {
        let dir = file.parent().unwrap_or(Path::new("/"));
        Self {
            source,
            base_dir: uri::encode(&dir.to_string_lossy()),
            table,
        }
    }
}

/// The layers holding a requested key, each cut down to the requested keys;
/// `cloudInsertionIndex` counts the system layers kept (the first `system` ones are).
fn filtered(
    layers: Vec<Layer>,
    paths: &[Vec<String>],
    system: usize,
) -> Result<ConfigLayers, RpcError> {
    let mut kept = Vec::new();
    let mut system_kept = 0;
    for (index, layer) in layers.into_iter().enumerate() {
        let selected = filter::select(&layer.table, paths);
        if selected.is_empty() {
            continue;
        }
        let toml = toml::to_string(&selected).map_err(|err| {
            RpcError::internal_error(format!("failed to load executor-local config: {err}"))
        })?;
        if index < system {
            system_kept += 1;
        }
        kept.push(ConfigLayer {
            source: layer.source,
            base_dir: layer.base_dir,
            toml,
        });
    }
    Ok(ConfigLayers {
        layers: kept,
        cloud_insertion_index: system_kept,
    })
}

/// How a parse failure is reported, as Codex's server words it for each kind of layer.
#[derive(Clone, Copy)]
enum Style {
    /// `<file>:<line>:<column>: <message>` (system, user, requirements).
    Located,
    /// `Error parsing project config file <file>: <toml's report>`.
    Project,
}

/// The file parsed; `None` when it is absent, or outside what this plugin was granted (which
/// it cannot tell from absent, by design).
fn load(file: &Path, style: Style) -> Result<Option<toml::Table>, RpcError> {
    let failed = |detail: String| {
        RpcError::internal_error(format!("failed to load executor-local config: {detail}"))
    };
    let bytes = match fs::read_file(&file.to_string_lossy()) {
        Ok(bytes) => bytes,
        Err(error)
            if matches!(
                error.kind,
                fs::ErrorKind::NotFound | fs::ErrorKind::OutsideRoots | fs::ErrorKind::Denied
            ) =>
        {
            return Ok(None);
        }
        Err(error) => return Err(failed(format!("{}: {}", file.display(), error.message))),
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let kind = match style {
                Style::Project => "project config",
                Style::Located => "config",
            };
            let err = err.utf8_error();
            return Err(failed(format!(
                "Failed to read {kind} file {}: {err}",
                file.display()
            )));
        }
    };
    match text.parse::<toml::Table>() {
        Ok(table) => Ok(Some(table)),
        Err(err) => Err(failed(match style {
            Style::Project => format!(
                "Error parsing project config file {}: {err}",
                file.display()
            ),
            Style::Located => {
                let (line, column) = err
                    .span()
                    .map_or((1, 1), |span| line_and_column(&text, span.start));
                format!(
                    "{}:{line}:{column}: {}",
                    file.display(),
                    err.message().trim_end()
                )
            }
        })),
    }
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |last| last.chars().count())
        + 1;
    (line, column)
}

/// The directories whose `.codex/config.toml` count, from the project root down to `cwd`:
/// the root is the nearest ancestor of `cwd` with a `.git` (a file, or a directory holding
/// `HEAD`), else `cwd`; the user layer must mark `cwd`, else the root, `trusted` (the first of
/// the two it names decides), and only directories at or below the one it marks count.
fn trusted_project_dirs(cwd: &Path, user: Option<&toml::Table>) -> Vec<PathBuf> {
    let root = cwd
        .ancestors()
        .find(|dir| is_repository(dir))
        .unwrap_or(cwd);
    let projects = user
        .and_then(|user| user.get("projects"))
        .and_then(toml::Value::as_table);
    let Some(projects) = projects else {
        return Vec::new();
    };
    let decided = [cwd, root].into_iter().find_map(|dir| {
        let entry = projects.get(dir.to_str()?)?;
        let trusted = entry.get("trust_level").and_then(toml::Value::as_str) == Some("trusted");
        Some((dir, trusted))
    });
    let Some((trusted_dir, true)) = decided else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = cwd
        .ancestors()
        .take_while(|dir| dir.starts_with(root))
        .filter(|dir| dir.starts_with(trusted_dir))
        .map(Path::to_path_buf)
        .collect();
    dirs.reverse();
    dirs
}

/// Whether `dir` holds a git repository marker Codex's server recognizes.
fn is_repository(dir: &Path) -> bool {
    let git = dir.join(".git");
    match fs::metadata(&git.to_string_lossy(), true) {
        Ok(meta) if meta.is_file => true,
        Ok(meta) if meta.is_directory => {
            fs::metadata(&git.join("HEAD").to_string_lossy(), true).is_ok_and(|head| head.is_file)
        }
        _ => false,
    }
}

wexec_guest::export_plugin!(Config);
