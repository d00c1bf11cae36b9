//! Names of the crash-safety fail points in the storage layer.
//!
//! The points are evaluated with the `fail` crate's `fail_point!` macro, which compiles to nothing
//! unless the `failpoints` cargo feature is on; tests configure them with
//! `fail::cfg(NAME, "return")` (inject an I/O error) or `"panic"` (simulate a crash at that point).
//! This module only names the points and builds the injected error; it has no behaviour of its own.

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

/// All fail point names, for tests that reset them.
pub const ALL: &[&str] = &[
    WAL_BEFORE_WRITE,
    WAL_PARTIAL_WRITE,
    WAL_AFTER_WRITE,
    WAL_AFTER_FSYNC,
    SNAPSHOT_BEFORE_RENAME,
    SNAPSHOT_AFTER_RENAME,
];

/// The error a `return` fail point injects.
#[cfg_attr(not(feature = "failpoints"), allow(dead_code))]
pub(crate) fn injected(name: &str) -> std::io::Error {
    std::io::Error::other(format!("injected by fail point {name}"))
}
