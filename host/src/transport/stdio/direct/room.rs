//! How much more stdout takes without blocking, when stdout is a pipe.

use std::io::Write;

/// The pipe size asked for: 1 MiB, what any user may set by default.
const WANTED_PIPE_BYTES: usize = 1024 * 1024;

/// Room left in stdout's pipe, known without asking the kernel before every write. A pipe holds
/// a fixed number of page-sized buffers, and a write may start a new one rather than fill the
/// last (measured on 6.18: fifteen 16 KiB writes fill a 256 KiB pipe, 43 writes of 4 KiB + 1
/// byte a 256 KiB one), so room is counted in pages: a write of `n` bytes takes at most
/// `ceil(n / page) + 1` of them. The pages the unread bytes hold are bounded by the writes
/// those bytes came from (`FIONREAD` says how many bytes are unread; they are the tail of what
/// was written), so only a write that might not fit makes wexec ask again, and a client that
/// keeps up costs one `ioctl` per pipe-full of replies instead of one per reply. The bound holds
/// as long as wexec is the pipe's only writer (another writer's bytes count from the next probe
/// on; at worst a write then waits for the reader, as a queued one would).
#[derive(Debug)]
pub struct PipeRoom {
    probe: std::fs::File,
    /// The pipe's buffers.
    pages: u64,
    page: u64,
    /// Writes whose bytes may be unread, oldest first: (bytes, pages at most).
    unread: std::collections::VecDeque<(u64, u64)>,
    /// The sum of their pages.
    used: u64,
    /// Nothing is known until the first probe.
    probed: bool,
}

impl PipeRoom {
    /// For a pipe; `None` for anything else (never written around the queue).
    pub fn new(stdout: &std::fs::File) -> Option<Self> {
        let probe = stdout.try_clone().ok()?;
        let stat = rustix::fs::fstat(&probe).ok()?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Fifo {
            return None;
        }
        // A larger pipe keeps more replies in flight while a client is busy writing requests
        // (pipelined reads), so fewer of them wait for the writer thread. Best effort: within
        // `/proc/sys/fs/pipe-max-size` and the user's pipe-buffer quota, else as it is.
        let _ = rustix::pipe::fcntl_setpipe_size(&probe, WANTED_PIPE_BYTES);
        let capacity = rustix::pipe::fcntl_getpipe_size(&probe).ok()? as u64;
        let page = rustix::param::page_size() as u64;
        Some(Self {
            probe,
            pages: capacity / page,
            page,
            unread: std::collections::VecDeque::new(),
            used: 0,
            probed: false,
        })
    }

    /// The most pages a write of `bytes` takes.
    fn pages_of(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.page) + 1
    }

    /// Whether writes of these sizes, one after the other, fit without blocking (a write of
    /// nothing is not made, and takes nothing).
    pub fn fits_writes(&mut self, writes: &[usize]) -> bool {
        let needed = (writes.iter())
            .filter(|&&bytes| bytes > 0)
            .map(|&bytes| self.pages_of(bytes as u64))
            .sum::<u64>();
        if self.probed && self.used + needed <= self.pages {
            return true;
        }
        let Ok(unread) = rustix::io::ioctl_fionread(&self.probe) else {
            return false;
        };
        self.probed = true;
        // Keep only the writes the unread bytes can have come from.
        let mut total: u64 = self.unread.iter().map(|&(bytes, _)| bytes).sum();
        while let Some(&(bytes, pages)) = self.unread.front() {
            if total - bytes < unread {
                break;
            }
            total -= bytes;
            self.used -= pages;
            self.unread.pop_front();
        }
        if total < unread {
            // Bytes wexec did not write, or did not count: assume each holds its own page.
            self.used = self.unread.iter().map(|&(_, pages)| pages).sum::<u64>() + (unread - total);
        }
        self.used + needed <= self.pages
    }

    fn wrote(&mut self, bytes: usize) {
        let bytes = bytes as u64;
        let pages = self.pages_of(bytes);
        self.unread.push_back((bytes, pages));
        self.used += pages;
    }
}

/// stdout as the transport writes it: every byte that reaches a pipe is counted in its room.
pub struct Output {
    inner: Box<dyn Write + Send>,
    /// Present when stdout is a pipe whose room is tracked (direct writes are allowed).
    pub room: Option<PipeRoom>,
}

impl Output {
    pub fn new(inner: Box<dyn Write + Send>, room: Option<PipeRoom>) -> Self {
        Self { inner, room }
    }
}

impl Write for Output {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(data)?;
        if let Some(room) = &mut self.room {
            room.wrote(written);
        }
        Ok(written)
    }

    /// One `writev`, counted as the one write it is to the pipe.
    fn write_vectored(&mut self, parts: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let written = self.inner.write_vectored(parts)?;
        if let Some(room) = &mut self.room {
            room.wrote(written);
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn never_claims_room_the_pipe_does_not_have() {
        for size in [1usize, 100, 4095, 4097, 16 * 1024 + 1, 60 * 1024] {
            let (read, write) = rustix::pipe::pipe().unwrap();
            let (read, write) = (std::fs::File::from(read), std::fs::File::from(write));
            let room = PipeRoom::new(&write).expect("a pipe");
            let mut output = Output::new(Box::new(write.try_clone().unwrap()), Some(room));
            rustix::fs::fcntl_setfl(&write, rustix::fs::OFlags::NONBLOCK).unwrap();
            let line = vec![b'x'; size];
            let mut writes = 0;
            while output.room.as_mut().unwrap().fits_writes(&[size]) {
                // Non-blocking: a write the pipe cannot take whole fails the test.
                let written = output.write(&line).unwrap();
                assert_eq!(written, size, "a write of {size} bytes fit only in part");
                writes += 1;
            }
            assert!(
                writes > 0 || size > 32 * 1024,
                "{size}-byte writes never fit"
            );
            drop(read);
        }
    }

    #[test]
    fn asks_the_kernel_only_when_the_bound_might_be_exceeded() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let (mut read, write) = (std::fs::File::from(read), std::fs::File::from(write));
        let room = PipeRoom::new(&write).expect("a pipe");
        let pages = room.pages as usize;
        let page = room.page as usize;
        let mut output = Output::new(Box::new(write), Some(room));
        let room = |output: &mut Output, bytes| output.room.as_mut().unwrap().fits_writes(&[bytes]);

        assert!(room(&mut output, (pages - 1) * page), "an empty pipe");
        assert!(
            !room(&mut output, pages * page),
            "never more than the capacity"
        );
        let half = vec![b'x'; pages / 2 * page];
        output.write_all(&half).unwrap();
        // Unread: half the pipe, and a page more for where the write began.
        assert!(room(&mut output, (pages / 2 - 2) * page));
        assert!(!room(&mut output, pages / 2 * page));
        // Once the reader has drained the pipe, the next probe sees it.
        read.read_exact(&mut vec![0; half.len()]).unwrap();
        assert!(room(&mut output, (pages - 1) * page));
        assert_eq!(output.room.as_ref().unwrap().used, 0);
    }

    #[test]
    fn only_pipes_are_tracked() {
        let file = std::fs::File::open("/dev/null").unwrap();
        assert!(PipeRoom::new(&file).is_none());
    }
}
