//! Waiting for the next request: a short spin on stdin before stdio's processor thread blocks in
//! `read`, while the client sends its requests quickly.
//!
//! Why: an idle CPU halts, and on a VM a halted vCPU is woken through the hypervisor. A client
//! on another CPU that sends its next request right after a reply then pays for that wakeup,
//! and wexec's thread resumes with cold caches: with the client on CPU 0 and wexec on CPU 1, a
//! 4 KiB `fs/readFile` took 19.9 µs instead of 13.6 µs and `environment/status` 10.5 µs
//! instead of 6.8 µs (`fs_vs_mcp`, 2026-12-06), and the thread's own CPU time per request
//! doubled. Polling stdin for a while keeps the thread running, so the client's write finds it
//! awake. Linux's `busy_poll` sockets and Go's spinning scheduler threads make the same trade.
//! What clients are told: docs/protocol.md §6, "Latency".
//!
//! Bounds:
//!
//! 1. **Only while the client is quick.** A wait spins only when the last timed wait (from the
//!    moment wexec began to wait until the line was read) took at most the window; an agent
//!    that thinks between calls never pays for it, and the end of a burst costs one window.
//! 2. **At most one window** ([`WINDOW`]), after which the thread blocks in `read` as before.
//!    Input, end of input and errors all end the spin at once (the `read` that follows reports
//!    them).
//! 3. **Out of the client's way.** Every look that finds no input yields the CPU, so a client
//!    on the same CPU can run (`sched_yield` moves wexec behind the threads runnable there);
//!    with one CPU online (as `/sys/devices/system/cpu/online` lists them; two are assumed
//!    when it cannot be read) there is no other CPU for the client to be on, and nothing
//!    spins.
//! 4. **Not while spinning saves nothing.** Input that is there at the first look, or that
//!    turns up right after a yield that let another thread run, says the client most likely
//!    shares wexec's CPU (it ran when the reply woke it, or while wexec yielded), where spinning
//!    only adds system calls (5–7% of a 4 KiB read on one CPU). Two such spins in a row, and
//!    the next [`SHARED_CPU_REST`] waits block at once, untimed (two clock reads per request
//!    cost 3–4% there); then the next wait is timed afresh. One is not enough: with the client
//!    on another CPU, some other thread on wexec's CPU took the yield in 12 of 4,056 spins,
//!    and resting after each of those left a third of the waits unspun (`fs_vs_mcp`,
//!    2026-12-06).
//!
//! The tests below hold bounds 1, 2 and 4 (but the yield's timing, which no test can force)
//! and the CPU list; `tests/tests/stdio_spin.rs` that a quick client on another CPU finds the
//! real binary awake, and that a quiet one costs it no CPU.

use std::fs::File;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

/// How long a wait spins: what a quick client on another CPU takes to answer a reply (a Rust
/// client 2–10 µs, a Python one ~15–20 µs, with the cross-CPU wakeup of the reply), with
/// room; `busy_poll`'s usual setting.
pub const WINDOW: Duration = Duration::from_micros(50);

/// A yield that took longer than this let another thread run.
const GAVE_WAY: Duration = Duration::from_micros(3);

/// Waits that block at once after two needless spins in a row (bound 4).
pub const SHARED_CPU_REST: u32 = 256;

/// How a wait began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spun {
    /// The last timed wait was slow, or the spin rests: straight to `read`.
    No,
    /// Input (or its end) arrived while spinning alone.
    UntilReady,
    /// Input was there at the first look, or came while another thread had the CPU (most
    /// likely the client's): the spin saved nothing.
    Needless,
    /// Nothing arrived within the window.
    Window,
}

/// stdin's spin state.
#[derive(Debug)]
pub struct InputSpin {
    input: File,
    window: Duration,
    /// Whether the last timed wait ended within the window.
    quick: bool,
    /// Waits left that block at once because the client shares the CPU (bound 4).
    rest: u32,
    /// The last spin was needless (reset by any other outcome).
    needless_last: bool,
    /// When the wait under way began.
    since: Option<Instant>,
}

impl InputSpin {
    /// For stdin, on a machine where the client may be on another CPU; `None` otherwise.
    pub fn new(stdin: &File) -> Option<Self> {
        if online_cpus() < 2 {
            return None;
        }
        Self::with_window(stdin, WINDOW)
    }

    fn with_window(input: &File, window: Duration) -> Option<Self> {
        let input = input
            .try_clone()
            .inspect_err(|err| tracing::debug!("stdin is not polled before reads: {err}"))
            .ok()?;
        Some(Self {
            input,
            window,
            quick: false,
            rest: 0,
            needless_last: false,
            since: None,
        })
    }

    /// Called before a blocking read: spins while the client has been quick (bound 1), for at
    /// most the window (bound 2), yielding the CPU at every look (bound 3), and not while
    /// spinning saves nothing (bound 4).
    pub(crate) fn before_wait(&mut self) -> Spun {
        // Resting, the wait is not timed: not even the clock is read.
        if self.rest > 0 {
            self.rest -= 1;
            if self.rest == 0 {
                // What the client did before the rest says nothing now: time the next wait.
                self.quick = false;
            }
            return Spun::No;
        }
        let start = Instant::now();
        self.since = Some(start);
        if !self.quick {
            self.needless_last = false;
            return Spun::No;
        }
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // At the first look a read would not wait either.
        let mut needless = true;
        loop {
            let mut fds = [PollFd::new(&self.input, PollFlags::IN)];
            // Ready, hung up, or an error: the read that follows says which.
            if !matches!(rustix::event::poll(&mut fds, Some(&zero)), Ok(0)) {
                return self.input_came(needless);
            }
            let turn = Instant::now();
            if turn - start >= self.window {
                self.needless_last = false;
                return Spun::Window;
            }
            rustix::thread::sched_yield();
            needless = turn.elapsed() > GAVE_WAY;
        }
    }

