//! The snapshot format: [`SnapshotCapture`] and its [`SnapshotCapture::write_to`], and the
//! validating reader behind [`Core::restore`](crate::Core::restore). The `impl Core` half
//! (capture, restore, the text dump) is in `machine/snapshot.rs`.
//!
//! A snapshot holds what replay would rebuild: every node with its persisted stat, the ACL
//! table, the sessions with their timeouts and passwords, and the last zxid. Connections,
//! watches and session deadlines are runtime state and are not in it (restored sessions get a
//! fresh deadline on the first tick, as Apache re-arms them on start-up).
//!
//! Taking a snapshot is split so that the state machine stops only for the cheap part: the
//! capture shares the tree's node records (a reference-count bump per chunk of 1,024; the tree
//! copies a chunk and a record it mutates while a capture holds them), and the capture is
//! serialized later, on any thread, straight into a writer.
//!
//! ```text
//! magic "ZKSN" | version i32 = 2 | last_zxid i64
//! acl_count i32, then per list:  id i32 | vector<ACL>
//! node_count i32, then per node: length i32 | node record (see tree/record.rs)
//! session_count i32, then per session: id i64 | timeout i32 | passwd buffer
//! ```
//!
//! Integers are big-endian (jute). Nodes come in arena order, not tree order: restore links
//! them to their parents after reading all of them. Everything read is validated; a bad
//! snapshot is an error, never a panic.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use bytes::BytesMut;
use zkit_proto::codec::{put_buffer, put_i32, put_i64, put_vec};
use zkit_proto::{DecodeError, Reader};

use crate::session::Session;
use crate::tree::{Capture, DataTree};

const MAGIC: &[u8; 4] = b"ZKSN";
const VERSION: i32 = 2;
/// Serialized bytes gathered before one write to the output: big enough that the writer (and
/// a checksum over it) sees few calls, small enough to stay out of the way.
const CHUNK: usize = 64 * 1024;

/// Why a snapshot could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestoreError {
    /// Not a snapshot, or a version this build does not read.
    #[error("not a zkit snapshot (bad magic or version)")]
    BadHeader,
    /// The bytes do not decode.
    #[error("malformed snapshot: {0}")]
    Decode(#[from] DecodeError),
    /// A node whose parent is missing, a duplicate path, a bad node record, an unknown ACL id
    /// or a missing root.
    #[error("inconsistent snapshot: {0}")]
    Inconsistent(String),
    /// Reading the snapshot failed, or it ended before its stated length.
    #[error("cannot read the snapshot: {0}")]
    Io(String),
}

/// The state at one zxid, detached from the [`Core`](crate::Core): `Send + 'static`, so it can be
/// serialized on another thread while the core keeps applying txns. See the module docs.
#[derive(Debug, Clone)]
pub struct SnapshotCapture {
    last_zxid: i64,
    tree: Capture,
    sessions: Vec<(i64, i32, Vec<u8>)>,
}

fn len_i32(n: usize) -> io::Result<i32> {
    i32::try_from(n).map_err(|_| io::Error::other(format!("{n} items do not fit a snapshot")))
}

impl SnapshotCapture {
    /// A capture of a state: a reference-count bump per chunk of 1,024 nodes plus a copy of
    /// the ACL table and of the sessions.
    pub(crate) fn new(
        last_zxid: i64,
        tree: &DataTree,
        sessions: &BTreeMap<i64, Session>,
    ) -> SnapshotCapture {
        SnapshotCapture {
            last_zxid,
            tree: tree.capture(),
            sessions: sessions
                .iter()
                .map(|(id, s)| (*id, s.timeout_ms, s.passwd.clone()))
                .collect(),
        }
    }

    /// The zxid of the last txn in the captured state.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// Number of nodes captured.
    pub fn node_count(&self) -> usize {
        self.tree.count
    }

