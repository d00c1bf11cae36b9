//! One znode's persisted state packed into a single shared allocation: stat fields, ACL id,
//! path and data. This is what keeps a million-node tree small (one ~170-byte allocation per
//! 100-byte node) and what makes a snapshot capture cheap (a capture shares the records; a
//! mutation while one is shared copies that record only).
//!
//! ```text
//! flags u8        bit i (0..=6): optional field i present; bit 7: data is null
//! czxid i64, ctime i64, acl u32, path_len u32        always present (25 bytes)
//! mzxid i64       if != czxid      ┐
//! mtime i64       if != ctime      │
//! pzxid i64       if != czxid      │ optional fields, in this order; a fresh node has none,
//! version i32     if != 0          │ so its header is 25 bytes instead of 69
//! cversion i32    if != 0          │
//! aversion i32    if != 0          │
//! owner i64       if != 0          ┘
//! path            path_len bytes of UTF-8
//! data            the rest
//! ```
//!
//! Integers are big-endian, like jute. The same bytes are written to snapshots as they are, so
//! [`check`] validates a record from an untrusted source without panicking. This module knows
//! nothing of the tree around the record.

use std::sync::Arc;

use super::stored::StoredStat;

/// Bit 7 of the flags: the data is null (not merely empty).
const NULL_DATA: u8 = 0x80;
/// Length of the fields every record has: flags, czxid, ctime, acl, path_len.
const FIXED: usize = 1 + 8 + 8 + 4 + 4;
/// Longest header: the fixed part and every optional field.
const MAX_HEADER: usize = FIXED + 8 * 4 + 4 * 3;
/// Sizes of the optional fields, in flag-bit order.
const OPTIONAL: [usize; 7] = [8, 8, 8, 4, 4, 4, 8];

/// The stored stat of a node and its interned ACL id. The stat's fields read and write as
/// `meta.czxid`, `meta.version`, ….
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meta {
    /// The stat as a snapshot stores it.
    pub stat: StoredStat,
    /// Id in the tree's ACL table.
    pub acl: u32,
}

impl std::ops::Deref for Meta {
    type Target = StoredStat;

    fn deref(&self) -> &StoredStat {
        &self.stat
    }
}

impl std::ops::DerefMut for Meta {
    fn deref_mut(&mut self) -> &mut StoredStat {
        &mut self.stat
    }
}

impl Meta {
    /// The optional fields as (present, bytes), in flag-bit order.
    fn optional(&self) -> [(bool, [u8; 8]); 7] {
        let w = |v: i64| v.to_be_bytes();
        let n = |v: i32| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&v.to_be_bytes());
            b
        };
        [
            (self.mzxid != self.czxid, w(self.mzxid)),
            (self.mtime != self.ctime, w(self.mtime)),
            (self.pzxid != self.czxid, w(self.pzxid)),
            (self.version != 0, n(self.version)),
            (self.cversion != 0, n(self.cversion)),
            (self.aversion != 0, n(self.aversion)),
            (self.ephemeral_owner != 0, w(self.ephemeral_owner)),
        ]
    }

    /// The encoded header (fixed part and present optional fields) and its length.
    fn header(&self, path_len: u32, null_data: bool) -> ([u8; MAX_HEADER], usize) {
        let mut out = [0u8; MAX_HEADER];
        let mut flags = if null_data { NULL_DATA } else { 0 };
        out[1..9].copy_from_slice(&self.czxid.to_be_bytes());
        out[9..17].copy_from_slice(&self.ctime.to_be_bytes());
        out[17..21].copy_from_slice(&self.acl.to_be_bytes());
        out[21..25].copy_from_slice(&path_len.to_be_bytes());
        let mut at = FIXED;
        for (bit, ((present, bytes), size)) in self.optional().iter().zip(OPTIONAL).enumerate() {
            if *present {
                flags |= 1 << bit;
                out[at..at + size].copy_from_slice(&bytes[..size]);
                at += size;
            }
        }
        out[0] = flags;
        (out, at)
    }
}

