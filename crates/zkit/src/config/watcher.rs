//! [`ConfigWatcher`]: a stream of every change of a key or of a whole subtree.
//!
//! A one-shot watch can skip updates: between the watch firing and the
//! re-read that sets the next watch, further writes go unnoticed (only the latest value is
//! read). That is acceptable for configuration as long as the *latest* value is never missed,
//! and this driver makes sure of it:
//! - It sets one persistent recursive watch (`addWatch`, ZooKeeper 3.6+) on the root, then reads
//!   the whole tree (the initial snapshot, [`ChangeKind::Initial`](super::ChangeKind)). Every
//!   later event makes it re-read that node; [`ConfigView`] drops reads that are not newer.
//! - After a reconnect of the same session it re-reads the whole tree, because events that
//!   happen while disconnected are not replayed to persistent watches (ZOOKEEPER-4698). After a
//!   new session (the old one was lost) it sets the watch again and re-reads the whole tree.
//!   Either way only what is newer than what was already reported comes out.
//! - Against a server without `addWatch` (it answers `UNIMPLEMENTED`, ZooKeeper < 3.6) it falls
//!   back to one-shot data and child watches on every node, and re-reads the tree whenever one
//!   fires ([`WatchMode::OneShot`]).
//!
//! Order: changes of one path come out with strictly increasing `mzxid`. Across paths, each
//! batch of reads is reported in `mzxid` order; before reporting a batch the driver also takes
//! the events already delivered for older writes (a server sends a watch event before the reply
//! of any later request on the same connection), so interleaved writes to several keys come out
//! in zxid order unless writes keep arriving faster than it can read.
//!
//! The driver is pull-based: nothing happens between calls of [`ConfigWatcher::next`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use futures::future::{join_all, BoxFuture};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::watch;
use zkit_client as zk;

use super::view::{ConfigChange, ConfigView, NodeRead};
use crate::error::{Error, Result};
use crate::session::{Session, SessionEvent};

/// How a [`ConfigWatcher`] learns of changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// One persistent recursive watch on the root (`addWatch`, ZooKeeper 3.6+).
    Persistent,
    /// One-shot watches on every node, re-armed by a full re-read after each event.
    OneShot,
}

/// Options of [`ConfigWatcher::with_options`].
#[derive(Debug, Clone)]
pub struct ConfigWatcherOptions {
    /// Use one-shot watches even if the server supports persistent ones (for old servers that do
    /// not answer `UNIMPLEMENTED` cleanly, and to test the fallback).
    pub force_one_shot: bool,
    /// Pause after a failed read before trying again (unless the session state changes first).
    pub retry_backoff: Duration,
}

impl Default for ConfigWatcherOptions {
    fn default() -> Self {
        ConfigWatcherOptions {
            force_one_shot: false,
            retry_backoff: Duration::from_millis(100),
        }
    }
}

type EventFuture = BoxFuture<'static, zk::WatchedEvent>;

/// The watch of one ZooKeeper session (one generation of the [`Session`]).
struct Active {
    generation: u64,
    client: zk::Client,
    persistent: Option<zk::PersistentWatcher>,
    oneshots: FuturesUnordered<EventFuture>,
}

impl Active {
    async fn next_event(&mut self) -> zk::WatchedEvent {
        if let Some(watcher) = self.persistent.as_mut() {
            watcher.changed().await
        } else if self.oneshots.is_empty() {
            std::future::pending().await
        } else {
            match self.oneshots.next().await {
                Some(event) => event,
                None => std::future::pending().await,
            }
        }
    }
}

/// A stream of changes of the node `root` and all its descendants. See the module docs.
pub struct ConfigWatcher {
    session: Session,
    root: String,
    options: ConfigWatcherOptions,
    mode: WatchMode,
    view: ConfigView,
    active: Option<Active>,
    /// A generation whose ZooKeeper session reported a terminal state: wait for the next one.
    dead_generation: Option<u64>,
    pending: BTreeSet<String>,
    need_resync: bool,
    queue: VecDeque<ConfigChange>,
    state_rx: watch::Receiver<SessionEvent>,
}

