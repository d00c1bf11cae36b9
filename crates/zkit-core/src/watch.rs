//! Watch registrations (Apache's `WatchManager`): one table for data watches (getData, exists,
//! persistent, persistent-recursive) and one for child watches (getChildren, persistent).
//!
//! A registration is a (path, connection) pair with one mode: standard (one-shot), persistent
//! or persistent-recursive. As in ZooKeeper 3.8's `WatcherModeManager`, a later registration
//! on the same pair *replaces* the mode (so a one-shot getData watch turns a persistent watch
//! into a one-shot one: ZOOKEEPER-4466, fixed only in 3.9). Triggering consumes one-shot
//! registrations; recursive ones also match descendants and never fire NodeChildrenChanged.
//! This module only decides *who* is notified; the caller builds and queues the events.

use std::collections::{BTreeMap, BTreeSet};

use crate::conn::ConnId;
use crate::path;

/// One-shot watch (getData/exists/getChildren with watch = true).
pub const STANDARD: u8 = 1;
/// addWatch PERSISTENT.
pub const PERSISTENT: u8 = 2;
/// addWatch PERSISTENT_RECURSIVE.
pub const PERSISTENT_RECURSIVE: u8 = 4;

/// One watch table.
#[derive(Debug, Default, Clone)]
pub struct WatchTable {
    by_path: BTreeMap<String, BTreeMap<ConnId, u8>>,
    by_conn: BTreeMap<ConnId, BTreeSet<String>>,
    recursive: usize,
}

impl WatchTable {
    /// Registers (`path`, `conn`) with `mode`, replacing any previous mode of that pair.
    pub fn add(&mut self, path: &str, conn: ConnId, mode: u8) {
        let modes = self
            .by_path
            .entry(path.to_owned())
            .or_default()
            .entry(conn)
            .or_insert(0);
        if *modes & PERSISTENT_RECURSIVE != 0 {
            self.recursive -= 1;
        }
        if mode & PERSISTENT_RECURSIVE != 0 {
            self.recursive += 1;
        }
        *modes = mode;
        self.by_conn
            .entry(conn)
            .or_default()
            .insert(path.to_owned());
    }

    /// Whether `conn` has any registration on `path`.
    pub fn contains(&self, path: &str, conn: ConnId) -> bool {
        self.by_path
            .get(path)
            .is_some_and(|w| w.contains_key(&conn))
    }

    /// ZooKeeper 3.8's `WatchManager.containsWatcher`, used by checkWatches: true when *any*
    /// connection watches `path` in this table (3.8 checks the path's watcher set, not the
    /// caller's membership in it; a caller's own recursive watch on `path` is in that set).
    pub fn contains_any(&self, path: &str) -> bool {
        self.by_path.get(path).is_some_and(|w| !w.is_empty())
    }

