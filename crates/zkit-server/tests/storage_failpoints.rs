//! Fail-point tests: injected I/O errors at each crash-safety point leave a readable log and
//! nothing acknowledged that was not durable. Needs `--features failpoints`.
#![cfg(feature = "failpoints")]

use std::fs;
use std::sync::Mutex;

use zkit_server::storage::commit::GroupCommit;
use zkit_server::storage::error::StorageError;
use zkit_server::storage::failpoint;
use zkit_server::storage::snapshot::SnapshotStore;
use zkit_server::storage::wal::{FsyncMode, Wal, WalOptions};

/// Fail points are process-global: these tests run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn opts() -> WalOptions {
    WalOptions {
        segment_size: 4096,
        ..WalOptions::default()
    }
}

fn zxids(wal: &Wal) -> Vec<i64> {
    wal.read_from(0).map(|r| r.unwrap().zxid).collect()
}

fn with_failpoint<T>(name: &str, action: &str, f: impl FnOnce() -> T) -> T {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    fail::cfg(name, action).unwrap();
    let out = f();
    for n in failpoint::ALL {
        fail::remove(n);
    }
    out
}

/// For each WAL point: the batch fails, the log is poisoned, and after reopening it holds the
/// acknowledged records plus, at most, whole records of the failed batch (never garbage).
#[test]
fn injected_wal_errors_leave_a_readable_log() {
    for point in [
        failpoint::WAL_BEFORE_WRITE,
        failpoint::WAL_PARTIAL_WRITE,
        failpoint::WAL_AFTER_WRITE,
        failpoint::WAL_AFTER_FSYNC,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), opts()).unwrap();
        wal.append_batch(&[(1, vec![1u8; 10]), (2, vec![2u8; 10])])
            .unwrap();
        wal.sync().unwrap();
        with_failpoint(point, "return", || {
            let batch: Vec<(i64, Vec<u8>)> = (3..=9).map(|z| (z, vec![z as u8; 50])).collect();
            let res = wal.append_batch(&batch).and_then(|()| wal.sync());
            assert!(
                matches!(res, Err(StorageError::Io { .. })),
                "{point}: {res:?}"
            );
            assert!(wal.is_poisoned());
        });
        // Nothing later is accepted.
        assert!(matches!(
            wal.append_batch(&[(10, vec![])]),
            Err(StorageError::Poisoned)
        ));
        assert!(matches!(wal.sync(), Err(StorageError::Poisoned)));
        drop(wal);
        let (mut wal, report) = Wal::open(dir.path(), opts()).unwrap();
        let got = zxids(&wal);
        assert_eq!(&got[..2], &[1, 2], "{point}");
        assert!(
            got.iter().zip(1..).all(|(z, want)| *z == want),
            "{point}: {got:?}"
        );
        if point == failpoint::WAL_PARTIAL_WRITE {
            assert_eq!(report.truncations.len(), 1, "{point}: torn tail repaired");
        }
        for r in wal.read_from(3) {
            let r = r.unwrap();
            assert_eq!(r.payload, vec![r.zxid as u8; 50]);
        }
        // Writable again after reopening.
        let next = wal.last_zxid().unwrap() + 1;
        wal.append_batch(&[(next, vec![])]).unwrap();
        wal.sync().unwrap();
    }
}

#[test]
fn group_commit_fails_the_whole_group_and_everything_after() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), opts()).unwrap();
    let gc = GroupCommit::start(wal).unwrap();
    gc.submit(vec![(1, b"a".to_vec())]).wait_blocking().unwrap();
    let (second, third) = with_failpoint(failpoint::WAL_AFTER_WRITE, "return", || {
        let second = gc.submit(vec![(2, b"b".to_vec())]).wait_blocking();
        let third = gc.submit(vec![(3, b"c".to_vec())]).wait_blocking();
        (second, third)
    });
    assert!(matches!(second, Err(StorageError::Io { .. })), "{second:?}");
    assert!(matches!(third, Err(StorageError::Poisoned)), "{third:?}");
    assert!(gc.submit(vec![(4, vec![])]).wait_blocking().is_err());
    let wal = gc.shutdown().unwrap();
    assert!(wal.is_poisoned());
}

#[test]
fn snapshot_rename_failures_keep_the_previous_snapshot() {
    for point in [
        failpoint::SNAPSHOT_BEFORE_RENAME,
        failpoint::SNAPSHOT_AFTER_RENAME,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let store = SnapshotStore::open(dir.path(), FsyncMode::Always).unwrap();
        store.write_snapshot(1, b"one").unwrap();
        let res = with_failpoint(point, "return", || store.write_snapshot(2, b"two"));
        assert!(res.is_err(), "{point}");
        let latest = store.latest_valid().unwrap().unwrap();
        // Before the rename the old one stays newest; after it the new one is complete.
        let expect: &[u8] = if point == failpoint::SNAPSHOT_BEFORE_RENAME {
            b"one"
        } else {
            b"two"
        };
        assert_eq!(latest.body(), expect, "{point}");
        let tmp_left = fs::read_dir(dir.path())
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".tmp"));
        assert!(!tmp_left, "{point}");
    }
}
