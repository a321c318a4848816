//! Waiting for the next request: a short spin on stdin before stdio's processor thread blocks in
//! `read`, while the client sends its requests quickly.
//!
//! Why: an idle CPU halts, and on a VM a halted vCPU is woken through the hypervisor. A client
//! on another CPU that sends its next request right after a reply then pays for that wakeup,
//! and wexec's thread resumes with cold caches: small requests took markedly longer and cost
//! the thread more CPU each (`fs_vs_mcp` with client and wexec on different CPUs shows it;
//! docs/performance.md). Polling stdin for a while keeps the thread running, so the client's
//! write finds it awake. Linux's `busy_poll` sockets and Go's spinning scheduler threads make the same trade.
//! What clients are told: docs/protocol.md §6, "Latency".
//!
//! Bounds:
//!
//! 1. **Only while the client is quick, with work.** A wait spins only when the last timed wait
//!    (from the moment wexec began to wait until the line was read) took at most the window
//!    and brought a request for a method wexec serves; an agent that thinks between calls
//!    never pays for it, the end of a burst costs one window, and lines that are not such
//!    requests — blank, malformed, a notification, an unknown method — never make a client
//!    quick ([`InputSpin::not_work`]): sent in a stream, they would buy a spinning thread for
//!    nothing. (Requests for served methods with bad params still count: bound 3 holds them.)
//! 2. **At most one window** ([`WINDOW`]), after which the thread blocks in `read` as before.
//!    Input, end of input and errors all end the spin at once (the `read` that follows reports
//!    them).
//! 3. **At most half the time.** Spinning earns credit at half the rate of wall time, up to
//!    [`MAX_CREDIT`]; a spin needs a window's worth and spends what it takes (a spin that
//!    overran, descheduled, leaves a debt): however a client paces its requests, the spin
//!    takes at most about half of the thread's time over any stretch longer than the credit.
//!    A quick client's spins are shorter than the work they wait between, so it rarely meets
//!    the bound.
//! 4. **Out of the client's way.** Every look that finds no input yields the CPU, so a client
//!    on the same CPU can run (`sched_yield` moves wexec behind the threads runnable there);
//!    with one CPU online (as `/sys/devices/system/cpu/online` lists them; two are assumed
//!    when it cannot be read) there is no other CPU for the client to be on, and nothing
//!    spins.
//! 5. **Not while spinning saves nothing.** Input that is there at the first look, or that
//!    turns up right after a yield that let another thread run, says the client most likely
//!    shares wexec's CPU (it ran when the reply woke it, or while wexec yielded), where spinning
//!    only adds system calls. Two such spins in a row, and the next [`SHARED_CPU_REST`] waits
//!    block at once, untimed (even reading the clock costs there); then the next wait is
//!    timed afresh. One is not enough: with the client on another CPU, some other thread on
//!    wexec's CPU now and then takes a yield, and resting after each of those would leave many
//!    waits unspun.
//!
//! Operators turn it off with `--no-stdio-spin` (docs/protocol.md §12).
//!
//! The tests below hold bounds 1, 2, 3 and 5 (but the yield's timing, which no test can force)
//! and the CPU list; `tests/tests/stdio_spin.rs` that a quick client on another CPU finds the
//! real binary awake, and that a quiet one costs it no CPU.

use std::fs::File;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};

/// How long a wait spins: longer than a quick client on another CPU (in Rust or in Python)
/// takes to answer a reply, the cross-CPU wakeup of the reply included, with room;
/// `busy_poll`'s usual setting.
pub const WINDOW: Duration = Duration::from_micros(50);

/// Most spin credit kept (bound 3): a burst of quick requests after a pause spins at once.
pub const MAX_CREDIT: Duration = Duration::from_millis(2);

/// A yield that took longer than this let another thread run.
const GAVE_WAY: Duration = Duration::from_micros(3);