    /// Removes every mode of (`path`, `conn`); false if there was none.
    pub fn remove(&mut self, path: &str, conn: ConnId) -> bool {
        let Some(watchers) = self.by_path.get_mut(path) else {
            return false;
        };
        let Some(modes) = watchers.remove(&conn) else {
            return false;
        };
        if modes & PERSISTENT_RECURSIVE != 0 {
            self.recursive -= 1;
        }
        if watchers.is_empty() {
            self.by_path.remove(path);
        }
        if let Some(paths) = self.by_conn.get_mut(&conn) {
            paths.remove(path);
            if paths.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
        true
    }

    /// Drops every registration of `conn` (the connection closed).
    pub fn remove_conn(&mut self, conn: ConnId) {
        for path in self.by_conn.remove(&conn).unwrap_or_default() {
            if let Some(watchers) = self.by_path.get_mut(&path) {
                if let Some(modes) = watchers.remove(&conn) {
                    if modes & PERSISTENT_RECURSIVE != 0 {
                        self.recursive -= 1;
                    }
                }
                if watchers.is_empty() {
                    self.by_path.remove(&path);
                }
            }
        }
    }

    /// `WatchManager.triggerWatch` (3.8): connections with a recursive registration on `path`
    /// or an ancestor (unless `children_changed`), and any registration on `path` itself;
    /// one-shot registrations are consumed. Returns them sorted.
    pub fn trigger(&mut self, path: &str, children_changed: bool) -> BTreeSet<ConnId> {
        let mut matched = BTreeSet::new();
        self.trigger_into(path, children_changed, &mut matched);
        matched
    }

    /// [`WatchTable::trigger`], adding the connections to `matched`.
    pub fn trigger_into(
        &mut self,
        path: &str,
        children_changed: bool,
        matched: &mut BTreeSet<ConnId>,
    ) {
        if self.recursive == 0 {
            // Only registrations on the path itself can match: no ancestor is looked at.
            self.trigger_at(path, true, children_changed, matched);
        } else {
            for (depth, local) in path::self_and_ancestors(path).enumerate() {
                self.trigger_at(local, depth == 0, children_changed, matched);
            }
        }
    }

    /// Whether no watch is registered at all (nothing can trigger).
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// The registrations on `local` (the triggering path itself when `is_self`, else one of
    /// its ancestors) that match, into `matched`; one-shot ones are consumed.
    fn trigger_at(
        &mut self,
        local: &str,
        is_self: bool,
        children_changed: bool,
        matched: &mut BTreeSet<ConnId>,
    ) {
        let Some(watchers) = self.by_path.get_mut(local) else {
            return;
        };
        let mut consumed = Vec::new();
        for (conn, mode) in watchers.iter() {
            if mode & PERSISTENT_RECURSIVE != 0 {
                if !children_changed {
                    matched.insert(*conn);
                }
            } else if is_self {
                matched.insert(*conn);
                if mode & PERSISTENT == 0 {
                    consumed.push(*conn);
                }
            }
        }
        for conn in &consumed {
            watchers.remove(conn);
            if let Some(paths) = self.by_conn.get_mut(conn) {
                paths.remove(local);
                if paths.is_empty() {
                    self.by_conn.remove(conn);
                }
            }
        }
        if watchers.is_empty() {
            self.by_path.remove(local);
        }
    }

    /// Whether [`WatchTable::trigger`] on `path` could match a registration: one on the path
    /// itself, or any recursive one (which may be on an ancestor). Never false when it could.
    pub fn may_match(&self, path: &str) -> bool {
        self.recursive > 0 || self.by_path.contains_key(path)
    }

    /// Number of (path, connection) registrations.
    pub fn count(&self) -> usize {
        self.by_path.values().map(BTreeMap::len).sum()
    }

    /// Every registration as (path, connection), by path (4lw `wchp`/`wchc`, admin `watches`).
    pub fn entries(&self) -> impl Iterator<Item = (&String, ConnId)> {
        self.by_path
            .iter()
            .flat_map(|(path, w)| w.keys().map(move |conn| (path, *conn)))
    }

    /// Watched paths.
    pub fn paths(&self) -> impl Iterator<Item = &String> {
        self.by_path.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shot_fires_once_persistent_stays() {
        let mut t = WatchTable::default();
        t.add("/a", 1, STANDARD);
        t.add("/a", 2, PERSISTENT);
        assert_eq!(
            t.trigger("/a", false).into_iter().collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(t.trigger("/a", false).into_iter().collect::<Vec<_>>(), [2]);
        assert_eq!(t.count(), 1);
    }

    #[test]
    fn a_later_mode_replaces_the_earlier_one_as_in_3_8() {
        let mut t = WatchTable::default();
        t.add("/a", 1, PERSISTENT);
        t.add("/a", 1, STANDARD);
        assert_eq!(t.trigger("/a", false).len(), 1);
        assert!(
            !t.contains("/a", 1),
            "ZOOKEEPER-4466: the persistent watch was replaced"
        );
        t.add("/a", 1, PERSISTENT_RECURSIVE);
        t.add("/a", 1, PERSISTENT);
        assert_eq!(t.trigger("/a/b", false).len(), 0);
    }

    #[test]
    fn recursive_matches_descendants_only_when_recursive() {
        let mut t = WatchTable::default();
        t.add("/a", 1, PERSISTENT_RECURSIVE);
        t.add("/a", 2, PERSISTENT);
        t.add("/a", 3, STANDARD);
        assert_eq!(
            t.trigger("/a/b/c", false).into_iter().collect::<Vec<_>>(),
            [1]
        );
        assert_eq!(t.trigger("/a/b/c", true).len(), 0);
        assert_eq!(t.trigger("/ab", false).len(), 0);
        t.remove_conn(1);
        assert_eq!(t.trigger("/a/b", false).len(), 0);
        assert_eq!(t.count(), 2);
    }
}
