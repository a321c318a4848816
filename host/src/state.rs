//! wexec's private state, one directory per user (docs/sandbox.md, "What is protected"):
//! `~/.local/state/wexec`, the home taken from the user database rather than `$HOME` or
//! `$XDG_STATE_HOME`, so that every wexec of one user agrees on it whatever its environment
//! (a wexec must hide the key of any other it might feed, below). It holds
//!
//! - `key`: 32 random bytes, made once, that key the compile cache's digests and memos
//!   (docs/plugins.md, "The compile cache"): a cache directory that some other wexec's plugins
//!   or processes can write (it lies inside that wexec's roots) cannot be given native code
//!   that passes the check without the key;
//! - `placeholders/`: one log per running wexec of the placeholders it made in the user's tree
//!   (`sandbox/placeholders.rs`), so that a wexec that starts removes what a SIGKILLed
//!   one left.
//!
//! The directory is made 0700 and checked (owned by this user, closed to everyone else) on the
//! opened descriptor; every wexec hides it from its plugins and its confined processes, as it
//! hides the token file.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

/// Bytes of the key.
pub const KEY_BYTES: usize = wexec_runtime::CACHE_KEY_BYTES;

/// The opened state directory.
#[derive(Debug)]
pub struct State {
    /// Canonical: what plugins and processes are kept from.
    dir: PathBuf,
    handle: OwnedFd,
}

/// Why the state directory cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("wexec's state directory {dir}: {reason}")]
pub struct StateError {
    dir: String,
    reason: String,
}

impl State {
    /// This user's state directory, made and checked; `None` with a warning when it cannot be
    /// used (no home, or not private): the compile cache is then off and a SIGKILLed wexec's
    /// placeholders stay.
    pub fn open_default() -> Option<Self> {
        let Some(home) = home() else {
            tracing::warn!("wexec's state directory is disabled: this user has no home");
            return None;
        };
        match Self::open(&home.join(".local/state/wexec")) {
            Ok(state) => Some(state),
            Err(err) => {
                tracing::warn!("{err}; the compile cache is off");
                None
            }
        }
    }

