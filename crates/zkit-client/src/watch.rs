//! The client's watch registrations, kept as Apache's `ZKWatchManager` keeps them: five tables
//! (data, exist, child, persistent, persistent recursive) of server path → watchers.
//!
//! - A one-shot registration is added when its request succeeds (exists on a missing node adds
//!   an *exist* watch, as `ExistsWatchRegistration` does) and removed when it fires.
//! - [`WatchManager::fire`] is `ZKWatchManager.materialize` for a node event, except that a
//!   persistent recursive watch never sees `NodeChildrenChanged` (the server never sends it one;
//!   Java would hand it another watch's).
//! - [`WatchManager::set_watches`] lists what to re-register (SetWatches/SetWatches2) after a
//!   reconnect; [`WatchManager::drain`] empties everything when the session ends.
//!
//! Pure: generic over the watcher handle `W`, no channels, no I/O.

use std::collections::HashMap;

use crate::types::{EventType, WatchType};

/// The five registration tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WatchKind {
    /// getData(watch), or exists(watch) on an existing node.
    Data,
    /// exists(watch) on a missing node.
    Exist,
    /// getChildren(watch).
    Child,
    /// addWatch PERSISTENT.
    Persistent,
    /// addWatch PERSISTENT_RECURSIVE.
    PersistentRecursive,
}

impl WatchKind {
    /// Whether it survives firing.
    pub fn is_persistent(self) -> bool {
        matches!(self, WatchKind::Persistent | WatchKind::PersistentRecursive)
    }

    const ALL: [WatchKind; 5] = [
        WatchKind::Data,
        WatchKind::Exist,
        WatchKind::Child,
        WatchKind::Persistent,
        WatchKind::PersistentRecursive,
    ];
}

/// Identifies one registration, so that dropping a watcher removes exactly it.
pub(crate) type WatcherId = u64;

/// Registrations by table and server path.
#[derive(Debug)]
pub(crate) struct WatchManager<W> {
    tables: [HashMap<String, Vec<(WatcherId, W)>>; 5],
}

impl<W> Default for WatchManager<W> {
    fn default() -> Self {
        WatchManager {
            tables: Default::default(),
        }
    }
}

fn slot(kind: WatchKind) -> usize {
    match kind {
        WatchKind::Data => 0,
        WatchKind::Exist => 1,
        WatchKind::Child => 2,
        WatchKind::Persistent => 3,
        WatchKind::PersistentRecursive => 4,
    }
}

/// Every ancestor of `path`, `path` first, `/` last.
fn self_and_ancestors(path: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(path);
    std::iter::from_fn(move || {
        let current = next?;
        next = crate::path::parent(current);
        Some(current)
    })
}

impl<W> WatchManager<W> {
    fn table(&mut self, kind: WatchKind) -> &mut HashMap<String, Vec<(WatcherId, W)>> {
        &mut self.tables[slot(kind)]
    }

    /// Adds a registration.
    pub fn add(&mut self, kind: WatchKind, path: &str, id: WatcherId, watcher: W) {
        self.table(kind)
            .entry(path.to_owned())
            .or_default()
            .push((id, watcher));
    }

    /// Removes one registration; returns its handle.
    pub fn remove(&mut self, kind: WatchKind, path: &str, id: WatcherId) -> Option<W> {
        let table = self.table(kind);
        let watchers = table.get_mut(path)?;
        let i = watchers.iter().position(|(w, _)| *w == id)?;
        let (_, watcher) = watchers.swap_remove(i);
        if watchers.is_empty() {
            table.remove(path);
        }
        Some(watcher)
    }

    /// After a registration of `kind` on `path` went away: the removeWatches that drops the
    /// server's watch, or `None` while local registrations still need it. The server keeps data
    /// and exist watches as one, and a persistent watch overlaps both (a 3.8 server has one
    /// entry per path and connection), so a one-shot kind is removed only when no persistent
    /// watch is left on the path, and a persistent one (with `Any`) only when nothing is.
    pub fn server_removal(&self, kind: WatchKind, path: &str) -> Option<WatchType> {
        let has = |k: WatchKind| self.tables[slot(k)].contains_key(path);
        let persistent = has(WatchKind::Persistent) || has(WatchKind::PersistentRecursive);
        match kind {
            WatchKind::Data | WatchKind::Exist => {
                (!has(WatchKind::Data) && !has(WatchKind::Exist) && !persistent)
                    .then_some(WatchType::Data)
            }
            WatchKind::Child => {
                (!has(WatchKind::Child) && !persistent).then_some(WatchType::Children)
            }
            WatchKind::Persistent | WatchKind::PersistentRecursive => WatchKind::ALL
                .iter()
                .all(|k| !has(*k))
                .then_some(WatchType::Any),
        }
    }

