//! Whole-state images: [`Core::snapshot_capture`] + [`SnapshotCapture::write_to`] (and
//! [`Core::snapshot`], the same into memory) / [`Core::restore`] (binary, for the WAL's
//! checkpoints) and [`Core::dump`] (deterministic text, for tests comparing states).
//!
//! A snapshot holds what replay would rebuild: every node with its persisted stat, the ACL
//! table, the sessions with their timeouts and passwords, and the last zxid. Connections,
//! watches and session deadlines are runtime state and are not in it (restored sessions get a
//! fresh deadline on the first tick, as Apache re-arms them on start-up).
//!
//! Taking a snapshot is split so that the state machine stops only for the cheap part: the
//! capture shares the tree's node records (a reference-count bump each; the tree copies a
//! record it mutates while a capture holds it), and the capture is serialized later, on any
//! thread, straight into a writer.
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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use bytes::BytesMut;
use zkit_proto::codec::{put_buffer, put_i32, put_i64, put_vec};
use zkit_proto::{DecodeError, Reader};

use crate::session::Session;
use crate::tree::{Capture, DataTree};
use crate::{Config, Core};

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

/// Node data in [`Core::dump`]: the quoted text, or `null` for null data.
struct DumpData<'a>(Option<&'a [u8]>);

impl std::fmt::Debug for DumpData<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(d) => write!(f, "{:?}", String::from_utf8_lossy(d)),
            None => f.write_str("null"),
        }
    }
}

/// The state at one zxid, detached from the [`Core`]: `Send + 'static`, so it can be
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
        for rec in self.tree.records.iter().flatten() {
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

impl Core {
    /// A capture of the current state for a snapshot: a reference-count bump per node plus a
    /// copy of the ACL table and the sessions. Serialize it with [`SnapshotCapture::write_to`].
    pub fn snapshot_capture(&self) -> SnapshotCapture {
        SnapshotCapture {
            last_zxid: self.last_zxid,
            tree: self.tree.capture(),
            sessions: self
                .sessions
                .iter()
                .map(|(id, s)| (*id, s.timeout_ms, s.passwd.clone()))
                .collect(),
        }
    }

    /// A binary image of the tree, the sessions and the last zxid, in memory (the whole image
    /// at once: large states should stream [`Core::snapshot_capture`] instead).
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        // Writing into a Vec cannot fail, and the counts fit (the tree holds them).
        let _ = self.snapshot_capture().write_to(&mut out);
        out
    }

    /// A core rebuilt from a snapshot (what [`SnapshotCapture::write_to`] wrote). `now` seeds
    /// session-id generation and the reaper schedule, like [`Core::new`].
    ///
    /// # Errors
    /// [`RestoreError`] for anything that is not a consistent snapshot; never panics.
    pub fn restore(config: Config, now: i64, bytes: &[u8]) -> Result<Core, RestoreError> {
        let mut r = Reader::new(bytes);
        if r.read_bytes(4)? != MAGIC || r.read_i32()? != VERSION {
            return Err(RestoreError::BadHeader);
        }
        let last_zxid = r.read_i64()?;
        let mut tree = DataTree::empty(config.extended_types);
        let acls = r.read_i32()?;
        let mut acl_ids = HashMap::new();
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
        let mut core = Core::with_tree(config, now, tree);
        core.last_zxid = last_zxid;
        let sessions = r.read_i32()?;
        for _ in 0..sessions.max(0) {
            let id = r.read_i64()?;
            let timeout_ms = r.read_i32()?;
            let passwd = r.read_buffer()?;
            core.sessions.insert(
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
        Ok(core)
    }

    /// A deterministic text dump of the persistent state (tree with stored stats, sessions,
    /// last zxid), for tests comparing states. Runtime state (connections, watches,
    /// deadlines) is left out.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "last_zxid {:#x}", self.last_zxid);
        for (p, n) in self.tree.nodes() {
            let acl: Vec<String> = n
                .acl()
                .iter()
                .map(|a| format!("{}:{}:{}", a.perms, a.id.scheme, a.id.id))
                .collect();
            let _ = writeln!(
                s,
                "node {p} czxid={:#x} mzxid={:#x} pzxid={:#x} ctime={} mtime={} version={} \
                 cversion={} aversion={} owner={:#x} children={} data={:?} acl=[{}]",
                n.czxid,
                n.mzxid,
                n.pzxid,
                n.ctime,
                n.mtime,
                n.version,
                n.cversion,
                n.aversion,
                n.ephemeral_owner,
                n.num_children(),
                DumpData(n.data()),
                acl.join(",")
            );
        }
        for (id, sess) in &self.sessions {
            let passwd: String = sess.passwd.iter().map(|b| format!("{b:02x}")).collect();
            let _ = writeln!(
                s,
                "session {id:#x} timeout={} passwd={passwd} ephemerals={:?}",
                sess.timeout_ms,
                self.tree.ephemerals_of(*id)
            );
        }
        s
    }
}