    /// Opens (creating, mode 0700) `dir`.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        let bad = |reason: String| StateError {
            dir: dir.display().to_string(),
            reason,
        };
        std::fs::create_dir_all(dir.parent().unwrap_or(Path::new("/")))
            .map_err(|err| bad(format!("cannot create its parent: {err}")))?;
        match rustix::fs::mkdir(dir, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(err) => return Err(bad(format!("cannot create it: {err}"))),
        }
        let handle = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| bad(format!("cannot open it as a directory: {err}")))?;
        let meta = rustix::fs::fstat(&handle).map_err(|err| bad(err.to_string()))?;
        if meta.st_uid != rustix::process::geteuid().as_raw() || meta.st_mode & 0o077 != 0 {
            return Err(bad(
                "not a directory of this user closed to everyone else (mode 0700)".into(),
            ));
        }
        let canonical = std::fs::canonicalize(dir).map_err(|err| bad(err.to_string()))?;
        Ok(Self {
            dir: canonical,
            handle,
        })
    }

    /// The canonical directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key, made at the first call of the first wexec; `None` (with a warning) if it can
    /// be neither read nor made.
    pub fn key(&self) -> Option<[u8; KEY_BYTES]> {
        match self.read_or_make_key() {
            Ok(key) => Some(key),
            Err(err) => {
                tracing::warn!(
                    "cannot use {}: {err}; the compile cache is off",
                    self.dir.join("key").display()
                );
                None
            }
        }
    }

    fn read_or_make_key(&self) -> std::io::Result<[u8; KEY_BYTES]> {
        if let Some(key) = self.read_key()? {
            return Ok(key);
        }
        let key = random_key()?;
        // Written whole under a name of its own, then linked into place: no wexec ever reads a
        // partial key, and of two that start together the second reads the first's. The name
        // is random, not the pid: wexecs in different PID namespaces may share a home.
        let temporary: String = random_key()?[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let temporary = format!("key.{temporary}");
        let file = rustix::fs::openat(
            &self.handle,
            &temporary,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        let mut file = std::fs::File::from(file);
        std::io::Write::write_all(&mut file, &key)?;
        file.sync_all()?;
        let linked = rustix::fs::linkat(
            &self.handle,
            &temporary,
            &self.handle,
            "key",
            rustix::fs::AtFlags::empty(),
        );
        let _ = rustix::fs::unlinkat(&self.handle, &temporary, rustix::fs::AtFlags::empty());
        match linked {
            Ok(()) => Ok(key),
            Err(rustix::io::Errno::EXIST) => self
                .read_key()?
                .ok_or_else(|| std::io::Error::other("the key vanished")),
            Err(err) => Err(err.into()),
        }
    }

    /// The key file's bytes; `None` when there is none yet.
    fn read_key(&self) -> std::io::Result<Option<[u8; KEY_BYTES]>> {
        let file = match rustix::fs::openat(
            &self.handle,
            "key",
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(file) => file,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        let meta = rustix::fs::fstat(&file)?;
        if FileType::from_raw_mode(meta.st_mode) != FileType::RegularFile
            || meta.st_size != KEY_BYTES as i64
        {
            return Err(std::io::Error::other(format!(
                "not a regular file of {KEY_BYTES} bytes"
            )));
        }
        let mut key = [0u8; KEY_BYTES];
        std::io::Read::read_exact(&mut std::fs::File::from(file), &mut key)?;
        Ok(Some(key))
    }

    /// The directory of placeholder logs, made if needed.
    pub fn placeholders(&self) -> std::io::Result<OwnedFd> {
        match rustix::fs::mkdirat(&self.handle, "placeholders", Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(err) => return Err(err.into()),
        }
        Ok(rustix::fs::openat(
            &self.handle,
            "placeholders",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }
}

/// [`KEY_BYTES`] from the kernel's random source.
fn random_key() -> std::io::Result<[u8; KEY_BYTES]> {
    let mut key = [0u8; KEY_BYTES];
    let mut filled = 0;
    while filled < KEY_BYTES {
        #[expect(
            unsafe_code,
            reason = "getrandom has no safe wrapper in the enabled crates"
        )]
        // SAFETY: the pointer and length name the unfilled rest of `key`, which is writable.
        let got =
            unsafe { libc::getrandom(key[filled..].as_mut_ptr().cast(), KEY_BYTES - filled, 0) };
        match usize::try_from(got) {
            Ok(got) => filled += got,
            Err(_) => {
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    Ok(key)
}

/// The effective user's home, from the user database's file (`/etc/passwd`); `$HOME` only when
/// it has no entry for the user (a container started with an arbitrary uid, users kept in a
/// directory service). Read as a file rather than through the C library's name service, which
/// would load its modules into wexec before the process supervisor is forked from it.
fn home() -> Option<PathBuf> {
    let uid = rustix::process::geteuid().as_raw();
    let from_database = std::fs::read("/etc/passwd")
        .ok()
        .and_then(|text| home_in(&text, uid));
    from_database.or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
    })
}

/// The home of `uid` in the text of a `passwd` file (`name:password:uid:gid:gecos:home:shell`).
fn home_in(passwd: &[u8], uid: u32) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    passwd.split(|&byte| byte == b'\n').find_map(|line| {
        let fields: Vec<&[u8]> = line.split(|&byte| byte == b':').collect();
        let [_, _, entry_uid, _, _, home, ..] = fields[..] else {
            return None;
        };
        let matches = std::str::from_utf8(entry_uid).ok()?.parse::<u32>().ok()? == uid;
        let home = PathBuf::from(std::ffi::OsStr::from_bytes(home));
        (matches && home.is_absolute()).then_some(home)
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wexec-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_key_is_made_once_and_read_back() {
        let dir = scratch("key");
        let state = State::open(&dir).unwrap();
        let key = state.key().unwrap();
        assert_eq!(State::open(&dir).unwrap().key(), Some(key));
        assert_eq!(std::fs::read(dir.join("key")).unwrap(), key);
        let mode = std::fs::metadata(dir.join("key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_open_to_others_is_refused() {
        let dir = scratch("open");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(State::open(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_home_is_the_users_entry_in_the_database() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Alice,,,:/home/alice:/bin/sh\nbroken\nnohome:x:7:7::relative:/bin/sh\n";
        assert_eq!(home_in(passwd, 0), Some(PathBuf::from("/root")));
        assert_eq!(home_in(passwd, 1000), Some(PathBuf::from("/home/alice")));
        assert_eq!(home_in(passwd, 7), None);
        assert_eq!(home_in(passwd, 42), None);
    }

    #[test]
    fn a_key_of_the_wrong_size_is_not_used() {
        let dir = scratch("short");
        let state = State::open(&dir).unwrap();
        std::fs::write(dir.join("key"), b"short").unwrap();
        assert_eq!(state.key(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