/// A record: cheap to clone (a reference count), copied on write when shared.
pub type Record = Arc<[u8]>;

/// Builds a record.
pub fn encode(meta: &Meta, path: &str, data: Option<&[u8]>) -> Record {
    build(meta, path.as_bytes(), data)
}

/// [`encode`] from the path's bytes (UTF-8, as every record's are).
fn build(meta: &Meta, path: &[u8], data: Option<&[u8]>) -> Record {
    // Paths longer than 4 GiB cannot arrive: requests are bounded far below that.
    let path_len = u32::try_from(path.len()).unwrap_or(u32::MAX);
    let (header, len) = meta.header(path_len, data.is_none());
    concat(&[&header[..len], path, data.unwrap_or_default()])
}

/// Records up to this length are assembled on the stack; longer ones in a vector.
const ON_STACK: usize = 256;

/// One record from its parts, each copied whole (a byte-by-byte copy from chained iterators
/// was a twentieth of the server's CPU under pipelined setData).
fn concat(parts: &[&[u8]]) -> Record {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len <= ON_STACK {
        let mut buf = [0u8; ON_STACK];
        let mut at = 0;
        for p in parts {
            buf[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        Record::from(&buf[..len])
    } else {
        Record::from(parts.concat())
    }
}

/// The layout of a record: where its path starts and how long it is.
#[derive(Debug, Clone, Copy)]
struct Layout {
    path_at: usize,
    path_len: usize,
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(x)
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(x)
}

/// Validates an untrusted record: header within bounds, path within bounds and UTF-8.
///
/// # Errors
/// What is wrong with it.
pub fn check(b: &[u8]) -> Result<(), &'static str> {
    if b.len() < FIXED {
        return Err("record shorter than its header");
    }
    let header = header_len(b[0]);
    let path_len = be_u32(b, 21) as usize;
    let end = header
        .checked_add(path_len)
        .ok_or("record path length overflows")?;
    if end > b.len() {
        return Err("record path runs past its end");
    }
    std::str::from_utf8(&b[header..end]).map_err(|_| "record path is not UTF-8")?;
    if b[0] & NULL_DATA != 0 && end != b.len() {
        return Err("record has null data and data bytes");
    }
    Ok(())
}

/// Flag bits of the 8-byte and the 4-byte optional fields.
const WIDE: u8 = 0b0100_0111;
const NARROW: u8 = 0b0011_1000;

/// Header length from the flags alone (no field decoding): the fast path of path lookups.
fn header_len(flags: u8) -> usize {
    FIXED + 8 * (flags & WIDE).count_ones() as usize + 4 * (flags & NARROW).count_ones() as usize
}

/// The path's bytes (what the path index hashes and compares; no UTF-8 check).
pub fn path_bytes(b: &[u8]) -> &[u8] {
    let at = header_len(b[0]);
    &b[at..at + be_u32(b, 21) as usize]
}

/// Decodes the header. The record must be one [`encode`] built or [`check`] accepted.
fn layout_and_meta(b: &[u8]) -> (Layout, Meta) {
    let flags = b[0];
    let czxid = be_i64(b, 1);
    let ctime = be_i64(b, 9);
    let mut meta = Meta {
        stat: StoredStat {
            czxid,
            mzxid: czxid,
            ctime,
            mtime: ctime,
            pzxid: czxid,
            ..StoredStat::default()
        },
        acl: be_u32(b, 17),
    };
    let path_len = be_u32(b, 21) as usize;
    // The optional fields in flag-bit order (see `OPTIONAL`), unrolled: this runs several
    // times per request.
    let mut at = FIXED;
    let mut wide = |bit: u8, field: &mut i64| {
        if flags & (1 << bit) != 0 {
            *field = be_i64(b, at);
            at += 8;
        }
    };
    wide(0, &mut meta.mzxid);
    wide(1, &mut meta.mtime);
    wide(2, &mut meta.pzxid);
    let mut narrow = |bit: u8, field: &mut i32| {
        if flags & (1 << bit) != 0 {
            *field = be_i32(b, at);
            at += 4;
        }
    };
    narrow(3, &mut meta.version);
    narrow(4, &mut meta.cversion);
    narrow(5, &mut meta.aversion);
    if flags & (1 << 6) != 0 {
        meta.ephemeral_owner = be_i64(b, at);
        at += 8;
    }
    (
        Layout {
            path_at: at,
            path_len,
        },
        meta,
    )
}

/// The stored stat and ACL id.
pub fn meta(b: &[u8]) -> Meta {
    layout_and_meta(b).1
}

/// The path.
pub fn path(b: &[u8]) -> &str {
    // Checked UTF-8 when the record was built or loaded; never fails.
    std::str::from_utf8(path_bytes(b)).unwrap_or_default()
}

/// Path (its bytes: the record's UTF-8 was checked when it was built or loaded, and only a
/// reader of the path as text pays for the check again), data and meta at once.
pub fn parts(b: &[u8]) -> (&[u8], Option<&[u8]>, Meta) {
    let (l, meta) = layout_and_meta(b);
    let path_end = l.path_at + l.path_len;
    let path = &b[l.path_at..path_end];
    let data = (b[0] & NULL_DATA == 0).then(|| &b[path_end..]);
    (path, data, meta)
}

/// Replaces the meta of `rec`: in place when the record is not shared (no snapshot capture
/// holds it) and the header keeps its length, which is the common case for a parent whose
/// cversion and pzxid move with every child; otherwise a new record is built.
pub fn set_meta(rec: &mut Record, new: &Meta) {
    let (l, _) = layout_and_meta(rec);
    let null_data = rec[0] & NULL_DATA != 0;
    let (header, len) = new.header(l.path_len as u32, null_data);
    if len == l.path_at {
        if let Some(bytes) = Arc::get_mut(rec) {
            bytes[..len].copy_from_slice(&header[..len]);
            return;
        }
    }
    let rebuilt = concat(&[&header[..len], &rec[l.path_at..]]);
    *rec = rebuilt;
}

/// Replaces the data and meta of `rec` (setData: always a new record, the length changes).
pub fn set_data(rec: &mut Record, new: &Meta, data: Option<&[u8]>) {
    let rebuilt = build(new, path_bytes(rec), data);
    *rec = rebuilt;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_and_without_optional_fields() {
        let fresh = Meta {
            stat: StoredStat {
                czxid: 7,
                mzxid: 7,
                ctime: 100,
                mtime: 100,
                pzxid: 7,
                ..StoredStat::default()
            },
            acl: 3,
        };
        let rec = encode(&fresh, "/a/b", Some(b"xyz"));
        assert_eq!(rec.len(), FIXED + 4 + 3);
        assert_eq!(parts(&rec), (&b"/a/b"[..], Some(&b"xyz"[..]), fresh));
        assert_eq!(check(&rec), Ok(()));
        let busy = Meta {
            stat: StoredStat {
                mzxid: 9,
                mtime: -5,
                pzxid: 11,
                version: -1,
                cversion: 4,
                aversion: i32::MIN,
                ephemeral_owner: i64::MIN,
                ..fresh.stat
            },
            ..fresh
        };
        let mut rec2 = rec.clone();
        set_meta(&mut rec2, &busy);
        assert_eq!(parts(&rec2), (&b"/a/b"[..], Some(&b"xyz"[..]), busy));
        // The shared original is untouched (copy on write).
        assert_eq!(meta(&rec), fresh);
        let null = encode(&fresh, "/", None);
        assert_eq!(parts(&null).1, None);
        assert_eq!(path(&null), "/");
        assert_eq!(check(&null), Ok(()));
    }

    #[test]
    fn every_combination_of_optional_fields_round_trips() {
        for mask in 0u8..128 {
            let on = |bit: u8| mask & (1 << bit) != 0;
            let mut stat = StoredStat {
                czxid: 70,
                mzxid: 70,
                ctime: 1_000,
                mtime: 1_000,
                pzxid: 70,
                ..StoredStat::default()
            };
            // Each field differs from what a fresh node has only when its bit is set, with a
            // value of its own so that a field read from another's place shows.
            if on(0) {
                stat.mzxid = 0x0101_0101_0101;
            }
            if on(1) {
                stat.mtime = -0x0202_0202_0202;
            }
            if on(2) {
                stat.pzxid = 0x0303_0303_0303;
            }
            if on(3) {
                stat.version = 0x0404_0404;
            }
            if on(4) {
                stat.cversion = -0x0505_0505;
            }
            if on(5) {
                stat.aversion = 0x0606_0606;
            }
            if on(6) {
                stat.ephemeral_owner = -0x0707_0707_0707;
            }
            let m = Meta { stat, acl: 9 };
            let rec = encode(&m, "/x/y", Some(b"data"));
            assert_eq!(rec[0] & 0x7f, mask, "flags of {m:?}");
            assert_eq!(
                parts(&rec),
                (&b"/x/y"[..], Some(&b"data"[..]), m),
                "mask {mask:#x}"
            );
            assert_eq!(path_bytes(&rec), b"/x/y");
        }
    }

    #[test]
    fn records_on_both_sides_of_the_stack_buffer_round_trip() {
        let m = Meta {
            stat: StoredStat {
                czxid: 3,
                pzxid: 3,
                mzxid: 5,
                ..StoredStat::default()
            },
            acl: 1,
        };
        let header = FIXED + 8;
        for len in [
            0,
            1,
            ON_STACK - header - 3,
            ON_STACK - header - 2,
            ON_STACK,
            5000,
        ] {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut rec = encode(&m, "/a", Some(&data));
            assert_eq!(rec.len(), header + 2 + len);
            assert_eq!(parts(&rec), (&b"/a"[..], Some(&data[..]), m));
            let other: Vec<u8> = data.iter().rev().copied().collect();
            set_data(&mut rec, &m, Some(&other));
            assert_eq!(parts(&rec), (&b"/a"[..], Some(&other[..]), m));
            assert_eq!(check(&rec), Ok(()));
        }
    }

    #[test]
    fn in_place_update_when_unique() {
        let m = Meta {
            stat: StoredStat {
                cversion: 1,
                pzxid: 2,
                ..StoredStat::default()
            },
            acl: 0,
        };
        let mut rec = encode(&m, "/p", Some(&[1; 64]));
        let before = rec.as_ptr();
        set_meta(
            &mut rec,
            &Meta {
                stat: StoredStat {
                    cversion: 2,
                    pzxid: 3,
                    ..m.stat
                },
                ..m
            },
        );
        assert_eq!(rec.as_ptr(), before);
        assert_eq!((meta(&rec).cversion, meta(&rec).pzxid), (2, 3));
    }

    #[test]
    fn check_rejects_damage_without_panicking() {
        let rec = encode(&Meta::default(), "/abc", Some(b"d"));
        for cut in 0..rec.len() {
            // Truncations either fail or still describe a consistent (shorter-data) record.
            let _ = check(&rec[..cut]);
        }
        assert!(check(&rec[..FIXED - 1]).is_err());
        let mut long = rec.to_vec();
        long[21..25].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(check(&long).is_err());
        let mut bad_utf8 = rec.to_vec();
        bad_utf8[FIXED] = 0xff;
        assert!(check(&bad_utf8).is_err());
        let mut null_with_data = rec.to_vec();
        null_with_data[0] |= NULL_DATA;
        assert!(check(&null_with_data).is_err());
    }
}
