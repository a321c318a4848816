//! Where the reader task delivers one process's events: reordered into `seq` order, queued,
//! and signalled to the process's handle.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::event::ProcessEvent;
use super::reorder::Reorder;
use super::sync::lock;

/// Where the reader task delivers one process's events.
pub(crate) struct ProcessRoute {
    pub(crate) id: String,
    state: Mutex<RouteState>,
    pub(crate) wake: Notify,
}

struct RouteState {
    reorder: Reorder,
    queue: VecDeque<ProcessEvent>,
}

impl ProcessRoute {
    pub(crate) fn new(id: String) -> Arc<Self> {
        Arc::new(Self {
            id,
            state: Mutex::new(RouteState {
                reorder: Reorder::new(),
                queue: VecDeque::new(),
            }),
            wake: Notify::new(),
        })
    }

    /// Accepts an event (in any order); returns whether the route has ended.
    pub(crate) fn accept(&self, event: ProcessEvent) -> bool {
        let mut state = lock(&self.state);
        let before = state.queue.len();
        let RouteState { reorder, queue } = &mut *state;
        reorder.accept(event, queue);
        self.wake_if_grown(before, queue.len());
        reorder.ended()
    }

    /// Ends the route with a failure event, unless it already ended.
    pub(crate) fn fail(&self, message: String) {
        let mut state = lock(&self.state);
        let before = state.queue.len();
        let RouteState { reorder, queue } = &mut *state;
        reorder.fail(ProcessEvent::Failed { message }, queue);
        self.wake_if_grown(before, queue.len());
    }

    /// `(last published seq, exit published, ended)`.
    pub(crate) fn progress(&self) -> (u64, bool, bool) {
        let state = lock(&self.state);
        (
            state.reorder.published(),
            state.reorder.exit_published(),
            state.reorder.ended(),
        )
    }

    fn wake_if_grown(&self, before: usize, after: usize) {
        if after > before {
            self.wake.notify_one();
        }
    }

    pub(crate) fn pop(&self) -> Result<ProcessEvent, bool> {
        let mut state = lock(&self.state);
        state.queue.pop_front().ok_or(state.reorder.ended())
    }
}
