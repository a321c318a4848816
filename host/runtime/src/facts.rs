//! The facts about this host that clients see in `environmentInfo` (docs/protocol.md §7.4):
//! gathered once, in one place. The `env` plugin reaches them through the environment capability
//! and builds the object clients see (capabilities and plugin list included).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use wexec_protocol::path_uri;

/// wexec's version, as reported in `executorVersion` and `wexec.version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `environmentInfo.providerId` (docs/protocol.md §7.4): `sha256:` and the hex SHA-256 of
/// `wexec <version> <arch>-<os>`, so it is opaque and changes with the build.
pub fn provider_id() -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!(
        "wexec {VERSION} {}-{}",
        std::env::consts::ARCH,
        std::env::consts::OS
    ));
    let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// Shell used when `$SHELL` is unset or unusable.
const FALLBACK_SHELL: &str = "/bin/sh";

/// Temporary directory used when `TMPDIR` is unset.
const FALLBACK_TEMP_DIR: &str = "/tmp";

/// What wexec knows about the machine it runs on, read once at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentFacts {
    /// The user's shell: `$SHELL`, else the login shell, if an existing absolute executable;
    /// else `/bin/sh`.
    pub shell: PathBuf,
    /// wexec's working directory; `None` if it cannot be read (deleted, for example).
    pub cwd: Option<PathBuf>,
    /// `HOME` if set and absolute, else the account's home.
    pub home: Option<PathBuf>,
    /// `TMPDIR` resolved against the working directory, if set.
    pub tmpdir: Option<PathBuf>,
    /// `linux` or `macos`.
    pub platform_os: &'static str,
}

impl EnvironmentFacts {
    /// Reads the facts from this process's environment, and its user's entry in `/etc/passwd`
    /// where a variable is missing.
    pub fn gather() -> Self {
        let uid = rustix::process::getuid().as_raw();
        let account = std::fs::read_to_string("/etc/passwd")
            .ok()
            .and_then(|passwd| Account::find(&passwd, uid));
        Self::from_sources(
            |name| std::env::var_os(name).map(PathBuf::from),
            std::env::current_dir().ok(),
            account,
        )
    }

    /// Builds the facts from a variable lookup, so tests need not touch the real environment.
    pub fn from_vars(var: impl Fn(&str) -> Option<PathBuf>, cwd: Option<PathBuf>) -> Self {
        Self::from_sources(var, cwd, None)
    }

    /// Builds the facts from a variable lookup and the user's account: the shell is `$SHELL`,
    /// else the account's login shell, each only if it is an existing absolute executable,
    /// else `/bin/sh`; the home is `HOME`, else the account's (docs/protocol.md §7.4).
    fn from_sources(
        var: impl Fn(&str) -> Option<PathBuf>,
        cwd: Option<PathBuf>,
        account: Option<Account>,
    ) -> Self {
        let (account_home, account_shell) = account.map_or((None, None), |account| {
            (Some(account.home), Some(account.shell))
        });
        let shell = var("SHELL")
            .into_iter()
            .chain(account_shell)
            .find(|shell| is_absolute_executable(shell))
            .unwrap_or_else(|| PathBuf::from(FALLBACK_SHELL));
        let home = var("HOME")
            .into_iter()
            .chain(account_home)
            .find(|home| home.is_absolute());
        let tmpdir = var("TMPDIR")
            .filter(|dir| !dir.as_os_str().is_empty())
            .and_then(|dir| match (dir.is_absolute(), &cwd) {
                (true, _) => Some(dir),
                (false, Some(cwd)) => Some(cwd.join(dir)),
                (false, None) => None,
            });
        Self {
            shell,
            cwd,
            home,
            tmpdir,
            platform_os: if cfg!(target_os = "macos") {
                "macos"
            } else {
                "linux"
            },
        }
    }

    /// The temporary directory children should use: `TMPDIR`, else `/tmp`.
    pub fn temp_dir(&self) -> PathBuf {
        self.tmpdir
            .clone()
            .unwrap_or_else(|| PathBuf::from(FALLBACK_TEMP_DIR))
    }

    /// The facts as reported: paths as `file://` URIs (the shell's path native), unknowns
    /// absent.
    pub fn reported(&self) -> ReportedFacts {
        let shell_name = self
            .shell
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        ReportedFacts {
            shell: ReportedShell {
                name: shell_name,
                path: self.shell.to_string_lossy().into_owned(),
            },
            executor_version: VERSION.to_owned(),
            cwd: self.cwd.as_deref().map(path_uri::to_uri),
            user_home_dir: self.home.as_deref().map(path_uri::to_uri),
            platform_os: self.platform_os.to_owned(),
            temporary_directories: self
                .tmpdir
                .as_deref()
                .map(|dir| vec![path_uri::to_uri(dir)]),
            temp_dir: path_uri::to_uri(&self.temp_dir()),
        }
    }
}

/// The host facts as `environmentInfo` reports them (docs/protocol.md §7.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReportedFacts {
    /// The user's shell.
    pub shell: ReportedShell,
    /// wexec's version.
    pub executor_version: String,
    /// PathUri of wexec's working directory; `None` if unknown.
    pub cwd: Option<String>,
    /// PathUri of `HOME`, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_home_dir: Option<String>,
    /// `linux` or `macos`.
    pub platform_os: String,
    /// `[TMPDIR]` as PathUris, if `TMPDIR` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporary_directories: Option<Vec<String>>,
    /// PathUri of `TMPDIR`, else of `/tmp`.
    pub temp_dir: String,
}