    /// Input came during a spin: at the first look or right after another thread's turn on
    /// this CPU (`needless`: a read would not have waited, or not for a halted CPU), or after
    /// spinning alone.
    fn input_came(&mut self, needless: bool) -> Spun {
        let twice = needless && self.needless_last;
        self.needless_last = needless && !twice;
        if twice {
            self.rest = SHARED_CPU_REST;
        }
        if needless {
            Spun::Needless
        } else {
            Spun::UntilReady
        }
    }

    /// Called once the read has returned: whether this wait, if timed, was quick.
    pub(crate) fn after_wait(&mut self) {
        if let Some(since) = self.since.take() {
            self.quick = since.elapsed() <= self.window;
        }
    }
}

/// CPUs online (not wexec's affinity: the client may run on a CPU wexec may not); 2 when unknown.
fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| count_cpus(list.trim()))
        .unwrap_or(2)
}

/// The CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn count_cpus(list: &str) -> Option<usize> {
    list.split(',').try_fold(0, |count, range| {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last) = (first.parse::<usize>().ok()?, last.parse::<usize>().ok()?);
        Some(count + last.checked_sub(first)? + 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pipe() -> (File, File) {
        let (reader, writer) = rustix::pipe::pipe().expect("pipe");
        (File::from(reader), File::from(writer))
    }

    /// A wait that ends at once, as a quick client's does.
    fn quick_wait(spin: &mut InputSpin) -> Spun {
        let spun = spin.before_wait();
        spin.after_wait();
        spun
    }

    #[test]
    fn the_first_wait_and_any_after_a_slow_one_do_not_spin() {
        let (reader, _writer) = pipe();
        let mut spin = InputSpin::with_window(&reader, Duration::from_millis(1)).expect("spin");
        assert_eq!(spin.before_wait(), Spun::No);
        std::thread::sleep(Duration::from_millis(5));
        spin.after_wait();
        assert_eq!(quick_wait(&mut spin), Spun::No, "the last wait was slow");
    }

    #[test]
    fn after_a_quick_wait_the_next_spins_until_input_arrives() {
        let (reader, mut writer) = pipe();
        let mut spin = InputSpin::with_window(&reader, Duration::from_secs(30)).expect("spin");
        assert_eq!(quick_wait(&mut spin), Spun::No);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            writer.write_all(b"{}\n").expect("write");
            writer
        });
        // Needless only if another thread took a yield just before the input came.
        assert!(matches!(
            spin.before_wait(),
            Spun::UntilReady | Spun::Needless
        ));
        spin.after_wait();
        drop(sender.join());
    }

    #[test]
    fn input_there_at_the_first_look_twice_rests_the_spin_then_times_afresh() {
        let (reader, mut writer) = pipe();
        let mut spin = InputSpin::with_window(&reader, Duration::from_secs(30)).expect("spin");
        writer.write_all(b"{}\n").expect("write");
        spin.quick = true;
        assert_eq!(quick_wait(&mut spin), Spun::Needless);
        assert_eq!(spin.rest, 0, "once is no sign");
        assert_eq!(quick_wait(&mut spin), Spun::Needless);
        assert_eq!(spin.rest, SHARED_CPU_REST, "twice in a row is");
        for _ in 0..SHARED_CPU_REST {
            assert_eq!(quick_wait(&mut spin), Spun::No);
        }
        assert!(!spin.quick, "the rest's end forgets the client's pace");
        assert_eq!(
            quick_wait(&mut spin),
            Spun::No,
            "the first wait after it is timed"
        );
        assert_eq!(quick_wait(&mut spin), Spun::Needless);
        assert_eq!(spin.rest, 0);
    }

    #[test]
    fn any_other_outcome_between_two_needless_spins_breaks_the_row() {
        let (reader, _writer) = pipe();
        let mut spin = InputSpin::with_window(&reader, Duration::from_micros(200)).expect("spin");
        spin.input_came(true);
        spin.input_came(false);
        spin.input_came(true);
        assert_eq!(spin.rest, 0, "a useful spin between");
        spin.quick = true;
        assert_eq!(spin.before_wait(), Spun::Window);
        spin.input_came(true);
        assert_eq!(spin.rest, 0, "a spin that found nothing between");
        spin.quick = false;
        assert_eq!(spin.before_wait(), Spun::No);
        spin.input_came(true);
        assert_eq!(spin.rest, 0, "a wait that did not spin between");
        spin.input_came(true);
        assert_eq!(spin.rest, SHARED_CPU_REST);
    }

    #[test]
    fn a_spin_ends_after_the_window_and_at_end_of_input() {
        let (reader, writer) = pipe();
        let mut spin = InputSpin::with_window(&reader, Duration::from_micros(200)).expect("spin");
        spin.quick = true;
        let start = Instant::now();
        assert_eq!(spin.before_wait(), Spun::Window);
        assert!(start.elapsed() >= Duration::from_micros(200));
        spin.quick = true;
        drop(writer);
        assert!(
            matches!(spin.before_wait(), Spun::UntilReady | Spun::Needless),
            "end of input is ready"
        );
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpus("0"), Some(1));
        assert_eq!(count_cpus("0-1"), Some(2));
        assert_eq!(count_cpus("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpus("3-1"), None);
        assert_eq!(count_cpus(""), None);
    }
}
