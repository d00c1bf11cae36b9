//! [`FileStorage`]: the bookie's files, as BookKeeper's interleaved ledger storage lays them out.
//!
//! ```text
//! JOURNAL_DIR/current/journal-<seq:016x>.log   journal records (see `journal`), group-committed
//! LEDGER_DIR/current/entrylog-<id:08x>.log     entry logs: [len u32][ledger i64][entry i64][entry]
//! LEDGER_DIR/current/index.log                 index records: key, fence, location of each entry
//!                                              (index-<gen:016x>.log once garbage collection
//!                                              has rewritten it; the checkpoint names it)
//! LEDGER_DIR/current/checkpoint                the last checkpoint (journal seq, index and entry
//!                                              log lengths), replaced atomically
//! ```
//!
//! An add is written to the journal and to the current entry log in the same round; only the
//! journal is fdatasynced before the add is acknowledged (BookKeeper's `Journal` +
//! `EntryLogger`). The in-memory index (ledger, entry → entry log, offset) is updated after that
//! sync, so a read sees only durable entries. A checkpoint (BookKeeper's `SyncThread`) fsyncs
//! the entry log, appends the index changes to `index.log`, starts a new journal file, writes
//! the checkpoint file (temp file, fsync, rename, fsync dir) and deletes the journal files
//! before it. Recovery loads the index log up to the checkpoint, cuts the entry logs back to the
//! checkpoint, and replays the journal from there; a torn journal tail is cut, a corrupt record
//! refuses to open with the file and offset named.

mod compact;
mod layout;
mod recover;
mod sink;

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;

use super::journal::GroupCommit;
use super::{
    Commit, DiskUsage, LedgerState, Record, RecoveredLedger, Result, Storage, StorageError,
    StorageStats,
};
use crate::metrics::Histogram;
use crate::protocol::entry::{MasterKey, MASTER_KEY_LEN};
use layout::entry_log_name;

/// When the journal is fdatasynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncMode {
    /// Before every acknowledgement (group-committed).
    Always,
    /// Never: an add is acknowledged once written to the page cache. Survives kill -9, not a
    /// power loss. For tests and benchmarks.
    Never,
}

/// Tuning for [`FileStorage`].
#[derive(Debug, Clone)]
pub struct FileStorageOptions {
    /// Journal sync policy.
    pub fsync: FsyncMode,
    /// An entry log is closed and a new one started past this size.
    pub entry_log_size: u64,
    /// A checkpoint runs once this many journal bytes were written since the last one.
    pub checkpoint_bytes: u64,
    /// Garbage collection compacts an entry log whose live bytes are under this share of its
    /// size (copies them to the current log and removes it); a log with none is removed.
    /// BookKeeper's major compaction threshold, 0.8 by default; 0 only removes empty logs.
    pub compaction_threshold: f64,
}

impl Default for FileStorageOptions {
    fn default() -> Self {
        FileStorageOptions {
            fsync: FsyncMode::Always,
            entry_log_size: 256 << 20,
            checkpoint_bytes: 64 << 20,
            compaction_threshold: 0.8,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Loc {
    log: u32,
    offset: u64,
    len: u32,
}

/// One ledger in the index: where each of its entries lies.
type LedgerIndex = LedgerState<Loc>;

#[derive(Debug, Default)]
struct Index {
    ledgers: HashMap<i64, LedgerIndex>,
}

impl Index {
    fn key(&mut self, ledger_id: i64, key: MasterKey) -> bool {
        let mut new = false;
        self.ledgers.entry(ledger_id).or_insert_with(|| {
            new = true;
            LedgerIndex {
                key,
                fenced: false,
                lac: -1,
                entries: BTreeMap::new(),
                adds: 0,
            }
        });
        new
    }
}

/// State shared by the journal thread and readers.
#[derive(Debug, Default)]
struct Shared {
    index: RwLock<Index>,
    logs: RwLock<HashMap<u32, Arc<File>>>,
    fsyncs: Mutex<Histogram>,
    checkpoints: AtomicU64,
    gc: GcCounters,
}

/// What garbage collection did, since the store opened.
#[derive(Debug, Default)]
struct GcCounters {
    logs_removed: AtomicU64,
    bytes_reclaimed: AtomicU64,
    copied: AtomicU64,
}

/// The file store. See the module docs.
#[derive(Debug)]
pub struct FileStorage {
    journal: GroupCommit,
    shared: Arc<Shared>,
    recovered: Vec<RecoveredLedger>,
    ledger_dir: PathBuf,
    journal_dir: PathBuf,
}

/// `DIR/current`, where the bookie keeps its files (and the cookie, `VERSION`).
pub fn current_dir(dir: &Path) -> PathBuf {
    dir.join("current")
}

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

impl Storage for FileStorage {
    fn submit(&self, records: Vec<Record>) -> Commit {
        self.journal.submit(records)
    }

    fn read(&self, ledger_id: i64, entry_id: i64) -> Result<Option<Bytes>> {
        // The handle is taken under the index lock: garbage collection moves an entry in the
        // index before it removes the log the entry was in.
        let (loc, file) = {
            let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
            let loc = match index
                .ledgers
                .get(&ledger_id)
                .and_then(|l| l.entries.get(&entry_id))
            {
                Some(loc) => *loc,
                None => return Ok(None),
            };
            let file = self
                .shared
                .logs
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&loc.log)
                .cloned()
                .ok_or_else(|| StorageError::Corrupt {
                    file: current_dir(&self.ledger_dir).join(entry_log_name(loc.log)),
                    offset: loc.offset,
                    reason: "entry log missing".into(),
                })?;
            (loc, file)
        };
        let mut buf = vec![0u8; loc.len as usize];
        file.read_exact_at(&mut buf, loc.offset)
            .map_err(|e| StorageError::io(format!("read entry log {:08x}", loc.log), e))?;
        Ok(Some(Bytes::from(buf)))
    }

    fn checkpoint(&self) -> Commit {
        self.journal.checkpoint()
    }

    fn collect_garbage(&self) -> Commit {
        self.journal.collect_garbage()
    }

    fn recovered(&self) -> Vec<RecoveredLedger> {
        self.recovered.clone()
    }

    fn disk_usage(&self) -> DiskUsage {
        let stats = fs4::statvfs(&self.ledger_dir).ok();
        let ledger_cur = current_dir(&self.ledger_dir);
        let journal_cur = current_dir(&self.journal_dir);
        let mut used = dir_bytes(&ledger_cur);
        if journal_cur != ledger_cur {
            used += dir_bytes(&journal_cur);
        }
        DiskUsage {
            free_bytes: stats.as_ref().map_or(0, |s| s.available_space()),
            total_bytes: stats.as_ref().map_or(0, |s| s.total_space()),
            used_bytes: used,
        }
    }

    fn stats(&self) -> StorageStats {
        StorageStats {
            fsync: self
                .shared
                .fsyncs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            checkpoints: self.shared.checkpoints.load(Relaxed),
            gc_logs_removed: self.shared.gc.logs_removed.load(Relaxed),
            gc_bytes_reclaimed: self.shared.gc.bytes_reclaimed.load(Relaxed),
            gc_entries_copied: self.shared.gc.copied.load(Relaxed),
        }
    }

    fn shutdown(&self) {
        self.journal.shutdown();
    }
}

// Keep the key length in sync with the index record layout above.
const _: () = assert!(MASTER_KEY_LEN == 32);
