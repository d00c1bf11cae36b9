//! A [`Core`] built from another server's persisted state, node by node with the stats that
//! server stored: how an Apache ZooKeeper data dir is imported (zkit-server's `apache_import`
//! reads Apache's files and feeds this; the txns logged after the snapshot are then applied
//! with [`Core::apply`], as zkit's own WAL is).
//!
//! Like [`Core::restore`], everything is validated (paths, duplicates, a parent for every
//! node, a root) and a bad image is an error, never a panic. It must not read files: the
//! caller hands it parsed values.

use std::collections::BTreeMap;

use zkit_proto::Acl;

use crate::session::Session;
use crate::tree::DataTree;
use crate::{Config, Core, RestoreError};

pub use crate::tree::stored::StoredStat;

/// Collects nodes and sessions, then [`ImageBuilder::finish`] makes the [`Core`].
#[derive(Debug)]
pub struct ImageBuilder {
    config: Config,
    now: i64,
    tree: DataTree,
    sessions: BTreeMap<i64, Session>,
}

impl ImageBuilder {
    /// An empty image for a core with `config`; `now` as in [`Core::new`].
    pub fn new(config: Config, now: i64) -> ImageBuilder {
        let tree = DataTree::empty(config.extended_types, config.hash_seed);
        ImageBuilder {
            config,
            now,
            tree,
            sessions: BTreeMap::new(),
        }
    }

    /// Adds node `path` (`/` for the root) with its data (`None`: null), ACL and stored stat.
    /// Parents may come after their children; [`ImageBuilder::finish`] links them.
    ///
    /// # Errors
    /// [`RestoreError::Inconsistent`] for an invalid or duplicate path.
    pub fn node(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        stat: &StoredStat,
    ) -> Result<(), RestoreError> {
        self.tree
            .restore_node(path, data, acl, stat)
            .map_err(RestoreError::Inconsistent)
    }

    /// Adds (or replaces) session `id` with its negotiated timeout and password.
    pub fn session(&mut self, id: i64, timeout_ms: i32, passwd: Vec<u8>) {
        self.sessions.insert(
            id,
            Session {
                timeout_ms,
                passwd,
                deadline: None,
            },
        );
    }

    /// The core holding the image, at `last_zxid`. Its sessions get deadlines on the first
    /// tick, as after [`Core::restore`].
    ///
    /// # Errors
    /// [`RestoreError::Inconsistent`] when there is no root or a node's parent is missing.
    pub fn finish(mut self, last_zxid: i64) -> Result<Core, RestoreError> {
        self.tree
            .restore_finish()
            .map_err(RestoreError::Inconsistent)?;
        let mut core = Core::with_tree(self.config, self.now, self.tree);
        core.last_zxid = last_zxid;
        core.sessions = self.sessions;
        Ok(core)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::open_acl;
    use crate::{Txn, TxnOp};

    fn stat(czxid: i64) -> StoredStat {
        StoredStat {
            czxid,
            mzxid: czxid,
            pzxid: czxid,
            ..StoredStat::default()
        }
    }

    #[test]
    fn nodes_keep_their_stats_and_later_txns_apply() {
        let mut b = ImageBuilder::new(Config::default(), 0);
        let acl = open_acl();
        // Children before parents is fine.
        let child = StoredStat {
            version: 3,
            aversion: 1,
            mzxid: 9,
            ephemeral_owner: 0x55,
            ..stat(5)
        };
        b.node("/a/b", Some(b"x"), &acl, &child).unwrap();
        b.node(
            "/a",
            None,
            &acl,
            &StoredStat {
                cversion: 7,
                ..stat(4)
            },
        )
        .unwrap();
        b.node("/", Some(b""), &acl, &stat(0)).unwrap();
        b.session(0x55, 4000, vec![1; 16]);
        let mut core = b.finish(10).unwrap();
        assert_eq!(core.last_zxid(), 10);
        let s = core.tree().stat("/a/b").unwrap();
        assert_eq!(
            (s.version, s.aversion, s.mzxid, s.ephemeral_owner),
            (3, 1, 9, 0x55)
        );
        assert_eq!(core.tree().get("/a").unwrap().data(), None);
        assert_eq!(core.tree().ephemerals_of(0x55), ["/a/b"]);
        assert_eq!(core.sessions().collect::<Vec<_>>(), [(0x55, 4000)]);
        // A create after the image continues the parent's sequence (cversion 7 → 8).
        core.apply(&Txn {
            zxid: 11,
            session: 0,
            time: 1,
            op: TxnOp::Create {
                path: "/a/c".into(),
                data: None,
                acl: acl.clone(),
                ephemeral_owner: 0,
                parent_cversion: 8,
            },
        });
        let a = core.tree().get("/a").unwrap();
        // The stored cversion; a Stat reports 2 × 8 − 2 children, as Apache's copyStat does.
        assert_eq!((a.cversion, a.pzxid, a.num_children()), (8, 11, 2));
        assert_eq!(core.tree().stat("/a").unwrap().cversion, 14);
        // Closing the session deletes its ephemeral, as for any session.
        core.apply(&Txn {
            zxid: 12,
            session: 0x55,
            time: 2,
            op: TxnOp::CloseSession,
        });
        assert!(core.tree().get("/a/b").is_none());
    }

    #[test]
    fn inconsistent_images_are_errors() {
        let acl = open_acl();
        let mut b = ImageBuilder::new(Config::default(), 0);
        b.node("/", None, &acl, &stat(0)).unwrap();
        assert!(b.node("/", None, &acl, &stat(0)).is_err(), "duplicate");
        assert!(b.node("bad", None, &acl, &stat(0)).is_err(), "invalid path");
        b.node("/x/y", None, &acl, &stat(1)).unwrap();
        assert!(b.finish(1).is_err(), "orphan");
        let mut b = ImageBuilder::new(Config::default(), 0);
        b.node("/x", None, &acl, &stat(1)).unwrap();
        assert!(b.finish(1).is_err(), "no root");
    }
}
