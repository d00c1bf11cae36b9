//! Bookie storage behind one trait, [`Storage`], so the server's logic runs the same on real
//! files ([`FileStorage`]) and in memory ([`MemoryStorage`]).
//!
//! The contract: [`Storage::submit`] queues journal records and returns a [`Commit`] that
//! resolves `Ok` only after the fdatasync covering them (or at once with `--fsync never`);
//! submissions are journaled in call order, and records submitted while a sync runs share the
//! next one (group commit). An entry is readable ([`Storage::read`]) once its commit resolved.
//! [`Storage::checkpoint`] flushes entry logs and the index and trims the journal. Opening
//! storage recovers: everything whose commit resolved before a crash (kill -9) is there.
//!
//! - [`journal`] — the journal record format, the file scanner (torn tail cut, corruption
//!   refused) and the group-commit thread.
//! - [`file`](mod@file) — [`FileStorage`]: journal files, entry logs, the index log, checkpoints.
//! - [`memory`] — [`MemoryStorage`].

pub mod file;
pub mod journal;
pub mod memory;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::histogram::Histogram;
use crate::protocol::entry::MasterKey;

pub use file::{FileStorage, FileStorageOptions, FsyncMode};
pub use memory::MemoryStorage;

/// One journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A ledger's master key (first sighting; BookKeeper's `METAENTRY_ID_LEDGER_KEY`).
    Key {
        /// Ledger.
        ledger_id: i64,
        /// Its key.
        master_key: MasterKey,
    },
    /// An entry.
    Add {
        /// Ledger.
        ledger_id: i64,
        /// Entry.
        entry_id: i64,
        /// LAC from the entry's header.
        lac: i64,
        /// The encoded entry, stored as is.
        entry: Bytes,
    },
    /// The ledger is fenced (BookKeeper's `METAENTRY_ID_FENCE_KEY`).
    Fence {
        /// Ledger.
        ledger_id: i64,
    },
    /// The ledger was deleted (its metadata is gone): its key, fence and entries are dropped
    /// from the index; compaction reclaims the entry log space (BookKeeper's
    /// `LedgerStorage.deleteLedger`, run by the `GarbageCollectorThread`).
    Delete {
        /// Ledger.
        ledger_id: i64,
    },
}

/// A ledger as storage recovered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredLedger {
    /// Ledger.
    pub ledger_id: i64,
    /// Its master key.
    pub master_key: MasterKey,
    /// Fenced durably.
    pub fenced: bool,
    /// Highest LAC among its entries (-1: none).
    pub lac: i64,
    /// Highest entry id (-1: none).
    pub last_entry: i64,
    /// Entries stored.
    pub entries: u64,
}

/// What both storages keep of one ledger; `E` is an entry (in memory) or where it lies in the
/// entry log (on disk).
#[derive(Debug)]
struct LedgerState<E> {
    key: MasterKey,
    fenced: bool,
    lac: i64,
    entries: BTreeMap<i64, E>,
    adds: u64,
}

/// [`Storage::recovered`] of a storage's ledgers: one summary each, sorted by ledger id.
fn recovered_of<'a, E: 'a>(
    ledgers: impl IntoIterator<Item = (&'a i64, &'a LedgerState<E>)>,
) -> Vec<RecoveredLedger> {
    let mut v: Vec<RecoveredLedger> = ledgers
        .into_iter()
        .map(|(id, l)| RecoveredLedger {
            ledger_id: *id,
            master_key: l.key,
            fenced: l.fenced,
            lac: l.lac,
            last_entry: l.entries.keys().next_back().copied().unwrap_or(-1),
            entries: l.adds,
        })
        .collect();
    v.sort_by_key(|r| r.ledger_id);
    v
}

