//! Whole-state images of a [`Core`]: [`Core::snapshot_capture`] (cheap, serialized later on
//! any thread) and [`Core::snapshot`] (the same into memory), [`Core::restore`] (the binary
//! format of `crate::snapshot`, for the WAL's checkpoints) and [`Core::dump`] (deterministic
//! text, for tests comparing states).

use std::fmt::Write as _;

use crate::snapshot::{self, RestoreError, SnapshotCapture};
use crate::{Config, Core};

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
    /// A capture of the current state for a snapshot: a reference-count bump per chunk of
    /// 1,024 nodes plus a copy of the ACL table and the sessions. Serialize it with
    /// [`SnapshotCapture::write_to`].
    pub fn snapshot_capture(&self) -> SnapshotCapture {
        SnapshotCapture::new(self.last_zxid, &self.tree, &self.sessions)
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
        Core::restore_from(config, now, bytes, bytes.len() as u64)
    }

    /// [`Core::restore`] from `len` bytes of a reader (a snapshot file, say), read in chunks of
    /// about a megabyte: the image is never in memory whole. `src` is read on a second thread
    /// while this one builds the tree (from 50,000 nodes on); it is not read past `len`.
    ///
    /// # Errors
    /// As [`Core::restore`]; [`RestoreError::Io`] when `src` fails or ends before `len`.
    pub fn restore_from(
        config: Config,
        now: i64,
        src: impl std::io::Read + Send,
        len: u64,
    ) -> Result<Core, RestoreError> {
        let image = snapshot::read(config.extended_types, config.hash_seed, src, len)?;
        let mut core = Core::with_tree(config, now, image.tree);
        core.last_zxid = image.last_zxid;
        core.sessions = image.sessions;
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
