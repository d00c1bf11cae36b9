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
    /// Of that, reading and checking the snapshot file.
    pub read_micros: u64,
    /// Of that, rebuilding the tree from the snapshot body.
    pub restore_micros: u64,
    /// Of that, reading and replaying the WAL records.
    pub replay_micros: u64,
}

fn micros_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX)
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
    let latest = snapshots.latest_valid()?;
    stats.read_micros = micros_since(started);
    let restore_started = Instant::now();
    let mut core = match latest {
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
    stats.restore_micros = micros_since(restore_started);
    let replay_started = Instant::now();
    let from = core.last_zxid().saturating_add(1);
    let (replayed, replayed_bytes) = replay(&mut core, wal, from)?;
    stats.replayed = replayed;
    stats.replayed_bytes = replayed_bytes;
    // Replay queues watch events and txns for connections that do not exist; drop them.
    drop(core.ready());
    stats.replay_micros = micros_since(replay_started);
    stats.last_zxid = core.last_zxid();
    stats.micros = micros_since(started);
    tracing::info!(
        snapshot_zxid = stats.snapshot_zxid.map(|z| format!("{z:#x}")),
        snapshot_bytes = stats.snapshot_bytes,
        replayed = stats.replayed,
        replayed_bytes = stats.replayed_bytes,
        last_zxid = format_args!("{:#x}", stats.last_zxid),
        took = ?Duration::from_micros(stats.micros),
        reading = ?Duration::from_micros(stats.read_micros),
        restoring = ?Duration::from_micros(stats.restore_micros),
        replaying = ?Duration::from_micros(stats.replay_micros),
        "state recovered"
    );
    Ok((core, stats))
}

/// Txns per hand-over from the reading thread of [`replay`] to the applying one.
const REPLAY_BATCH: usize = 1024;

/// Replays the WAL records from `from` on into `core`; returns how many, and their size in
/// the log. A second thread reads the records (checksums), decodes them into txns and hands
/// them over in batches while this one applies them, in log order: the first bad record in
/// that order is the error, as on one thread.
fn replay(core: &mut Core, wal: &Wal, from: i64) -> Result<(u64, u64)> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(Txn, u64)>>(8);
        let reader = scope.spawn(move || -> Result<()> {
            let mut batch = Vec::with_capacity(REPLAY_BATCH);
            for record in wal.read_from(from) {
                let decoded = record.and_then(|record| {
                    let txn = Txn::decode(&record.payload)
                        .map_err(|e| corrupt_record(wal, record.zxid, e))?;
                    if txn.zxid != record.zxid {
                        return Err(corrupt_record(
                            wal,
                            record.zxid,
                            format!("record holds txn {:#x}", txn.zxid),
                        ));
                    }
                    Ok((txn, (RECORD_HEADER_LEN + record.payload.len()) as u64))
                });
                match decoded {
                    Ok(decoded) => batch.push(decoded),
                    Err(err) => {
                        // The txns before the bad record are applied first (the applying
                        // side may find an earlier error, which is the one to report).
                        let _ = tx.send(batch);
                        return Err(err);
                    }
                }
                if batch.len() == REPLAY_BATCH
                    && tx
                        .send(std::mem::replace(
                            &mut batch,
                            Vec::with_capacity(REPLAY_BATCH),
                        ))
                        .is_err()
                {
                    // The applying side stopped at an error of its own.
                    return Ok(());
                }
            }
            let _ = tx.send(batch);
            Ok(())
        });
        // Takes the receiver: when it returns (at an error too), the channel closes, so the
        // reading thread is never left blocked on a full channel.
        let applied = apply_batches(core, wal, rx);
        let read = reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let applied = applied?;
        read?;
        Ok(applied)
    })
}

