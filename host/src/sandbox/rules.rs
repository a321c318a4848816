//! Filesystem access as a function of the path: a set of entries where the longest matching
//! path decides and a denial covers everything below it (docs/protocol.md §7.3). The operator
//! ceiling and a client's request are each such a set; the effective access is their minimum, path
//! by path, and the mount plan is that function written as layers.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a path allows, weakest first: the effective access of two sets is the minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Denied (`deny`/`none`): nothing, and nothing below (`EACCES`).
    Hidden,
    /// Not covered by any entry: not there.
    Absent,
    /// Readable only.
    Read,
    /// Readable and writable.
    Write,
}

/// Names kept read-only inside every writable path, as Codex keeps them (present or not).
pub const PROTECTED_NAMES: [&str; 4] = [".git", ".agents", ".codex", ".aws"];

/// The host directories a confined program always gets as the sandbox provides them, whatever
/// the entries say: a private `/dev` and its PID namespace's `/proc`.
pub const PROVIDED: [&str; 2] = ["/dev", "/proc"];

/// The devices of `/dev` a confined program may open, read and write, in either tier. Ptys
/// are not among them: the namespace tier gives each program a `devpts` of its own, and the
/// host's is shared with the user's terminals.
pub const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Entries: absolute, canonical paths with a level.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    entries: Vec<(PathBuf, Level)>,
}

impl Rules {
    /// Everything writable.
    pub fn full() -> Self {
        let mut rules = Self::default();
        rules.add(PathBuf::from("/"), Level::Write);
        rules
    }

    /// Adds an entry.
    pub fn add(&mut self, path: PathBuf, level: Level) {
        self.entries.push((path, level));
    }

    /// The paths entries name.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.entries.iter().map(|(path, _)| path.as_path())
    }

    /// The access at `path`: `Hidden` under any denial; else the longest matching entry's
    /// (`Write` beating `Read` on one path); else `Absent`.
    pub fn level(&self, path: &Path) -> Level {
        let mut best: Option<(usize, Level)> = None;
        for (entry, level) in &self.entries {
            if !within(path, entry) {
                continue;
            }
            if *level == Level::Hidden {
                return Level::Hidden;
            }
            let depth = depth(entry);
            best = match best {
                Some((best_depth, best_level))
                    if best_depth > depth || (best_depth == depth && best_level >= *level) =>
                {
                    Some((best_depth, best_level))
                }
                _ => Some((depth, *level)),
            };
        }
        best.map_or(Level::Absent, |(_, level)| level)
    }
}

impl Rules {
    /// The access of both at once: at every path the weaker of the two.
    pub fn intersect(&self, other: &Self) -> Self {
        let mut paths: Vec<&Path> = std::iter::once(Path::new("/"))
            .chain(self.paths())
            .chain(other.paths())
            .collect();
        paths.sort();
        paths.dedup();
        let mut both = Self::default();
        for path in paths {
            both.add(path.to_path_buf(), self.level(path).min(other.level(path)));
        }
        both
    }
}

/// The effective access of `request` under `ceiling` as mount layers: `/` first, then each
/// path whose access differs from its parent's, parents before children. Writable paths other
/// than `/` keep [`PROTECTED_NAMES`] read-only.
pub fn layers(ceiling: &Rules, request: &Rules) -> Vec<(PathBuf, Level)> {
    let combined = |path: &Path| ceiling.level(path).min(request.level(path));
    let mut points: Vec<PathBuf> = std::iter::once(Path::new("/"))
        .chain(ceiling.paths())
        .chain(request.paths())
        .filter(|path| {
            !PROVIDED
                .iter()
                .any(|provided| within(path, Path::new(provided)))
        })
        .map(Path::to_path_buf)
        .collect();
    let writable: Vec<PathBuf> = points
        .iter()
        .filter(|path| path.as_os_str() != "/" && combined(path) == Level::Write)
        .cloned()
        .collect();
    let protected: Vec<PathBuf> = writable
        .iter()
        .flat_map(|root| PROTECTED_NAMES.iter().map(move |name| root.join(name)))
        .collect();
    points.extend(protected.iter().cloned());
    let level = |path: &Path| {
        let level = combined(path);
        if protected.iter().any(|protected| within(path, protected)) {
            level.min(Level::Read)
        } else {
            level
        }
    };
    points.sort_by(|a, b| depth(a).cmp(&depth(b)).then_with(|| a.cmp(b)));
    points.dedup();
    let mut layers = Vec::with_capacity(points.len());
    for path in points {
        let here = level(&path);
        match path.parent() {
            Some(parent) if level(parent) == here => {}
            _ => layers.push((path, here)),
        }
    }
    layers
}

/// Whether `path` is `ancestor` or lies below it. Every sandboxed start asks this for each
/// pair of entries and points, and `Path::starts_with` parses both into components each
/// time, which made it most of the policy's cost: on clean absolute paths (canonical ones,
/// or resolved ones: no `.`, `..`, repeated or trailing `/`) a byte comparison says the same.
pub fn within(path: &Path, ancestor: &Path) -> bool {
    let (bytes, prefix) = (path.as_os_str().as_bytes(), ancestor.as_os_str().as_bytes());
    if !clean(bytes) || !clean(prefix) {
        return path.starts_with(ancestor);
    }
    if prefix == b"/" {
        return true;
    }
    bytes.starts_with(prefix) && (bytes.len() == prefix.len() || bytes[prefix.len()] == b'/')
}

