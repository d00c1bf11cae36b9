//! Black-box tests of the write-ahead log: round trip, torn tails, corruption, rollover, fsync
//! modes and group commit.

use std::fs;
use std::path::{Path, PathBuf};

use zkit_server::storage::commit::GroupCommit;
use zkit_server::storage::error::StorageError;
use zkit_server::storage::wal::{
    encode_record, segment_name, FsyncMode, Pruned, SegmentInfo, Wal, WalOptions, WalRecord,
    RECORD_HEADER_LEN, SEGMENT_HEADER_LEN, SEGMENT_MAGIC, SEGMENT_VERSION,
};

fn opts(segment_size: u64) -> WalOptions {
    WalOptions {
        segment_size,
        ..WalOptions::default()
    }
}

fn payload(zxid: i64) -> Vec<u8> {
    // Varying lengths, including empty, and content tied to the zxid.
    (0..(zxid % 23) as usize)
        .map(|i| (zxid as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

fn write_log(dir: &Path, zxids: impl IntoIterator<Item = i64>, o: WalOptions) -> Wal {
    let (mut wal, _) = Wal::open(dir, o).expect("open");
    let batch: Vec<(i64, Vec<u8>)> = zxids.into_iter().map(|z| (z, payload(z))).collect();
    for chunk in batch.chunks(7) {
        wal.append_batch(chunk).expect("append");
        wal.sync().expect("sync");
    }
    wal
}

fn read_all(wal: &Wal, from: i64) -> Vec<WalRecord> {
    wal.read_from(from)
        .collect::<Result<Vec<_>, _>>()
        .expect("read")
}

fn expected(zxids: impl IntoIterator<Item = i64>) -> Vec<WalRecord> {
    zxids
        .into_iter()
        .map(|zxid| WalRecord {
            zxid,
            payload: payload(zxid),
        })
        .collect()
}

fn only_segment(dir: &Path) -> PathBuf {
    let segs: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(segs.len(), 1, "{segs:?}");
    segs[0].clone()
}

/// Records in the last segment of a log whose zxids are consecutive.
fn records_in_last_segment(wal: &Wal) -> u64 {
    let first = wal.segments().last().expect("a segment").first_zxid;
    (wal.last_zxid().expect("a record") - first + 1) as u64
}

/// Offsets of each record in a segment holding `zxids` written by `write_log`.
fn record_offsets(zxids: impl IntoIterator<Item = i64>) -> Vec<(i64, usize, usize)> {
    let mut off = SEGMENT_HEADER_LEN as usize;
    zxids
        .into_iter()
        .map(|z| {
            let end = off + RECORD_HEADER_LEN + payload(z).len();
            let r = (z, off, end);
            off = end;
            r
        })
        .collect()
}

#[test]
fn round_trip_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write_log(dir.path(), 1..=50, WalOptions::default());
    assert_eq!(wal.last_zxid(), Some(50));
    assert_eq!(read_all(&wal, 0), expected(1..=50));
    drop(wal);
    let (mut wal, report) = Wal::open(dir.path(), WalOptions::default()).unwrap();
    assert_eq!(report.records_checked, 50);
    assert_eq!(report.last_zxid, Some(50));
    assert!(report.truncations.is_empty());
    assert_eq!(read_all(&wal, 17), expected(17..=50));
    // Appending continues after the recovered tail.
    wal.append_batch(&[(51, payload(51))]).unwrap();
    wal.sync().unwrap();
    drop(wal);
    let (wal, _) = Wal::open(dir.path(), WalOptions::default()).unwrap();
    assert_eq!(read_all(&wal, 0), expected(1..=51));
}

#[test]
fn rejects_non_increasing_zxid_without_poisoning() {
    let dir = tempfile::tempdir().unwrap();
    let mut wal = write_log(dir.path(), [5, 6], WalOptions::default());
    let err = wal.append_batch(&[(7, vec![]), (7, vec![])]).unwrap_err();
    assert!(
        matches!(err, StorageError::ZxidNotIncreasing { zxid: 7, last: 7 }),
        "{err}"
    );
    assert!(!wal.is_poisoned());
    wal.append_batch(&[(7, payload(7))]).unwrap();
    wal.sync().unwrap();
    assert_eq!(read_all(&wal, 0), expected([5, 6, 7]));
}

/// Cuts the last segment at every byte offset inside its last three records, both as a short
/// file and as a pre-allocated file whose tail was never written; each must recover to the
/// prefix of whole records, and accept appends afterwards.
#[test]
fn truncated_at_every_offset_recovers_a_prefix() {
    let zxids: Vec<i64> = (1..=12).collect();
    let dir = tempfile::tempdir().unwrap();
    drop(write_log(dir.path(), zxids.clone(), opts(4096)));
    let seg = only_segment(dir.path());
    let original = fs::read(&seg).unwrap();
    let offsets = record_offsets(zxids.clone());
    let first_cut = offsets[offsets.len() - 3].1;
    let last_end = offsets[offsets.len() - 1].2;
    for cut in first_cut..=last_end {
        let survivors: Vec<i64> = offsets.iter().filter(|r| r.2 <= cut).map(|r| r.0).collect();
        for zero_fill in [false, true] {
            let mut bytes = original.clone();
            if zero_fill {
                bytes[cut..].fill(0);
            } else {
                bytes.truncate(cut);
            }
            // Start from just this segment (an earlier round may have rolled a new one).
            for e in fs::read_dir(dir.path()).unwrap() {
                fs::remove_file(e.unwrap().path()).unwrap();
            }
            fs::write(&seg, &bytes).unwrap();
            let (mut wal, report) = Wal::open(dir.path(), opts(4096))
                .unwrap_or_else(|e| panic!("cut {cut} zero_fill {zero_fill}: {e}"));
            assert_eq!(read_all(&wal, 0), expected(survivors.clone()), "cut {cut}");
            let torn =
                cut < last_end && !survivors.is_empty() && !offsets.iter().any(|r| r.1 == cut);
            if torn {
                assert_eq!(report.truncations.len(), 1, "cut {cut}");
                assert!(!report.truncations[0].corrupt);
            }
            // The log is writable again after the repair, right after the prefix.
            let next = survivors.last().copied().unwrap_or(0) + 100;
            wal.append_batch(&[(next, payload(next))]).unwrap();
            wal.sync().unwrap();
            drop(wal);
            let (wal, report) = Wal::open(dir.path(), opts(4096)).unwrap();
            assert!(report.truncations.is_empty(), "cut {cut}: {report:?}");
            let mut want = expected(survivors.clone());
            want.extend(expected([next]));
            assert_eq!(read_all(&wal, 0), want, "cut {cut} after append");
        }
    }
}

/// Power loss with out-of-order writeback: a sector in the middle of the unsynced tail never
/// reached the disk while later ones did. That is a torn tail (truncated before the hole), not
/// corruption, wherever the hole falls relative to record boundaries.
#[test]
fn hole_left_by_reordered_writeback_is_a_torn_tail() {
    let zxids: Vec<i64> = (1..=60).collect();
    let dir = tempfile::tempdir().unwrap();
    drop(write_log(dir.path(), zxids.clone(), opts(8192)));
    let seg = only_segment(dir.path());
    let original = fs::read(&seg).unwrap();
    let offsets = record_offsets(zxids);
    let data_end = offsets.last().unwrap().2;
    for sector in (512..data_end - 512).step_by(512) {
        let mut bytes = original.clone();
        bytes[sector..sector + 512].fill(0);
        for e in fs::read_dir(dir.path()).unwrap() {
            fs::remove_file(e.unwrap().path()).unwrap();
        }
        fs::write(&seg, &bytes).unwrap();
        let (wal, report) =
            Wal::open(dir.path(), opts(8192)).unwrap_or_else(|e| panic!("hole at {sector}: {e}"));
        let survivors: Vec<i64> = offsets
            .iter()
            .filter(|r| r.2 <= sector)
            .map(|r| r.0)
            .collect();
        assert_eq!(read_all(&wal, 0), expected(survivors), "hole at {sector}");
        assert_eq!(report.truncations.len(), 1, "hole at {sector}");
    }
}

/// A flipped byte anywhere in a record that is followed by valid records is corruption, reported
/// with the file and the offset of the damaged record, and never silently truncated.
#[test]
fn flipped_byte_in_the_middle_is_detected_with_file_and_offset() {
    let zxids: Vec<i64> = (1..=10).collect();
    let dir = tempfile::tempdir().unwrap();
    drop(write_log(dir.path(), zxids.clone(), opts(4096)));
    let seg = only_segment(dir.path());
    let original = fs::read(&seg).unwrap();
    let offsets = record_offsets(zxids);
    let (_, start, end) = offsets[4];
    for at in start..end {
        let mut bytes = original.clone();
        bytes[at] ^= 0x5a;
        fs::write(&seg, &bytes).unwrap();
        match Wal::open(dir.path(), opts(4096)) {
            Err(StorageError::Corruption { file, offset, .. }) => {
                assert_eq!(file, seg);
                assert_eq!(offset, start as u64, "flip at {at}");
            }
            other => panic!("flip at {at}: expected corruption, got {other:?}"),
        }
    }
    // With truncate_corrupt the log is cut at the bad record.
    let mut bytes = original.clone();
    bytes[start + RECORD_HEADER_LEN - 1] ^= 1;
    fs::write(&seg, &bytes).unwrap();
    let o = WalOptions {
        truncate_corrupt: true,
        ..opts(4096)
    };
    let (wal, report) = Wal::open(dir.path(), o).unwrap();
    assert_eq!(report.truncations.len(), 1);
    assert!(report.truncations[0].corrupt);
    assert_eq!(report.truncations[0].offset, start as u64);
    assert_eq!(read_all(&wal, 0), expected(1..=4));
}

/// A log of several segments whose first segment's last record has a byte flipped, and where
/// that record starts.
fn log_with_damaged_first_segment(dir: &Path) -> (Vec<SegmentInfo>, usize) {
    let wal = write_log(dir, 1..=60, opts(256));
    let segs = wal.segments().to_vec();
    assert!(segs.len() >= 3);
    drop(wal);
    // Damage the last record of the first segment: followed by nothing in its own file, but it
    // is not the tail of the log.
    let first = &segs[0];
    let n = segs[1].first_zxid - first.first_zxid;
    let offsets = record_offsets(first.first_zxid..first.first_zxid + n);
    let (_, start, _) = offsets[offsets.len() - 1];
    let mut bytes = fs::read(&first.path).unwrap();
    bytes[start + 12] ^= 0xff;
    fs::write(&first.path, &bytes).unwrap();
    (segs, start)
}

#[test]
fn corruption_in_an_earlier_segment_is_never_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (segs, start) = log_with_damaged_first_segment(dir.path());
    let first = &segs[0];
    // The open reads only the last segment; reading the first finds the damage, after handing
    // out the records before it, and names file and offset.
    let (wal, report) = Wal::open(dir.path(), opts(256)).unwrap();
    assert!(report.truncations.is_empty());
    assert_eq!(report.last_zxid, Some(60));
    let mut records = wal.read_from(0);
    for zxid in first.first_zxid..segs[1].first_zxid - 1 {
        assert_eq!(records.next().unwrap().unwrap().zxid, zxid);
    }
    match records.next() {
        Some(Err(StorageError::Corruption { file, offset, .. })) => {
            assert_eq!((file, offset), (first.path.clone(), start as u64));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert!(records.next().is_none(), "nothing after the damage");
    // Reading from a later segment on does not touch the first.
    assert_eq!(
        read_all(&wal, segs[1].first_zxid),
        expected(segs[1].first_zxid..=60)
    );
    drop(wal);
    // With truncate_corrupt the open reads every segment and cuts the log at the damage.
    let o = WalOptions {
        truncate_corrupt: true,
        ..opts(256)
    };
    let (wal, report) = Wal::open(dir.path(), o).unwrap();
    assert_eq!(report.truncations.len(), 1);
    assert!(report.truncations[0].corrupt);
    assert_eq!(
        (
            report.truncations[0].file.clone(),
            report.truncations[0].offset
        ),
        (first.path.clone(), start as u64)
    );
    assert_eq!(report.truncations[0].deleted_segments.len(), segs.len() - 1);
    assert_eq!(read_all(&wal, 0), expected(1..segs[1].first_zxid - 1));
}

#[test]
fn a_bad_header_in_an_earlier_segment_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write_log(dir.path(), 1..=60, opts(256));
    let segs = wal.segments().to_vec();
    drop(wal);
    let mut bytes = fs::read(&segs[1].path).unwrap();
    bytes[9] ^= 0x01; // the first zxid in the header no longer matches the name
    fs::write(&segs[1].path, &bytes).unwrap();
    match Wal::open(dir.path(), opts(256)) {
        Err(StorageError::Corruption { file, offset, .. }) => {
            assert_eq!((file, offset), (segs[1].path.clone(), 0));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    // A segment cut short of its header, too.
    fs::write(&segs[1].path, &bytes[..7]).unwrap();
    assert!(Wal::open(dir.path(), opts(256))
        .unwrap_err()
        .is_corruption());
}

/// The open reads the segments before the last one only for their headers: a log whose
/// earlier segments are unreadable as records still opens, and appends after its tail.
#[test]
fn the_open_reads_the_last_segment_only() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write_log(dir.path(), 1..=60, opts(256));
    let segs = wal.segments().to_vec();
    assert!(segs.len() >= 3);
    drop(wal);
    for seg in &segs[..segs.len() - 1] {
        let mut bytes = fs::read(&seg.path).unwrap();
        for b in &mut bytes[SEGMENT_HEADER_LEN as usize..] {
            *b = 0xee;
        }
        fs::write(&seg.path, &bytes).unwrap();
    }
    let (mut wal, report) = Wal::open(dir.path(), opts(256)).unwrap();
    assert_eq!(report.last_zxid, Some(60));
    assert_eq!(report.records_checked, records_in_last_segment(&wal));
    wal.append_batch(&[(61, payload(61))]).unwrap();
    wal.sync().unwrap();
    let last = segs[segs.len() - 1].first_zxid;
    assert_eq!(read_all(&wal, last), expected(last..=61));
    assert!(wal.read_from(0).next().unwrap().is_err());
}

/// A torn tail that leaves the last segment without a record: the segment goes, and the one
/// before it, read whole now, is where appends continue.
#[test]
fn a_tail_segment_torn_to_nothing_hands_the_tail_to_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write_log(dir.path(), 1..=60, opts(256));
    let segs = wal.segments().to_vec();
    drop(wal);
    let tail = &segs[segs.len() - 1];
    // Its first record torn: every byte after the header zeroed but one in the first record.
    let mut bytes = fs::read(&tail.path).unwrap();
    for b in &mut bytes[SEGMENT_HEADER_LEN as usize..] {
        *b = 0;
    }
    bytes[SEGMENT_HEADER_LEN as usize + 5] = 0x17;
    fs::write(&tail.path, &bytes).unwrap();
    let (mut wal, report) = Wal::open(dir.path(), opts(256)).unwrap();
    assert_eq!(report.truncations.len(), 1);
    assert!(!report.truncations[0].corrupt);
    assert!(!tail.path.exists());
    let before = tail.first_zxid - 1;
    assert_eq!(report.last_zxid, Some(before));
    assert_eq!(wal.last_zxid(), Some(before));
    assert_eq!(wal.segments().len(), segs.len() - 1);
    // The segment before it ends at its last record: new records follow it.
    wal.append_batch(&[(before + 1, payload(before + 1))])
        .unwrap();
    wal.sync().unwrap();
    drop(wal);
    let (wal, _) = Wal::open(dir.path(), opts(256)).unwrap();
    assert_eq!(read_all(&wal, 0), expected(1..=before + 1));
}

/// A roll that made its segment (header written) but crashed before the record: the empty
/// segment goes, and the one before it, read whole now, is where appends continue.
#[test]
fn an_empty_last_segment_hands_the_tail_to_the_one_before() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write_log(dir.path(), 1..=60, opts(256));
    let segs = wal.segments().to_vec();
    assert!(segs.len() >= 3);
    drop(wal);
    let mut empty = Vec::new();
    empty.extend_from_slice(&SEGMENT_MAGIC);
    empty.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    empty.extend_from_slice(&61i64.to_le_bytes());
    empty.resize(256, 0);
    let empty_path = dir.path().join(segment_name(61));
    fs::write(&empty_path, &empty).unwrap();
    let (mut wal, report) = Wal::open(dir.path(), opts(256)).unwrap();
    assert!(!empty_path.exists());
    assert_eq!((report.last_zxid, wal.last_zxid()), (Some(60), Some(60)));
    assert_eq!(report.records_checked, records_in_last_segment(&wal));
    assert_eq!(wal.segments(), &segs[..]);
    // A smaller zxid than the dropped name is refused: the log knows where it ends.
    assert!(wal.append_batch(&[(60, payload(60))]).is_err());
    drop(wal);
    let (mut wal, _) = Wal::open(dir.path(), opts(256)).unwrap();
    wal.append_batch(&[(61, payload(61))]).unwrap();
    wal.sync().unwrap();
    drop(wal);
    let (wal, _) = Wal::open(dir.path(), opts(256)).unwrap();
    assert_eq!(read_all(&wal, 0), expected(1..=61));
    drop(wal);
    // Without fsync the header itself may never have reached the disk: the same.
    let unwritten = dir.path().join(segment_name(62));
    fs::write(&unwritten, [0u8; 256]).unwrap();
    let (wal, report) = Wal::open(dir.path(), opts(256)).unwrap();
    assert!(!unwritten.exists());
    assert_eq!((report.last_zxid, wal.last_zxid()), (Some(61), Some(61)));
    assert_eq!(read_all(&wal, 0), expected(1..=61));
    drop(wal);
    // With truncate_corrupt every segment is read whole at open: the one before the dropped
    // segment is not read a second time, and nothing is cut.
    let o = WalOptions {
        truncate_corrupt: true,
        ..opts(256)
    };
    let mut empty = empty[..8].to_vec();
    empty.extend_from_slice(&62i64.to_le_bytes());
    empty.resize(256, 0);
    let empty_path = dir.path().join(segment_name(62));
    fs::write(&empty_path, &empty).unwrap();
    let (wal, report) = Wal::open(dir.path(), o).unwrap();
    assert!(!empty_path.exists());
    assert!(report.truncations.is_empty(), "{:?}", report.truncations);
    assert_eq!(report.last_zxid, Some(61));
    assert_eq!(read_all(&wal, 0), expected(1..=61));
}

#[test]
fn rollover_names_segments_by_first_zxid_and_reads_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write_log(dir.path(), 1..=200, opts(512));
    let segs = wal.segments().to_vec();
    assert!(segs.len() > 5, "{}", segs.len());
    assert_eq!(segs[0].first_zxid, 1);
    for s in &segs {
        let name = s.path.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(name, format!("wal-{:016x}.log", s.first_zxid));
        assert!(fs::metadata(&s.path).unwrap().len() >= 512, "pre-allocated");
    }
    assert!(segs.windows(2).all(|w| w[0].first_zxid < w[1].first_zxid));
    assert_eq!(read_all(&wal, 0), expected(1..=200));
    assert_eq!(read_all(&wal, 123), expected(123..=200));
    drop(wal);
    let (wal, report) = Wal::open(dir.path(), opts(512)).unwrap();
    // Only the last segment is read at open; the reads above checked the rest.
    let in_last = 200 - segs[segs.len() - 1].first_zxid as u64 + 1;
    assert_eq!(
        (report.records_checked, report.segments),
        (in_last, segs.len())
    );
    assert_eq!(read_all(&wal, 0), expected(1..=200));
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A log of zxids 1..=200 in 512-byte segments with its first `n` segments detached (pruned
/// through the zxid before segment `n`'s first), and its segments before that.
fn log_with_detached(dir: &Path, n: usize) -> (Wal, Vec<SegmentInfo>, Pruned) {
    let mut wal = write_log(dir, 1..=200, opts(512));
    let segs = wal.segments().to_vec();
    assert!(segs.len() > n + 1, "{}", segs.len());
    let pruned = wal.detach_through(segs[n].first_zxid - 1).unwrap();
    assert_eq!(pruned.len(), n);
    (wal, segs, pruned)
}

#[test]
fn pruning_detaches_segments_at_once_and_deletes_them_later() {
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, segs, pruned) = log_with_detached(dir.path(), 2);
    // The log forgot them and they no longer look like segments, but they are still on disk:
    // deleting them is left to whoever holds `pruned`, off the thread that writes the log.
    assert_eq!(wal.segments(), &segs[2..]);
    let detached: Vec<String> = segs[..2]
        .iter()
        .map(|s| format!("wal-{:016x}.log.pruned", s.first_zxid))
        .collect();
    let on_disk = names(dir.path());
    assert!(detached.iter().all(|d| on_disk.contains(d)), "{on_disk:?}");
    assert_eq!(on_disk.len(), segs.len());
    // The log goes on meanwhile.
    wal.append_batch(&[(201, payload(201))]).unwrap();
    wal.sync().unwrap();
    assert_eq!(
        read_all(&wal, segs[2].first_zxid),
        expected(segs[2].first_zxid..=201)
    );
    assert_eq!(pruned.remove().unwrap(), 2);
    let on_disk = names(dir.path());
    assert!(on_disk.iter().all(|n| n.ends_with(".log")), "{on_disk:?}");
    // (The append may have rolled a new segment.)
    assert_eq!(on_disk.len(), wal.segments().len());
    assert!(wal.segments().starts_with(&segs[2..]));
    // Nothing to prune: nothing detached.
    assert!(wal.detach_through(0).unwrap().is_empty());
}

#[test]
fn a_pruned_segment_left_by_a_crash_is_deleted_on_open() {
    let dir = tempfile::tempdir().unwrap();
    // Detached, then the process dies before deleting them.
    let (wal, segs, pruned) = log_with_detached(dir.path(), 1);
    drop((pruned, wal));
    let (wal, report) = Wal::open(dir.path(), opts(512)).unwrap();
    assert_eq!(report.segments, segs.len() - 1);
    assert_eq!(read_all(&wal, 0), expected(segs[1].first_zxid..=200));
    assert!(names(dir.path()).iter().all(|n| n.ends_with(".log")));
}

#[test]
fn a_reopen_and_the_deleting_thread_may_both_reach_a_pruned_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, segs, pruned) = log_with_detached(dir.path(), 2);
    drop(wal);
    // The log is opened again (a rebuild after a failed write) and deletes the detached
    // segments before the thread holding `pruned` gets to them: neither side fails.
    let (wal, report) = Wal::open(dir.path(), opts(512)).unwrap();
    assert_eq!(report.segments, segs.len() - 2);
    assert_eq!(pruned.remove().unwrap(), 2);
    assert_eq!(read_all(&wal, 0), expected(segs[2].first_zxid..=200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_prunes_while_it_keeps_committing() {
    let dir = tempfile::tempdir().unwrap();
    let wal = write_log(dir.path(), 1..=200, opts(512));
    let segs = wal.segments().to_vec();
    let gc = GroupCommit::start(wal).unwrap();
    let through = segs[3].first_zxid - 1;
    let pruned = gc.prune_through(through);
    gc.submit(vec![(201, payload(201))]).await.unwrap();
    assert_eq!(pruned.await.unwrap(), 3);
    let wal = gc.shutdown().unwrap();
    // (The append may have rolled a new segment.)
    assert!(wal.segments().starts_with(&segs[3..]));
    assert_eq!(names(dir.path()).len(), wal.segments().len());
    assert_eq!(read_all(&wal, 0), expected(segs[3].first_zxid..=201));
}

#[test]
fn record_larger_than_a_segment_gets_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (mut wal, _) = Wal::open(dir.path(), opts(256)).unwrap();
    let big = vec![7u8; 4000];
    wal.append_batch(&[(1, vec![1u8]), (2, big.clone()), (3, vec![3u8])])
        .unwrap();
    wal.sync().unwrap();
    drop(wal);
    let (wal, _) = Wal::open(dir.path(), opts(256)).unwrap();
    let got = read_all(&wal, 0);
    assert_eq!(got.len(), 3);
    assert_eq!(got[1].payload, big);
}

#[test]
fn fsync_never_mode_still_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let o = WalOptions {
        fsync: FsyncMode::Never,
        ..opts(1024)
    };
    let wal = write_log(dir.path(), 1..=100, o.clone());
    drop(wal);
    let (wal, report) = Wal::open(dir.path(), o).unwrap();
    assert_eq!(report.records_checked, records_in_last_segment(&wal));
    assert_eq!(read_all(&wal, 0), expected(1..=100));
}

