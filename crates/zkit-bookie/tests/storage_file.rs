//! The file store on real files: recovery after reopen, checkpoint + trim + recovery, a journal
//! cut at every offset recovers every entry committed before the cut, a flipped byte refuses
//! to open naming the file and offset, the fenced flag and master key survive restarts.

mod common;

use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::{add_record, key_record, sized_entry};
use zkit_bookie::storage::journal::{scan, ScanEnd};
use zkit_bookie::storage::{
    FileStorage, FileStorageOptions, FsyncMode, Record, Storage, StorageError,
};

fn opts() -> FileStorageOptions {
    FileStorageOptions {
        fsync: FsyncMode::Never,
        ..FileStorageOptions::default()
    }
}

fn open(dir: &Path, o: FileStorageOptions) -> Result<FileStorage, StorageError> {
    FileStorage::open(dir, dir, o)
}

/// Submits each group and waits for it (each is acknowledged before the next is sent).
fn commit_each(s: &FileStorage, groups: Vec<Vec<Record>>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for g in groups {
        rt.block_on(s.submit(g)).expect("commit");
    }
}

fn journals(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("current"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("journal-")
        })
        .collect();
    v.sort();
    v
}

#[test]
fn entries_and_ledger_state_survive_reopen_and_checkpoint_trims_the_journal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = FileStorageOptions {
        // Small entry logs: several rolls.
        entry_log_size: 4096,
        ..opts()
    };
    {
        let s = open(dir, o.clone()).unwrap();
        let mut groups = vec![vec![key_record(1), key_record(2)]];
        groups.extend((0..50).map(|e| vec![add_record(1, e, 200)]));
        commit_each(&s, groups);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(s.checkpoint()).unwrap();
        assert_eq!(
            journals(dir).len(),
            1,
            "journal not trimmed after the checkpoint"
        );
        commit_each(
            &s,
            (50..60)
                .map(|e| vec![add_record(1, e, 200)])
                .chain([
                    vec![Record::Fence { ledger_id: 2 }],
                    vec![add_record(2, 0, 10)],
                ])
                .collect(),
        );
        s.shutdown();
    }
    let logs = std::fs::read_dir(dir.join("current"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .starts_with("entrylog-")
        })
        .count();
    assert!(logs > 1, "entry logs never rolled");
    // Reopen twice: recovery replays the journal since the checkpoint, and is repeatable.
    for _ in 0..2 {
        let s = open(dir, o.clone()).unwrap();
        let rec = s.recovered();
        assert_eq!(rec.len(), 2);
        assert_eq!(
            (rec[0].ledger_id, rec[0].last_entry, rec[0].lac),
            (1, 59, 58)
        );
        assert!(!rec[0].fenced);
        assert_eq!(rec[0].master_key, [1; 32]);
        assert!(rec[1].fenced, "fence lost over a restart");
        assert_eq!(rec[1].last_entry, 0);
        for e in 0..60 {
            assert_eq!(
                s.read(1, e).unwrap(),
                Some(sized_entry(1, e, 200)),
                "entry {e}"
            );
        }
        assert_eq!(s.read(2, 0).unwrap(), Some(sized_entry(2, 0, 10)));
        assert_eq!(s.read(1, 60).unwrap(), None);
        assert_eq!(s.read(3, 0).unwrap(), None);
        s.shutdown();
    }
    // And after a checkpoint the fence comes from the index log, not the journal.
    let s = open(dir, o.clone()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(s.checkpoint()).unwrap();
    s.shutdown();
    let s = open(dir, o).unwrap();
    assert!(s.recovered()[1].fenced, "fence lost over a checkpoint");
    assert_eq!(s.read(1, 59).unwrap(), Some(sized_entry(1, 59, 200)));
    s.shutdown();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("current")).unwrap();
    for e in std::fs::read_dir(from.join("current")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join("current").join(e.file_name())).unwrap();
    }
}

