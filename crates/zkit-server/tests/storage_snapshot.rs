//! Black-box tests of snapshots, pruning and the data-dir lock.

use std::fs;

use zkit_server::storage::datadir::DataDir;
use zkit_server::storage::error::StorageError;
use zkit_server::storage::snapshot::{self, SnapshotStore};
use zkit_server::storage::wal::{FsyncMode, Wal, WalOptions};

#[test]
fn snapshot_round_trip_and_streaming_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), FsyncMode::Always).unwrap();
    assert_eq!(store.latest_valid().unwrap(), None);
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let path = store.write_snapshot(0x1_0000_0005, &body).unwrap();
    assert_eq!(path.file_name().unwrap(), "snap-0000000100000005");
    let path2 = store
        .write_with(0x1_0000_0009, |w| {
            for chunk in body.chunks(777) {
                w.write_all(chunk)?;
            }
            Ok(())
        })
        .unwrap();
    let latest = store.latest_valid().unwrap().unwrap();
    assert_eq!(
        (latest.zxid, &latest.path, latest.body()),
        (0x1_0000_0009, &path2, &body[..])
    );
    assert_eq!(SnapshotStore::read(&path).unwrap().body(), body);
}

#[test]
fn damaged_or_torn_newest_snapshot_falls_back_to_the_previous_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), FsyncMode::Always).unwrap();
    store.write_snapshot(10, b"ten").unwrap();
    let good = store.write_snapshot(20, b"twenty-twenty").unwrap();
    let newest = store.write_snapshot(30, b"thirty-thirty-thirty").unwrap();
    let original = fs::read(&newest).unwrap();
    // Every single-byte flip and every truncation of the newest one is caught.
    for at in 0..original.len() {
        let mut bytes = original.clone();
        bytes[at] ^= 0x01;
        fs::write(&newest, &bytes).unwrap();
        assert!(
            SnapshotStore::read(&newest).unwrap_err().is_corruption(),
            "flip at {at}"
        );
        assert_eq!(
            store.latest_valid().unwrap().unwrap().zxid,
            20,
            "flip at {at}"
        );
        fs::write(&newest, &original[..at]).unwrap();
        assert!(
            SnapshotStore::read(&newest).unwrap_err().is_corruption(),
            "cut at {at}"
        );
        assert_eq!(
            store.latest_valid().unwrap().unwrap().path,
            good,
            "cut at {at}"
        );
    }
    // Two damaged: falls back further.
    fs::write(&good, b"junk").unwrap();
    assert_eq!(store.latest_valid().unwrap().unwrap().body(), b"ten");
}

#[test]
fn leftover_temp_and_deleting_files_are_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), FsyncMode::Always).unwrap();
    store.write_snapshot(5, b"five").unwrap();
    fs::write(
        dir.path().join("snap-0000000000000009.tmp"),
        b"half a snapsh",
    )
    .unwrap();
    // A pruned snapshot a crash left half cut.
    fs::write(dir.path().join("snap-0000000000000003.deleting"), b"thr").unwrap();
    assert_eq!(store.list().unwrap().len(), 1);
    assert_eq!(store.latest_valid().unwrap().unwrap().zxid, 5);
    let store = SnapshotStore::open(dir.path(), FsyncMode::Never).unwrap();
    assert_eq!(store.list().unwrap().len(), 1);
    // The interrupted snapshot's name is free at once for a new one (its file was renamed
    // before it is deleted); the files themselves go on a thread of their own.
    store.write_snapshot(9, b"nine").unwrap();
    store.wait_for_leftovers();
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["snap-0000000000000005", "snap-0000000000000009"]);
    assert_eq!(store.latest_valid().unwrap().unwrap().zxid, 9);
}

#[test]
fn pruning_keeps_last_snapshots_and_the_wal_they_need() {
    let data = tempfile::tempdir().unwrap();
    let dd = DataDir::open(data.path()).unwrap();
    let store = SnapshotStore::open(dd.snap_dir(), FsyncMode::Always).unwrap();
    let o = WalOptions {
        segment_size: 256,
        ..WalOptions::default()
    };
    let (mut wal, _) = Wal::open(dd.wal_dir(), o).unwrap();
    for z in 1..=100i64 {
        wal.append_batch(&[(z, vec![z as u8; 20])]).unwrap();
        wal.sync().unwrap();
        if z % 20 == 0 {
            store
                .write_snapshot(z, format!("state at {z}").as_bytes())
                .unwrap();
        }
    }
    let before = wal.segments().len();
    let (oldest, deleted) =
        snapshot::prune(&store, &mut wal, snapshot::DEFAULT_KEEP_SNAPSHOTS).unwrap();
    assert_eq!(oldest, Some(60));
    let kept: Vec<i64> = store.list().unwrap().iter().map(|s| s.0).collect();
    assert_eq!(kept, vec![100, 80, 60]);
    // The pruned ones are gone, not left renamed.
    assert_eq!(fs::read_dir(dd.snap_dir()).unwrap().count(), 3);
    assert!(deleted > 0);
    assert_eq!(wal.segments().len(), before - deleted);
    // Everything after the oldest kept snapshot is still there and contiguous...
    let after: Vec<i64> = wal.read_from(61).map(|r| r.unwrap().zxid).collect();
    assert_eq!(after, (61..=100).collect::<Vec<_>>());
    // ...and every deleted segment was entirely at or below it.
    assert!(wal.segments()[0].first_zxid <= 61);
    assert!(wal.segments().len() < 2 || wal.segments()[1].first_zxid > 61);
    drop(wal);
    let (wal, report) = Wal::open(
        dd.wal_dir(),
        WalOptions {
            segment_size: 256,
            ..WalOptions::default()
        },
    )
    .unwrap();
    assert!(report.truncations.is_empty());
    assert_eq!(wal.last_zxid(), Some(100));
}

#[test]
fn second_opener_of_a_data_dir_is_refused_with_the_holder_pid() {
    let data = tempfile::tempdir().unwrap();
    let first = DataDir::open(data.path()).unwrap();
    assert!(first.wal_dir().is_dir() && first.snap_dir().is_dir());
    let err = DataDir::open(data.path()).unwrap_err();
    let pid = std::process::id();
    assert!(
        matches!(err, StorageError::DataDirInUse { pid: Some(p), .. } if p == pid),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "data dir {} is in use by another zkit server (pid {pid})",
            data.path().display()
        )
    );
    // The failed attempt did not wipe the holder's pid.
    assert_eq!(
        fs::read_to_string(data.path().join("LOCK")).unwrap().trim(),
        pid.to_string()
    );
    drop(first);
    // Released on drop (and by the kernel on process death).
    let _again = DataDir::open(data.path()).unwrap();
}
