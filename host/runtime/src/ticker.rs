//! The epoch ticker: advances an engine's epoch every [`EPOCH_TICK`] while any guest code may
//! be running, and sleeps while none is, so an idle wexec wakes nobody (it woke 200 times a
//! second before).
//!
//! Every store counts itself in from the moment the host calls into its guest until the guest
//! returns (wasmtime's call hook, so no path into guest code can be missed; a store dropped
//! mid-call counts itself out as it goes). The ticker parks only once nothing has run for
//! [`IDLE_TICKS`], and a guest entering while it is parked unparks it: the counter is raised
//! before the parked flag is read, the flag is raised before the counter is read (both
//! sequentially consistent), so one of the two sees the other and a guest never runs without
//! ticks.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::Thread;

use wasmtime::Engine;

/// How often the epoch advances. A guest's time is checked at each tick; a busy guest also
/// yields its thread back to the async runtime.
pub const EPOCH_TICK: std::time::Duration = std::time::Duration::from_millis(5);

/// Ticks without a guest call before the ticker parks: a second.
const IDLE_TICKS: u32 = 200;

/// What the ticker and the stores of its engine share.
#[derive(Debug, Default)]
pub struct Ticker {
    /// Stores whose guest is inside a call.
    running: AtomicUsize,
    parked: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Ticker {
    /// A store's guest is entered (the host calls into it).
    pub fn entered(&self) {
        self.running.fetch_add(1, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst)
            && let Some(thread) = self.thread.get()
        {
            thread.unpark();
        }
    }

    /// A store's guest returned, or its store is gone mid-call.
    pub fn left(&self) {
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether the ticker is parked (for tests).
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::SeqCst)
    }

    /// Ticks `engine` on this thread, for as long as wexec runs.
    pub fn run(&self, engine: &Engine) {
        let _ = self.thread.set(std::thread::current());
        let mut idle = 0;
        loop {
            std::thread::sleep(EPOCH_TICK);
            engine.increment_epoch();
            if self.running.load(Ordering::SeqCst) != 0 {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle < IDLE_TICKS {
                continue;
            }
            self.parked.store(true, Ordering::SeqCst);
            // `park` may return early; only a guest entering ends the wait.
            while self.running.load(Ordering::SeqCst) == 0 {
                std::thread::park();
            }
            self.parked.store(false, Ordering::SeqCst);
            idle = 0;
        }
    }
}

/// One store's place in its ticker's count: in while its guest runs, out when it returns or
/// when the store is dropped mid-call.
#[derive(Debug)]
pub struct GuestPresence {
    ticker: std::sync::Arc<Ticker>,
    /// Calls into the guest not yet returned (a guest may call the host, which calls it again).
    depth: u32,
}

impl GuestPresence {
    pub fn new(ticker: std::sync::Arc<Ticker>) -> Self {
        Self { ticker, depth: 0 }
    }

    /// The host calls into the guest.
    pub fn enter(&mut self) {
        if self.depth == 0 {
            self.ticker.entered();
        }
        self.depth += 1;
    }

    /// The guest returns to the host.
    pub fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            self.ticker.left();
        }
    }
}

impl Drop for GuestPresence {
    fn drop(&mut self) {
        if self.depth > 0 {
            self.ticker.left();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;

    fn wait_for(what: &str, condition: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn parks_when_idle_and_ticks_again_once_a_guest_enters() {
        let engine = Engine::new(wasmtime::Config::new().epoch_interruption(true)).unwrap();
        let ticker = Arc::new(Ticker::default());
        let ticking = (Arc::clone(&ticker), engine.clone());
        std::thread::spawn(move || ticking.0.run(&ticking.1));
        wait_for("the idle ticker parks", || ticker.is_parked());

        let mut presence = GuestPresence::new(Arc::clone(&ticker));
        presence.enter();
        wait_for("a guest's entry unparks it", || !ticker.is_parked());
        // Nested calls count once; a store dropped mid-call counts itself out.
        presence.enter();
        presence.leave();
        assert_eq!(ticker.running.load(Ordering::SeqCst), 1);
        drop(presence);
        assert_eq!(ticker.running.load(Ordering::SeqCst), 0);
        wait_for("idle again, it parks again", || ticker.is_parked());
    }
}
