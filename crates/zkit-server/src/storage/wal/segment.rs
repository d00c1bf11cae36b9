//! The on-disk format of WAL segments (see the parent module for the layout and the torn-tail
//! rules): names, the header, record encoding, the check-then-parse decoder and the scan that
//! tells a torn tail from corruption. Pure functions over bytes, except listing and removing
//! segment files.

use std::fs;
use std::path::{Path, PathBuf};

use crate::storage::error::{IoContext, Result};

/// Magic bytes at the start of every segment.
pub const SEGMENT_MAGIC: [u8; 4] = *b"ZKWL";
/// Segment format version.
pub const SEGMENT_VERSION: u32 = 1;
/// Bytes of the segment header.
pub const SEGMENT_HEADER_LEN: u64 = 16;
/// Bytes of a record before its payload: len, crc, zxid.
pub const RECORD_HEADER_LEN: usize = 16;
/// Largest payload accepted or read back (ZooKeeper's jute.maxbuffer is 1 MiB; this is a sanity
/// bound that also keeps the reader from trusting a garbage length).
pub const MAX_PAYLOAD_LEN: usize = 64 << 20;
/// Sector size assumed for the torn-write rule: a sector is written whole or not at all.
const SECTOR: usize = 512;
/// Bound on checksum work when looking for a valid record after a bad one; when it runs out the
/// answer is "maybe", and recovery takes the safe side (corruption, not silent truncation).
const SCAN_CRC_BUDGET: usize = 1 << 30;

/// One segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    /// zxid of its first record (from its name); every record in it is `>=` this and `<` the next
    /// segment's.
    pub first_zxid: i64,
    /// Its path.
    pub path: PathBuf,
}

/// `wal-%016x.log`.
pub fn segment_name(first_zxid: i64) -> String {
    format!("wal-{:016x}.log", first_zxid as u64)
}

pub(super) fn parse_segment_name(name: &str) -> Option<i64> {
    let hex = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(|z| z as i64)
}

/// What a pruned segment's name gets appended until it is deleted.
const PRUNED_SUFFIX: &str = ".pruned";

/// The name a pruned segment at `path` is renamed to.
pub(super) fn pruned_path(path: &Path) -> PathBuf {
    crate::storage::delete::with_suffix(path, PRUNED_SUFFIX)
}

pub(super) fn list_segments(dir: &Path) -> Result<Vec<SegmentInfo>> {
    let mut segments = Vec::new();
    let entries = fs::read_dir(dir).ctx(|| format!("list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.ctx(|| format!("list {}", dir.display()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with("wal-") && name.ends_with(".log.tmp") {
            // A roll that crashed before its rename: never held an acknowledged record.
            remove_file(&entry.path())?;
            continue;
        }
        if name
            .strip_suffix(PRUNED_SUFFIX)
            .is_some_and(|segment| parse_segment_name(segment).is_some())
        {
            // Pruned (older than a durable snapshot) but not yet deleted when the log was
            // closed: nothing needs it. The thread deleting it may still be at work.
            remove_pruned(&entry.path())?;
            continue;
        }
        match parse_segment_name(name) {
            Some(first_zxid) => segments.push(SegmentInfo {
                first_zxid,
                path: entry.path(),
            }),
            None => {
                tracing::warn!(file = %entry.path().display(), "ignoring unknown file in WAL directory")
            }
        }
    }
    segments.sort_by_key(|s| s.first_zxid);
    Ok(segments)
}

pub(super) fn segment_header(first_zxid: i64) -> [u8; SEGMENT_HEADER_LEN as usize] {
    let mut h = [0u8; SEGMENT_HEADER_LEN as usize];
    h[0..4].copy_from_slice(&SEGMENT_MAGIC);
    h[4..8].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
    h[8..16].copy_from_slice(&first_zxid.to_le_bytes());
    h
}

pub(super) fn check_header(buf: &[u8], first_zxid: i64) -> std::result::Result<(), String> {
    let Some(h) = buf.get(..SEGMENT_HEADER_LEN as usize) else {
        return Err("segment shorter than its header".into());
    };
    if h[0..4] != SEGMENT_MAGIC {
        return Err("bad segment magic".into());
    }
    let version = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    if version != SEGMENT_VERSION {
        return Err(format!("unsupported segment version {version}"));
    }
    let zxid = read_i64(h, 8);
    if zxid != first_zxid {
        return Err(format!(
            "header says first zxid {zxid:#x}, name says {first_zxid:#x}"
        ));
    }
    Ok(())
}

