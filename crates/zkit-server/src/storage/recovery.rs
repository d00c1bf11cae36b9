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
    /// Of that, reading the snapshot file and rebuilding the tree from it (at once: the
    /// file is read in chunks while the tree is built).
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
    // The newest snapshot that verifies, as `SnapshotStore::latest_valid` picks it, but
    // streamed: never the whole file in memory.
    let mut core = None;
    for (_, path) in snapshots.list()? {
        let mut body = match SnapshotStore::open_body(&path) {
            Ok(body) => body,
            Err(e @ StorageError::Corruption { .. }) => {
                tracing::warn!(file = %path.display(), error = %e, "skipping damaged snapshot");
                continue;
            }
            Err(e) => return Err(e),
        };
        let (zxid, len) = (body.zxid, body.len());
        // Restored while it is read; the checksum is known only at the end, so a restore
        // from a damaged file is thrown away then, and the next older snapshot is tried.
        let restored = Core::restore_from(config.clone(), now, &mut body, len);
        match body.finish() {
            Ok(()) => {}
            Err(e @ StorageError::Corruption { .. }) => {
                tracing::warn!(file = %path.display(), error = %e, "skipping damaged snapshot");
                continue;
            }
            Err(e) => return Err(e),
        }
        let restored = restored.map_err(|e| StorageError::Corruption {
            file: path.clone(),
            offset: 16,
            reason: format!("snapshot body does not restore: {e}"),
        })?;
        if restored.last_zxid() != zxid {
            return Err(StorageError::Corruption {
                file: path,
                offset: 8,
                reason: format!(
                    "snapshot named {zxid:#x} holds state at {:#x}",
                    restored.last_zxid()
                ),
            });
        }
        stats.snapshot_zxid = Some(zxid);
        stats.snapshot_bytes = len;
        core = Some(restored);
        break;
    }
    let mut core = core.unwrap_or_else(|| Core::new(config, now));
    stats.restore_micros = micros_since(started);
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
        restoring = ?Duration::from_micros(stats.restore_micros),
        replaying = ?Duration::from_micros(stats.replay_micros),
        "state recovered"
    );
    Ok((core, stats))
}

/// Txns per hand-over from the reading thread of [`replay`] to the applying one.
const REPLAY_BATCH: usize = 1024;

