//! Per-instance host state: WASI that grants nothing, the plugin's identity and grants, the
//! memory limiter, the guest-time clock and the context of the call in progress.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use wexec_protocol::PluginSummary;

use crate::bindings::wexec::plugin::types::Capability;
use crate::facts::EnvironmentFacts;
use crate::fs::{FileHandles, FsPolicy, Roots, WatchSlot};
use crate::grants::Grants;
use crate::limits::Limits;
use crate::net;
use crate::port::{CallPort, Room};

/// How much of a guest's stderr is kept (the tail of a panic message, for error reports).
pub const STDERR_CAPTURE_BYTES: usize = 64 * 1024;

/// Core instances, tables and memories one plugin instance may create: generous for a component
/// (a Rust component has a handful of each), small enough to stop a runaway.
const MAX_INSTANCES: usize = 64;
const MAX_TABLES: usize = 64;
const MAX_MEMORIES: usize = 16;
/// Elements one table may grow to.
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// What one plugin may use, as its instances see it: its name, what it declared, what it was
/// granted, its limits, and its filesystem roots, opened.
#[derive(Debug, Default)]
pub struct Granted {
    /// Its name.
    pub name: String,
    /// The capabilities it declared.
    pub capabilities: Vec<Capability>,
    /// Its declarations intersected with the operator's grants.
    pub grants: Grants,
    /// Its limits.
    pub limits: Limits,
    /// Its filesystem roots, opened.
    pub roots: Roots,
}

impl Granted {
    /// Whether the plugin declared `capability`.
    pub fn declared(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }
}

/// State shared by every instance.
#[derive(Debug)]
pub struct Shared {
    /// Host facts for the environment capability.
    pub facts: Arc<EnvironmentFacts>,
    /// Summaries of every loaded plugin (filled once loading completes).
    pub plugins: Mutex<Vec<PluginSummary>>,
    /// The HTTP client.
    pub http: net::Client,
    /// The epoch ticker every store counts its guest's calls in with.
    pub ticker: Arc<crate::ticker::Ticker>,
    /// Stores alive (each holds an instance slot once instantiated), idle ones included.
    pub stores: Arc<std::sync::atomic::AtomicUsize>,
}

/// What the capabilities need to know about the call in progress.
pub struct CallContext {
    /// The way back to the client (early replies, notifications, room for file contents);
    /// `None` for wexec's own calls, which have no client.
    pub port: Option<Arc<dyn CallPort>>,
    /// The file handles the called plugin opened on the calling connection.
    pub handles: Arc<FileHandles>,
    /// The called plugin's watch on the calling connection.
    pub watch: Arc<WatchSlot>,
    /// The request's `sandbox` (and the ceiling) for the filesystem capability, if any.
    pub sandbox: Option<Arc<dyn FsPolicy>>,
}

/// The state of one plugin instance's store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// What the guest wrote to stderr (panic messages).
    pub stderr: MemoryOutputPipe,
    /// What the plugin this instance runs may use.
    pub plugin: Arc<Granted>,
    /// Process-wide capability state.
    pub shared: Arc<Shared>,
    /// Memory limit enforcement.
    pub limiter: Limiter,
    /// Guest execution time of the current call.
    pub clock: CallClock,
    /// The call in progress, if any.
    pub call: Option<CallContext>,
    /// Bytes of file `contents` the guest holds (outside its memory, so counted here).
    pub contents_held: u64,
    /// What the current call has logged.
    pub log: LogBudget,
    /// Room the current call reserved for HTTP bodies it read, given back when it returns.
    pub rooms: Vec<Room>,
    /// Keeps the epoch ticker running while this store's guest is inside a call.
    pub presence: crate::ticker::GuestPresence,
    /// This store's place in [`Shared::stores`].
    _counted: StoreCount,
}

/// One store in [`Shared::stores`], for as long as it lives.
struct StoreCount(Arc<std::sync::atomic::AtomicUsize>);

impl StoreCount {
    fn new(stores: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        stores.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(Arc::clone(stores))
    }
}

