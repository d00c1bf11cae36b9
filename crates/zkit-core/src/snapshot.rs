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
use std::io::{self, Write};

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

/// What a snapshot holds, read back and validated.
pub(crate) struct Image {
    /// The zxid of the last txn in it.
    pub(crate) last_zxid: i64,
    /// The tree, linked and with its ACL table.
    pub(crate) tree: DataTree,
    /// The sessions, without deadlines.
    pub(crate) sessions: BTreeMap<i64, Session>,
}

/// Reads what [`SnapshotCapture::write_to`] wrote. Everything is validated; a bad snapshot is
/// an error, never a panic.
pub(crate) fn read(
    extended_types: bool,
    hash_seed: u64,
    bytes: &[u8],
) -> Result<Image, RestoreError> {
    let mut r = Reader::new(bytes);
    if r.read_bytes(4)? != MAGIC || r.read_i32()? != VERSION {
        return Err(RestoreError::BadHeader);
    }
    let last_zxid = r.read_i64()?;
    let mut tree = DataTree::empty(extended_types, hash_seed);
    let acls = r.read_i32()?;
    let mut acl_ids = BTreeMap::new();
    for _ in 0..acls.max(0) {
        let id = r.read_i32()? as u32;
        let list = r.read_vec()?;
        let new = tree.restore_acl(list).map_err(RestoreError::Inconsistent)?;
        if acl_ids.insert(id, new).is_some() {
            return Err(RestoreError::Inconsistent(format!(
                "ACL id {id} appears twice"
            )));
        }
    }
    let count = r.read_i32()?.max(0) as usize;
    // Never reserve more than the input can hold (a node takes at least 30 bytes), so a
    // damaged count cannot make restore allocate wildly.
    tree.reserve(count.min(r.remaining() / 30));
    for _ in 0..count {
        let len = r.read_i32()?;
        let len = usize::try_from(len)
            .map_err(|_| RestoreError::Inconsistent(format!("node record length {len}")))?;
        tree.restore_record(r.read_bytes(len)?, &acl_ids)
            .map_err(RestoreError::Inconsistent)?;
    }
    tree.restore_finish().map_err(RestoreError::Inconsistent)?;
    let mut sessions = BTreeMap::new();
    let count = r.read_i32()?;
    for _ in 0..count.max(0) {
        let id = r.read_i64()?;
        let timeout_ms = r.read_i32()?;
        let passwd = r.read_buffer()?;
        sessions.insert(
            id,
            Session {
                timeout_ms,
                passwd,
                deadline: None,
            },
        );
    }
    if !r.is_empty() {
        return Err(DecodeError::TrailingBytes(r.remaining()).into());
    }
    Ok(Image {
        last_zxid,
        tree,
        sessions,
    })
}
