//! The pure decision core of [`crate::config::ConfigWatcher`]: what the watcher has reported so
//! far, and which changes a fresh read (one node, or a whole-subtree snapshot) adds to that.
//!
//! The rule that keeps values from going backwards: a node is identified by its `mzxid` (the
//! zxid of the transaction that last wrote it). A read whose `mzxid` is not newer than what was
//! already reported for that path is not a change (it is a duplicate event, a re-read after a
//! coalesced event, or a stale server after a reconnect). A deleted node leaves a tombstone with
//! its last `mzxid`, so a stale read cannot bring it back either.
//!
//! No I/O and no clock here.

use std::collections::{BTreeMap, HashMap};

/// What a [`ConfigChange`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// Part of the initial snapshot (the first full read of the watched tree).
    Initial,
    /// The node was created or its value changed after the initial snapshot.
    Changed,
    /// The node was deleted.
    Removed,
}

/// One change of one node of the watched tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigChange {
    /// Absolute path of the node (in the session's chroot).
    pub path: String,
    /// What happened.
    pub kind: ChangeKind,
    /// The new value; `None` for [`ChangeKind::Removed`].
    pub value: Option<Vec<u8>>,
    /// The node's data version (for `Removed`: the last version seen).
    pub version: i32,
    /// The zxid that last modified the node (for `Removed`: the last one seen). Strictly
    /// increasing per path across all changes reported for it.
    pub mzxid: i64,
}

impl ConfigChange {
    /// The value as UTF-8 text (lossy), empty for a removal.
    pub fn value_lossy(&self) -> String {
        self.value
            .as_deref()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default()
    }
}

/// A node as read from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRead {
    /// The node's data.
    pub value: Vec<u8>,
    /// Its data version.
    pub version: i32,
    /// Its `mzxid`.
    pub mzxid: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    mzxid: i64,
    version: i32,
}

/// What has been reported so far, per path. See the module docs for the rules.
#[derive(Debug, Default, Clone)]
pub struct ConfigView {
    live: BTreeMap<String, Seen>,
    tombstones: HashMap<String, i64>,
    initialized: bool,
}

impl ConfigView {
    /// An empty view: the next [`ConfigView::snapshot`] is reported as [`ChangeKind::Initial`].
    pub fn new() -> Self {
        ConfigView::default()
    }

    /// True once the initial snapshot was applied.
    pub fn is_initialized(&self) -> bool {
        self.initialized
    }

