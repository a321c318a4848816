//! How much more stdout takes without blocking, when stdout is a pipe.

use std::io::Write;

/// Two pages of slack for partly filled pipe buffers: a pipe's capacity counts pages, and a
/// page holding a few bytes takes no more.
const SLACK: u64 = 8 * 1024;

/// Room left in stdout's pipe, known without asking the kernel before every write: the bytes
/// the reader may not have read yet are bounded by what `FIONREAD` said last plus everything
/// written since. Only a message that might not fit under that bound makes it ask again, so a
/// client that keeps up costs one `ioctl` per pipe-full of replies instead of one per reply.
/// The bound holds as long as wexec is the pipe's only writer (another writer's bytes count
/// from the next probe on; at worst a write then waits for the reader, as a queued one would).
#[derive(Debug)]
pub struct PipeRoom {
    probe: std::fs::File,
    capacity: u64,
    unread_bound: u64,
}

impl PipeRoom {
    /// For a pipe; `None` for anything else (never written around the queue).
    pub fn new(stdout: &std::fs::File) -> Option<Self> {
        let probe = stdout.try_clone().ok()?;
        let stat = rustix::fs::fstat(&probe).ok()?;
        if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Fifo {
            return None;
        }
        let capacity = rustix::pipe::fcntl_getpipe_size(&probe).ok()? as u64;
        Some(Self {
            probe,
            capacity,
            // Unknown until asked.
            unread_bound: capacity,
        })
    }

    /// Whether `bytes` more fit without blocking.
    pub fn fits(&mut self, bytes: usize) -> bool {
        let needed = bytes as u64 + SLACK;
        if self.unread_bound.saturating_add(needed) <= self.capacity {
            return true;
        }
        match rustix::io::ioctl_fionread(&self.probe) {
            Ok(unread) => {
                self.unread_bound = unread;
                unread.saturating_add(needed) <= self.capacity
            }
            Err(_) => false,
        }
    }

    fn wrote(&mut self, bytes: usize) {
        self.unread_bound = self.unread_bound.saturating_add(bytes as u64);
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

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn asks_the_kernel_only_when_the_bound_might_be_exceeded() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let (mut read, write) = (std::fs::File::from(read), std::fs::File::from(write));
        let room = PipeRoom::new(&write).expect("a pipe");
        let capacity = room.capacity as usize;
        let mut output = Output::new(Box::new(write), Some(room));
        let room = |output: &mut Output, bytes| output.room.as_mut().unwrap().fits(bytes);

        assert!(room(&mut output, capacity - SLACK as usize));
        assert!(!room(&mut output, capacity), "never more than the capacity");
        let half = vec![b'x'; capacity / 2];
        output.write_all(&half).unwrap();
        // Unread: half the pipe. What is left fits; what is not does not.
        assert!(room(&mut output, capacity / 2 - SLACK as usize));
        assert!(!room(&mut output, capacity / 2));
        // Once the reader has drained the pipe, the next probe sees it.
        read.read_exact(&mut vec![0; capacity / 2]).unwrap();
        assert!(room(&mut output, capacity - SLACK as usize));
        assert_eq!(output.room.as_ref().unwrap().unread_bound, 0);
    }

    #[test]
    fn only_pipes_are_tracked() {
        let file = std::fs::File::open("/dev/null").unwrap();
        assert!(PipeRoom::new(&file).is_none());
    }
}
