//! Caches of znodes kept up to date by watches (Curator's `CuratorCache`, `NodeCache`,
//! `TreeCache`): an initial load, then `Added` / `Updated` / `Removed` events, and a re-sync
//! after reconnects and new sessions that neither repeats nor skips the latest state.
//!
//! # Layout
//! - this file: [`CacheEvent`], [`ChildData`] and the pure [`apply`] that turns a
//!   [`ConfigChange`] into a cache update and its event. No I/O.
//! - [`TreeCache`]: a node and its whole subtree; [`NodeCache`]: one node.
//!
//! Both are driven by [`crate::config::ConfigWatcher`] (persistent recursive watch with a
//! one-shot fallback), which already guarantees per-node zxid order and no duplicates; the
//! caches only keep the data and name the events the Curator way.

use std::collections::BTreeMap;

use crate::config::{ChangeKind, ConfigChange, ConfigWatcher, ConfigWatcherOptions};
use crate::error::Result;
use crate::session::Session;

/// A cached node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildData {
    /// Absolute path.
    pub path: String,
    /// Its data.
    pub data: Vec<u8>,
    /// Its data version.
    pub version: i32,
    /// The zxid of its last write.
    pub mzxid: i64,
}

/// What changed in a cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheEvent {
    /// A node entered the cache (initial load, or created).
    Added(ChildData),
    /// A cached node's data changed: old and new.
    Updated {
        /// Before.
        old: ChildData,
        /// After.
        new: ChildData,
    },
    /// A node left the cache (deleted).
    Removed(ChildData),
    /// The initial load is complete (Curator's `INITIALIZED`): every node that existed when the
    /// cache started has been reported as `Added`.
    Initialized,
}

/// Applies one watcher change to `nodes` and returns the event (`None` if the change does not
/// concern the cache, e.g. a removal of a node it never had).
pub fn apply(nodes: &mut BTreeMap<String, ChildData>, change: ConfigChange) -> Option<CacheEvent> {
    match change.kind {
        ChangeKind::Removed => nodes.remove(&change.path).map(CacheEvent::Removed),
        ChangeKind::Initial | ChangeKind::Changed => {
            let new = ChildData {
                path: change.path.clone(),
                data: change.value.unwrap_or_default(),
                version: change.version,
                mzxid: change.mzxid,
            };
            match nodes.insert(change.path, new.clone()) {
                Some(old) => Some(CacheEvent::Updated { old, new }),
                None => Some(CacheEvent::Added(new)),
            }
        }
    }
}

/// A cache of a node and all its descendants (Curator's `CuratorCache` / `TreeCache`).
#[derive(Debug)]
pub struct TreeCache {
    watcher: ConfigWatcher,
    nodes: BTreeMap<String, ChildData>,
    only: Option<String>,
    initialized: bool,
    pending: std::collections::VecDeque<CacheEvent>,
}

impl TreeCache {
    /// Caches `root` (need not exist yet) and its subtree.
    ///
    /// # Errors
    /// [`crate::Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, root: &str) -> Result<Self> {
        Self::with_options(session, root, ConfigWatcherOptions::default())
    }

    /// As [`TreeCache::new`] with watcher options (e.g. forcing one-shot watches).
    ///
    /// # Errors
    /// [`crate::Error::BadArguments`] for an invalid path.
    pub fn with_options(
        session: &Session,
        root: &str,
        options: ConfigWatcherOptions,
    ) -> Result<Self> {
        Ok(TreeCache {
            watcher: ConfigWatcher::with_options(session, root, options)?,
            nodes: BTreeMap::new(),
            only: None,
            initialized: false,
            pending: Default::default(),
        })
    }

    /// The next event; the first ones are the initial load (`Added` for every node), then
    /// [`CacheEvent::Initialized`], then changes.
    ///
    /// # Errors
    /// [`crate::Error::Closed`] once the session is closed.
    ///
    /// # Cancellation safety
    /// Cancel-safe (as [`ConfigWatcher::next`]).
    pub async fn next(&mut self) -> Result<CacheEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            if !self.initialized {
                self.initialized().await?;
                continue;
            }
            let change = self.watcher.next().await?;
            self.push(change);
        }
    }

    fn push(&mut self, change: ConfigChange) {
        if self.only.as_deref().is_some_and(|p| p != change.path) {
            return;
        }
        if let Some(event) = apply(&mut self.nodes, change) {
            self.pending.push_back(event);
        }
    }

    /// Completes the initial load (returns at once if done): its `Added` events and then
    /// `Initialized` are queued for [`TreeCache::next`], and the cache content is available.
    ///
    /// # Errors
    /// As [`TreeCache::next`].
    pub async fn initialized(&mut self) -> Result<()> {
        if self.initialized {
            return Ok(());
        }
        self.watcher.load().await?;
        // The snapshot is queued in one piece by `load`.
        for change in self.watcher.drain_queued() {
            self.push(change);
        }
        self.initialized = true;
        self.pending.push_back(CacheEvent::Initialized);
        Ok(())
    }

    /// The cached node at `path`.
    pub fn get(&self, path: &str) -> Option<&ChildData> {
        self.nodes.get(path)
    }

    /// Every cached node, in path order.
    pub fn nodes(&self) -> impl Iterator<Item = &ChildData> {
        self.nodes.values()
    }

    /// The number of cached nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// A cache of one node (Curator's `NodeCache`): its data, or `None` while it does not exist.
#[derive(Debug)]
pub struct NodeCache {
    tree: TreeCache,
    path: String,
}

impl NodeCache {
    /// Caches `path` (need not exist yet).
    ///
    /// # Errors
    /// [`crate::Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        let mut tree = TreeCache::new(session, path)?;
        let path = tree.watcher.root().to_string();
        tree.only = Some(path.clone());
        Ok(NodeCache { tree, path })
    }

    /// The next event about the node (`Added` when it appears, `Updated`, `Removed`,
    /// `Initialized` after the initial load).
    ///
    /// # Errors
    /// As [`TreeCache::next`].
    pub async fn next(&mut self) -> Result<CacheEvent> {
        self.tree.next().await
    }

    /// The cached data of the node.
    pub fn current(&self) -> Option<&ChildData> {
        self.tree.get(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &str, kind: ChangeKind, value: Option<&str>, version: i32) -> ConfigChange {
        ConfigChange {
            path: path.into(),
            kind,
            value: value.map(|v| v.as_bytes().to_vec()),
            version,
            mzxid: i64::from(version) + 100,
        }
    }

    #[test]
    fn changes_become_added_updated_removed() {
        let mut nodes = BTreeMap::new();
        let e = apply(&mut nodes, change("/a", ChangeKind::Initial, Some("1"), 0)).unwrap();
        assert!(matches!(e, CacheEvent::Added(ref d) if d.data == b"1"));
        let e = apply(&mut nodes, change("/a", ChangeKind::Changed, Some("2"), 1)).unwrap();
        match e {
            CacheEvent::Updated { old, new } => {
                assert_eq!((old.data, new.data), (b"1".to_vec(), b"2".to_vec()));
            }
            other => panic!("{other:?}"),
        }
        let e = apply(&mut nodes, change("/a", ChangeKind::Removed, None, 1)).unwrap();
        assert!(matches!(e, CacheEvent::Removed(ref d) if d.data == b"2"));
        assert!(nodes.is_empty());
        assert_eq!(
            apply(&mut nodes, change("/b", ChangeKind::Removed, None, 0)),
            None
        );
    }
}
