//! Restoring a [`DataTree`] from a snapshot: untrusted records checked and copied
//! ([`RecordPreparer`], which may run on another thread than the tree's), then put into the
//! tree and linked under their parents.

use std::collections::BTreeMap;
use std::sync::Arc;

use zkit_proto::Acl;

use super::index::{index_hash, index_tag};
use super::record::{self, Meta, Record};
use super::stored::StoredStat;
use super::{lookup, DataTree, TreeHasher};
use crate::path;

/// Checks and copies untrusted snapshot records for a [`DataTree`] being restored, without
/// touching the tree: the part of a restore that can run on a second thread. `Send`.
pub(crate) struct RecordPreparer {
    hasher: TreeHasher,
}

/// A snapshot record that [`RecordPreparer::prepare`] validated, with its ACL id mapped to
/// the restoring tree's and its path's index tag computed.
pub(crate) struct PreparedRecord {
    rec: Record,
    tag: u32,
}

impl RecordPreparer {
    /// Validates `bytes` as a record (layout, UTF-8 path, a valid path, a known ACL id; the
    /// ids of `acl_ids` are the snapshot's, mapped to the tree's) and copies it.
    pub(crate) fn prepare(
        &self,
        bytes: &[u8],
        acl_ids: &BTreeMap<u32, u32>,
    ) -> Result<PreparedRecord, String> {
        record::check(bytes).map_err(str::to_owned)?;
        let meta = record::meta(bytes);
        let p = record::path(bytes);
        if p != "/" && path::validate_path(p).is_err() {
            return Err(format!("invalid path {p:?}"));
        }
        let acl = *acl_ids
            .get(&meta.acl)
            .ok_or_else(|| format!("{p} has an unknown ACL id {}", meta.acl))?;
        let tag = index_tag(&self.hasher, p.as_bytes());
        let mut rec: Record = Arc::from(bytes);
        if acl != meta.acl {
            record::set_meta(&mut rec, &Meta { acl, ..meta });
        }
        Ok(PreparedRecord { rec, tag })
    }
}

impl DataTree {
    /// Restore: room for `nodes` nodes.
    pub(crate) fn reserve(&mut self, nodes: usize) {
        self.slots.reserve(nodes);
        self.index.reserve(nodes, |e| index_hash(e.tag));
    }

    /// Restore: an ACL list; returns the id it gets in this tree.
    pub(crate) fn restore_acl(&mut self, list: Vec<Acl>) -> Result<u32, String> {
        self.acls
            .insert_unreferenced(list)
            .ok_or_else(|| "an ACL list appears twice".to_owned())
    }

    /// Restore: what [`RecordPreparer::prepare`] needs of this tree, to check and copy
    /// records off it (on another thread, while this tree takes the ones before).
    pub(crate) fn record_preparer(&self) -> RecordPreparer {
        RecordPreparer {
            hasher: self.hasher.clone(),
        }
    }

    /// Restore: one record that [`RecordPreparer::prepare`] checked, not yet linked to its
    /// parent. Refuses a path that is already in the tree.
    pub(crate) fn restore_prepared(&mut self, prepared: PreparedRecord) -> Result<(), String> {
        let PreparedRecord { rec, tag } = prepared;
        let p = record::path_bytes(&rec);
        if lookup(&self.index, &self.slots, tag, p).is_some() {
            return Err(format!("duplicate path {}", record::path(&rec)));
        }
        self.acls.add_ref(record::meta(&rec).acl);
        self.insert_unlinked(rec, tag);
        Ok(())
    }

    /// Restore from another server's state: one node with its stored stat, not yet linked to
    /// its parent. The ACL list is interned (a list shared by many nodes is kept once).
    pub(crate) fn restore_node(
        &mut self,
        p: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        stored: &StoredStat,
    ) -> Result<(), String> {
        if p != "/" && path::validate_path(p).is_err() {
            return Err(format!("invalid path {p:?}"));
        }
        let tag = self.tag(p);
        if lookup(&self.index, &self.slots, tag, p.as_bytes()).is_some() {
            return Err(format!("duplicate path {p}"));
        }
        let meta = Meta {
            stat: *stored,
            acl: self.acls.intern(acl),
        };
        self.insert_unlinked(record::encode(&meta, p, data), tag);
        Ok(())
    }

    /// Restore: links every node under its parent and drops ACL lists no node uses.
    pub(crate) fn restore_finish(&mut self) -> Result<(), String> {
        self.link_all()?;
        self.acls.purge_unused();
        Ok(())
    }
}
