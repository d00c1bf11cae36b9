//! [`MemoryStorage`]: the [`Storage`] contract in memory, for tests of the server's logic.
//! Commits resolve at once; [`MemoryStorage::set_full`] makes writes fail as a full disk does,
//! and [`MemoryStorage::set_free_bytes`] sets the free space the disk monitor sees. A bookie
//! started again on the same `MemoryStorage` sees what was committed, like a restart.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use bytes::Bytes;

use super::{
    recovered_of, Commit, DiskUsage, LedgerState, Record, RecoveredLedger, Result, Storage,
    StorageError, StorageStats,
};

/// One ledger in memory.
type Ledger = LedgerState<Bytes>;

/// In-memory storage. See the module docs.
#[derive(Debug)]
pub struct MemoryStorage {
    ledgers: Mutex<HashMap<i64, Ledger>>,
    full: AtomicBool,
    free: AtomicU64,
    checkpoints: AtomicU64,
}

impl Default for MemoryStorage {
    fn default() -> Self {
        MemoryStorage {
            ledgers: Mutex::default(),
            full: AtomicBool::new(false),
            free: AtomicU64::new(u64::MAX / 2),
            checkpoints: AtomicU64::new(0),
        }
    }
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }

    /// While set, every submit fails with [`StorageError::DiskFull`] and stores nothing.
    pub fn set_full(&self, full: bool) {
        self.full.store(full, Relaxed);
    }

    /// The free space [`Storage::disk_usage`] reports.
    pub fn set_free_bytes(&self, free: u64) {
        self.free.store(free, Relaxed);
    }
}

impl Storage for MemoryStorage {
    fn submit(&self, records: Vec<Record>) -> Commit {
        if self.full.load(Relaxed) {
            return Commit::ready(Err(StorageError::DiskFull(
                "memory storage set full".into(),
            )));
        }
        let mut ledgers = self.ledgers.lock().unwrap_or_else(|p| p.into_inner());
        for r in records {
            match r {
                Record::Key {
                    ledger_id,
                    master_key,
                } => {
                    ledgers.entry(ledger_id).or_insert(Ledger {
                        key: master_key,
                        fenced: false,
                        lac: -1,
                        entries: BTreeMap::new(),
                        adds: 0,
                    });
                }
                Record::Fence { ledger_id } => {
                    if let Some(l) = ledgers.get_mut(&ledger_id) {
                        l.fenced = true;
                    }
                }
                Record::Delete { ledger_id } => {
                    ledgers.remove(&ledger_id);
                }
                Record::Add {
                    ledger_id,
                    entry_id,
                    lac,
                    entry,
                } => {
                    if let Some(l) = ledgers.get_mut(&ledger_id) {
                        l.entries.insert(entry_id, entry);
                        l.lac = l.lac.max(lac);
                        l.adds += 1;
                    }
                }
            }
        }
        Commit::ready(Ok(()))
    }

    fn read(&self, ledger_id: i64, entry_id: i64) -> Result<Option<Bytes>> {
        let ledgers = self.ledgers.lock().unwrap_or_else(|p| p.into_inner());
        Ok(ledgers
            .get(&ledger_id)
            .and_then(|l| l.entries.get(&entry_id))
            .cloned())
    }

    fn checkpoint(&self) -> Commit {
        self.checkpoints.fetch_add(1, Relaxed);
        Commit::ready(Ok(()))
    }

    fn recovered(&self) -> Vec<RecoveredLedger> {
        let ledgers = self.ledgers.lock().unwrap_or_else(|p| p.into_inner());
        recovered_of(ledgers.iter())
    }

    fn disk_usage(&self) -> DiskUsage {
        let ledgers = self.ledgers.lock().unwrap_or_else(|p| p.into_inner());
        let used = ledgers
            .values()
            .flat_map(|l| l.entries.values())
            .map(|e| e.len() as u64)
            .sum();
        let free = self.free.load(Relaxed);
        DiskUsage {
            free_bytes: free,
            total_bytes: free.saturating_add(used),
            used_bytes: used,
        }
    }

    fn stats(&self) -> StorageStats {
        StorageStats {
            fsync: Default::default(),
            checkpoints: self.checkpoints.load(Relaxed),
            ..StorageStats::default()
        }
    }

    fn shutdown(&self) {}
}
