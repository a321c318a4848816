//! A process's events as the client delivers them.

use crate::protocol::OutputStream;

/// One event of a process, delivered strictly in `seq` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessEvent {
    /// Output bytes, as the server read them.
    Output {
        /// Its seq.
        seq: u64,
        /// Which stream.
        stream: OutputStream,
        /// The bytes.
        data: Vec<u8>,
    },
    /// The process exited (`128 + N` when killed by signal N).
    Exited {
        /// Its seq.
        seq: u64,
        /// The exit code.
        exit_code: i32,
    },
    /// Every stream reached end-of-file after the exit: the last event.
    Closed {
        /// Its seq.
        seq: u64,
    },
    /// The client can no longer follow the process (connection lost, or events the server no
    /// longer retains): the last event.
    Failed {
        /// Why.
        message: String,
    },
}

impl ProcessEvent {
    /// The event's seq; `None` for a failure.
    pub fn seq(&self) -> Option<u64> {
        match self {
            Self::Output { seq, .. } | Self::Exited { seq, .. } | Self::Closed { seq } => {
                Some(*seq)
            }
            Self::Failed { .. } => None,
        }
    }
}