/// The applying half of [`replay`].
fn apply_batches(
    core: &mut Core,
    wal: &Wal,
    rx: std::sync::mpsc::Receiver<Vec<(Txn, u64)>>,
) -> Result<(u64, u64)> {
    let (mut replayed, mut replayed_bytes) = (0, 0);
    for batch in rx {
        for (txn, bytes) in batch {
            // The core numbers txns consecutively; a jump means a segment went missing
            // between the snapshot and this record, and replaying past it would silently
            // lose writes.
            let expected = core.last_zxid().saturating_add(1);
            if txn.zxid != expected {
                return Err(corrupt_record(
                    wal,
                    txn.zxid,
                    format!("expected zxid {expected:#x} next: txns are missing from the log"),
                ));
            }
            core.apply(&txn);
            replayed += 1;
            replayed_bytes += bytes;
        }
    }
    Ok((replayed, replayed_bytes))
}

pub(super) fn corrupt_record(wal: &Wal, zxid: i64, reason: impl std::fmt::Display) -> StorageError {
    StorageError::Corruption {
        file: wal.dir().to_path_buf(),
        offset: 0,
        reason: format!("WAL record {zxid:#x}: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use zkit_core::TxnOp;

    use super::*;
    use crate::storage::wal::WalOptions;

    /// Enough records for several hand-overs between the two threads of a replay.
    const N: i64 = 3 * REPLAY_BATCH as i64;

    fn payload(zxid: i64) -> Vec<u8> {
        let txn = Txn {
            zxid,
            session: 0x77,
            time: 1_700_000_000_000 + zxid,
            op: TxnOp::Error { err: -101 },
        };
        let mut buf = BytesMut::new();
        txn.encode(&mut buf);
        buf.to_vec()
    }

    /// Replays a log of these records onto an empty core: how many, or the error.
    fn replayed(records: Vec<(i64, Vec<u8>)>) -> std::result::Result<u64, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (mut wal, _) =
            Wal::open(dir.path(), WalOptions::default()).map_err(|e| e.to_string())?;
        wal.append_batch(&records).map_err(|e| e.to_string())?;
        wal.sync().map_err(|e| e.to_string())?;
        let mut core = Core::new(Config::default(), 0);
        let (n, _) = replay(&mut core, &wal, 1).map_err(|e| e.to_string())?;
        assert_eq!(core.last_zxid(), n as i64);
        Ok(n)
    }

    fn log(skip: i64, swap: i64, garbage: i64) -> Vec<(i64, Vec<u8>)> {
        (1..=N)
            .filter(|z| *z != skip)
            .map(|z| match z {
                z if z == swap => (z, payload(z + 1)),
                z if z == garbage => (z, vec![0xff; 3]),
                z => (z, payload(z)),
            })
            .collect()
    }

    #[test]
    fn replay_applies_every_record_in_order_and_stops_at_the_first_bad_one() {
        assert_eq!(replayed(log(0, 0, 0)), Ok(N as u64));
        // The error without the (temporary) directory's name.
        let err = |r: std::result::Result<u64, String>| {
            let text = r.err().unwrap_or_default();
            text.find("WAL record")
                .map_or(text.clone(), |i| text[i..].to_string())
        };
        // Found by the applying thread.
        let gap = err(replayed(log(1500, 0, 0)));
        assert!(gap.contains("expected zxid 0x5dc next"), "{gap}");
        // Found by the reading thread.
        let swapped = err(replayed(log(0, 2000, 0)));
        assert!(swapped.contains("record holds txn 0x7d1"), "{swapped}");
        let undecodable = err(replayed(log(0, 0, 2500)));
        assert!(undecodable.contains("WAL record 0x9c4"), "{undecodable}");
        // Both: the first in log order wins, whichever thread finds it.
        assert_eq!(err(replayed(log(1500, 0, 2500))), gap);
        // (in one hand-over)
        let late_gap = err(replayed(log(2400, 0, 0)));
        assert!(late_gap.contains("missing from the log"), "{late_gap}");
        assert_eq!(err(replayed(log(2400, 0, 2500))), late_gap);
        assert_eq!(
            err(replayed(log(0, 2000, 1500))),
            err(replayed(log(0, 0, 1500)))
        );
        assert_ne!(err(replayed(log(0, 2000, 1500))), swapped);
    }
}