impl std::fmt::Debug for ConfigWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatcher")
            .field("root", &self.root)
            .field("mode", &self.mode)
            .field("queued", &self.queue.len())
            .finish()
    }
}

impl ConfigWatcher {
    /// Watches `root` (an absolute path; it need not exist yet) and its whole subtree.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, root: &str) -> Result<Self> {
        Self::with_options(session, root, ConfigWatcherOptions::default())
    }

    /// As [`ConfigWatcher::new`], with options.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn with_options(
        session: &Session,
        root: &str,
        options: ConfigWatcherOptions,
    ) -> Result<Self> {
        let root = super::resolve_key("/", root)?;
        let root = if root.len() > 1 {
            root.trim_end_matches('/').to_string()
        } else {
            root
        };
        Ok(ConfigWatcher {
            session: session.clone(),
            root,
            mode: if options.force_one_shot {
                WatchMode::OneShot
            } else {
                WatchMode::Persistent
            },
            options,
            view: ConfigView::new(),
            active: None,
            dead_generation: None,
            pending: BTreeSet::new(),
            need_resync: true,
            queue: VecDeque::new(),
            state_rx: session.watch_state(),
        })
    }

    /// The watched root.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// How changes are learned: persistent until the server refuses `addWatch`.
    pub fn mode(&self) -> WatchMode {
        self.mode
    }

    /// What has been reported so far.
    pub fn view(&self) -> &ConfigView {
        &self.view
    }

    /// The next change: first the initial snapshot (every existing node, as
    /// [`ChangeKind::Initial`](super::ChangeKind)), then changes as they happen. Waits across
    /// disconnects and session replacements; errors on the way are retried, not returned.
    ///
    /// # Errors
    /// [`Error::Closed`] once the session is closed.
    ///
    /// # Cancellation safety
    /// Cancel-safe: a dropped call loses no change (what was read but not yet returned stays
    /// queued, and unread events are re-read or covered by a re-sync on the next call).
    pub async fn next(&mut self) -> Result<ConfigChange> {
        loop {
            if let Some(change) = self.queue.pop_front() {
                return Ok(change);
            }
            self.step_or_back_off().await?;
        }
    }

    /// Runs until the initial snapshot has been read; its changes stay queued for
    /// [`ConfigWatcher::next`] / [`ConfigWatcher::drain_queued`]. Returns at once afterwards.
    ///
    /// # Errors
    /// [`Error::Closed`] once the session is closed.
    pub async fn load(&mut self) -> Result<()> {
        while !self.view.is_initialized() {
            self.step_or_back_off().await?;
        }
        Ok(())
    }

    /// Takes every change already read but not yet returned, without waiting.
    pub fn drain_queued(&mut self) -> Vec<ConfigChange> {
        self.queue.drain(..).collect()
    }

    /// One [`ConfigWatcher::step`]; on failure, backs off (until the session state moves or a
    /// short pause passes). Only [`Error::Closed`] is returned.
    async fn step_or_back_off(&mut self) -> Result<()> {
        if self.session.is_closed() {
            return Err(Error::Closed);
        }
        match self.step().await {
            Ok(()) => Ok(()),
            Err(Error::Closed) => Err(Error::Closed),
            Err(err) => {
                tracing::debug!(root = %self.root, error = %err, "config watcher retrying");
                if err.is_unrecoverable() {
                    if let Some(active) = self.active.take() {
                        self.dead_generation = Some(active.generation);
                    }
                }
                self.need_resync = true;
                // Back off, but wake at once when the session state moves (reconnected, new
                // session), which is what most failures wait for.
                tokio::select! {
                    _ = tokio::time::sleep(self.options.retry_backoff) => Ok(()),
                    changed = self.state_rx.changed() => {
                        if changed.is_err() { Err(Error::Closed) } else { Ok(()) }
                    }
                }
            }
        }
    }

    /// One unit of work: (re)establish the watch, re-sync, read pending nodes, or wait for one
    /// event. Each leaves the watcher consistent if it is cancelled at an await.
    async fn step(&mut self) -> Result<()> {
        let generation = self.session.generation();
        if self.active.as_ref().map(|a| a.generation) != Some(generation) {
            self.active = None;
            if self.dead_generation == Some(generation) {
                // The old session ended; the session layer is building the next one.
                if self.state_rx.changed().await.is_err() {
                    return Err(Error::Closed);
                }
                return Ok(());
            }
            self.session.wait_connected().await?;
            let (client, generation) = self.session.client_and_generation();
            let persistent = match self.mode {
                WatchMode::Persistent => {
                    match client
                        .watch(&self.root, zk::AddWatchMode::PersistentRecursive)
                        .await
                    {
                        Ok(watcher) => Some(watcher),
                        Err(zk::Error::Unimplemented) => {
                            tracing::info!(root = %self.root, "server has no addWatch; using one-shot watches");
                            self.mode = WatchMode::OneShot;
                            None
                        }
                        Err(err) => return Err(err.into()),
                    }
                }
                WatchMode::OneShot => None,
            };
            self.active = Some(Active {
                generation,
                client,
                persistent,
                oneshots: FuturesUnordered::new(),
            });
            self.need_resync = true;
        }
        if self.need_resync {
            return self.resync().await;
        }
        if !self.pending.is_empty() {
            return self.read_pending().await;
        }
        self.wait_event().await
    }

    async fn resync(&mut self) -> Result<()> {
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        let one_shot = self.mode == WatchMode::OneShot;
        let (nodes, watchers) = read_tree(&active.client, &self.root, one_shot).await?;
        if one_shot {
            // The old one-shot watches are superseded: the new ones were set by this read.
            active.oneshots = watchers.into_iter().collect();
        }
        tracing::trace!(root = %self.root, nodes = nodes.len(), watches = active.oneshots.len(), "config watcher resync");
        // Everything pending is covered by the full read.
        self.pending.clear();
        self.need_resync = false;
        let changes = self.view.snapshot(nodes);
        self.queue.extend(changes);
        Ok(())
    }

    async fn read_pending(&mut self) -> Result<()> {
        let Some(client) = self.active.as_ref().map(|a| a.client.clone()) else {
            return Ok(());
        };
        let mut batch: BTreeMap<String, Option<NodeRead>> = BTreeMap::new();
        // A few rounds at most: see the module docs on order.
        for _ in 0..4 {
            let paths: Vec<String> = self.pending.iter().cloned().collect();
            if paths.is_empty() {
                break;
            }
            let reads = join_all(paths.iter().map(|p| read_node(&client, p))).await;
            for (path, read) in paths.into_iter().zip(reads) {
                // On error the path stays pending (and is re-read next time).
                let read = read?;
                self.pending.remove(&path);
                batch.insert(path, read);
            }
            self.drain_ready_events();
            if self.need_resync || self.active.is_none() {
                break;
            }
        }
        let changes = self.view.observe_batch(batch.into_iter().collect());
        self.queue.extend(changes);
        Ok(())
    }

    /// Takes the events already delivered, without waiting.
    fn drain_ready_events(&mut self) {
        while let Some(active) = self.active.as_mut() {
            match active.next_event().now_or_never() {
                Some(event) => self.handle_event(event),
                None => break,
            }
        }
    }

    async fn wait_event(&mut self) -> Result<()> {
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        let generation = active.generation;
        tokio::select! {
            event = active.next_event() => self.handle_event(event),
            changed = self.state_rx.changed() => {
                if changed.is_err() {
                    return Err(Error::Closed);
                }
                if self.state_rx.borrow().generation != generation {
                    self.active = None;
                }
            }
        }
        Ok(())
    }

    fn handle_event(&mut self, event: zk::WatchedEvent) {
        use zk::{EventType, SessionState as Raw};
        tracing::trace!(root = %self.root, ?event, "config watcher event");
        match event.event_type {
            EventType::Session => match event.session_state {
                Raw::Disconnected => {}
                // Same session back. The client has re-registered the persistent watch
                // (SetWatches2 with the last zxid seen), but the server does not replay to
                // persistent watches the changes made while this client was disconnected
                // (ZOOKEEPER-4698: `DataTree.setWatches` compares the zxid for data, exist and
                // child watches only, and re-adds persistent ones silently), so re-read
                // everything; the view reports only what is newer than what was reported.
                Raw::SyncConnected | Raw::ConnectedReadOnly => {
                    self.need_resync = true;
                }
                // Terminal: this generation is over; the watcher would only repeat the
                // terminal event.
                Raw::Expired | Raw::AuthFailed | Raw::Closed => {
                    if let Some(active) = self.active.take() {
                        self.dead_generation = Some(active.generation);
                    }
                }
            },
            _ if self.mode == WatchMode::OneShot => self.need_resync = true,
            EventType::NodeCreated | EventType::NodeDataChanged | EventType::NodeDeleted => {
                self.pending.insert(event.path);
            }
            // Recursive watches do not deliver it; creations and deletions come per node.
            EventType::NodeChildrenChanged => {}
            // Someone removed this session's watch (removeWatches): set it again, re-read.
            EventType::PersistentWatchRemoved => self.active = None,
            EventType::DataWatchRemoved | EventType::ChildWatchRemoved => {}
        }
    }
}