#[test]
fn journal_cut_at_every_offset_recovers_every_entry_committed_before_the_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    {
        let s = open(&orig, opts()).unwrap();
        let mut groups = vec![vec![key_record(1), add_record(1, 0, 4)]];
        groups.extend((1..8).map(|e| vec![add_record(1, e, 4)]));
        groups.push(vec![Record::Fence { ledger_id: 1 }]);
        commit_each(&s, groups);
        s.shutdown();
    }
    let journal = journals(&orig).pop().unwrap();
    let name = journal.file_name().unwrap().to_owned();
    let data = Bytes::from(std::fs::read(&journal).unwrap());
    let (records, end) = scan(&data);
    assert_eq!(end, ScanEnd::Clean);
    // End offsets of the records: the key, entries 0..8, the fence.
    let ends: Vec<u64> = records
        .iter()
        .map(|(at, p)| at + 12 + p.len() as u64)
        .collect();
    assert_eq!(ends.len(), 10);
    let work = tmp.path().join("work");
    for cut in 0..=data.len() as u64 {
        // No checkpoint was taken: the journal alone holds the data (entry logs are rebuilt).
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(work.join("current")).unwrap();
        std::fs::write(work.join("current").join(&name), &data[..cut as usize]).unwrap();
        let s = open(&work, opts()).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let whole = ends.iter().filter(|e| **e <= cut).count();
        // Record 0 is the key; records 1..=8 are entries 0..8; record 9 the fence.
        let entries = whole.saturating_sub(1).min(8) as i64;
        for e in 0..entries {
            assert_eq!(
                s.read(1, e).unwrap(),
                Some(sized_entry(1, e, 4)),
                "cut at {cut}: entry {e} lost"
            );
        }
        assert_eq!(
            s.read(1, entries).unwrap(),
            None,
            "cut at {cut}: entry {entries} from nowhere"
        );
        let rec = s.recovered();
        assert_eq!(
            rec.first().map(|r| r.fenced).unwrap_or(false),
            whole == 10,
            "cut at {cut}"
        );
        // New writes after recovery land after the cut and survive another reopen (checked
        // at every third cut, to keep the test short).
        let rewrite = whole >= 1 && cut % 3 == 0;
        if rewrite {
            commit_each(&s, vec![vec![add_record(1, entries, 4)]]);
        }
        s.shutdown();
        if rewrite {
            let s = open(&work, opts()).unwrap_or_else(|e| panic!("reopen after cut {cut}: {e}"));
            assert_eq!(
                s.read(1, entries).unwrap(),
                Some(sized_entry(1, entries, 4)),
                "cut {cut}"
            );
            s.shutdown();
        }
    }
}

#[test]
fn a_flipped_byte_in_the_journal_or_index_refuses_to_open_naming_the_place() {
    let tmp = tempfile::tempdir().unwrap();
    let orig = tmp.path().join("orig");
    {
        let s = open(&orig, opts()).unwrap();
        let mut groups = vec![vec![key_record(1)]];
        groups.extend((0..5).map(|e| vec![add_record(1, e, 100)]));
        commit_each(&s, groups);
        s.shutdown();
    }
    let journal = journals(&orig).pop().unwrap();
    let name = journal.file_name().unwrap().to_owned();
    let len = std::fs::metadata(&journal).unwrap().len();
    let work = tmp.path().join("work");
    // A byte in the middle of the journal, and one in its last record.
    for at in [len / 2, len - 3] {
        let _ = std::fs::remove_dir_all(&work);
        copy_dir(&orig, &work);
        let path = work.join("current").join(&name);
        let mut data = std::fs::read(&path).unwrap();
        data[at as usize] ^= 0x10;
        std::fs::write(&path, data).unwrap();
        match open(&work, opts()) {
            Err(StorageError::Corrupt { file, offset, .. }) => {
                assert_eq!(file, path);
                assert!(offset <= at, "offset {offset} after the flipped byte {at}");
            }
            Err(e) => panic!("flip at {at}: wrong error {e}"),
            Ok(_) => panic!("flip at {at}: opened a corrupt journal"),
        }
    }
    // The index log after a checkpoint.
    let _ = std::fs::remove_dir_all(&work);
    copy_dir(&orig, &work);
    {
        let s = open(&work, opts()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(s.checkpoint()).unwrap();
        s.shutdown();
    }
    let index = work.join("current").join("index.log");
    let mut data = std::fs::read(&index).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 0x01;
    std::fs::write(&index, data).unwrap();
    let err = open(&work, opts()).expect_err("opened a corrupt index");
    assert!(
        matches!(&err, StorageError::Corrupt { file, .. } if *file == index),
        "{err}"
    );
}

#[test]
fn fsync_always_commits_and_counts_fsyncs() {
    let tmp = tempfile::tempdir().unwrap();
    let s = open(
        tmp.path(),
        FileStorageOptions {
            fsync: FsyncMode::Always,
            ..FileStorageOptions::default()
        },
    )
    .unwrap();
    let mut groups = vec![vec![key_record(1)]];
    groups.extend((0..5).map(|e| vec![add_record(1, e, 100)]));
    commit_each(&s, groups);
    assert_eq!(s.stats().fsync.count(), 6, "one fsync per awaited commit");
    s.shutdown();
}
