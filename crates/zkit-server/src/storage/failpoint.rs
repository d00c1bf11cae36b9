//! Names of the crash-safety fail points in the storage layer, and of two deliberately broken
//! behaviours that prove the verification checkers (`zkit-verify`) catch real violations.
//!
//! The points are evaluated with the `fail` crate's `fail_point!` macro, which compiles to nothing
//! unless the `failpoints` cargo feature is on; tests configure them with
//! `fail::cfg(NAME, "return")` (inject an I/O error) or `"panic"` (simulate a crash at that point).
//! This module only names the points and builds the injected error; it has no behaviour of its own.
//!
//! [`ACK_BEFORE_WRITE`] and [`STALE_READS`] are not crash points but bugs on purpose, for tests
//! only: configured with `return(MS)`, they make the server acknowledge writes before they reach
//! the log, or answer reads from a stale cache. A server built without the feature cannot do
//! either.

/// In `Wal::append_batch`, before any byte of the batch is written.
pub const WAL_BEFORE_WRITE: &str = "storage::wal::before_write";
/// In `Wal::append_batch`, after half of the batch's bytes are written: a torn write.
pub const WAL_PARTIAL_WRITE: &str = "storage::wal::partial_write";
/// In `Wal::sync`, after the batch is written and before it is fsynced.
pub const WAL_AFTER_WRITE: &str = "storage::wal::after_write_before_fsync";
/// In `Wal::sync`, after the fsync and before the writers are acknowledged.
pub const WAL_AFTER_FSYNC: &str = "storage::wal::after_fsync_before_ack";
/// In `SnapshotStore::write_snapshot`, after the temp file is fsynced, before the rename.
pub const SNAPSHOT_BEFORE_RENAME: &str = "storage::snapshot::before_rename";
/// In `SnapshotStore::write_snapshot`, after the rename, before the directory fsync.
pub const SNAPSHOT_AFTER_RENAME: &str = "storage::snapshot::after_rename";

/// Broken on purpose (tests only), `return(MS)`: the group-commit thread acknowledges each
/// group before writing it, then waits MS before writing and fsyncing it, so a kill -9 in that
/// window loses acknowledged writes.
pub const ACK_BEFORE_WRITE: &str = "storage::commit::ack_before_write";
/// Broken on purpose (tests only), `return(MS)`: getData replies are served from a cache of
/// earlier replies for the same node (by czxid) for up to MS, never invalidated by writes: stale
/// reads.
pub const STALE_READS: &str = "pipeline::stale_reads";

/// Whether this build evaluates fail points (the `failpoints` feature); without it configuring
/// one has no effect.
pub const ENABLED: bool = cfg!(feature = "failpoints");

/// All fail point names, for tests that reset them.
pub const ALL: &[&str] = &[
    WAL_BEFORE_WRITE,
    WAL_PARTIAL_WRITE,
    WAL_AFTER_WRITE,
    WAL_AFTER_FSYNC,
    SNAPSHOT_BEFORE_RENAME,
    SNAPSHOT_AFTER_RENAME,
    ACK_BEFORE_WRITE,
    STALE_READS,
];

/// The error a `return` fail point injects.
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(crate) fn injected(name: &str) -> std::io::Error {
    std::io::Error::other(format!("injected by fail point {name}"))
}

/// The `MS` of a `return(MS)` action as a duration (300 ms when absent or not a number).
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(crate) fn millis_arg(arg: Option<String>) -> std::time::Duration {
    let ms = arg.and_then(|a| a.trim().parse().ok()).unwrap_or(300);
    std::time::Duration::from_millis(ms)
}