/// Reads one node: `None` if it does not exist.
async fn read_node(client: &zk::Client, path: &str) -> Result<Option<NodeRead>> {
    match client.get_data(path).await {
        Ok((value, stat)) => Ok(Some(NodeRead {
            value,
            version: stat.version,
            mzxid: stat.mzxid,
        })),
        Err(zk::Error::NoNode) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// What one node's read yields: its data (if it exists), its children, and watches.
type NodeAndChildren = (Option<NodeRead>, Vec<String>, Vec<EventFuture>);

async fn read_one(
    client: &zk::Client,
    path: &str,
    watches: bool,
    is_root: bool,
) -> Result<NodeAndChildren> {
    if !watches {
        let read = read_node(client, path).await?;
        if read.is_none() {
            return Ok((None, Vec::new(), Vec::new()));
        }
        let children = match client.list_children(path).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(err) => return Err(err.into()),
        };
        return Ok((read, children, Vec::new()));
    }
    match client.get_and_watch_data(path).await {
        Ok((value, stat, data_watch)) => {
            let mut futures: Vec<EventFuture> = vec![Box::pin(data_watch.changed())];
            let children = match client.list_and_watch_children(path).await {
                Ok((children, child_watch)) => {
                    futures.push(Box::pin(child_watch.changed()));
                    children
                }
                // Deleted in between: the data watch fires for it.
                Err(zk::Error::NoNode) => Vec::new(),
                Err(err) => return Err(err.into()),
            };
            let read = NodeRead {
                value,
                version: stat.version,
                mzxid: stat.mzxid,
            };
            Ok((Some(read), children, futures))
        }
        Err(zk::Error::NoNode) if is_root => {
            // Watch for the root's creation; if it appeared in between, let the caller re-read.
            let (stat, exists_watch) = client.check_and_watch_stat(path).await?;
            if stat.is_some() {
                return Err(Error::ConnectionLoss);
            }
            Ok((None, Vec::new(), vec![Box::pin(exists_watch.changed())]))
        }
        // A descendant deleted between listing and reading: its parent's child watch fires.
        Err(zk::Error::NoNode) => Ok((None, Vec::new(), Vec::new())),
        Err(err) => Err(err.into()),
    }
}

/// Reads the whole tree under `root`, level by level (each level's reads pipelined), setting
/// one-shot watches on every node when `watches`.
async fn read_tree(
    client: &zk::Client,
    root: &str,
    watches: bool,
) -> Result<(Vec<(String, NodeRead)>, Vec<EventFuture>)> {
    let mut nodes = Vec::new();
    let mut all_watches = Vec::new();
    let mut frontier = vec![root.to_string()];
    while !frontier.is_empty() {
        let reads = join_all(
            frontier
                .iter()
                .map(|p| read_one(client, p, watches, p == root)),
        )
        .await;
        let mut next = Vec::new();
        for (path, read) in frontier.into_iter().zip(reads) {
            let (node, children, node_watches) = read?;
            all_watches.extend(node_watches);
            for child in children {
                next.push(crate::protected::join(&path, &child));
            }
            if let Some(node) = node {
                nodes.push((path, node));
            }
        }
        frontier = next;
    }
    Ok((nodes, all_watches))
}
