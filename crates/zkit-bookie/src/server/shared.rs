//! What every task of a bookie shares: the core under its lock, the storage, the metrics, the
//! read-only state and the stop signal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::core::{Ack, BookieCore};
use crate::metrics::{Gauges, Metrics};
use crate::storage::{Storage, StorageError};

pub(super) struct Locked {
    pub(super) core: BookieCore,
    /// LAC watchers of long polls, per ledger; updated under the same lock as the core so a
    /// long poll never misses the add that would have woken it.
    pub(super) lac: HashMap<i64, watch::Sender<i64>>,
}

pub(super) struct Shared {
    pub(super) locked: Mutex<Locked>,
    pub(super) storage: Arc<dyn Storage>,
    pub(super) metrics: Metrics,
    pub(super) stop: CancellationToken,
    pub(super) max_frame: usize,
    pub(super) max_in_flight: usize,
    pub(super) min_free: u64,
    pub(super) writable_free: u64,
    pub(super) forced_read_only: AtomicBool,
    pub(super) disk_read_only: AtomicBool,
    /// An fsync failed: read-only until restart.
    pub(super) poisoned: AtomicBool,
    /// Effective read-only state.
    pub(super) mode: watch::Sender<bool>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Locked> {
        self.locked.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn update_mode(&self) {
        let ro = self.forced_read_only.load(Relaxed)
            || self.disk_read_only.load(Relaxed)
            || self.poisoned.load(Relaxed);
        self.lock().core.set_read_only(ro);
        self.mode.send_if_modified(|m| {
            let changed = *m != ro;
            if changed {
                info!(read_only = ro, "bookie mode changed");
            }
            *m = ro;
            changed
        });
    }

    pub(super) fn storage_failed(&self, e: &StorageError) {
        match e {
            StorageError::DiskFull(_) => {
                warn!(error = %e, "disk full: switching to read-only");
                self.disk_read_only.store(true, Relaxed);
            }
            StorageError::Stopped => return,
            _ => {
                warn!(error = %e, "storage failed: read-only until restart");
                self.poisoned.store(true, Relaxed);
            }
        }
        self.update_mode();
    }

    /// Marks a pending group durable, waking long polls when the LAC moved.
    pub(super) fn committed(&self, ack: &Ack) {
        let mut l = self.lock();
        if let Some(lac) = l.core.committed(ack) {
            if let Some(tx) = l.lac.get(&ack.ledger_id) {
                tx.send_replace(lac);
            }
        }
    }

    pub(super) fn gauges(&self) -> Gauges {
        let usage = self.storage.disk_usage();
        let stats = self.storage.stats();
        let l = self.lock();
        Gauges {
            ledgers: l.core.ledger_count(),
            entries: l.core.entry_count(),
            disk_used: usage.used_bytes,
            disk_free: usage.free_bytes,
            read_only: l.core.read_only(),
            checkpoints: stats.checkpoints,
        }
    }
}