    /// Whether any registration of `watch_type` exists on `path` (checkWatches'
    /// client side, `ZKWatchManager.containsWatcher`).
    pub fn contains(&self, path: &str, watch_type: WatchType) -> bool {
        self.kinds_of(watch_type)
            .iter()
            .any(|k| self.tables[slot(*k)].contains_key(path))
    }

    fn kinds_of(&self, watch_type: WatchType) -> &'static [WatchKind] {
        match watch_type {
            WatchType::Children => &[WatchKind::Child],
            WatchType::Data => &[WatchKind::Data, WatchKind::Exist],
            WatchType::Any => &WatchKind::ALL,
        }
    }

    /// Removes every registration of `watch_type` on `path` (`ZKWatchManager.removeWatcher`),
    /// with the event each removed watcher is told.
    pub fn remove_all(&mut self, path: &str, watch_type: WatchType) -> Vec<(W, EventType)> {
        let mut out = Vec::new();
        for kind in self.kinds_of(watch_type) {
            let event = match kind {
                WatchKind::Data | WatchKind::Exist => EventType::DataWatchRemoved,
                WatchKind::Child => EventType::ChildWatchRemoved,
                WatchKind::Persistent | WatchKind::PersistentRecursive => {
                    EventType::PersistentWatchRemoved
                }
            };
            if let Some(watchers) = self.tables[slot(*kind)].remove(path) {
                out.extend(watchers.into_iter().map(|(_, w)| (w, event)));
            }
        }
        out
    }

    /// The watchers a node event goes to. One-shot registrations are removed; persistent ones
    /// are returned by reference (they stay).
    pub fn fire(&mut self, event: EventType, path: &str) -> Fired<'_, W> {
        let mut oneshot = Vec::new();
        let mut take = |tables: &mut [HashMap<String, Vec<(WatcherId, W)>>; 5], k: WatchKind| {
            if let Some(ws) = tables[slot(k)].remove(path) {
                oneshot.extend(ws.into_iter().map(|(_, w)| w));
            }
        };
        match event {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                take(&mut self.tables, WatchKind::Data);
                take(&mut self.tables, WatchKind::Exist);
            }
            EventType::NodeChildrenChanged => take(&mut self.tables, WatchKind::Child),
            EventType::NodeDeleted => {
                take(&mut self.tables, WatchKind::Data);
                take(&mut self.tables, WatchKind::Exist);
                take(&mut self.tables, WatchKind::Child);
            }
            _ => {}
        }
        let mut persistent = Vec::new();
        if let Some(ws) = self.tables[slot(WatchKind::Persistent)].get(path) {
            persistent.extend(ws.iter().map(|(_, w)| w));
        }
        if event != EventType::NodeChildrenChanged {
            let recursive = &self.tables[slot(WatchKind::PersistentRecursive)];
            for p in self_and_ancestors(path) {
                if let Some(ws) = recursive.get(p) {
                    persistent.extend(ws.iter().map(|(_, w)| w));
                }
            }
        }
        Fired {
            oneshot,
            persistent,
        }
    }

    /// Every persistent watcher (they hear about session state changes).
    pub fn persistent(&self) -> impl Iterator<Item = &W> {
        self.tables[slot(WatchKind::Persistent)]
            .values()
            .chain(self.tables[slot(WatchKind::PersistentRecursive)].values())
            .flatten()
            .map(|(_, w)| w)
    }

    /// The paths to re-register, per table: data, exist, child, persistent, recursive.
    pub fn set_watches(&self) -> [Vec<String>; 5] {
        let mut out: [Vec<String>; 5] = Default::default();
        for (i, table) in self.tables.iter().enumerate() {
            out[i] = table.keys().cloned().collect();
            out[i].sort();
        }
        out
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.tables.iter().all(HashMap::is_empty)
    }

    /// Removes and returns every registration.
    pub fn drain(&mut self) -> Vec<W> {
        self.tables
            .iter_mut()
            .flat_map(|t| t.drain())
            .flat_map(|(_, ws)| ws.into_iter().map(|(_, w)| w))
            .collect()
    }
}

