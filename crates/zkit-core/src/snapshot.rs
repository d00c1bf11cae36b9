//! Whole-state images: [`Core::snapshot`] / [`Core::restore`] (binary, for the WAL's
//! checkpoints) and [`Core::dump`] (deterministic text, for tests comparing states).
//!
//! A snapshot holds what replay would rebuild: every node with its persisted stat, the
//! sessions with their timeouts and passwords, and the last zxid. Connections, watches and
//! session deadlines are runtime state and are not in it (restored sessions get a fresh
//! deadline on the first tick, as Apache re-arms them on start-up).

use std::fmt::Write as _;

use bytes::BytesMut;
use zkit_proto::codec::{put_buffer, put_i32, put_i64, put_opt_buffer, put_ustring, put_vec};
use zkit_proto::{DecodeError, Reader};

use crate::path;
use crate::session::Session;
use crate::tree::{DataTree, Node};
use crate::{Config, Core};

const MAGIC: &[u8; 4] = b"ZKSN";
const VERSION: i32 = 1;

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
    /// A node whose parent is missing, a duplicate path, or a missing root.
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

impl Core {
    /// A binary image of the tree, the sessions and the last zxid.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(MAGIC);
        put_i32(&mut buf, VERSION);
        put_i64(&mut buf, self.last_zxid);
        put_i32(&mut buf, i32::try_from(self.tree.len()).unwrap_or(i32::MAX));
        for (p, n) in self.tree.nodes() {
            put_ustring(&mut buf, p);
            put_opt_buffer(&mut buf, n.data.as_deref());
            put_vec(&mut buf, &n.acl);
            for v in [n.czxid, n.mzxid, n.ctime, n.mtime] {
                put_i64(&mut buf, v);
            }
            for v in [n.version, n.cversion, n.aversion] {
                put_i32(&mut buf, v);
            }
            put_i64(&mut buf, n.ephemeral_owner);
            put_i64(&mut buf, n.pzxid);
        }
        put_i32(
            &mut buf,
            i32::try_from(self.sessions.len()).unwrap_or(i32::MAX),
        );
        for (id, s) in &self.sessions {
            put_i64(&mut buf, *id);
            put_i32(&mut buf, s.timeout_ms);
            put_buffer(&mut buf, &s.passwd);
        }
        buf.to_vec()
    }

    /// A core rebuilt from [`Core::snapshot`] bytes. `now` seeds session-id generation and
    /// the reaper schedule, like [`Core::new`].
    ///
    /// # Errors
    /// [`RestoreError`] for anything that is not a consistent snapshot; never panics.
    pub fn restore(config: Config, now: i64, bytes: &[u8]) -> Result<Core, RestoreError> {
        let mut r = Reader::new(bytes);
        if r.read_bytes(4)? != MAGIC || r.read_i32()? != VERSION {
            return Err(RestoreError::BadHeader);
        }
        let last_zxid = r.read_i64()?;
        let count = r.read_i32()?;
        let mut tree = DataTree::empty(config.extended_types);
        let mut paths = Vec::new();
        for _ in 0..count.max(0) {
            let p = r.read_ustring()?;
            let data = r.read_opt_buffer()?;
            let acl = r.read_vec()?;
            let node = Node {
                data,
                acl,
                czxid: r.read_i64()?,
                mzxid: r.read_i64()?,
                ctime: r.read_i64()?,
                mtime: r.read_i64()?,
                version: r.read_i32()?,
                cversion: r.read_i32()?,
                aversion: r.read_i32()?,
                ephemeral_owner: r.read_i64()?,
                pzxid: r.read_i64()?,
                children: Default::default(),
            };
            if tree.get(&p).is_some() {
                return Err(RestoreError::Inconsistent(format!("duplicate path {p}")));
            }
            if p != "/" && path::validate_path(&p).is_err() {
                return Err(RestoreError::Inconsistent(format!("invalid path {p:?}")));
            }
            tree.restore_node(p.clone(), node);
            paths.push(p);
        }
        if tree.get("/").is_none() {
            return Err(RestoreError::Inconsistent("no root".into()));
        }
        for p in paths.iter().filter(|p| p.as_str() != "/") {
            let parent = path::parent_of(p).unwrap_or("/");
            if !tree.link_child(parent, path::name_of(p)) {
                return Err(RestoreError::Inconsistent(format!("{p} has no parent")));
            }
        }
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
                .acl
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
                n.children.len(),
                DumpData(n.data.as_deref()),
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