#[test]
fn empty_and_garbage_files_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, report) = Wal::open(dir.path(), WalOptions::default()).unwrap();
    assert_eq!((report.records_checked, wal.last_zxid()), (0, None));
    drop(wal);
    // A segment of pure garbage is corruption, not a crash.
    fs::write(
        dir.path().join("wal-0000000000000001.log"),
        b"not a wal segment at all",
    )
    .unwrap();
    fs::write(
        dir.path().join("wal-0000000000000009.log"),
        b"\x00\x01garbage",
    )
    .unwrap();
    assert!(Wal::open(dir.path(), WalOptions::default())
        .unwrap_err()
        .is_corruption());
    // A leftover .tmp from a crashed roll is removed.
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("wal-0000000000000001.log.tmp"), [0u8; 64]).unwrap();
    let (_wal, report) = Wal::open(dir.path(), WalOptions::default()).unwrap();
    assert_eq!(report.segments, 0);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn encode_record_layout() {
    let mut buf = Vec::new();
    encode_record(&mut buf, 0x0102, b"xy");
    assert_eq!(buf.len(), RECORD_HEADER_LEN + 2);
    assert_eq!(&buf[0..4], &10u32.to_le_bytes());
    assert_eq!(&buf[8..16], &0x0102i64.to_le_bytes());
    assert_eq!(&buf[16..], b"xy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_acknowledges_every_batch_after_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), opts(4096)).unwrap();
    let gc = GroupCommit::start(wal).unwrap();
    // The single writer submits in zxid order without waiting; waiters run concurrently.
    let mut pending = Vec::new();
    for z in 1..=300i64 {
        pending.push(tokio::spawn(gc.submit(vec![(z, payload(z))])));
    }
    for p in pending {
        p.await.unwrap().unwrap();
    }
    assert_eq!(gc.prune_through(0).await.unwrap(), 0);
    let wal = gc.shutdown().unwrap();
    assert_eq!(read_all(&wal, 0), expected(1..=300));
    drop(wal);
    let (wal, report) = Wal::open(dir.path(), opts(4096)).unwrap();
    assert_eq!(report.records_checked, records_in_last_segment(&wal));
    assert_eq!(read_all(&wal, 0), expected(1..=300));
}

/// Polls `commit` once, without waiting: `Some` when it had already resolved.
fn resolved_now(
    commit: &mut zkit_server::storage::commit::Commit,
) -> Option<Result<(), StorageError>> {
    use std::future::Future;
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
    let mut cx = std::task::Context::from_waker(&waker);
    match std::pin::Pin::new(commit).poll(&mut cx) {
        std::task::Poll::Ready(r) => Some(r),
        std::task::Poll::Pending => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_log_makes_a_small_batch_durable_before_submit_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), opts(4096)).unwrap();
    let gc = GroupCommit::start(wal).unwrap();
    for z in 1..=20i64 {
        // Nothing is queued before each of these: the caller writes and syncs it itself.
        let mut commit = gc.submit(vec![(z, payload(z))]);
        assert!(
            matches!(resolved_now(&mut commit), Some(Ok(()))),
            "batch {z} of one record on an idle log was not durable when submit returned"
        );
    }
    let wal = gc.shutdown().unwrap();
    assert_eq!(read_all(&wal, 0), expected(1..=20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_and_thread_batches_reach_the_log_in_submission_order() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, _) = Wal::open(dir.path(), opts(4096)).unwrap();
    let gc = GroupCommit::start(wal).unwrap();
    // Batch sizes around the inline limit, some submitted while earlier ones are still on the
    // commit thread (small ones then must queue behind them), some after everything resolved.
    let sizes = [1usize, 9, 1, 2, 12, 3, 1, 4, 5, 1, 1, 30, 2];
    let mut z = 0i64;
    for round in 0..6 {
        let mut pending = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let batch: Vec<(i64, Vec<u8>)> = (0..n)
                .map(|_| {
                    z += 1;
                    (z, payload(z))
                })
                .collect();
            pending.push(gc.submit(batch));
            if (i + round) % 4 == 0 {
                // Let the log go idle now and then, so the next small batch is written inline.
                for p in pending.drain(..) {
                    p.await.unwrap();
                }
            }
        }
        for p in pending {
            p.await.unwrap();
        }
    }
    let wal = gc.shutdown().unwrap();
    assert_eq!(read_all(&wal, 0), expected(1..=z));
}
