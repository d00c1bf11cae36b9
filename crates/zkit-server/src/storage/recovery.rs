//! Recovery on start: the newest valid snapshot, then the WAL records after it replayed through
//! `Core::apply` — the same function live traffic goes through — so a restarted server holds
//! exactly the txns that were durable.
//!
//! Sessions come back from the snapshot and from replayed `createSession` txns without a
//! deadline; the core gives each one `now + timeout` on its first tick (as Apache re-arms its
//! session tracker on start-up), so a client that reconnects within its timeout keeps its
//! session and ephemerals, and the others expire. This module is blocking file I/O plus CPU
//! work: run it on a blocking thread, before serving. It never writes.

use std::time::{Duration, Instant};

use zkit_core::{Config, Core, Txn};

use super::error::{Result, StorageError};
use super::snapshot::SnapshotStore;
use super::wal::{Wal, RECORD_HEADER_LEN};

/// What a recovery loaded, for the start-up log line and for tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// The zxid of the snapshot the state started from (`None`: an empty tree).
    pub snapshot_zxid: Option<i64>,
    /// Bytes of that snapshot's body.
    pub snapshot_bytes: u64,
    /// WAL records replayed on top of it.
    pub replayed: u64,
    /// Their size in the log (record headers included).
    pub replayed_bytes: u64,
    /// The zxid of the recovered state.
    pub last_zxid: i64,
    /// Wall-clock time the recovery took, in microseconds.
    pub micros: u64,
}

/// Rebuilds the state from `snapshots` and `wal`.
///
/// # Errors
/// [`StorageError::Corruption`] when the newest verifying snapshot does not restore, a record
/// does not decode as a txn, or the txns after the snapshot skip a zxid (a lost segment);
/// [`StorageError::Io`] when reading fails.
pub fn recover(
    snapshots: &SnapshotStore,
    wal: &Wal,
    config: Config,
    now: i64,
) -> Result<(Core, RecoveryStats)> {
    let started = Instant::now();
    let mut stats = RecoveryStats::default();
    let mut core = match snapshots.latest_valid()? {
        Some(snap) => {
            stats.snapshot_zxid = Some(snap.zxid);
            stats.snapshot_bytes = snap.body().len() as u64;
            let core =
                Core::restore(config, now, snap.body()).map_err(|e| StorageError::Corruption {
                    file: snap.path.clone(),
                    offset: 16,
                    reason: format!("snapshot body does not restore: {e}"),
                })?;
            if core.last_zxid() != snap.zxid {
                return Err(StorageError::Corruption {
                    file: snap.path,
                    offset: 8,
                    reason: format!(
                        "snapshot named {:#x} holds state at {:#x}",
                        snap.zxid,
                        core.last_zxid()
                    ),
                });
            }
            core
        }
        None => Core::new(config, now),
    };
    let from = core.last_zxid().saturating_add(1);
    for record in wal.read_from(from) {
        let record = record?;
        let txn = Txn::decode(&record.payload).map_err(|e| corrupt_record(wal, record.zxid, e))?;
        if txn.zxid != record.zxid {
            return Err(corrupt_record(
                wal,
                record.zxid,
                format!("record holds txn {:#x}", txn.zxid),
            ));
        }
        // The core numbers txns consecutively; a jump means a segment went missing between the
        // snapshot and this record, and replaying past it would silently lose writes.
        let expected = core.last_zxid().saturating_add(1);
        if txn.zxid != expected {
            return Err(corrupt_record(
                wal,
                record.zxid,
                format!("expected zxid {expected:#x} next: txns are missing from the log"),
            ));
        }
        core.apply(&txn);
        stats.replayed += 1;
        stats.replayed_bytes += (RECORD_HEADER_LEN + record.payload.len()) as u64;
    }
    // Replay queues watch events and txns for connections that do not exist; drop them.
    drop(core.ready());
    stats.last_zxid = core.last_zxid();
    stats.micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    tracing::info!(
        snapshot_zxid = stats.snapshot_zxid.map(|z| format!("{z:#x}")),
        snapshot_bytes = stats.snapshot_bytes,
        replayed = stats.replayed,
        replayed_bytes = stats.replayed_bytes,
        last_zxid = format_args!("{:#x}", stats.last_zxid),
        took = ?Duration::from_micros(stats.micros),
        "state recovered"
    );
    Ok((core, stats))
}

pub(super) fn corrupt_record(wal: &Wal, zxid: i64, reason: impl std::fmt::Display) -> StorageError {
    StorageError::Corruption {
        file: wal.dir().to_path_buf(),
        offset: 0,
        reason: format!("WAL record {zxid:#x}: {reason}"),
    }
}
