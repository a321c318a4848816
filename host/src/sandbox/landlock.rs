//! The Landlock tier's plan (docs/sandbox.md, "Tiers"): a confinement's layers as Landlock
//! grants, for kernels where the namespace tier cannot run (no unprivileged user namespaces).
//!
//! Landlock grants rights beneath a directory and never takes them back further down: the
//! rights at a path are the union of the grants on its ancestors. So a layer that narrows the
//! one around it cannot be a grant. A denied path inside a readable one is expressed by
//! granting its siblings instead, level by level down to it (an *expansion*), which holds
//! because nothing there is writable: nothing can be renamed into or out of the denied place.
//! A read-only or denied path inside a writable one cannot be held at all — a writable parent
//! can rename it away and put a look-alike in its place — and is refused, unless the operator
//! accepted [`Weaker::CarveOuts`] for read-only ones.
//!
//! `/dev` and `/proc` are never granted as parts of a layer: like the namespace tier's private
//! ones, `/dev` offers only the usual devices ([`DEVICES`]) and `/proc` is read-only.

use std::path::{Path, PathBuf};

use super::confinement::{Grant, GrantAccess};
use super::rules::{DEVICES, Level, PROVIDED, within};

/// Guarantees of the namespace tier the Landlock tier lacks, which an operator may accept
/// (`--sandbox-accept`): each request that needs one is otherwise refused.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Weaker {
    /// Read-only paths inside a writable root (`.git`, `.codex`, `.agents`, `.aws`, a
    /// request's read-only entries) are left writable.
    CarveOuts,
    /// On Landlock below ABI 6 (Linux 6.12), a process can signal any process of wexec's user
    /// (wexec and its own supervisor included, and so outlive its session) and reach the
    /// host's abstract unix sockets.
    Signals,
    /// A process may change the mode, owner, times and extended attributes of any file its
    /// user owns, readable or not (Landlock does not cover them); otherwise `chmod`, `chown`,
    /// `utimensat` and the `*xattr` calls fail with `EPERM`, even in writable roots.
    Metadata,
}

impl Weaker {
    /// As spelled on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::CarveOuts => "carve-outs",
            Self::Signals => "signals",
            Self::Metadata => "metadata",
        }
    }
}

/// Grants a plan may hold: each is a path opened and a rule added at every start.
const MAX_GRANTS: usize = 4096;

/// Why a confinement cannot be expressed as Landlock grants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Inexpressible {
    /// A read-only path inside a writable one.
    #[error("{path} must stay read-only inside the writable {root}, which needs mount namespaces")]
    CarveOut {
        /// The read-only path.
        path: String,
        /// The writable path around it.
        root: String,
    },
    /// One of wexec's own files inside a writable path: never left writable.
    #[error(
        "{path} is wexec's own and must stay read-only inside the writable {root}, which needs mount namespaces"
    )]
    Protected {
        /// wexec's file or directory.
        path: String,
        /// The writable path around it.
        root: String,
    },
    /// A denied path inside a writable one.
    #[error("{path} must stay hidden inside the writable {root}, which needs mount namespaces")]
    Hidden {
        /// The denied path.
        path: String,
        /// The writable path around it.
        root: String,
    },
    /// Too many entries around denied paths.
    #[error("denying {path} inside a readable directory takes more than {MAX_GRANTS} rules")]
    TooLarge {
        /// The denied path being worked around.
        path: String,
    },
}

impl Inexpressible {
    /// What the operator could accept instead of the refusal.
    pub fn acceptable(&self) -> Option<Weaker> {
        matches!(self, Self::CarveOut { .. }).then_some(Weaker::CarveOuts)
    }
}