/// An absolute path without `.` or `..` components and without repeated or trailing `/`.
fn clean(path: &[u8]) -> bool {
    if path == b"/" {
        return true;
    }
    path.first() == Some(&b'/')
        && path
            .split(|byte| *byte == b'/')
            .skip(1)
            .all(|part| !part.is_empty() && part != b"." && part != b"..")
}

/// How deep `path` lies (`/` is 0): orders entries and points as component counts would.
fn depth(path: &Path) -> usize {
    let bytes = path.as_os_str().as_bytes();
    if clean(bytes) {
        if bytes == b"/" {
            0
        } else {
            bytes.iter().filter(|byte| **byte == b'/').count()
        }
    } else {
        path.components().count().saturating_sub(1)
    }
}

/// Whether `layers` restrict anything (with `network` off, the network is restricted).
pub fn restricts(layers: &[(PathBuf, Level)], network: bool) -> bool {
    !network || layers.len() != 1 || layers.first().map(|(_, level)| *level) != Some(Level::Write)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_agrees_with_path_starts_with() {
        let paths = [
            "/", "/a", "/ab", "/a/b", "/a/b/c", "/b", "/a/", "/a//b", "/a/./b", "/a/../b", "a",
        ];
        for path in paths {
            for ancestor in paths {
                assert_eq!(
                    within(Path::new(path), Path::new(ancestor)),
                    Path::new(path).starts_with(ancestor),
                    "{path} within {ancestor}"
                );
            }
            assert_eq!(
                depth(Path::new(path)),
                Path::new(path).components().count().saturating_sub(1),
                "{path}"
            );
        }
    }

    fn rules(entries: &[(&str, Level)]) -> Rules {
        let mut rules = Rules::default();
        for (path, level) in entries {
            rules.add(PathBuf::from(path), *level);
        }
        rules
    }

    #[test]
    fn the_longest_match_decides_and_a_denial_covers_everything_below() {
        let rules = rules(&[
            ("/", Level::Read),
            ("/w", Level::Write),
            ("/w/.git", Level::Read),
            ("/w/secret", Level::Hidden),
            ("/w/secret/open", Level::Write),
            ("/x", Level::Read),
            ("/x", Level::Write),
        ]);
        assert_eq!(rules.level(Path::new("/etc")), Level::Read);
        assert_eq!(rules.level(Path::new("/w/a")), Level::Write);
        assert_eq!(rules.level(Path::new("/w/.git/hooks")), Level::Read);
        assert_eq!(rules.level(Path::new("/w/secret/open/x")), Level::Hidden);
        assert_eq!(rules.level(Path::new("/x/y")), Level::Write);
        assert_eq!(Rules::default().level(Path::new("/")), Level::Absent);
    }

    #[test]
    fn the_ceiling_narrows_a_request_path_by_path() {
        let ceiling = rules(&[
            ("/", Level::Read),
            ("/w", Level::Write),
            ("/tmp", Level::Write),
        ]);
        let request = rules(&[
            ("/", Level::Read),
            ("/w/sub", Level::Write),
            ("/etc", Level::Write),
        ]);
        assert_eq!(
            layers(&ceiling, &request),
            vec![
                (PathBuf::from("/"), Level::Read),
                (PathBuf::from("/w/sub"), Level::Write),
                (PathBuf::from("/w/sub/.agents"), Level::Read),
                (PathBuf::from("/w/sub/.aws"), Level::Read),
                (PathBuf::from("/w/sub/.codex"), Level::Read),
                (PathBuf::from("/w/sub/.git"), Level::Read),
            ]
        );
        assert!(restricts(&layers(&ceiling, &request), true));
        let full = layers(&Rules::full(), &Rules::full());
        assert_eq!(full, vec![(PathBuf::from("/"), Level::Write)]);
        assert!(!restricts(&full, true));
        assert!(restricts(&full, false));
    }

    #[test]
    fn an_intersection_is_the_weaker_access_everywhere() {
        let a = rules(&[
            ("/", Level::Read),
            ("/w", Level::Write),
            ("/w/s", Level::Hidden),
        ]);
        let b = rules(&[("/", Level::Write), ("/w/.git", Level::Read)]);
        let both = a.intersect(&b);
        assert_eq!(both.level(Path::new("/etc")), Level::Read);
        assert_eq!(both.level(Path::new("/w/x")), Level::Write);
        assert_eq!(both.level(Path::new("/w/.git/x")), Level::Read);
        assert_eq!(both.level(Path::new("/w/s/x")), Level::Hidden);
    }

    #[test]
    fn provided_directories_are_not_layers() {
        let request = rules(&[
            ("/", Level::Read),
            ("/dev/shm", Level::Write),
            ("/proc", Level::Hidden),
        ]);
        assert_eq!(
            layers(&Rules::full(), &request),
            vec![(PathBuf::from("/"), Level::Read)]
        );
    }
}
