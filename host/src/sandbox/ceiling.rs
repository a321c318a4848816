//! The operator ceiling (`--sandbox` and friends, docs/protocol.md §3.1 and §7.3): the most any
//! process may do. A client's request can only narrow it.

use std::path::PathBuf;

use super::rules::{Level, Rules};

/// `--sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Processes write nothing.
    ReadOnly,
    /// Processes write only in the writable roots.
    WorkspaceWrite,
    /// No confinement beyond a client's request.
    DangerFullAccess,
}

impl Mode {
    /// As spelled on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::ReadOnly => "read-only",
            Self::WorkspaceWrite => "workspace-write",
            Self::DangerFullAccess => "danger-full-access",
        }
    }
}

/// The validated ceiling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling {
    /// The mode.
    pub mode: Mode,
    /// Canonical writable roots (`workspace-write`).
    pub writable: Vec<PathBuf>,
    /// Canonical readable roots; `None`: the whole disk.
    pub readable: Option<Vec<PathBuf>>,
    /// `--process-network`.
    pub process_network: bool,
    /// `false` with `--no-processes`.
    pub processes: bool,
    /// Canonical paths no confined process may write whatever the roots and the request say:
    /// wexec's own state — its compile cache (native code wexec runs), its config file and the
    /// plugin files it loads (docs/sandbox.md, "What is protected").
    pub protected: Vec<PathBuf>,
    /// Canonical paths no confined process may read either: the WebSocket token file.
    pub secrets: Vec<PathBuf>,
    /// Weaker guarantees the operator accepts under the Landlock tier (`--sandbox-accept`).
    pub accepted: Vec<super::landlock::Weaker>,
}

impl Default for Ceiling {
    fn default() -> Self {
        Self {
            mode: Mode::WorkspaceWrite,
            writable: vec![super::canonical(&std::env::temp_dir())],
            readable: None,
            process_network: false,
            processes: true,
            protected: Vec::new(),
            secrets: Vec::new(),
            accepted: Vec::new(),
        }
    }
}

impl Ceiling {
    /// Whether processes may use the network.
    pub fn network(&self) -> bool {
        self.mode == Mode::DangerFullAccess || self.process_network
    }

    /// The ceiling as entries.
    pub fn rules(&self) -> Rules {
        if self.mode == Mode::DangerFullAccess {
            return Rules::full();
        }
        let mut rules = Rules::default();
        match &self.readable {
            None => rules.add(PathBuf::from("/"), Level::Read),
            Some(readable) => {
                for path in readable
                    .iter()
                    .cloned()
                    .chain(super::minimal::paths())
                    .chain(self.writable.iter().cloned())
                {
                    rules.add(path, Level::Read);
                }
            }
        }
        if self.mode == Mode::WorkspaceWrite {
            for path in &self.writable {
                rules.add(path.clone(), Level::Write);
            }
        }
        rules
    }
}