/// The watchers of one node event.
pub(crate) struct Fired<'a, W> {
    /// One-shot watchers, now unregistered.
    pub oneshot: Vec<W>,
    /// Persistent watchers, still registered.
    pub persistent: Vec<&'a W>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fired(m: &mut WatchManager<&'static str>, e: EventType, p: &str) -> Vec<&'static str> {
        let f = m.fire(e, p);
        let mut all: Vec<&str> = f.oneshot;
        all.extend(f.persistent.into_iter().copied());
        all.sort();
        all
    }

    #[test]
    fn one_shot_watches_fire_once_and_persistent_stay() {
        let mut m = WatchManager::default();
        m.add(WatchKind::Data, "/a", 1, "data");
        m.add(WatchKind::Exist, "/b", 2, "exist");
        m.add(WatchKind::Child, "/a", 3, "child");
        m.add(WatchKind::Persistent, "/a", 4, "persistent");
        m.add(WatchKind::PersistentRecursive, "/", 5, "recursive");

        assert_eq!(
            fired(&mut m, EventType::NodeDataChanged, "/a"),
            ["data", "persistent", "recursive"]
        );
        assert_eq!(
            fired(&mut m, EventType::NodeDataChanged, "/a"),
            ["persistent", "recursive"]
        );
        // Children changed: child watch and persistent, never the recursive one.
        assert_eq!(
            fired(&mut m, EventType::NodeChildrenChanged, "/a"),
            ["child", "persistent"]
        );
        assert_eq!(
            fired(&mut m, EventType::NodeCreated, "/b"),
            ["exist", "recursive"]
        );
        assert_eq!(fired(&mut m, EventType::NodeCreated, "/b"), ["recursive"]);
        assert_eq!(fired(&mut m, EventType::NodeDeleted, "/x/y"), ["recursive"]);
        let [data, exist, child, persistent, recursive] = m.set_watches();
        assert!(data.is_empty() && exist.is_empty() && child.is_empty());
        assert_eq!(persistent, ["/a"]);
        assert_eq!(recursive, ["/"]);
    }

    #[test]
    fn delete_fires_data_and_child_watches() {
        let mut m = WatchManager::default();
        m.add(WatchKind::Data, "/a", 1, "data");
        m.add(WatchKind::Child, "/a", 2, "child");
        m.add(WatchKind::Child, "/a", 3, "child2");
        assert_eq!(
            fired(&mut m, EventType::NodeDeleted, "/a"),
            ["child", "child2", "data"]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn removal_and_server_need() {
        let mut m = WatchManager::default();
        m.add(WatchKind::Data, "/a", 1, "d1");
        m.add(WatchKind::Exist, "/a", 2, "e1");
        assert_eq!(m.remove(WatchKind::Data, "/a", 1), Some("d1"));
        assert_eq!(m.remove(WatchKind::Data, "/a", 1), None);
        assert_eq!(
            m.server_removal(WatchKind::Data, "/a"),
            None,
            "exist shares the data watch"
        );
        assert!(m.contains("/a", WatchType::Data));
        assert!(!m.contains("/a", WatchType::Children));
        assert_eq!(m.remove(WatchKind::Exist, "/a", 2), Some("e1"));
        assert_eq!(
            m.server_removal(WatchKind::Exist, "/a"),
            Some(WatchType::Data)
        );
        m.add(WatchKind::Child, "/a", 9, "c");
        m.add(WatchKind::Persistent, "/a", 10, "p");
        assert_eq!(
            m.server_removal(WatchKind::Data, "/a"),
            None,
            "persistent overlaps"
        );
        m.remove(WatchKind::Persistent, "/a", 10);
        assert_eq!(
            m.server_removal(WatchKind::Persistent, "/a"),
            None,
            "child left"
        );
        m.remove(WatchKind::Child, "/a", 9);
        assert_eq!(
            m.server_removal(WatchKind::Persistent, "/a"),
            Some(WatchType::Any)
        );
        assert!(m.is_empty());

        m.add(WatchKind::Data, "/a", 3, "d");
        m.add(WatchKind::Child, "/a", 4, "c");
        m.add(WatchKind::Persistent, "/a", 5, "p");
        let mut removed = m.remove_all("/a", WatchType::Data);
        assert_eq!(removed, [("d", EventType::DataWatchRemoved)]);
        removed = m.remove_all("/a", WatchType::Any);
        removed.sort_by_key(|(w, _)| *w);
        assert_eq!(
            removed,
            [
                ("c", EventType::ChildWatchRemoved),
                ("p", EventType::PersistentWatchRemoved)
            ]
        );
        assert!(m.is_empty());
    }

    #[test]
    fn drain_returns_everything() {
        let mut m = WatchManager::default();
        m.add(WatchKind::Data, "/a", 1, 1);
        m.add(WatchKind::PersistentRecursive, "/b", 2, 2);
        assert_eq!(m.persistent().copied().collect::<Vec<_>>(), [2]);
        let mut all = m.drain();
        all.sort();
        assert_eq!(all, [1, 2]);
        assert!(m.is_empty());
    }
}