/// Appends one encoded record to `buf`.
pub fn encode_record(buf: &mut Vec<u8>, zxid: i64, payload: &[u8]) {
    let zxid_bytes = zxid.to_le_bytes();
    let len = (8 + payload.len()) as u32;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&zxid_bytes), payload);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&crc.to_le_bytes());
    buf.extend_from_slice(&zxid_bytes);
    buf.extend_from_slice(payload);
}

pub(super) fn read_u32(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

pub(super) fn read_i64(buf: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    i64::from_le_bytes(b)
}

/// What is at one offset of a segment.
pub(super) enum Decoded<'a> {
    Record {
        zxid: i64,
        payload: &'a [u8],
        next: usize,
    },
    /// Zeros from here to the end of the file.
    End,
    Bad(String),
}

/// Check-then-parse of one record at `off`; never panics on any input.
pub(super) fn decode(buf: &[u8], off: usize, min_zxid: i64, last: Option<i64>) -> Decoded<'_> {
    let rest = buf.get(off..).unwrap_or_default();
    if rest.iter().all(|&b| b == 0) {
        return Decoded::End;
    }
    if rest.len() < RECORD_HEADER_LEN {
        return Decoded::Bad("short record header".into());
    }
    let len = read_u32(buf, off) as usize;
    if len == 0 {
        return Decoded::Bad("zero length before non-zero bytes".into());
    }
    if !(8..=8 + MAX_PAYLOAD_LEN).contains(&len) {
        return Decoded::Bad(format!("implausible record length {len}"));
    }
    let next = off + 8 + len;
    if next > buf.len() {
        return Decoded::Bad(format!(
            "record of length {len} runs past the end of the file"
        ));
    }
    let crc = read_u32(buf, off + 4);
    let body = &buf[off + 8..next];
    if crc32c::crc32c(body) != crc {
        return Decoded::Bad("checksum mismatch".into());
    }
    let zxid = read_i64(buf, off + 8);
    if zxid < min_zxid || last.is_some_and(|last| zxid <= last) {
        return Decoded::Bad(format!("zxid {zxid:#x} out of order"));
    }
    Decoded::Record {
        zxid,
        payload: &body[8..],
        next,
    }
}

pub(super) enum Stop {
    /// Clean end: zeros (or nothing) after the last record.
    Clean,
    Bad {
        offset: usize,
        reason: String,
        /// Looks like a torn write (see the module docs); only honoured in the last segment.
        torn: bool,
    },
}

pub(super) struct Scan {
    /// Offset after the last valid record.
    pub(super) end: usize,
    /// Valid records.
    pub(super) records: u64,
    /// The last valid record's zxid.
    pub(super) last_zxid: Option<i64>,
    /// What ended the walk.
    pub(super) stop: Stop,
}

/// Walks the records of one segment (header already checked), calling `on_record` with each
/// valid one's zxid and the range of `buf` its payload takes, and classifies what stopped the
/// walk.
pub(super) fn scan(
    buf: &[u8],
    first_zxid: i64,
    mut last: Option<i64>,
    mut on_record: impl FnMut(i64, std::ops::Range<usize>),
) -> Scan {
    let mut off = SEGMENT_HEADER_LEN as usize;
    let mut records = 0;
    loop {
        match decode(buf, off, first_zxid, last) {
            Decoded::Record {
                zxid,
                payload,
                next,
            } => {
                on_record(zxid, next - payload.len()..next);
                records += 1;
                last = Some(zxid);
                off = next;
            }
            Decoded::End => {
                return Scan {
                    end: off,
                    records,
                    last_zxid: last,
                    stop: Stop::Clean,
                }
            }
            Decoded::Bad(reason) => {
                let torn = unwritten_sector_at(buf, off)
                    || hole_in_record(buf, off)
                    || !valid_record_after(buf, off, first_zxid, last);
                return Scan {
                    end: off,
                    records,
                    last_zxid: last,
                    stop: Stop::Bad {
                        offset: off,
                        reason,
                        torn,
                    },
                };
            }
        }
    }
}

/// The record header at `off` reads as zeros up to the end of its sector (at least the length
/// field): that sector was never written.
pub(super) fn unwritten_sector_at(buf: &[u8], off: usize) -> bool {
    let sector_end = (off / SECTOR + 1) * SECTOR;
    let end = sector_end
        .max(off + 4)
        .min(off + RECORD_HEADER_LEN)
        .min(buf.len());
    end >= off + 4 && buf[off..end].iter().all(|&b| b == 0)
}

