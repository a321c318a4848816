//! The minimal system set (`minimal`, docs/sandbox.md): what programs need to run when reads are
//! confined (`--readable-root`, or a request's `minimal` without `root`). The system's program
//! and library directories whole, and of `/etc` only what programs read to run — the dynamic
//! loader's configuration, the name service (users, groups, hosts, DNS), TLS trust, locale and
//! time zone, and the system-wide configuration of shells and common tools — never all of it:
//! `/etc` also holds the host's secrets (`shadow`, `gshadow`, `sudoers`, SSH host keys,
//! `ssl/private`, keytabs), which a process running as root (as in most containers) would
//! otherwise read, since ownership stops nothing there.
//!
//! Of these, an entry only root can read is left out too: the set holds nothing an
//! unprivileged user of the host could not read. Entries are taken where they are, through the
//! symbolic links on the way (a `resolv.conf` managed under `/run`, an `/etc/ssl` kept
//! elsewhere), which the view shows as links: every path in the set is canonical or a link.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Directories of programs and libraries, readable whole.
pub const DIRECTORIES: [&str; 5] = ["/bin", "/sbin", "/usr", "/lib", "/lib64"];

/// Entries of `/etc` programs read to run.
pub const ETC: &[&str] = &[
    // The dynamic loader.
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    // The name service and the resolver.
    "nsswitch.conf",
    "passwd",
    "group",
    "hosts",
    "host.conf",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    "networks",
    "rpc",
    "hostname",
    // TLS trust and the TLS libraries' configuration (Debian and Fedora layouts).
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/tls/cert.pem",
    "pki/tls/openssl.cnf",
    "pki/ca-trust/extracted",
    "crypto-policies",
    "gnutls",
    // Locale and time.
    "locale.alias",
    "locale.conf",
    "default/locale",
    "localtime",
    "timezone",
    "environment",
    // Shells and common tools.
    "alternatives",
    "shells",
    "profile",
    "profile.d",
    "bash.bashrc",
    "inputrc",
    "terminfo",
    "mime.types",
    "magic",
    "magic.mime",
    "gitconfig",
    "mtab",
    "fonts",
    "os-release",
    "lsb-release",
    "debian_version",
    "machine-id",
    // Tools whose packages keep part of their files in `/etc` (a name ending in `*` is a
    // prefix: `java-17-openjdk`...).
    "manpath.config",
    "groff",
    "java*",
    "maven",
    "ImageMagick*",
    "vim",
    "nanorc",
    "wgetrc",
    "pip.conf",
];

/// How long a look at `/etc` is used: a process start or an `fs/*` call with `minimal` in its
/// sandbox would otherwise pay some fifty `lstat`s each, and `/etc` rarely changes.
const FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(1);

/// The set as it is on this host: canonical paths, the `/etc` entries that exist and any user
/// may read, as looked at within the last [`FRESH_FOR`] (`/etc` changes under a running
/// wexec).
pub fn paths() -> Vec<PathBuf> {
    static LAST: std::sync::Mutex<Option<(std::time::Instant, Vec<PathBuf>)>> =
        std::sync::Mutex::new(None);
    let mut last = LAST
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((when, paths)) = last.as_ref()
        && when.elapsed() < FRESH_FOR
    {
        return paths.clone();
    }
    let paths = look();
    *last = Some((std::time::Instant::now(), paths.clone()));
    paths
}

/// The set as it is now.
fn look() -> Vec<PathBuf> {
    static DIRECTORIES_CANONICAL: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    let mut paths = DIRECTORIES_CANONICAL
        .get_or_init(|| {
            DIRECTORIES
                .iter()
                .map(|path| super::canonical(Path::new(path)))
                .collect()
        })
        .clone();
    let etc = Path::new("/etc");
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    let mut listing = None;
    for name in ETC {
        match name.strip_suffix('*') {
            None => names.push(name.into()),
            Some(prefix) => {
                let listing = listing.get_or_insert_with(|| {
                    std::fs::read_dir(etc)
                        .map(|entries| entries.flatten().map(|entry| entry.file_name()).collect())
                        .unwrap_or_else(|_| Vec::new())
                });
                names.extend(
                    listing
                        .iter()
                        .filter(|found| found.as_encoded_bytes().starts_with(prefix.as_bytes()))
                        .cloned(),
                );
            }
        }
    }
    for name in names {
        let path = etc.join(name);
        let Ok(target) = std::fs::canonicalize(&path) else {
            continue;
        };
        if !std::fs::metadata(&target).is_ok_and(|meta| readable_by_anyone(&meta)) {
            continue;
        }
        // The links on the way are shown as they are (`/etc/ssl` may be one, as on NixOS, and
        // `resolv.conf` often is), and what they lead to, which the view reaches without any.
        for link in super::links_on_the_way(&path) {
            if !sandbox_own(&link) && !paths.contains(&link) {
                paths.push(link);
            }
        }
        if !sandbox_own(&target) && !paths.iter().any(|known| target.starts_with(known)) {
            paths.push(target);
        }
    }
    paths
}

/// `/proc`, `/sys` and `/dev` are the sandbox's own.
fn sandbox_own(path: &Path) -> bool {
    ["/proc", "/sys", "/dev"]
        .iter()
        .any(|pseudo| path.starts_with(pseudo))
}

/// Whether any user may read it: a file readable by others, a directory they may list and
/// enter.
fn readable_by_anyone(meta: &std::fs::Metadata) -> bool {
    let needed = if meta.is_dir() { 0o005 } else { 0o004 };
    meta.mode() & needed == needed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set_holds_what_programs_need_and_no_secret() {
        let paths = paths();
        let usr = super::super::canonical(Path::new("/usr"));
        assert!(paths.contains(&usr));
        for name in ["passwd", "group", "ld.so.cache"] {
            let path = Path::new("/etc").join(name);
            if path.exists() {
                assert!(paths.contains(&path), "{name}");
            }
        }
        for secret in [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/ssl/private",
            "/etc/ssh",
            "/etc",
        ] {
            assert!(
                !paths.iter().any(|path| Path::new(secret).starts_with(path)),
                "{secret}"
            );
        }
    }
}