/// A confinement's layers (outermost first, as [`super::process_policy`] builds them) as
/// Landlock grants, and the accepted weaker guarantees the process relies on. `protected` are
/// wexec's own files, which no acceptance leaves writable; `named` are denied directories
/// whose entries' names are no secret (wexec's state directory: its contents are), so that
/// their parents stay listable.
pub fn plan(
    layers: &[(PathBuf, Level)],
    accepted: &[Weaker],
    protected: &[PathBuf],
    named: &[PathBuf],
) -> Result<(Vec<Grant>, Vec<Weaker>), Inexpressible> {
    let mut levels: Vec<(PathBuf, Level)> = Vec::with_capacity(layers.len());
    let mut relied = Vec::new();
    for (path, level) in layers {
        let around = enclosing(&levels, path);
        let level = match (*level, around) {
            (Level::Read, Some((root, Level::Write))) => {
                if protected.iter().any(|own| within(path, own)) {
                    return Err(Inexpressible::Protected {
                        path: path.display().to_string(),
                        root: root.display().to_string(),
                    });
                }
                if !accepted.contains(&Weaker::CarveOuts) {
                    return Err(Inexpressible::CarveOut {
                        path: path.display().to_string(),
                        root: root.display().to_string(),
                    });
                }
                if !relied.contains(&Weaker::CarveOuts) {
                    relied.push(Weaker::CarveOuts);
                }
                Level::Write
            }
            (Level::Hidden | Level::Absent, Some((root, Level::Write))) => {
                return Err(Inexpressible::Hidden {
                    path: path.display().to_string(),
                    root: root.display().to_string(),
                });
            }
            (level, _) => level,
        };
        levels.push((path.clone(), level));
    }
    // What no layer may grant: denied paths inside readable ones, and what the sandbox
    // provides itself.
    let mut holes: Vec<Hole> = levels
        .iter()
        .filter(|(path, level)| {
            *level <= Level::Absent
                && enclosing(&levels, path).is_some_and(|(_, around)| around >= Level::Read)
        })
        .map(|(path, _)| Hole {
            path: path.clone(),
            unlisted: !named.contains(path)
                && std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir()),
        })
        .collect();
    // Their contents may be listed, as in the namespace tier.
    holes.extend(PROVIDED.iter().map(|path| Hole {
        path: PathBuf::from(path),
        unlisted: false,
    }));
    let mut grants = Vec::new();
    for (path, level) in &levels {
        let access = match level {
            Level::Read => GrantAccess::Read,
            Level::Write => GrantAccess::Write,
            Level::Hidden | Level::Absent => continue,
        };
        if holes.iter().any(|hole| within(&hole.path, path)) {
            expand(path, access, &holes, &mut grants)?;
        } else {
            grants.push(grant(path, access));
        }
    }
    grants.push(grant(Path::new("/proc"), GrantAccess::Read));
    grants.extend(
        DEVICES
            .iter()
            .map(|device| grant(&Path::new("/dev").join(device), GrantAccess::Device)),
    );
    Ok((grants, relied))
}

/// A path no grant may cover.
struct Hole {
    path: PathBuf,
    /// A denied directory, whose entries must not be listed either: no directory above it
    /// may get the right to list (which covers every directory below).
    unlisted: bool,
}

/// The innermost earlier layer strictly around `path`, with its level.
fn enclosing<'a>(levels: &'a [(PathBuf, Level)], path: &Path) -> Option<(&'a Path, Level)> {
    levels
        .iter()
        .rev()
        .find(|(outer, _)| outer != path && within(path, outer))
        .map(|(outer, level)| (outer.as_path(), *level))
}

fn grant(path: &Path, access: GrantAccess) -> Grant {
    Grant {
        path: path.to_string_lossy().into_owned(),
        access,
    }
}