/// A whole 512-byte sector of zeros overlaps the (bad) record at `off` and lies before the last
/// non-zero byte of the file: a hole that a power loss left in an unsynced batch whose later
/// sectors did reach the disk. Zeros after the last non-zero byte are just pre-allocation, so a
/// damaged length that points into them does not count.
pub(super) fn hole_in_record(buf: &[u8], off: usize) -> bool {
    let Some(last_nonzero) = buf.iter().rposition(|&b| b != 0) else {
        return false;
    };
    let len = buf
        .get(off..off + 4)
        .map_or(0, |_| read_u32(buf, off) as usize)
        .min(8 + MAX_PAYLOAD_LEN);
    let span_end = (off + 8 + len)
        .max(off + RECORD_HEADER_LEN)
        .min(last_nonzero);
    let mut sector = off / SECTOR * SECTOR;
    while sector < span_end {
        let end = (sector + SECTOR).min(buf.len());
        if end - sector == SECTOR && buf[sector..end].iter().all(|&b| b == 0) {
            return true;
        }
        sector += SECTOR;
    }
    false
}

/// Is there any valid record starting after `off`? Errs towards "yes" when the checksum budget
/// runs out, so that doubt ends in a corruption error, never in a silent truncation.
pub(super) fn valid_record_after(buf: &[u8], off: usize, min_zxid: i64, last: Option<i64>) -> bool {
    let mut budget = SCAN_CRC_BUDGET;
    // A record's length field is non-zero, so none starts in the trailing zeros (usually most
    // of a pre-allocated segment).
    let limit = buf.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let mut p = off + 1;
    while p < limit && p + RECORD_HEADER_LEN <= buf.len() {
        let len = read_u32(buf, p) as usize;
        if (8..=8 + MAX_PAYLOAD_LEN).contains(&len) && p + 8 + len <= buf.len() {
            let zxid = read_i64(buf, p + 8);
            if zxid >= min_zxid && last.map_or(true, |last| zxid > last) {
                if budget < len {
                    return true;
                }
                budget -= len;
                if crc32c::crc32c(&buf[p + 8..p + 8 + len]) == read_u32(buf, p + 4) {
                    return true;
                }
            }
        }
        p += 1;
    }
    false
}

pub(super) fn remove_file(path: &Path) -> Result<()> {
    fs::remove_file(path).ctx(|| format!("remove {}", path.display()))
}

/// Deletes a pruned segment, in cuts (see `storage/delete.rs`); one already gone
/// (deleted by whoever else got to it first: the deleting thread, or a reopen of the log) is
/// no error.
pub(super) fn remove_pruned(path: &Path) -> Result<()> {
    crate::storage::delete::delete_in_cuts(path).ctx(|| format!("remove {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(records: &[(i64, &[u8])], zeros: usize) -> Vec<u8> {
        let mut buf = segment_header(records[0].0).to_vec();
        for (z, p) in records {
            encode_record(&mut buf, *z, p);
        }
        buf.resize(buf.len() + zeros, 0);
        buf
    }

    #[test]
    fn scan_reads_records_and_stops_at_zeros() {
        let buf = segment(&[(1, b"a"), (2, b""), (5, b"ccc")], 100);
        let mut got = Vec::new();
        let s = scan(&buf, 1, None, |z, p| got.push((z, buf[p].to_vec())));
        assert!(matches!(s.stop, Stop::Clean));
        assert_eq!(
            got,
            vec![(1, b"a".to_vec()), (2, vec![]), (5, b"ccc".to_vec())]
        );
        assert_eq!(s.end, buf.len() - 100);
    }

    #[test]
    fn bad_middle_record_is_not_torn_but_bad_last_record_is() {
        let buf = segment(&[(1, b"aaaa"), (2, b"bbbb"), (3, b"cccc")], 600);
        let second = SEGMENT_HEADER_LEN as usize + 16 + 4;
        let mut middle = buf.clone();
        middle[second + 18] ^= 0x40;
        match scan(&middle, 1, None, |_, _| {}).stop {
            Stop::Bad { offset, torn, .. } => assert_eq!((offset, torn), (second, false)),
            Stop::Clean => panic!("flip not detected"),
        }
        let third = second + 20;
        let mut last = buf.clone();
        last[third + 18] ^= 0x40;
        match scan(&last, 1, None, |_, _| {}).stop {
            Stop::Bad { offset, torn, .. } => assert_eq!((offset, torn), (third, true)),
            Stop::Clean => panic!("flip not detected"),
        }
    }

    #[test]
    fn out_of_order_zxid_is_bad() {
        let buf = segment(&[(5, b"a"), (4, b"b")], 0);
        assert!(matches!(
            scan(&buf, 5, None, |_, _| {}).stop,
            Stop::Bad { .. }
        ));
    }

    #[test]
    fn decode_never_panics_on_garbage() {
        let mut x: u32 = 12345;
        for n in 0..2000usize {
            let mut buf = segment_header(0).to_vec();
            for _ in 0..(n % 97) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                buf.push(x as u8);
            }
            let _ = scan(&buf, 0, None, |_, _| {});
        }
    }
}