/// Replays the WAL records from `from` on into `core`; returns how many, and their size in
/// the log. A second thread reads the records (checksums) and decodes them into txns while
/// this one applies them, in log order ([`zkit_core::two_threads::run`]): the first bad record
/// in that order is the error, as on one thread.
fn replay(core: &mut Core, wal: &Wal, from: i64) -> Result<(u64, u64)> {
    let (mut replayed, mut replayed_bytes) = (0, 0);
    zkit_core::two_threads::run(
        REPLAY_BATCH,
        |emit| {
            for record in wal.read_from(from) {
                let record = record?;
                let txn = Txn::decode(&record.payload)
                    .map_err(|e| corrupt_record(wal, record.zxid, e))?;
                if txn.zxid != record.zxid {
                    return Err(corrupt_record(
                        wal,
                        record.zxid,
                        format!("record holds txn {:#x}", txn.zxid),
                    ));
                }
                if !emit((txn, (RECORD_HEADER_LEN + record.payload.len()) as u64)) {
                    break;
                }
            }
            Ok(())
        },
        |(txn, bytes): (Txn, u64)| {
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
            Ok(())
        },
    )?;
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
    use crate::storage::wal::{FsyncMode, WalOptions};

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

    /// A data dir whose WAL holds txns 1..=9 and whose snapshots are at 5 and 9 (the cores
    /// after those txns). The newest one's body is `body` instead when given (its checksum
    /// then holds), and its file has the body byte `flip` flipped when given.
    fn data_dir(
        body: Option<&[u8]>,
        flip: Option<usize>,
    ) -> (tempfile::TempDir, SnapshotStore, Wal) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut wal, _) = Wal::open(dir.path().join("wal"), WalOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let records: Vec<(i64, Vec<u8>)> = (1..=9).map(|z| (z, payload(z))).collect();
        assert!(wal.append_batch(&records).and_then(|()| wal.sync()).is_ok());
        let store = SnapshotStore::open(dir.path().join("snap"), FsyncMode::Always)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut core = Core::new(Config::default(), 0);
        for z in 1..=9 {
            core.apply(&Txn::decode(&payload(z)).unwrap_or_else(|e| panic!("{e}")));
            if z == 5 {
                assert!(store.write_snapshot(5, &core.snapshot()).is_ok());
            }
        }
        let newest = body.map_or_else(|| core.snapshot(), <[u8]>::to_vec);
        let path = store
            .write_snapshot(9, &newest)
            .unwrap_or_else(|e| panic!("{e}"));
        if let Some(at) = flip {
            let mut file = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
            file[16 + at] ^= 0x40;
            assert!(std::fs::write(&path, file).is_ok());
        }
        (dir, store, wal)
    }

    fn recovered(store: &SnapshotStore, wal: &Wal) -> std::result::Result<RecoveryStats, String> {
        recover(store, wal, Config::default(), 0)
            .map(|(core, stats)| {
                assert_eq!(core.last_zxid(), 9);
                stats
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn recovery_streams_the_newest_snapshot_that_verifies() {
        let (_dir, store, wal) = data_dir(None, None);
        let stats = recovered(&store, &wal).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((stats.snapshot_zxid, stats.replayed), (Some(9), 0));

        // A damaged body fails its checksum, found once it has been read; the restore from
        // it is thrown away (even one that stopped at once, on a bad header) and the older
        // snapshot is used, with the WAL after it.
        for at in [0, 20] {
            let (_dir, store, wal) = data_dir(None, Some(at));
            let stats = recovered(&store, &wal).unwrap_or_else(|e| panic!("byte {at}: {e}"));
            assert_eq!(
                (stats.snapshot_zxid, stats.replayed),
                (Some(5), 4),
                "byte {at}"
            );
        }

        // A body that verifies but is not a state is corruption, not a reason to go back.
        let (_dir, store, wal) = data_dir(Some(b"not a state"), None);
        let err = recovered(&store, &wal).err().unwrap_or_default();
        assert!(err.contains("snapshot body does not restore"), "{err}");
    }

    /// The open reads only the WAL's last segment; the replay checks the segments it reads.
    /// Damage in a segment wholly before the snapshot is never read, so it does not stop a
    /// recovery; damage in a segment the replay needs stops it, naming the file and offset.
    #[test]
    fn recovery_reads_the_log_after_the_snapshot_and_checks_every_record_of_it() {
        let wal_opts = WalOptions {
            segment_size: 512,
            ..WalOptions::default()
        };
        // A log of 1..=60 in many segments, a snapshot at 30; the byte `flip` of segment `seg`
        // (counted from the first) flipped.
        let setup = |seg: usize, flip: usize| {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let (mut wal, _) = Wal::open(dir.path().join("wal"), wal_opts.clone())
                .unwrap_or_else(|e| panic!("{e}"));
            let store = SnapshotStore::open(dir.path().join("snap"), FsyncMode::Always)
                .unwrap_or_else(|e| panic!("{e}"));
            let mut core = Core::new(Config::default(), 0);
            for z in 1..=60 {
                assert!(wal.append_batch(&[(z, payload(z))]).is_ok());
                core.apply(&Txn::decode(&payload(z)).unwrap_or_else(|e| panic!("{e}")));
                if z == 30 {
                    assert!(store.write_snapshot(30, &core.snapshot()).is_ok());
                }
            }
            assert!(wal.sync().is_ok());
            let segments = wal.segments().to_vec();
            assert!(segments.len() >= 4, "{}", segments.len());
            drop(wal);
            let path = segments[seg].path.clone();
            let mut file = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
            file[flip] ^= 0x40;
            assert!(std::fs::write(&path, file).is_ok());
            let (wal, _) = Wal::open(dir.path().join("wal"), wal_opts.clone())
                .unwrap_or_else(|e| panic!("{e}"));
            (dir, store, wal, segments)
        };
        // The second record of the first segment: before the snapshot, never read.
        let second = 16 + 16 + payload(1).len() + 20;
        let (_dir, store, wal, segments) = setup(0, second);
        assert!(segments[1].first_zxid <= 30);
        let (core, stats) =
            recover(&store, &wal, Config::default(), 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (stats.snapshot_zxid, stats.replayed, core.last_zxid()),
            (Some(30), 30, 60)
        );
        // The same record of the next-to-last segment, which the replay reads.
        let seg = segments.len() - 2;
        let first = segments[seg].first_zxid;
        assert!(first > 30);
        let second = 16 + 16 + payload(first).len() + 20;
        let (_dir, store, wal, segments) = setup(seg, second);
        match recover(&store, &wal, Config::default(), 0) {
            Err(StorageError::Corruption { file, offset, .. }) => {
                assert_eq!(file, segments[seg].path);
                assert_eq!(offset, (16 + 16 + payload(first).len()) as u64);
            }
            Err(e) => panic!("expected corruption, got {e}"),
            Ok(_) => panic!("expected corruption, the recovery succeeded"),
        }
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