impl Drop for StoreCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl HostState {
    /// Fresh state for an instance of `plugin`. WASI gets no preopens, no environment, no
    /// arguments, no sockets and no stdin; stdout is discarded and stderr captured.
    pub fn new(plugin: Arc<Granted>, shared: Arc<Shared>) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE_BYTES);
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
        Self {
            wasi,
            table: ResourceTable::new(),
            stderr,
            limiter: Limiter {
                memory_limit: plugin.limits.memory_bytes,
                memory_exceeded: false,
            },
            clock: CallClock::new(plugin.limits.time),
            plugin,
            presence: crate::ticker::GuestPresence::new(Arc::clone(&shared.ticker)),
            _counted: StoreCount::new(&shared.stores),
            shared,
            call: None,
            contents_held: 0,
            log: LogBudget::default(),
            rooms: Vec::new(),
        }
    }

    /// Reserves room in the calling connection's replies for `bytes` of payload (file
    /// contents, an HTTP body), waiting while its client is not reading its replies (the wait
    /// is host time, not the guest's).
    pub async fn reserve_room(&mut self, bytes: u64) -> Room {
        let Some(port) = self.call.as_ref().and_then(|call| call.port.clone()) else {
            return Room::default();
        };
        // While the client keeps up, as cheap as an atomic operation.
        if let Some(room) = port.try_room(bytes) {
            return room;
        }
        let started = Instant::now();
        let room = port.room(bytes).await;
        self.clock.add_host_time(started.elapsed());
        room
    }

    /// The resource table (host resources handed to the guest, e.g. HTTP bodies).
    pub fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// The last lines the guest wrote to stderr, for error reports.
    pub fn stderr_tail(&self) -> Option<String> {
        let contents = self.stderr.contents();
        let text = String::from_utf8_lossy(&contents);
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        let tail: Vec<&str> = text.lines().rev().take(4).collect();
        Some(tail.into_iter().rev().collect::<Vec<_>>().join(" / "))
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Enforces the plugin's memory limit; remembers a refusal so the failure can be named.
pub struct Limiter {
    memory_limit: usize,
    /// Set when the guest tried to grow past its limit.
    pub memory_exceeded: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.memory_exceeded = true;
            // Trapping (rather than failing the grow) stops the guest at once with a cause
            // wexec can name; a failed grow would surface as an opaque abort.
            return Err(wasmtime::Error::msg("plugin memory limit exceeded"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

/// Measures a call's guest execution time: wall time minus time spent blocked in host I/O
/// (docs/protocol.md §11.3: disk and network waits do not count).
pub struct CallClock {
    limit: Duration,
    started: Instant,
    in_host: Duration,
    /// Set when the limit was hit.
    pub timed_out: bool,
}

impl CallClock {
    fn new(limit: Duration) -> Self {
        Self {
            limit,
            started: Instant::now(),
            in_host: Duration::ZERO,
            timed_out: false,
        }
    }

    /// Starts timing a call.
    pub fn start(&mut self) {
        self.started = Instant::now();
        self.in_host = Duration::ZERO;
        self.timed_out = false;
    }

    /// Records time spent blocked in a host import.
    pub fn add_host_time(&mut self, spent: Duration) {
        self.in_host += spent;
    }

    /// Whether the guest has used up its time; marks the clock if so.
    pub fn check(&mut self) -> bool {
        if self.guest_time() > self.limit {
            self.timed_out = true;
        }
        self.timed_out
    }

    /// The guest's own execution time in this call so far.
    pub fn guest_time(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.in_host)
    }

    /// The limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }
}

/// What a call has logged so far.
#[derive(Debug, Default)]
pub struct LogBudget {
    pub(crate) used: usize,
    pub(crate) dropped_lines: u64,
    pub(crate) dropped_bytes: usize,
}

impl LogBudget {
    /// A call begins.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// A call ended: says how much it could not log.
    pub fn report(&self, plugin: &str, limit: usize) {
        if self.dropped_lines > 0 {
            tracing::warn!(
                plugin,
                "{} log lines ({} bytes) dropped: a call may log {limit} bytes (--plugin-log-limit-kib)",
                self.dropped_lines,
                self.dropped_bytes
            );
        }
    }
}
