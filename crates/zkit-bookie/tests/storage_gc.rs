//! Garbage collection of deleted ledgers in the file store: the entry logs of a deleted ledger
//! are reclaimed (whole logs removed, mixed logs compacted), live ledgers read back byte for
//! byte, before and after a reopen; and a process running collections is killed with SIGKILL
//! at random points, several times, without losing a live entry or bringing a deleted ledger
//! back; the index is rewritten without the deleted ledgers, fences kept. Reproduce a kill schedule with `ZKIT_GC_SEED=<n>`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{add_record, key_record, sized_entry};
use zkit_bookie::storage::{FileStorage, FileStorageOptions, FsyncMode, Record, Storage};

const PAYLOAD: usize = 300;

fn opts() -> FileStorageOptions {
    FileStorageOptions {
        fsync: FsyncMode::Never,
        // Small logs: many of them, some holding one ledger, some several.
        entry_log_size: 32 << 10,
        ..FileStorageOptions::default()
    }
}

fn entry(ledger_id: i64, entry_id: i64) -> Bytes {
    sized_entry(ledger_id, entry_id, PAYLOAD)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn entry_log_bytes(dir: &Path) -> u64 {
    bytes_of(dir, "entrylog-")
}

/// Bytes and count of the files in `dir/current` whose names start with `prefix`.
fn bytes_of(dir: &Path, prefix: &str) -> u64 {
    files_of(dir, prefix).iter().sum()
}

fn files_of(dir: &Path, prefix: &str) -> Vec<u64> {
    std::fs::read_dir(dir.join("current"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.metadata().unwrap().len())
        .collect()
}

/// Writes `entries` entries to each of `ledgers`: first a run of each ledger alone (logs of
/// one ledger), then all interleaved (logs shared by every ledger).
fn fill(s: &FileStorage, ledgers: &[i64], entries: i64) {
    let rt = rt();
    let keys = ledgers.iter().map(|&l| key_record(l)).collect();
    rt.block_on(s.submit(keys)).unwrap();
    let add = |l: i64, e: i64| add_record(l, e, PAYLOAD);
    let half = entries / 2;
    for &l in ledgers {
        rt.block_on(s.submit((0..half).map(|e| add(l, e)).collect()))
            .unwrap();
    }
    for e in half..entries {
        rt.block_on(s.submit(ledgers.iter().map(|&l| add(l, e)).collect()))
            .unwrap();
    }
    // As a running bookie does: the journal no longer holds these entries.
    rt.block_on(s.checkpoint()).unwrap();
}

/// The ledgers of `ledgers` that are not in `deleted`.
fn live_ledgers(ledgers: &[i64], deleted: &[i64]) -> Vec<i64> {
    ledgers
        .iter()
        .copied()
        .filter(|l| !deleted.contains(l))
        .collect()
}

fn check(s: &FileStorage, live: &[i64], deleted: &[i64], entries: i64) {
    for &l in live {
        for e in 0..entries {
            assert_eq!(
                s.read(l, e).unwrap(),
                Some(entry(l, e)),
                "live ledger {l} entry {e}"
            );
        }
    }
    for &l in deleted {
        for e in 0..entries {
            assert_eq!(s.read(l, e).unwrap(), None, "deleted ledger {l} entry {e}");
        }
    }
    let recovered: Vec<i64> = s.recovered().iter().map(|r| r.ledger_id).collect();
    for l in deleted {
        assert!(!recovered.contains(l), "deleted ledger {l} recovered");
    }
}

#[test]
fn a_deleted_ledgers_space_is_reclaimed_and_live_ledgers_are_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let rt = rt();
    let entries = 200;
    {
        let s = FileStorage::open(dir, dir, opts()).unwrap();
        fill(&s, &[1, 2, 3], entries);
        let before = entry_log_bytes(dir);
        // Nothing deleted: nothing to collect.
        rt.block_on(s.collect_garbage()).unwrap();
        assert_eq!(s.stats().gc_logs_removed, 0);
        assert_eq!(entry_log_bytes(dir), before);

        rt.block_on(s.submit(vec![Record::Fence { ledger_id: 3 }]))
            .unwrap();
        rt.block_on(s.checkpoint()).unwrap();
        let index_before = bytes_of(dir, "index");
        rt.block_on(s.submit(vec![Record::Delete { ledger_id: 2 }]))
            .unwrap();
        assert_eq!(s.read(2, 0).unwrap(), None, "gone from the index at once");
        rt.block_on(s.collect_garbage()).unwrap();
        let after = entry_log_bytes(dir);
        let stats = s.stats();
        eprintln!(
            "entry logs {before} -> {after} bytes; {} logs removed, {} entries copied",
            stats.gc_logs_removed, stats.gc_entries_copied
        );
        // A third of the data was ledger 2's; with a 0.8 threshold every log holding some of
        // it was either removed or compacted.
        assert!(stats.gc_logs_removed > 0);
        assert!(stats.gc_entries_copied > 0, "mixed logs were compacted");
        let per_ledger = before / 3;
        assert!(
            after <= before - per_ledger * 9 / 10,
            "reclaimed only {} of ~{per_ledger} bytes",
            before - after
        );
        check(&s, &[1, 3], &[2], entries);
        // The index was rewritten without ledger 2's records: one file, smaller.
        let index_after = files_of(dir, "index");
        assert_eq!(index_after.len(), 1, "one index file: {index_after:?}");
        assert!(
            index_after[0] < index_before,
            "index {index_before} -> {index_after:?} bytes"
        );
        s.shutdown();
    }
    // After a reopen: the same, and the deleted ledger does not come back.
    let s = FileStorage::open(dir, dir, opts()).unwrap();
    check(&s, &[1, 3], &[2], entries);
    let fenced: Vec<(i64, bool)> = s
        .recovered()
        .iter()
        .map(|r| (r.ledger_id, r.fenced))
        .collect();
    assert_eq!(fenced, vec![(1, false), (3, true)], "keys and fence kept");
    // Collecting again finds nothing more.
    let bytes = entry_log_bytes(dir);
    rt.block_on(s.collect_garbage()).unwrap();
    assert_eq!(s.stats().gc_logs_removed, 0);
    assert_eq!(entry_log_bytes(dir), bytes);
}

/// The child of the kill -9 test: opens the store in `ZKIT_GC_CHILD_DIR`, deletes the
/// ledgers in `ZKIT_GC_DELETE`, says "ready", collects garbage, says "done", then waits to
/// be killed. Does nothing in a normal run.
#[test]
fn gc_child() {
    let Ok(dir) = std::env::var("ZKIT_GC_CHILD_DIR") else {
        return;
    };
    let dir = Path::new(&dir);
    let s = FileStorage::open(dir, dir, opts()).unwrap();
    let rt = rt();
    let deletes: Vec<Record> = std::env::var("ZKIT_GC_DELETE")
        .unwrap_or_default()
        .split(',')
        .filter_map(|l| l.parse().ok())
        .map(|ledger_id| Record::Delete { ledger_id })
        .collect();
    rt.block_on(s.submit(deletes)).unwrap();
    println!("ready");
    let start = Instant::now();
    rt.block_on(s.collect_garbage()).unwrap();
    println!("done {}", start.elapsed().as_micros());
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn kill_9_during_garbage_collection_loses_no_live_entry() {
    let seed = std::env::var("ZKIT_GC_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos() as u64
        });
    eprintln!("ZKIT_GC_SEED={seed}");
    // A small LCG: enough to vary the kill points reproducibly.
    let mut state = seed | 1;
    let mut next = move |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let entries = 400;
    let ledgers: Vec<i64> = (1..=8).collect();
    {
        let s = FileStorage::open(dir, dir, opts()).unwrap();
        fill(&s, &ledgers, entries);
        s.shutdown();
    }
    let mut deleted: Vec<i64> = Vec::new();
    let mut killed_mid_gc = 0;
    let mut gc_micros = 20_000u64;
    // Rounds 0-3 each delete one more ledger (the even ids); every round's collection is
    // killed at a random point within about its expected duration.
    const ROUNDS: i64 = 6;
    for round in 0..ROUNDS {
        if round < 4 {
            deleted.push(2 * (round + 1));
        }
        let list: Vec<String> = deleted.iter().map(i64::to_string).collect();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["gc_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("ZKIT_GC_CHILD_DIR", dir)
            .env("ZKIT_GC_DELETE", list.join(","))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let start = Instant::now();
        while !line.contains("ready") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "child exited early");
            assert!(start.elapsed() < Duration::from_secs(60));
        }
        std::thread::sleep(Duration::from_micros(next(gc_micros * 3 / 2)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut rest);
        match rest.split_whitespace().skip_while(|w| *w != "done").nth(1) {
            Some(us) => gc_micros = us.parse().unwrap_or(gc_micros).max(1000),
            None => {
                // Killed before the end: aim later next time, so kills land all along it.
                killed_mid_gc += 1;
                gc_micros = gc_micros * 3 / 2;
            }
        }
        let s = FileStorage::open(dir, dir, opts()).unwrap();
        let live = live_ledgers(&ledgers, &deleted);
        check(&s, &live, &deleted, entries);
        s.shutdown();
    }
    eprintln!("{killed_mid_gc} of {ROUNDS} kills landed before the collection finished");
    // Finally a collection that runs to the end reclaims what the kills interrupted, and
    // its result survives a reopen.
    let s = FileStorage::open(dir, dir, opts()).unwrap();
    let before = entry_log_bytes(dir);
    rt().block_on(s.collect_garbage()).unwrap();
    s.shutdown();
    drop(s);
    let s = FileStorage::open(dir, dir, opts()).unwrap();
    let after = entry_log_bytes(dir);
    eprintln!("final collection: entry logs {before} -> {after} bytes");
    let live = live_ledgers(&ledgers, &deleted);
    check(&s, &live, &deleted, entries);
    // Half the ledgers are gone: so is at least ~40% of the space (a 0.8 threshold leaves
    // logs that are still 80% live).
    let total = {
        let one = (entry(1, 0).len() as u64 + 20) * entries as u64;
        one * ledgers.len() as u64
    };
    assert!(
        after <= total * 6 / 10,
        "{after} bytes of entry logs left of {total}"
    );
}