    /// Serializes the captured state into `w` (see the module docs for the format); returns
    /// the number of bytes written. `w` need not be buffered: output leaves in 64 KiB chunks.
    ///
    /// # Errors
    /// What `w` returns, or more than `i32::MAX` nodes or sessions.
    pub fn write_to<W: Write + ?Sized>(&self, w: &mut W) -> io::Result<u64> {
        let mut written = 0u64;
        let mut buf = BytesMut::with_capacity(CHUNK + 1024);
        let mut flush = |buf: &mut BytesMut, w: &mut W| -> io::Result<()> {
            w.write_all(buf)?;
            written += buf.len() as u64;
            buf.clear();
            Ok(())
        };
        buf.extend_from_slice(MAGIC);
        put_i32(&mut buf, VERSION);
        put_i64(&mut buf, self.last_zxid);
        put_i32(&mut buf, len_i32(self.tree.acls.len())?);
        for (id, list) in &self.tree.acls {
            put_i32(&mut buf, *id as i32);
            put_vec(&mut buf, list);
            if buf.len() >= CHUNK {
                flush(&mut buf, w)?;
            }
        }
        put_i32(&mut buf, len_i32(self.tree.count)?);
        let mut nodes = 0usize;
        for rec in self.tree.records.records() {
            put_i32(&mut buf, len_i32(rec.len())?);
            buf.extend_from_slice(rec);
            nodes += 1;
            if buf.len() >= CHUNK {
                flush(&mut buf, w)?;
            }
        }
        if nodes != self.tree.count {
            // The count was taken with the records; a mismatch is a bug, not a bad disk.
            return Err(io::Error::other("snapshot capture lost track of its nodes"));
        }
        put_i32(&mut buf, len_i32(self.sessions.len())?);
        for (id, timeout_ms, passwd) in &self.sessions {
            put_i64(&mut buf, *id);
            put_i32(&mut buf, *timeout_ms);
            put_buffer(&mut buf, passwd);
            if buf.len() >= CHUNK {
                flush(&mut buf, w)?;
            }
        }
        flush(&mut buf, w)?;
        Ok(written)
    }
}

/// A snapshot body being read from a [`Read`] source of a known length, through a buffer of
/// about [`READ_CHUNK`] bytes: a restore never holds the whole body in memory (at 10,000,000
/// nodes that is 1.6 GB that would be read, and its pages touched, only to be copied again).
struct Stream<R> {
    src: R,
    /// Bytes read from `src` at a time ([`READ_CHUNK`]; tests make it small).
    chunk: usize,
    buf: Vec<u8>,
    /// `buf[start..end]` is read and not yet consumed.
    start: usize,
    end: usize,
    /// Body bytes not yet read from `src`.
    left: u64,
}

/// Bytes read from the source at a time.
const READ_CHUNK: usize = 1 << 20;

impl<R: Read> Stream<R> {
    fn new(src: R, len: u64, chunk: usize) -> Self {
        Stream {
            src,
            chunk: chunk.max(1),
            buf: Vec::new(),
            start: 0,
            end: 0,
            left: len,
        }
    }

    /// Body bytes not yet consumed.
    fn remaining(&self) -> u64 {
        (self.end - self.start) as u64 + self.left
    }

    fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Buffers at least `n` bytes, or everything left when less is; reads in chunks of
    /// `chunk`. Returns how many bytes are buffered.
    fn fill(&mut self, n: usize) -> Result<usize, RestoreError> {
        let have = self.end - self.start;
        if have >= n || self.left == 0 {
            return Ok(have);
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.start = 0;
        self.end = have;
        // Never more than the body holds, so a damaged length cannot make this allocate
        // beyond the size of the file it claims to be in.
        let target = usize::try_from((have as u64).saturating_add(self.left))
            .unwrap_or(usize::MAX)
            .min(n.max(self.chunk));
        if self.buf.len() < target {
            self.buf.resize(target, 0);
        }
        while self.end < target {
            let got = match self.src.read(&mut self.buf[self.end..target]) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(RestoreError::Io(e.to_string())),
            };
            if got == 0 {
                return Err(RestoreError::Io(format!(
                    "the snapshot ended {} bytes before its stated length",
                    self.left
                )));
            }
            self.end += got;
            self.left -= got as u64;
        }
        Ok(self.end)
    }

