//! Puts a process's events back in `seq` order.

use std::collections::{BTreeMap, VecDeque};

use super::event::ProcessEvent;

/// Holds events that arrived early until every earlier seq was published; drops duplicates and
/// anything at or below what was already published. The route ends when `closed` (or a failure)
/// is actually published, not when it arrives.
#[derive(Debug)]
pub(crate) struct Reorder {
    next: u64,
    early: BTreeMap<u64, ProcessEvent>,
    exit_published: bool,
    ended: bool,
}

impl Reorder {
    pub(crate) fn new() -> Self {
        Self {
            next: 1,
            early: BTreeMap::new(),
            exit_published: false,
            ended: false,
        }
    }

    /// The last published seq (0 before any).
    pub(crate) fn published(&self) -> u64 {
        self.next - 1
    }

    pub(crate) fn exit_published(&self) -> bool {
        self.exit_published
    }

    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// Accepts an event carrying a seq and publishes whatever became contiguous into `out`.
    pub(crate) fn accept(&mut self, event: ProcessEvent, out: &mut VecDeque<ProcessEvent>) {
        let Some(seq) = event.seq() else {
            return self.fail(event, out);
        };
        if self.ended || seq < self.next || self.early.contains_key(&seq) {
            return;
        }
        self.early.insert(seq, event);
        while let Some(event) = self.early.remove(&self.next) {
            self.next += 1;
            match event {
                ProcessEvent::Exited { .. } => self.exit_published = true,
                ProcessEvent::Closed { .. } => self.ended = true,
                _ => {}
            }
            out.push_back(event);
            if self.ended {
                self.early.clear();
                return;
            }
        }
    }

    /// Publishes a terminal failure; later events are ignored.
    pub(crate) fn fail(&mut self, failure: ProcessEvent, out: &mut VecDeque<ProcessEvent>) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.early.clear();
        out.push_back(failure);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::OutputStream;

    fn output(seq: u64) -> ProcessEvent {
        ProcessEvent::Output {
            seq,
            stream: OutputStream::Stdout,
            data: vec![seq as u8],
        }
    }

    fn seqs(out: &VecDeque<ProcessEvent>) -> Vec<Option<u64>> {
        out.iter().map(ProcessEvent::seq).collect()
    }

    #[test]
    fn publishes_in_seq_order_and_ends_only_when_closed_is_published() {
        let (mut reorder, mut out) = (Reorder::new(), VecDeque::new());
        reorder.accept(ProcessEvent::Closed { seq: 4 }, &mut out);
        assert!(out.is_empty() && !reorder.ended());
        reorder.accept(output(1), &mut out);
        reorder.accept(
            ProcessEvent::Exited {
                seq: 3,
                exit_code: 0,
            },
            &mut out,
        );
        assert_eq!(seqs(&out), [Some(1)]);
        assert!(!reorder.ended());
        reorder.accept(output(2), &mut out);
        assert_eq!(seqs(&out), [Some(1), Some(2), Some(3), Some(4)]);
        assert!(reorder.ended() && reorder.exit_published());
    }

    #[test]
    fn duplicates_and_published_seqs_are_ignored() {
        let (mut reorder, mut out) = (Reorder::new(), VecDeque::new());
        reorder.accept(output(2), &mut out);
        reorder.accept(output(2), &mut out);
        reorder.accept(output(1), &mut out);
        reorder.accept(output(1), &mut out);
        reorder.accept(output(2), &mut out);
        assert_eq!(seqs(&out), [Some(1), Some(2)]);
        assert_eq!(reorder.published(), 2);
    }

    #[test]
    fn a_failure_ends_the_route_and_drops_early_events() {
        let (mut reorder, mut out) = (Reorder::new(), VecDeque::new());
        reorder.accept(output(1), &mut out);
        reorder.accept(output(3), &mut out);
        let failure = ProcessEvent::Failed {
            message: "gone".into(),
        };
        reorder.accept(failure, &mut out);
        reorder.accept(output(2), &mut out);
        assert_eq!(seqs(&out), [Some(1), None]);
        assert!(reorder.ended());
    }
}
