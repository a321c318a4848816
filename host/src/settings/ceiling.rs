//! The process sandbox's ceiling from `--sandbox`, `--writable-root`, `--readable-root`,
//! `--process-network` and the config's `[sandbox]` (docs/sandbox.md), and the canonical
//! `--fs-root`s it starts from.

use std::path::PathBuf;

use super::StartupError;
use crate::cli::ServeOptions;
use crate::sandbox::{Ceiling, Mode};

impl ServeOptions {
    /// The sandbox ceiling: roots must exist; writable roots default to the fs roots and the
    /// temp dir.
    pub(super) fn ceiling(
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

    pub(super) fn canonical_fs_roots(&self) -> Result<Vec<PathBuf>, StartupError> {
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