/// The `shell` member of [`ReportedFacts`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportedShell {
    /// File name of the shell, e.g. `bash`.
    pub name: String,
    /// Native absolute path of the shell.
    pub path: String,
}

/// A user's home and login shell, from a `passwd` line (`name:pw:uid:gid:gecos:home:shell`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Account {
    home: PathBuf,
    shell: PathBuf,
}

impl Account {
    /// The entry of `uid` in the text of `/etc/passwd`.
    fn find(passwd: &str, uid: u32) -> Option<Self> {
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let [_, _, entry_uid, _, _, home, shell] = fields.as_slice() else {
                return None;
            };
            (entry_uid.parse::<u32>().ok()? == uid).then(|| Self {
                home: PathBuf::from(home),
                shell: PathBuf::from(shell),
            })
        })
    }
}

fn is_absolute_executable(path: &Path) -> bool {
    path.is_absolute()
        && std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::HashMap;

    fn facts(vars: &[(&str, &str)], cwd: Option<&str>) -> EnvironmentFacts {
        let vars: HashMap<String, PathBuf> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), PathBuf::from(v)))
            .collect();
        EnvironmentFacts::from_vars(|name| vars.get(name).cloned(), cwd.map(PathBuf::from))
    }

    #[test]
    fn shell_falls_back_unless_an_existing_absolute_executable() {
        assert_eq!(
            facts(&[("SHELL", "/bin/sh")], None).shell,
            PathBuf::from("/bin/sh")
        );
        for shell in ["sh", "/nonexistent/zsh", "/etc/passwd", "/tmp"] {
            assert_eq!(
                facts(&[("SHELL", shell)], None).shell,
                PathBuf::from(FALLBACK_SHELL),
                "{shell}"
            );
        }
    }

    #[test]
    fn the_account_fills_in_a_missing_shell_and_home() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000::/home/alice:/bin/sh\nbroken line\n";
        let alice = Account::find(passwd, 1000).expect("alice");
        assert_eq!(
            alice,
            Account {
                home: "/home/alice".into(),
                shell: "/bin/sh".into()
            }
        );
        assert_eq!(Account::find(passwd, 7), None);
        let from_account = EnvironmentFacts::from_sources(|_| None, None, Some(alice.clone()));
        assert_eq!(from_account.shell, PathBuf::from("/bin/sh"));
        assert_eq!(from_account.home, Some(PathBuf::from("/home/alice")));
        let vars: HashMap<&str, PathBuf> =
            HashMap::from([("HOME", "/h".into()), ("SHELL", "/nonexistent/zsh".into())]);
        let mixed = EnvironmentFacts::from_sources(
            |name| vars.get(name).cloned(),
            None,
            Some(Account {
                home: "/home/alice".into(),
                shell: "/nonexistent/fish".into(),
            }),
        );
        assert_eq!(mixed.home, Some(PathBuf::from("/h")), "HOME wins");
        assert_eq!(
            mixed.shell,
            PathBuf::from(FALLBACK_SHELL),
            "neither shell exists"
        );
    }

    #[test]
    fn info_reports_paths_as_uris_and_omits_unknowns() {
        let info = facts(
            &[
                ("HOME", "/home/a b"),
                ("TMPDIR", "tmp"),
                ("SHELL", "/bin/sh"),
            ],
            Some("/work"),
        )
        .reported();
        let json = serde_json::to_value(&info).unwrap();
        assert_eq!(
            json["shell"],
            serde_json::json!({"name": "sh", "path": "/bin/sh"})
        );
        assert_eq!(json["cwd"], "file:///work");
        assert_eq!(json["userHomeDir"], "file:///home/a%20b");
        assert_eq!(
            json["temporaryDirectories"],
            serde_json::json!(["file:///work/tmp"])
        );
        assert_eq!(json["tempDir"], "file:///work/tmp");

        let bare = serde_json::to_value(facts(&[], None).reported()).unwrap();
        assert_eq!(bare["cwd"], serde_json::Value::Null);
        assert!(bare.get("userHomeDir").is_none());
        assert!(bare.get("temporaryDirectories").is_none());
        assert_eq!(bare["tempDir"], "file:///tmp");
    }
}

/// The process sandbox, as the `environment` capability reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxFacts {
    /// `namespaces`, `landlock` or `none`.
    pub tier: String,
    /// Why the namespace tier is not in force, when it is not.
    pub namespaces_missing: Option<String>,
    /// Weaker guarantees the operator accepted.
    pub accepted: Vec<String>,
}

/// Where [`sandbox`] gets its answer: the host's, which may wait for its sandbox probe.
pub type SandboxSource = Box<
    dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Option<SandboxFacts>> + Send>> + Send + Sync,
>;

static SANDBOX: std::sync::OnceLock<SandboxSource> = std::sync::OnceLock::new();

/// Sets where [`sandbox`] gets its answer (once; the runtime itself runs no processes).
pub fn report_sandbox_with(source: SandboxSource) {
    let _ = SANDBOX.set(source);
}

/// The process sandbox; `None` when no source was set or it cannot say.
pub async fn sandbox() -> Option<SandboxFacts> {
    match SANDBOX.get() {
        Some(source) => source().await,
        None => None,
    }
}