    /// Decodes one item with `f` from the buffered bytes, buffering more while `f` runs out
    /// of them and the body has more.
    fn decode<T>(
        &mut self,
        f: impl Fn(&mut Reader<'_>) -> Result<T, DecodeError>,
    ) -> Result<T, RestoreError> {
        let mut want = 256;
        loop {
            let have = self.fill(want)?;
            let mut r = Reader::new(self.buffered());
            match f(&mut r) {
                Ok(v) => {
                    self.start += r.position();
                    return Ok(v);
                }
                // The item may run past the buffered bytes (a list's length is checked
                // against what remains of them): buffer more and try again.
                Err(DecodeError::Truncated { .. } | DecodeError::InvalidLength(0..))
                    if self.left > 0 =>
                {
                    want = have.saturating_mul(2);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The next node record's bytes (a length, then the record).
    fn next_record(&mut self) -> Result<&[u8], RestoreError> {
        let len = self.decode(|r| r.read_i32())?;
        let len = usize::try_from(len)
            .map_err(|_| RestoreError::Inconsistent(format!("node record length {len}")))?;
        if len as u64 > self.remaining() {
            return Err(DecodeError::Truncated {
                needed: len,
                remaining: usize::try_from(self.remaining()).unwrap_or(usize::MAX),
            }
            .into());
        }
        self.fill(len)?;
        let at = self.start;
        self.start += len;
        Ok(&self.buf[at..at + len])
    }
}

/// Restores `count` node records from `stream` into `tree`: a second thread reads, checks and
/// copies them (the tree's `RecordPreparer`), this one puts them into the tree in the
/// snapshot's order ([`crate::two_threads::run`]), so the result, and the first bad record
/// reported, are the ones of a single thread.
fn read_nodes_on_two_threads<R: Read + Send>(
    tree: &mut DataTree,
    stream: &mut Stream<R>,
    count: usize,
    acl_ids: &BTreeMap<u32, u32>,
) -> Result<(), RestoreError> {
    let preparer = tree.record_preparer();
    crate::two_threads::run(
        BATCH,
        move |emit| {
            for _ in 0..count {
                let bytes = stream.next_record()?;
                let prepared = preparer
                    .prepare(bytes, acl_ids)
                    .map_err(RestoreError::Inconsistent)?;
                if !emit(prepared) {
                    break;
                }
            }
            Ok(())
        },
        |prepared| {
            tree.restore_prepared(prepared)
                .map_err(RestoreError::Inconsistent)
        },
    )
}

/// What a snapshot holds, read back and validated.
pub(crate) struct Image {
    /// The zxid of the last txn in it.
    pub(crate) last_zxid: i64,
    /// The tree, linked and with its ACL table.
    pub(crate) tree: DataTree,
    /// The sessions, without deadlines.
    pub(crate) sessions: BTreeMap<i64, Session>,
}

/// Reads what [`SnapshotCapture::write_to`] wrote, `len` bytes of it, from `src`. Everything
/// is validated; a bad snapshot is an error, never a panic.
pub(crate) fn read<R: Read + Send>(
    extended_types: bool,
    hash_seed: u64,
    src: R,
    len: u64,
) -> Result<Image, RestoreError> {
    read_with(
        extended_types,
        hash_seed,
        src,
        len,
        PARALLEL_FROM,
        READ_CHUNK,
    )
}

/// From this many node records on, a restore checks and copies them on a second thread while
/// the calling one inserts them into the tree (at 10,000,000 nodes each half is seconds of
/// work); below it, a thread costs more than it saves.
const PARALLEL_FROM: usize = 50_000;

/// Node records per hand-over between the two threads of a restore.
const BATCH: usize = 1024;

/// [`read`], with node records restored on two threads from `parallel_from` of them on, and
/// `src` read `chunk` bytes at a time.
fn read_with<R: Read + Send>(
    extended_types: bool,
    hash_seed: u64,
    src: R,
    len: u64,
    parallel_from: usize,
    chunk: usize,
) -> Result<Image, RestoreError> {
    let mut r = Stream::new(src, len, chunk);
    let header = r.decode(|r| Ok((r.read_bytes(4)?.to_vec(), r.read_i32()?)))?;
    if header.0 != MAGIC || header.1 != VERSION {
        return Err(RestoreError::BadHeader);
    }
    let last_zxid = r.decode(|r| r.read_i64())?;
    let mut tree = DataTree::empty(extended_types, hash_seed);
    let acls = r.decode(|r| r.read_i32())?;
    let mut acl_ids = BTreeMap::new();
    for _ in 0..acls.max(0) {
        let (id, list) = r.decode(|r| Ok((r.read_i32()? as u32, r.read_vec()?)))?;
        let new = tree.restore_acl(list).map_err(RestoreError::Inconsistent)?;
        if acl_ids.insert(id, new).is_some() {
            return Err(RestoreError::Inconsistent(format!(
                "ACL id {id} appears twice"
            )));
        }
    }
    let count = r.decode(|r| r.read_i32())?.max(0) as usize;
    // Never reserve more than the input can hold (a node takes at least 30 bytes), so a
    // damaged count cannot make restore allocate wildly.
    let fit = usize::try_from(r.remaining() / 30).unwrap_or(usize::MAX);
    tree.reserve(count.min(fit));
    if count >= parallel_from {
        read_nodes_on_two_threads(&mut tree, &mut r, count, &acl_ids)?;
    } else {
        let preparer = tree.record_preparer();
        for _ in 0..count {
            let bytes = r.next_record()?;
            let prepared = preparer
                .prepare(bytes, &acl_ids)
                .map_err(RestoreError::Inconsistent)?;
            tree.restore_prepared(prepared)
                .map_err(RestoreError::Inconsistent)?;
        }
    }
    tree.restore_finish().map_err(RestoreError::Inconsistent)?;
    let mut sessions = BTreeMap::new();
    let count = r.decode(|r| r.read_i32())?;
    for _ in 0..count.max(0) {
        let (id, timeout_ms, passwd) =
            r.decode(|r| Ok((r.read_i64()?, r.read_i32()?, r.read_buffer()?)))?;
        sessions.insert(
            id,
            Session {
                timeout_ms,
                passwd,
                deadline: None,
            },
        );
    }
    if r.remaining() > 0 {
        let trailing = usize::try_from(r.remaining()).unwrap_or(usize::MAX);
        return Err(DecodeError::TrailingBytes(trailing).into());
    }
    Ok(Image {
        last_zxid,
        tree,
        sessions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::open_acl;

    /// A tree of `n` nodes under `/d` (`/d/n000000` …) with every third one deleted again, so
    /// the snapshot has holes in its slot order; data `x`, two ACL lists.
    fn sample(n: i64) -> Vec<u8> {
        let mut tree = DataTree::new(false);
        let open = open_acl();
        let read_only = vec![zkit_proto::Acl {
            perms: zkit_proto::op::perms::READ,
            ..open[0].clone()
        }];
        assert!(tree.create("/d", None, &open, 0, 1, 1, 0).is_ok());
        for i in 0..n {
            let acl = if i % 2 == 0 { &open } else { &read_only };
            let p = format!("/d/n{i:06}");
            assert!(tree.create(&p, Some(b"x"), acl, 0, 1, i + 2, 0).is_ok());
        }
        for i in (0..n).step_by(3) {
            assert!(tree.delete(&format!("/d/n{i:06}"), n + 2).is_ok());
        }
        let mut out = Vec::new();
        let capture = SnapshotCapture::new(n + 2, &tree, &BTreeMap::new());
        assert!(capture.write_to(&mut out).is_ok());
        out
    }

    /// Restores `bytes` (on two threads when `parallel_from` is 0, reading `chunk` bytes at a
    /// time) and writes the result back as a snapshot.
    fn restored_with(
        bytes: &[u8],
        parallel_from: usize,
        chunk: usize,
    ) -> Result<Vec<u8>, RestoreError> {
        let image = read_with(false, 0, bytes, bytes.len() as u64, parallel_from, chunk)?;
        let mut out = Vec::new();
        let capture = SnapshotCapture::new(image.last_zxid, &image.tree, &image.sessions);
        assert!(capture.write_to(&mut out).is_ok());
        Ok(out)
    }

    fn restored(bytes: &[u8], parallel_from: usize) -> Result<Vec<u8>, RestoreError> {
        restored_with(bytes, parallel_from, READ_CHUNK)
    }

    fn at(bytes: &[u8], needle: &[u8]) -> usize {
        bytes
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap_or_else(|| panic!("{needle:?} not in the snapshot"))
    }

    #[test]
    fn two_threads_restore_the_tree_one_thread_does() {
        // Several batches, and a last one that is not full.
        let snap = sample(3 * BATCH as i64 + 17);
        let one = restored(&snap, usize::MAX).unwrap_or_else(|e| panic!("{e}"));
        let two = restored(&snap, 0).unwrap_or_else(|e| panic!("{e}"));
        // Written back, both are the snapshot they were restored from, byte for byte.
        assert!(one == snap, "one thread changed the snapshot");
        assert!(two == snap, "two threads changed the snapshot");
    }

    #[test]
    fn any_read_size_restores_the_same_tree() {
        let snap = sample(2 * BATCH as i64);
        for chunk in [1, 7, 64, 4096, READ_CHUNK] {
            for parallel_from in [0, usize::MAX] {
                let back = restored_with(&snap, parallel_from, chunk);
                assert!(
                    back.as_ref() == Ok(&snap),
                    "chunk {chunk}, parallel from {parallel_from}: {:?}",
                    back.err()
                );
            }
        }
    }

    #[test]
    fn a_source_shorter_or_longer_than_its_stated_length_is_an_error() {
        let snap = sample(100);
        let n = snap.len() as u64;
        // The source ends early.
        let short = read_with(false, 0, &snap[..snap.len() - 10], n, 0, 7).err();
        assert!(
            matches!(&short, Some(RestoreError::Io(m)) if m.contains("10 bytes before")),
            "{short:?}"
        );
        // The stated length cuts the sessions off, or leaves bytes after them.
        assert!(matches!(
            read_with(false, 0, &snap[..], n - 1, 0, 7).err(),
            Some(RestoreError::Decode(DecodeError::Truncated { .. }))
        ));
        let mut longer = snap.clone();
        longer.extend_from_slice(b"xyz");
        assert_eq!(
            read_with(false, 0, &longer[..], n + 3, 0, 7).err(),
            Some(RestoreError::Decode(DecodeError::TrailingBytes(3)))
        );
        // A reader is never read past the stated length.
        let mut src = &longer[..];
        assert!(read_with(false, 0, src.by_ref(), n, 0, 7).is_ok());
        assert_eq!(src, b"xyz");
    }

    #[test]
    fn two_threads_report_the_first_bad_record_as_one_thread_does() {
        let snap = sample(3 * BATCH as i64);
        // The records cross every read boundary with chunks of 7 bytes.
        let restored = |bytes: &[u8], parallel_from| restored_with(bytes, parallel_from, 7);
        // A duplicate path (found by the inserting thread) early, a bad path (found by the
        // reading thread) late; then each of them alone.
        let dup = at(&snap, b"/d/n002000");
        let bad = at(&snap, b"/d/n002900");
        let mut both = snap.clone();
        both[dup..dup + 10].copy_from_slice(b"/d/n001999");
        both[bad + 3] = b'/';
        let mut late_dup = snap.clone();
        late_dup[bad..bad + 10].copy_from_slice(b"/d/n002000");
        let mut early_bad = snap.clone();
        early_bad[dup + 3] = 0xff;
        for (what, bytes, want) in [
            ("both", &both, "duplicate path /d/n001999"),
            ("duplicate", &late_dup, "duplicate path /d/n002000"),
            ("not UTF-8", &early_bad, "record path is not UTF-8"),
        ] {
            let one = restored(bytes, usize::MAX).err();
            let two = restored(bytes, 0).err();
            assert_eq!(one, two, "{what}");
            let text = one.map(|e| e.to_string()).unwrap_or_default();
            assert!(text.contains(want), "{what}: {text}");
        }
    }
}