    /// The paths currently known to exist, in path order.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.live.keys().map(String::as_str)
    }

    /// The last `mzxid` reported for `path` (live or removed).
    pub fn last_mzxid(&self, path: &str) -> Option<i64> {
        self.live
            .get(path)
            .map(|s| s.mzxid)
            .or_else(|| self.tombstones.get(path).copied())
    }

    /// A single-node read: `Some(node)` if it exists, `None` if the server said `NoNode`.
    /// Returns the change to report, if any.
    pub fn observe(&mut self, path: &str, read: Option<NodeRead>) -> Option<ConfigChange> {
        match read {
            Some(node) => {
                if self.last_mzxid(path).is_some_and(|m| m >= node.mzxid) {
                    return None;
                }
                self.tombstones.remove(path);
                self.live.insert(
                    path.to_string(),
                    Seen {
                        mzxid: node.mzxid,
                        version: node.version,
                    },
                );
                Some(ConfigChange {
                    path: path.to_string(),
                    kind: if self.initialized {
                        ChangeKind::Changed
                    } else {
                        ChangeKind::Initial
                    },
                    value: Some(node.value),
                    version: node.version,
                    mzxid: node.mzxid,
                })
            }
            None => {
                let seen = self.live.remove(path)?;
                self.tombstones.insert(path.to_string(), seen.mzxid);
                Some(ConfigChange {
                    path: path.to_string(),
                    kind: ChangeKind::Removed,
                    value: None,
                    version: seen.version,
                    mzxid: seen.mzxid,
                })
            }
        }
    }

    /// A full read of the watched tree (every node that exists). The first call reports every
    /// node as [`ChangeKind::Initial`]; later calls (re-syncs after a reconnect or a new session)
    /// report only what is newer than what was reported, plus removals of nodes that are gone.
    /// Changes come out in `mzxid` order (removals, whose zxid is unknown, last, in path order).
    pub fn snapshot(&mut self, nodes: Vec<(String, NodeRead)>) -> Vec<ConfigChange> {
        let present: std::collections::HashSet<String> =
            nodes.iter().map(|(p, _)| p.clone()).collect();
        let mut nodes = nodes;
        nodes.sort_by_key(|(_, n)| n.mzxid);
        let mut changes: Vec<ConfigChange> = nodes
            .into_iter()
            .filter_map(|(path, node)| self.observe(&path, Some(node)))
            .collect();
        let gone: Vec<String> = self
            .live
            .keys()
            .filter(|p| !present.contains(*p))
            .cloned()
            .collect();
        changes.extend(gone.into_iter().filter_map(|p| self.observe(&p, None)));
        self.initialized = true;
        changes
    }

    /// Applies a batch of single-node reads made after a batch of events and returns the changes
    /// in `mzxid` order (removals last). Within a batch this restores zxid order across paths.
    pub fn observe_batch(&mut self, reads: Vec<(String, Option<NodeRead>)>) -> Vec<ConfigChange> {
        let mut reads = reads;
        reads.sort_by_key(|(_, r)| r.as_ref().map_or(i64::MAX, |n| n.mzxid));
        reads
            .into_iter()
            .filter_map(|(path, read)| self.observe(&path, read))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(value: &str, version: i32, mzxid: i64) -> NodeRead {
        NodeRead {
            value: value.as_bytes().to_vec(),
            version,
            mzxid,
        }
    }

    #[test]
    fn initial_snapshot_then_changes_and_no_duplicates() {
        let mut view = ConfigView::new();
        let changes = view.snapshot(vec![
            ("/c/b".into(), node("2", 0, 7)),
            ("/c/a".into(), node("1", 3, 5)),
        ]);
        assert_eq!(
            changes
                .iter()
                .map(|c| (c.path.as_str(), c.kind))
                .collect::<Vec<_>>(),
            vec![("/c/a", ChangeKind::Initial), ("/c/b", ChangeKind::Initial)]
        );
        // The same read again (a coalesced event) is not a change.
        assert_eq!(view.observe("/c/a", Some(node("1", 3, 5))), None);
        let change = view.observe("/c/a", Some(node("9", 4, 10))).unwrap();
        assert_eq!(change.kind, ChangeKind::Changed);
        assert_eq!(change.value.as_deref(), Some(&b"9"[..]));
    }

    #[test]
    fn a_stale_read_never_moves_a_value_backwards() {
        let mut view = ConfigView::new();
        view.snapshot(vec![("/k".into(), node("new", 5, 50))]);
        // A lagging server after a reconnect answers with an older write.
        assert_eq!(view.observe("/k", Some(node("old", 4, 40))), None);
        assert!(view
            .snapshot(vec![("/k".into(), node("old", 4, 40))])
            .is_empty());
        assert_eq!(view.last_mzxid("/k"), Some(50));
    }

    #[test]
    fn removal_leaves_a_tombstone_and_recreation_is_reported() {
        let mut view = ConfigView::new();
        view.snapshot(vec![("/k".into(), node("v", 0, 3))]);
        let removed = view.observe("/k", None).unwrap();
        assert_eq!(removed.kind, ChangeKind::Removed);
        assert_eq!(removed.value, None);
        // Removing again (a second NoNode read) reports nothing.
        assert_eq!(view.observe("/k", None), None);
        // A stale read of the deleted node does not resurrect it.
        assert_eq!(view.observe("/k", Some(node("v", 0, 3))), None);
        let again = view.observe("/k", Some(node("w", 0, 9))).unwrap();
        assert_eq!(again.kind, ChangeKind::Changed);
        assert_eq!(view.paths().collect::<Vec<_>>(), vec!["/k"]);
    }

    #[test]
    fn resync_reports_only_newer_nodes_and_removals() {
        let mut view = ConfigView::new();
        view.snapshot(vec![
            ("/a".into(), node("1", 0, 1)),
            ("/b".into(), node("1", 0, 2)),
            ("/c".into(), node("1", 0, 3)),
        ]);
        // While disconnected: /a unchanged, /b written, /c deleted, /d created.
        let changes = view.snapshot(vec![
            ("/a".into(), node("1", 0, 1)),
            ("/d".into(), node("x", 0, 8)),
            ("/b".into(), node("2", 1, 6)),
        ]);
        let summary: Vec<(&str, ChangeKind, i64)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.kind, c.mzxid))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("/b", ChangeKind::Changed, 6),
                ("/d", ChangeKind::Changed, 8),
                ("/c", ChangeKind::Removed, 3),
            ]
        );
    }

    #[test]
    fn batches_come_out_in_zxid_order() {
        let mut view = ConfigView::new();
        view.snapshot(Vec::new());
        let changes = view.observe_batch(vec![
            ("/a".into(), Some(node("a", 1, 12))),
            ("/b".into(), Some(node("b", 1, 11))),
        ]);
        assert_eq!(
            changes.iter().map(|c| c.mzxid).collect::<Vec<_>>(),
            vec![11, 12]
        );
    }
}
