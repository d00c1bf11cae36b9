//! What the `wal_reader` and `snapshot_reader` fuzz targets check, as plain code so that
//! `crates/zkit-server/tests/storage_fuzz_regressions.rs` replays saved inputs with
//! `cargo test` (it includes this file by path: one source of truth).
//!
//! - WAL: the input (after one flag byte) is the only segment of a log directory. Opening it
//!   must not panic: it refuses (corruption) or opens, repairing a torn tail. An opened log
//!   reads back with zxids strictly increasing, opens again with nothing left to repair and
//!   the same records, and takes an append that survives a reopen.
//! - Snapshots: the input is a snapshot file (header, body, trailer) for the file reader, and
//!   also a snapshot body for `Core::restore`. Neither may panic; a body that restores
//!   snapshots to something that restores again to the same snapshot.

use std::path::{Path, PathBuf};

use zkit_core::{Config, Core};
use zkit_server::storage::snapshot::{snapshot_name, SnapshotStore};
use zkit_server::storage::wal::{segment_name, FsyncMode, Wal, WalOptions, WalRecord};

/// A scratch directory for this process (on /dev/shm when there is one: fuzzing writes a file
/// per input), emptied.
fn scratch(what: &str) -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("zkit-fuzz-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn read_all(wal: &Wal) -> Vec<WalRecord> {
    wal.read_from(0)
        .collect::<Result<Vec<_>, _>>()
        .expect("an opened log reads back")
}

/// The WAL checks. `data[0]` bit 0: open with `truncate_corrupt`; the rest: the segment.
pub fn exercise_wal(data: &[u8]) {
    let Some((flags, segment)) = data.split_first() else {
        return;
    };
    let dir = scratch("wal");
    // Name the segment after the zxid its header claims, so the fuzzer gets past that check.
    let first = segment
        .get(8..16)
        .map_or(1, |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    std::fs::write(dir.join(segment_name(first)), segment).expect("write segment");
    let opts = WalOptions {
        segment_size: 4096,
        fsync: FsyncMode::Never,
        truncate_corrupt: flags & 1 == 1,
    };
    let Ok((wal, _)) = Wal::open(&dir, opts.clone()) else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let records = read_all(&wal);
    assert!(
        records.windows(2).all(|w| w[0].zxid < w[1].zxid),
        "zxids not increasing"
    );
    assert_eq!(wal.last_zxid(), records.last().map(|r| r.zxid), "last zxid");
    drop(wal);
    let (mut wal, report) = Wal::open(&dir, opts.clone()).expect("a repaired log opens again");
    assert!(
        report.truncations.is_empty(),
        "second open repaired again: {report:?}"
    );
    assert_eq!(read_all(&wal), records, "records changed on reopen");
    let next = records.last().map_or(Some(1), |r| r.zxid.checked_add(1));
    if let Some(next) = next {
        wal.append_batch(&[(next, b"appended".to_vec())])
            .expect("append after recovery");
        wal.sync().expect("sync after recovery");
        drop(wal);
        let (wal, _) = Wal::open(&dir, opts).expect("open after append");
        let again = read_all(&wal);
        assert_eq!(again.len(), records.len() + 1, "append lost");
        assert_eq!(again.last().map(|r| r.zxid), Some(next));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The snapshot checks: `data` as a snapshot file and as a snapshot body.
pub fn exercise_snapshot(data: &[u8]) {
    if let Ok(core) = Core::restore(Config::default(), 0, data) {
        let once = core.snapshot();
        let again = Core::restore(Config::default(), 0, &once)
            .expect("the snapshot of a restored core restores");
        assert_eq!(
            again.snapshot(),
            once,
            "snapshot of a restored snapshot differs"
        );
    }
    let dir = scratch("snap");
    let zxid = data
        .get(8..16)
        .map_or(0, |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let path = dir.join(snapshot_name(zxid));
    std::fs::write(&path, data).expect("write snapshot");
    if let Ok(snapshot) = SnapshotStore::read(&path) {
        assert_eq!(snapshot.zxid, zxid);
        assert_eq!(
            snapshot.body(),
            &data[16..data.len() - 16],
            "body is what lies between header and trailer"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Valid inputs to start from: a segment with a few records (with the flag byte), and a
/// snapshot file of a fresh server state (also a valid body at offset 16).
pub fn wal_seeds() -> Vec<Vec<u8>> {
    let dir = scratch("wal-seed");
    let opts = WalOptions {
        segment_size: 4096,
        fsync: FsyncMode::Never,
        truncate_corrupt: false,
    };
    let (mut wal, _) = Wal::open(&dir, opts).expect("open seed log");
    let batch: Vec<(i64, Vec<u8>)> = (1..=5).map(|z| (z, vec![z as u8; 20])).collect();
    wal.append_batch(&batch).expect("append seed");
    wal.sync().expect("sync seed");
    drop(wal);
    let bytes = std::fs::read(dir.join(segment_name(1))).expect("read seed segment");
    let _ = std::fs::remove_dir_all(&dir);
    // The pre-allocated tail is zeros: keep a little of it.
    let used = bytes.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
    let seg = &bytes[..(used + 64).min(bytes.len())];
    let mut plain = vec![0u8];
    plain.extend_from_slice(seg);
    let mut truncating = vec![1u8];
    truncating.extend_from_slice(seg);
    vec![plain, truncating]
}

/// Seeds of the snapshot target: a whole snapshot file and the bare body.
pub fn snapshot_seeds() -> Vec<Vec<u8>> {
    let body = Core::new(Config::default(), 0).snapshot();
    let dir = scratch("snap-seed");
    let store = SnapshotStore::open(&dir, FsyncMode::Never).expect("open seed store");
    let path = store.write_snapshot(0, &body).expect("write seed snapshot");
    let file = std::fs::read(path).expect("read seed snapshot");
    let _ = std::fs::remove_dir_all(&dir);
    vec![file, body]
}
