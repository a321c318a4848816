//! Limits a client can run into, the numbers of docs/protocol.md §12. Both sides of the
//! boundary read them from here: the host enforces them, the bundled plugins and the client
//! stay within them.

/// Largest message wexec accepts or sends, in bytes. Large enough for a 32 MiB file or HTTP
/// body in base64 plus its envelope.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// Largest file `fs/readFile` returns, in bytes.
pub const MAX_READ_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// Largest response body a buffered `http/request` returns, in bytes: its base64 fits a
/// [`MAX_MESSAGE_BYTES`] message.
pub const MAX_HTTP_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Most decoded bytes one `http/request/bodyDelta` carries.
pub const MAX_HTTP_DELTA_BYTES: usize = 1024 * 1024;

/// Largest block `fs/readBlock` reads or `fs/writeBlock` writes at once, in bytes.
pub const MAX_BLOCK_BYTES: usize = 1024 * 1024;

/// Most files one plugin may hold open on one connection, opens in progress included.
pub const MAX_HANDLES: usize = 128;

/// Longest `handleId`, in bytes.
pub const MAX_HANDLE_ID_BYTES: usize = 32;

/// Longest id a client chooses for something wexec keeps (`processId` on `process/start`,
/// `writeId`, a streaming `http/request`'s `requestId`), in bytes. Codex's are short (call ids,
/// UUIDs); each is kept as long as what it names, some twice.
pub const MAX_ID_BYTES: usize = 256;

/// Longest request path, in bytes: Linux's `PATH_MAX`; a longer path cannot be opened anyway.
pub const MAX_PATH_BYTES: usize = 4096;

/// Most components one path resolution walks, counting those symlink targets splice in.
pub const MAX_PATH_COMPONENTS: usize = 1024;

/// Deepest `fs/walk` (`options.maxDepth`; 0 = direct children only).
pub const MAX_WALK_DEPTH: u64 = 64;

/// Most directories one `fs/walk` traverses (`options.maxDirectories`), the root included.
pub const MAX_WALK_DIRECTORIES: u64 = 10_000;

/// Most entries one `fs/walk` examines (`options.maxEntries`).
pub const MAX_WALK_ENTRIES: u64 = 50_000;

/// Most filesystem entries of one request's `sandbox` (all of a `capabilityRoots/discoverV1`'s
/// sandboxes together): Codex sends a few dozen; each costs the policy work with every other.
pub const MAX_SANDBOX_ENTRIES: usize = 256;

/// Most `missing` paths one `fs/watchMissing` may watch (duplicates count).
pub const MAX_WATCH_PATHS: usize = 64;

/// Most distinct ancestor directories (`/` included) of the `missing` paths of one watch.
pub const MAX_WATCH_ANCESTORS: usize = 64;