/// Grants `access` on everything below `directory` but the holes: each entry that neither is
/// nor holds a hole gets the grant, the others are expanded in turn. The directory itself may
/// be listed unless a hidden directory lies below it (a listing right covers every directory
/// below). What appears in an expanded directory later is not granted, and one that cannot be
/// listed is granted nothing: narrower, never wider.
fn expand(
    directory: &Path,
    access: GrantAccess,
    holes: &[Hole],
    grants: &mut Vec<Grant>,
) -> Result<(), Inexpressible> {
    let too_large = || Inexpressible::TooLarge {
        path: holes
            .iter()
            .find(|hole| within(&hole.path, directory))
            .map_or_else(String::new, |hole| hole.path.display().to_string()),
    };
    if !holes
        .iter()
        .any(|hole| hole.unlisted && within(&hole.path, directory))
    {
        grants.push(grant(directory, GrantAccess::List));
    }
    let Ok(entries) = std::fs::read_dir(directory) else {
        return Ok(());
    };
    // Never more than the cap is read, however large the directory.
    let mut names: Vec<_> = (entries.flatten().map(|entry| entry.file_name()))
        .take(MAX_GRANTS + 1)
        .collect();
    if grants.len() + names.len() > MAX_GRANTS {
        return Err(too_large());
    }
    names.sort();
    for name in names {
        let path = directory.join(name);
        if holes.iter().any(|hole| hole.path == path) {
            continue;
        }
        if holes.iter().any(|hole| within(&hole.path, &path)) {
            expand(&path, access, holes, grants)?;
        } else if !std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.file_type().is_symlink())
        {
            // A link is followed to its target, which is granted (or not) where it lies.
            grants.push(grant(&path, access));
        }
        if grants.len() > MAX_GRANTS {
            return Err(too_large());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(entries: &[(&str, Level)]) -> Vec<(PathBuf, Level)> {
        entries
            .iter()
            .map(|(path, level)| (PathBuf::from(path), *level))
            .collect()
    }

    fn granted(grants: &[Grant], path: &str) -> Option<GrantAccess> {
        grants
            .iter()
            .find(|grant| grant.path == path)
            .map(|grant| grant.access)
    }

    #[test]
    fn widening_layers_are_grants_and_carve_outs_are_refused_unless_accepted() {
        let read_only = layers(&[("/", Level::Read)]);
        let (grants, relied) = plan(&read_only, &[], &[], &[]).unwrap();
        assert_eq!(granted(&grants, "/proc"), Some(GrantAccess::Read));
        assert_eq!(granted(&grants, "/dev/null"), Some(GrantAccess::Device));
        // `/` is expanded around `/dev` and `/proc`, never granted whole.
        assert_eq!(granted(&grants, "/"), Some(GrantAccess::List));
        assert_eq!(granted(&grants, "/usr"), Some(GrantAccess::Read));
        assert_eq!(granted(&grants, "/dev"), None);
        assert!(relied.is_empty());

        let workspace = layers(&[
            ("/", Level::Read),
            ("/w", Level::Write),
            ("/w/.git", Level::Read),
        ]);
        assert_eq!(
            plan(&workspace, &[], &[], &[]).unwrap_err(),
            Inexpressible::CarveOut {
                path: "/w/.git".to_owned(),
                root: "/w".to_owned()
            }
        );
        let (grants, relied) = plan(&workspace, &[Weaker::CarveOuts], &[], &[]).unwrap();
        assert_eq!(granted(&grants, "/w"), Some(GrantAccess::Write));
        assert_eq!(granted(&grants, "/w/.git"), Some(GrantAccess::Write));
        assert_eq!(relied, vec![Weaker::CarveOuts]);
        // wexec's own files stay read-only whatever is accepted.
        let config = layers(&[
            ("/", Level::Read),
            ("/w", Level::Write),
            ("/w/wexec.toml", Level::Read),
        ]);
        assert!(matches!(
            plan(
                &config,
                &[Weaker::CarveOuts],
                &[PathBuf::from("/w/wexec.toml")],
                &[]
            ),
            Err(Inexpressible::Protected { .. })
        ));

        let secret_inside = layers(&[
            ("/", Level::Read),
            ("/w", Level::Write),
            ("/w/k", Level::Hidden),
        ]);
        assert!(matches!(
            plan(&secret_inside, &[Weaker::CarveOuts], &[], &[]),
            Err(Inexpressible::Hidden { .. })
        ));
    }

    #[test]
    fn a_denied_file_in_a_readable_tree_leaves_its_siblings_readable() {
        let base = std::env::temp_dir().join(format!("wexec-landlock-plan-{}", std::process::id()));
        std::fs::create_dir_all(base.join("etc/wexec")).unwrap();
        std::fs::create_dir_all(base.join("keys")).unwrap();
        std::fs::write(base.join("etc/wexec/token"), "t").unwrap();
        std::fs::write(base.join("etc/wexec/config"), "c").unwrap();
        std::fs::write(base.join("etc/hosts"), "h").unwrap();
        let base = super::super::canonical(&base);
        let path = |relative: &str| base.join(relative).display().to_string();
        let denied = vec![
            (PathBuf::from("/"), Level::Absent),
            (base.clone(), Level::Read),
            (base.join("etc/wexec/token"), Level::Hidden),
            (base.join("keys"), Level::Hidden),
        ];
        let (grants, _) = plan(&denied, &[], &[], &[]).unwrap();
        assert_eq!(
            granted(&grants, &path("etc/wexec/config")),
            Some(GrantAccess::Read)
        );
        assert_eq!(
            granted(&grants, &path("etc/hosts")),
            Some(GrantAccess::Read)
        );
        assert_eq!(granted(&grants, &path("etc/wexec/token")), None);
        assert_eq!(granted(&grants, &path("keys")), None);
        // `etc` holds only a denied file: listable; the base holds a denied directory: not.
        assert_eq!(granted(&grants, &path("etc")), Some(GrantAccess::List));
        assert_eq!(
            granted(&grants, &path("etc/wexec")),
            Some(GrantAccess::List)
        );
        assert_eq!(granted(&grants, &base.display().to_string()), None);
        assert!(!grants.iter().any(|grant| grant.path == "/"));
        // A denied directory whose names are no secret leaves its parents listable.
        let (grants, _) = plan(&denied, &[], &[], &[base.join("keys")]).unwrap();
        assert_eq!(
            granted(&grants, &base.display().to_string()),
            Some(GrantAccess::List)
        );
        assert_eq!(granted(&grants, &path("keys")), None);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
