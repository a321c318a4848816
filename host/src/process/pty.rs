//! Pseudo-terminals: open a pair sized 24×80, and drive the master side asynchronously.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use tokio::io::unix::AsyncFd;

/// Rows of every pseudo-terminal (no resize).
pub const ROWS: u16 = 24;
/// Columns of every pseudo-terminal.
pub const COLUMNS: u16 = 80;

/// A new pseudo-terminal pair. Both ends are close-on-exec; the child gets the slave through
/// `dup2` onto its stdio.
pub struct PtyPair {
    /// The side wexec keeps.
    pub master: OwnedFd,
    /// The side the child's stdio uses.
    pub slave: OwnedFd,
}

/// Opens a pair.
pub fn open() -> io::Result<PtyPair> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let size = Winsize {
        ws_row: ROWS,
        ws_col: COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(&slave, size)?;
    Ok(PtyPair { master, slave })
}

/// The master side, readable and writable concurrently from async code.
pub struct PtyMaster {
    fd: AsyncFd<OwnedFd>,
}

impl PtyMaster {
    /// Wraps a master fd (made non-blocking).
    pub fn new(fd: OwnedFd) -> io::Result<Self> {
        rustix::io::ioctl_fionbio(&fd, true)?;
        #[expect(
            unsafe_code,
            reason = "tokio's AsyncFd registration is unsafe since tokio 1.52"
        )]
        // SAFETY: an OwnedFd is a valid open descriptor that stays open, and always names the
        // same file description, until the AsyncFd (its owner from here on) drops it.
        let fd = unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)?;
        Ok(Self { fd })
    }

    /// Reads what the terminal produced. `Ok(0)` is end of file: on Linux a master read fails
    /// with EIO once no process holds the slave open any more.
    pub async fn read(&self, buffer: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut ready = self.fd.readable().await?;
            match ready.try_io(|fd| {
                rustix::io::read(fd.get_ref().as_fd(), &mut *buffer).map_err(io::Error::from)
            }) {
                Ok(Err(err))
                    if err.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) =>
                {
                    return Ok(0);
                }
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `data` to the terminal (the child's input).
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut ready = self.fd.writable().await?;
            match ready
                .try_io(|fd| rustix::io::write(fd.get_ref().as_fd(), data).map_err(io::Error::from))
            {
                Ok(Ok(written)) => data = &data[written..],
                Ok(Err(err)) => return Err(err),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }
}