/// Storage failures.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// An I/O error; `context` says what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What failed.
        context: String,
        /// The error (shared: one failure answers a whole group).
        source: Arc<std::io::Error>,
    },
    /// The disk is full (ENOSPC or EDQUOT) while writing; nothing of the group was kept.
    #[error("disk full: {0}")]
    DiskFull(String),
    /// On-disk data is corrupt; the bookie must not start on it.
    #[error("corrupt {file} at offset {offset}: {reason}")]
    Corrupt {
        /// File.
        file: PathBuf,
        /// Byte offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An fsync failed earlier: what it covered may be lost, so the store accepts nothing more
    /// (restart to recover from the journal).
    #[error("storage poisoned by an earlier failure: {0}")]
    Poisoned(String),
    /// The storage thread is gone (stopped or panicked).
    #[error("storage stopped")]
    Stopped,
}

impl StorageError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> StorageError {
        let context = context.into();
        if is_disk_full(&source) {
            return StorageError::DiskFull(format!("{context}: {source}"));
        }
        StorageError::Io {
            context,
            source: Arc::new(source),
        }
    }

    /// The disk is full: switch to read-only.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StorageError::DiskFull(_))
    }
}

fn is_disk_full(e: &std::io::Error) -> bool {
    // ENOSPC, EDQUOT (ErrorKind::StorageFull is newer than the crate's MSRV).
    matches!(e.raw_os_error(), Some(code) if code == 28 || code == 122)
}

/// Result alias.
pub type Result<T> = std::result::Result<T, StorageError>;

/// A pending commit; resolves when its records are durable, or with the error that stopped
/// them.
#[derive(Debug)]
#[must_use = "an add may be acknowledged only after its Commit resolves Ok"]
pub struct Commit(oneshot::Receiver<Result<()>>);

impl Commit {
    /// A commit and the sender that resolves it.
    pub fn channel() -> (oneshot::Sender<Result<()>>, Commit) {
        let (tx, rx) = oneshot::channel();
        (tx, Commit(rx))
    }

    /// A commit already resolved.
    pub fn ready(result: Result<()>) -> Commit {
        let (tx, c) = Commit::channel();
        let _ = tx.send(result);
        c
    }
}

impl Future for Commit {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(StorageError::Stopped)))
    }
}

/// Space on the ledger dir's filesystem and what the bookie's files take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskUsage {
    /// Free bytes for unprivileged writers.
    pub free_bytes: u64,
    /// Filesystem size.
    pub total_bytes: u64,
    /// Bytes of journal, entry logs and index.
    pub used_bytes: u64,
}

/// Storage counters for `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct StorageStats {
    /// Journal fdatasync durations.
    pub fsync: Histogram,
    /// Checkpoints done.
    pub checkpoints: u64,
    /// Entry logs removed by garbage collection.
    pub gc_logs_removed: u64,
    /// Bytes of entry logs removed by garbage collection.
    pub gc_bytes_reclaimed: u64,
    /// Live entries copied by compaction.
    pub gc_entries_copied: u64,
}

/// The storage a bookie runs on. See the module docs.
pub trait Storage: Send + Sync + 'static {
    /// Queues `records` for the journal; the commit resolves once they are durable.
    fn submit(&self, records: Vec<Record>) -> Commit;

    /// The stored entry, `None` when absent. May block on disk I/O (call from a blocking
    /// context).
    ///
    /// # Errors
    /// [`StorageError`] on a read failure.
    fn read(&self, ledger_id: i64, entry_id: i64) -> Result<Option<Bytes>>;

    /// Flushes entry logs and the index, records the journal position, trims older journal
    /// files. Resolves when done.
    fn checkpoint(&self) -> Commit;

    /// Reclaims the disk space of deleted ledgers ([`Record::Delete`]): removes entry logs
    /// with no live entry and compacts mostly-dead ones. Resolves when done. The default (for
    /// stores with nothing to reclaim) resolves at once.
    fn collect_garbage(&self) -> Commit {
        Commit::ready(Ok(()))
    }

    /// What was recovered when the storage opened.
    fn recovered(&self) -> Vec<RecoveredLedger>;

    /// Disk space.
    fn disk_usage(&self) -> DiskUsage;

    /// Counters.
    fn stats(&self) -> StorageStats;

    /// Stops the storage thread after the queued work.
    fn shutdown(&self);
}