/// Waits that block at once after two needless spins in a row (bound 5).
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
    /// Waits left that block at once because the client shares the CPU (bound 5).
    rest: u32,
    /// The last spin was needless (reset by any other outcome).
    needless_last: bool,
    /// When the wait under way began.
    since: Option<Instant>,
    /// Spinning time earned and not spent (bound 3), as of `credited`, in nanoseconds: below
    /// zero when a spin overran what it had (a yield that lasted), which later time repays.
    credit: i64,
    /// When credit was last earned.
    credited: Option<Instant>,
    /// Most credit kept ([`MAX_CREDIT`]; tests raise it).
    max_credit: i64,
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
        Self::with_limits(input, window, MAX_CREDIT)
    }

    fn with_limits(input: &File, window: Duration, max_credit: Duration) -> Option<Self> {
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
            credit: nanos(max_credit),
            credited: None,
            max_credit: nanos(max_credit),
        })
    }

    /// Called before a blocking read: spins while the client has been quick with work (bound
    /// 1), for at most the window (bound 2) and the credit (bound 3), yielding the CPU at every
    /// look (bound 4), and not while spinning saves nothing (bound 5).
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
        if !self.may_spin(start) || !self.quick {
            self.needless_last = false;
            return Spun::No;
        }
        let spun = self.spin(start, self.window);
        self.spent(start.elapsed());
        spun
    }

    /// Earns credit for the time since the last look, at half its rate; whether there is
    /// enough for a whole window (slivers of spins would cost their overhead for nothing).
    /// Bound 3.
    fn may_spin(&mut self, now: Instant) -> bool {
        if let Some(credited) = self.credited {
            self.credit = (self.credit + nanos(now - credited) / 2).min(self.max_credit);
        }
        self.credited = Some(now);
        self.credit >= nanos(self.window)
    }

    /// Spends what a spin took (its time is earned back from at the next look, as any other).
    fn spent(&mut self, spun: Duration) {
        self.credit -= nanos(spun);
    }

    /// Looks for input until `limit` has passed since `start`.
    fn spin(&mut self, start: Instant, limit: Duration) -> Spun {
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
            if turn - start >= limit {
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

    /// What the last wait brought is no work wexec serves (a blank or malformed line, a
    /// notification, an unknown method): it does not make the client quick (bound 1).
    pub fn not_work(&mut self) {
        self.quick = false;
    }
}

/// `duration` in nanoseconds, saturating.
fn nanos(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
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
        let long = Duration::from_secs(30);
        let mut spin = InputSpin::with_limits(&reader, long, long * 2).expect("spin");
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
        let long = Duration::from_secs(30);
        let mut spin = InputSpin::with_limits(&reader, long, long * 2).expect("spin");
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
        // Credit that a spin overrun by a loaded machine cannot spend.
        let mut spin =
            InputSpin::with_limits(&reader, Duration::from_micros(200), Duration::from_secs(60))
                .expect("spin");
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
    fn a_line_that_is_no_work_never_makes_the_client_quick() {
        let (reader, _writer) = pipe();
        let mut spin = InputSpin::with_window(&reader, Duration::from_micros(200)).expect("spin");
        assert_eq!(quick_wait(&mut spin), Spun::No);
        spin.not_work();
        assert_eq!(quick_wait(&mut spin), Spun::No, "no work came: no spin");
        assert_eq!(spin.before_wait(), Spun::Window, "a quick request came");
    }

    #[test]
    fn spinning_takes_at_most_half_the_time() {
        let (reader, _writer) = pipe();
        let window = Duration::from_micros(50);
        let mut spin = InputSpin::with_window(&reader, window).expect("spin");
        // Time as the spin sees it, for a client whose request comes each time the spin gives
        // up, at once (all spin, were it not bounded), and the thread that now and then is
        // descheduled in a spin for a whole scheduler slice.
        let mut now = Instant::now();
        let start = now;
        let mut spinning = Duration::ZERO;
        for look in 0..1_000_000u32 {
            if spin.may_spin(now) {
                let took = if look % 97 == 0 {
                    Duration::from_millis(4)
                } else {
                    window
                };
                spin.spent(took);
                spinning += took;
                now += took;
            } else {
                now += Duration::from_micros(1);
            }
        }
        let total = (now - start).as_secs_f64();
        let share = spinning.as_secs_f64() / total;
        // Half the time, plus the first credit and a last overrun that nothing repaid.
        let bound = 0.5 + (MAX_CREDIT + Duration::from_millis(4)).as_secs_f64() / total;
        assert!(share <= bound, "spun {share:.3} of the time");
        assert!(share >= 0.45, "spun only {share:.3} of the time");
    }

    #[test]
    fn a_spin_needs_a_window_of_credit() {
        let (reader, _writer) = pipe();
        let window = Duration::from_micros(50);
        let mut spin = InputSpin::with_window(&reader, window).expect("spin");
        let now = Instant::now();
        assert!(spin.may_spin(now), "a full credit to begin with");
        spin.spent(MAX_CREDIT);
        assert!(!spin.may_spin(now));
        assert!(!spin.may_spin(now + window), "half a window earned");
        assert!(spin.may_spin(now + window * 2));
        spin.spent(window * 10);
        assert!(
            !spin.may_spin(now + window * 20),
            "an overrun is a debt, repaid before anything is spun again"
        );
        assert!(spin.may_spin(now + window * 22));
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
