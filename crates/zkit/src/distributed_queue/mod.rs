//! Curator's `DistributedQueue` family, in Curator's node layout and item format so that Java
//! and zkit producers and consumers share queues: [`DistributedQueue`] (FIFO),
//! [`PriorityQueue`] (`DistributedPriorityQueue`), [`DelayQueue`] (`DistributedDelayQueue`),
//! [`IdQueue`] (`DistributedIdQueue`, remove by id), and [`QueueSharder`] (Curator's
//! `QueueSharder`: a queue split over several shard queues once one holds more than 10,000
//! items, since one znode with that many children makes every listing slow).
//!
//! Consumers pull ([`DistributedQueue::take`], [`DistributedQueue::poll`]) where Curator pushes
//! to a `QueueConsumer` from a thread; the semantics are Curator's:
//! - Without a lock path, taking an item is reading it and deleting it (with the read
//!   version): whoever deletes it owns it. **At most once**: a consumer that dies after the
//!   delete loses the item, as with Curator's default.
//! - With a lock path ([`DistributedQueue::with_lock_path`], Curator's `lockPath`), a consumer
//!   first creates the ephemeral node `<lock path>/<item name>`, so items survive consumer
//!   crashes: [`DistributedQueue::claim`] returns a [`QueueClaim`] to [`QueueClaim::ack`] (one
//!   `multi` deleting the item and the lock node) or [`QueueClaim::release`]; a consumer that
//!   dies loses its session, hence the lock node, and the item is delivered again.
//! - A node that does not decode (not Curator's item format) is left in place and skipped with
//!   a warning (Curator logs "Corrupted queue item" and drops it).
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use zkit::distributed_queue::PriorityQueue;
//! let queue = PriorityQueue::new(&session, "/work/queue")?;
//! queue.put(b"later", 10).await?;
//! queue.put(b"urgent", -5).await?; // lower values first, as in Curator
//! let message = queue.take().await?;
//! assert_eq!(message.items, vec![b"urgent".to_vec()]);
//! # Ok(()) }
//! ```
//!
//! # Layout
//! - [`item`]: names, order and item framing (pure).
//! - this file: the queue drivers; [`sharder`]: the sharded queue.

pub mod item;
pub mod sharder;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use zkit_client as zk;

pub use item::{QueueKind, QUEUE_ITEM_NAME};
pub use sharder::{QueueSharder, QueueSharderPolicies};

use crate::claimed::{self, session_lost_if_gone};
use crate::discovery::instance::now_millis;
use crate::error::{Error, Result};
use crate::protected::join;
use crate::session::{Session, SessionEvent};

/// One taken item node: its name and the items it held (one, unless it was put with
/// `put_multi`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The item node's name (`queue-…NNNNNNNNNN`).
    pub name: String,
    /// The items in it.
    pub items: Vec<Vec<u8>>,
}

/// A queue of the family (the kind decides names and order). See the module docs.
#[derive(Debug, Clone)]
pub struct DistributedQueue {
    session: Session,
    path: String,
    kind: QueueKind,
    lock_path: Option<String>,
}

enum Taken {
    Message(Message),
    Claim(QueueClaim),
}

/// What one look at the queue found.
struct Look {
    taken: Option<Taken>,
    watcher: Option<zk::OneshotWatcher>,
    /// With lock safety: a watch on the lock node of the first due item another session holds.
    /// Its release (an ack deletes the item too, but a release or the holder's session ending
    /// leaves the queue's children as they were) must wake a waiting consumer.
    held: Option<zk::OneshotWatcher>,
    /// The head is due this long from now (delay queues).
    next_due: Option<Duration>,
}

impl DistributedQueue {
    /// A FIFO queue at `path` (Curator's `DistributedQueue`).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        DistributedQueue::of_kind(session, path, QueueKind::Fifo)
    }

    pub(crate) fn of_kind(session: &Session, path: &str, kind: QueueKind) -> Result<Self> {
        Ok(DistributedQueue {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
            kind,
            lock_path: None,
        })
    }

    /// Uses `lock_path` for lock safety (Curator's `QueueBuilder.lockPath`); required by
    /// [`DistributedQueue::claim`].
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn with_lock_path(mut self, lock_path: &str) -> Result<Self> {
        self.lock_path = Some(crate::config::resolve_key("/", lock_path)?);
        Ok(self)
    }

    /// The queue node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The kind.
    pub fn kind(&self) -> QueueKind {
        self.kind
    }

    /// Puts one item (FIFO queues; see the wrappers for the other kinds). Returns the node name.
    ///
    /// # Errors
    /// ZooKeeper errors; after `ConnectionLoss` the item may or may not have been put (a
    /// sequential create is not retried, as in Curator).
    pub async fn put(&self, item: &[u8]) -> Result<String> {
        self.put_with_suffix("", &[item]).await
    }

    /// Puts several items as one node (Curator's `putMulti`): they are taken together.
    ///
    /// # Errors
    /// As [`DistributedQueue::put`].
    pub async fn put_multi(&self, items: &[&[u8]]) -> Result<String> {
        self.put_with_suffix("", items).await
    }

    pub(crate) async fn put_with_suffix(&self, suffix: &str, items: &[&[u8]]) -> Result<String> {
        let client = self.session.client();
        let data = item::encode_items(items);
        let prefix = join(&self.path, &format!("{QUEUE_ITEM_NAME}{suffix}"));
        let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let mut made_parents = false;
        loop {
            match client.create(&prefix, &data, &options).await {
                Ok((_, sequence)) => {
                    return Ok(format!(
                        "{QUEUE_ITEM_NAME}{suffix}{:010}",
                        sequence.into_i64()
                    ))
                }
                Err(zk::Error::NoNode) if !made_parents => {
                    crate::discovery::make_parents(&client, &self.path).await?;
                    made_parents = true;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// The item node names in the order they are taken.
    ///
    /// # Errors
    /// ZooKeeper errors; a missing queue is empty.
    pub async fn names(&self) -> Result<Vec<String>> {
        let children = match self.session.client().list_children(&self.path).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(err) => return Err(err.into()),
        };
        Ok(item::sorted_items(self.kind, &children)
            .into_iter()
            .map(str::to_string)
            .collect())
    }

    /// The number of item nodes (claimed ones included).
    ///
    /// # Errors
    /// As [`DistributedQueue::names`].
    pub async fn len(&self) -> Result<usize> {
        Ok(self.names().await?.len())
    }

    /// True when no item node is there.
    ///
    /// # Errors
    /// As [`DistributedQueue::names`].
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }

    /// Takes the head item node if one is due, without waiting.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn poll(&self) -> Result<Option<Message>> {
        match self.look(false, false).await?.taken {
            Some(Taken::Message(m)) => Ok(Some(m)),
            _ => Ok(None),
        }
    }

    /// Takes the head item node, waiting for one to be there (and due).
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::Closed`].
    ///
    /// # Cancellation safety
    /// An item is only taken by its delete; a cancelled `take` took nothing, or was cancelled
    /// with its delete in flight (the item may then be gone).
    pub async fn take(&self) -> Result<Message> {
        match self.wait(false).await? {
            Taken::Message(m) => Ok(m),
            Taken::Claim(_) => Err(Error::Unexpected("a claim where a take was asked".into())),
        }
    }

    /// [`DistributedQueue::take`], giving up after `timeout` (`Ok(None)`).
    ///
    /// # Errors
    /// As [`DistributedQueue::take`].
    pub async fn take_for(&self, timeout: Duration) -> Result<Option<Message>> {
        match tokio::time::timeout(timeout, self.take()).await {
            Ok(taken) => taken.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Claims the head item node (lock safety): creates the ephemeral lock node, reads the
    /// item, and leaves it in the queue until [`QueueClaim::ack`]. Waits for an item.
    ///
    /// # Errors
    /// [`Error::BadArguments`] without a lock path; ZooKeeper errors; [`Error::Closed`].
    ///
    /// # Cancellation safety
    /// Not cancel-safe: a cancelled claim may leave its lock node until the session ends.
    pub async fn claim(&self) -> Result<QueueClaim> {
        self.require_lock()?;
        match self.wait(true).await? {
            Taken::Claim(c) => Ok(c),
            Taken::Message(_) => Err(Error::Unexpected("a take where a claim was asked".into())),
        }
    }

    /// Claims the head item node if one is due, without waiting.
    ///
    /// # Errors
    /// As [`DistributedQueue::claim`].
    pub async fn try_claim(&self) -> Result<Option<QueueClaim>> {
        self.require_lock()?;
        match self.look(true, false).await?.taken {
            Some(Taken::Claim(c)) => Ok(Some(c)),
            _ => Ok(None),
        }
    }

    fn require_lock(&self) -> Result<&str> {
        self.lock_path
            .as_deref()
            .ok_or_else(|| Error::BadArguments("claims need a lock path".into()))
    }

    async fn wait(&self, claim: bool) -> Result<Taken> {
        let mut state: watch::Receiver<SessionEvent> = self.session.watch_state();
        loop {
            let look = self.look(claim, true).await?;
            if let Some(taken) = look.taken {
                return Ok(taken);
            }
            let due = async {
                match look.next_due {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            let held = async {
                match look.held {
                    Some(held) => {
                        held.changed().await;
                    }
                    None => std::future::pending().await,
                }
            };
            match look.watcher {
                Some(watcher) => tokio::select! {
                    _ = watcher.changed() => {}
                    () = held => {}
                    () = due => {}
                    changed = state.changed() => changed.map_err(|_| Error::Closed)?,
                },
                // The queue node appeared between two requests: look again.
                None if look.next_due.is_none() => {}
                None => due.await,
            }
        }
    }

    /// Lists the queue (with a watch if `watch`) and takes (or claims) the first due item.
    async fn look(&self, claim: bool, watch: bool) -> Result<Look> {
        let (client, generation) = self.session.client_and_generation();
        let (children, watcher) = if watch {
            match client.list_and_watch_children(&self.path).await {
                Ok((c, w)) => (c, Some(w)),
                Err(zk::Error::NoNode) => {
                    let (stat, w) = client.check_and_watch_stat(&self.path).await?;
                    if stat.is_some() {
                        return Ok(Look {
                            taken: None,
                            watcher: None,
                            held: None,
                            next_due: None,
                        });
                    }
                    (Vec::new(), Some(w))
                }
                Err(err) => return Err(err.into()),
            }
        } else {
            match client.list_children(&self.path).await {
                Ok(c) => (c, None),
                Err(zk::Error::NoNode) => (Vec::new(), None),
                Err(err) => return Err(err.into()),
            }
        };
        let now = now_millis();
        let mut held = None;
        for name in item::sorted_items(self.kind, &children) {
            let delay = item::delay_ms(self.kind, name, now);
            if delay > 0 {
                // Sorted by due time: nothing after it is due either.
                return Ok(Look {
                    taken: None,
                    watcher,
                    held,
                    next_due: Some(Duration::from_millis(u64::try_from(delay).unwrap_or(0))),
                });
            }
            // Watch the first lock found held, when waiting.
            let held_watch = (watch && held.is_none()).then_some(&mut held);
            let taken = match (&self.lock_path, claim) {
                (Some(lock), true) => self
                    .claim_one(&client, generation, lock, name, held_watch)
                    .await?
                    .map(Taken::Claim),
                (Some(lock), false) => self
                    .take_locked(&client, lock, name, held_watch)
                    .await?
                    .map(Taken::Message),
                (None, _) => self.take_plain(&client, name).await?.map(Taken::Message),
            };
            if let Some(taken) = taken {
                return Ok(Look {
                    taken: Some(taken),
                    watcher: None,
                    held: None,
                    next_due: None,
                });
            }
        }
        Ok(Look {
            taken: None,
            watcher,
            held,
            next_due: None,
        })
    }

    fn decode(&self, name: &str, data: &[u8]) -> Option<Vec<Vec<u8>>> {
        match item::decode_items(data) {
            Ok(items) => Some(items),
            Err(err) => {
                tracing::warn!(queue = %self.path, name, error = %err, "skipping a queue node that is not an item");
                None
            }
        }
    }

    /// Curator's `processNormally`: read, delete with the read version.
    async fn take_plain(&self, client: &zk::Client, name: &str) -> Result<Option<Message>> {
        let path = join(&self.path, name);
        let (data, stat) = match client.get_data(&path).await {
            Ok(read) => read,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        let Some(items) = self.decode(name, &data) else {
            return Ok(None);
        };
        match client.delete(&path, Some(stat.version)).await {
            Ok(()) => Ok(Some(Message {
                name: name.to_string(),
                items,
            })),
            // Another consumer got it.
            Err(zk::Error::NoNode | zk::Error::BadVersion) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Curator's `processWithLockSafety` for a take: lock, read, delete item and lock.
    async fn take_locked(
        &self,
        client: &zk::Client,
        lock: &str,
        name: &str,
        held: Option<&mut Option<zk::OneshotWatcher>>,
    ) -> Result<Option<Message>> {
        let generation = self.session.generation();
        let Some(claim) = self.claim_one(client, generation, lock, name, held).await? else {
            return Ok(None);
        };
        claim.ack().await?;
        Ok(Some(claim.message))
    }

    async fn claim_one(
        &self,
        client: &zk::Client,
        generation: u64,
        lock: &str,
        name: &str,
        held: Option<&mut Option<zk::OneshotWatcher>>,
    ) -> Result<Option<QueueClaim>> {
        let lock_node = join(lock, name);
        if !create_lock_node(client, lock, &lock_node, held).await? {
            return Ok(None);
        }
        let item_path = join(&self.path, name);
        let release = || async {
            let _ = client.delete(&lock_node, None).await;
        };
        let data = match client.get_data(&item_path).await {
            Ok((data, _)) => data,
            Err(zk::Error::NoNode) => {
                release().await;
                return Ok(None);
            }
            Err(err) => {
                release().await;
                return Err(err.into());
            }
        };
        let Some(items) = self.decode(name, &data) else {
            release().await;
            return Ok(None);
        };
        Ok(Some(QueueClaim {
            message: Message {
                name: name.to_string(),
                items,
            },
            item_path,
            lock_node,
            client: client.clone(),
            generation,
        }))
    }

    /// Deletes the items whose node name satisfies `pred` (with lock safety when configured).
    pub(crate) async fn remove_where(&self, pred: impl Fn(&str) -> bool) -> Result<usize> {
        let client = self.session.client();
        let mut removed = 0;
        for name in self.names().await? {
            if !pred(&name) {
                continue;
            }
            let path = join(&self.path, &name);
            match &self.lock_path {
                Some(lock) => {
                    let lock_node = join(lock, &name);
                    if !create_lock_node(&client, lock, &lock_node, None).await? {
                        continue;
                    }
                    let mut multi = client.new_multi_writer();
                    multi.add_delete(&path, None)?;
                    multi.add_delete(&lock_node, None)?;
                    match multi.commit().await {
                        Ok(_) => removed += 1,
                        Err(_) => {
                            let _ = client.delete(&lock_node, None).await;
                        }
                    }
                }
                None => match client.delete(&path, None).await {
                    Ok(()) => removed += 1,
                    Err(zk::Error::NoNode) => {}
                    Err(err) => return Err(err.into()),
                },
            }
        }
        Ok(removed)
    }
}

/// Creates the ephemeral lock node of an item. `Ok(false)`: another session holds it.
///
/// With `held`, a lock node found held by another session gets an exists watch, left in `held`:
/// it fires when that lock goes.
async fn create_lock_node(
    client: &zk::Client,
    lock: &str,
    lock_node: &str,
    mut held: Option<&mut Option<zk::OneshotWatcher>>,
) -> Result<bool> {
    let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let ours = client.session_id().0;
    let mut made_parents = false;
    loop {
        match client.create(lock_node, b"", &options).await {
            Ok(_) => return Ok(true),
            Err(zk::Error::NoNode) if !made_parents => {
                crate::discovery::make_parents(client, lock).await?;
                made_parents = true;
                continue;
            }
            Err(zk::Error::NodeExists) => {}
            Err(err) if Error::from(err.clone()).is_recoverable() => {}
            Err(err) => return Err(err.into()),
        }
        // Taken, or our own create whose reply was lost: whose is it?
        let checked = match held.as_deref_mut() {
            Some(slot) => client
                .check_and_watch_stat(lock_node)
                .await
                .map(|(stat, watcher)| {
                    if stat.is_some_and(|s| s.ephemeral_owner != ours) {
                        *slot = Some(watcher);
                    }
                    stat
                }),
            None => client.check_stat(lock_node).await,
        };
        match checked {
            Ok(Some(stat)) => return Ok(stat.ephemeral_owner == ours),
            Ok(None) => continue,
            Err(err) if Error::from(err.clone()).is_recoverable() => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

/// A claimed item node (lock safety): process it, then [`QueueClaim::ack`] or
/// [`QueueClaim::release`]. Dropped without either, the item stays claimed until the
/// session ends.
#[derive(Debug)]
pub struct QueueClaim {
    message: Message,
    item_path: String,
    lock_node: String,
    client: zk::Client,
    generation: u64,
}

impl QueueClaim {
    /// The claimed item node.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The session generation holding the claim.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Consumes the item: deletes it and its lock node in one `multi`.
    ///
    /// # Errors
    /// [`Error::SessionLost`] when the claiming session ended (the lock went with it; the item
    /// is delivered again unless the multi committed before); other ZooKeeper errors.
    pub async fn ack(&self) -> Result<()> {
        claimed::ack(&self.client, &self.item_path, &self.lock_node, |_| Ok(())).await
    }

    /// Gives the item back (deletes the lock node): it is delivered again.
    ///
    /// # Errors
    /// ZooKeeper errors ([`Error::SessionLost`] if the session is gone, which released it too).
    pub async fn release(self) -> Result<()> {
        match self.client.delete(&self.lock_node, None).await {
            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
            Err(err) => Err(session_lost_if_gone(err.into())),
        }
    }

    /// The message, consuming the claim without acking (the lock node stays until the session
    /// ends or someone deletes it).
    pub fn into_message(self) -> Message {
        self.message
    }
}

macro_rules! consume_methods {
    () => {
        /// The underlying queue (names, length, the lock path).
        pub fn queue(&self) -> &DistributedQueue {
            &self.0
        }

        /// As [`DistributedQueue::take`].
        ///
        /// # Errors
        /// As [`DistributedQueue::take`].
        pub async fn take(&self) -> Result<Message> {
            self.0.take().await
        }

        /// As [`DistributedQueue::take_for`].
        ///
        /// # Errors
        /// As [`DistributedQueue::take`].
        pub async fn take_for(&self, timeout: Duration) -> Result<Option<Message>> {
            self.0.take_for(timeout).await
        }

        /// As [`DistributedQueue::poll`].
        ///
        /// # Errors
        /// As [`DistributedQueue::poll`].
        pub async fn poll(&self) -> Result<Option<Message>> {
            self.0.poll().await
        }

        /// As [`DistributedQueue::claim`].
        ///
        /// # Errors
        /// As [`DistributedQueue::claim`].
        pub async fn claim(&self) -> Result<QueueClaim> {
            self.0.claim().await
        }

        /// As [`DistributedQueue::try_claim`].
        ///
        /// # Errors
        /// As [`DistributedQueue::claim`].
        pub async fn try_claim(&self) -> Result<Option<QueueClaim>> {
            self.0.try_claim().await
        }

        /// Uses `lock_path` for lock safety (see [`DistributedQueue::with_lock_path`]).
        ///
        /// # Errors
        /// [`Error::BadArguments`] for an invalid path.
        pub fn with_lock_path(self, lock_path: &str) -> Result<Self> {
            Ok(Self(self.0.with_lock_path(lock_path)?))
        }
    };
}

/// Curator's `DistributedPriorityQueue`: lower priority values are taken first; equal
/// priorities in FIFO order.
#[derive(Debug, Clone)]
pub struct PriorityQueue(DistributedQueue);

impl PriorityQueue {
    /// The priority queue at `path`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        Ok(PriorityQueue(DistributedQueue::of_kind(
            session,
            path,
            QueueKind::Priority,
        )?))
    }

    /// Puts `item` with `priority`.
    ///
    /// # Errors
    /// As [`DistributedQueue::put`].
    pub async fn put(&self, item: &[u8], priority: i32) -> Result<String> {
        self.0
            .put_with_suffix(&item::priority_to_string(priority), &[item])
            .await
    }

    /// Puts several items as one node with `priority`.
    ///
    /// # Errors
    /// As [`DistributedQueue::put`].
    pub async fn put_multi(&self, items: &[&[u8]], priority: i32) -> Result<String> {
        self.0
            .put_with_suffix(&item::priority_to_string(priority), items)
            .await
    }

    consume_methods!();
}

/// Curator's `DistributedDelayQueue`: each item is due at a time and is not taken before it;
/// due items are taken earliest first. Due times are compared with the consumer's clock.
#[derive(Debug, Clone)]
pub struct DelayQueue(DistributedQueue);

impl DelayQueue {
    /// The delay queue at `path`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        Ok(DelayQueue(DistributedQueue::of_kind(
            session,
            path,
            QueueKind::Delay,
        )?))
    }

    /// Puts `item`, due at `due`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a time not after the epoch (Curator's "delayUntilEpoch
    /// cannot be negative"); as [`DistributedQueue::put`].
    pub async fn put(&self, item: &[u8], due: SystemTime) -> Result<String> {
        self.put_multi(&[item], due).await
    }

    /// Puts several items as one node, due at `due`.
    ///
    /// # Errors
    /// As [`DelayQueue::put`].
    pub async fn put_multi(&self, items: &[&[u8]], due: SystemTime) -> Result<String> {
        let epoch = due
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .filter(|ms| *ms > 0)
            .ok_or_else(|| Error::BadArguments("the due time must be after the epoch".into()))?;
        self.0
            .put_with_suffix(&item::epoch_to_string(epoch), items)
            .await
    }

    consume_methods!();
}

/// Curator's `DistributedIdQueue`: FIFO, and every item carries an id it can be removed by.
#[derive(Debug, Clone)]
pub struct IdQueue(DistributedQueue);

impl IdQueue {
    /// The id queue at `path`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        Ok(IdQueue(DistributedQueue::of_kind(
            session,
            path,
            QueueKind::Id,
        )?))
    }

    /// Puts `item` with `id` (not unique: several items may share an id).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an empty id; as [`DistributedQueue::put`].
    pub async fn put(&self, item: &[u8], id: &str) -> Result<String> {
        if id.is_empty() {
            return Err(Error::BadArguments("invalid id: empty".into()));
        }
        self.0
            .put_with_suffix(&item::id_to_string(id), &[item])
            .await
    }

    /// Removes every item with `id`; returns how many were removed. Ids are compared after
    /// the `/` and `|` replacement of [`item::fix_id`] (Curator compares the raw id with the
    /// stored one, so it cannot remove ids containing those characters).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn remove(&self, id: &str) -> Result<usize> {
        let fixed = item::fix_id(id);
        self.0
            .remove_where(|name| item::parse_id(name).0 == fixed)
            .await
    }

    /// Whether an item with `id` is queued.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn contains(&self, id: &str) -> Result<bool> {
        let fixed = item::fix_id(id);
        Ok(self
            .0
            .names()
            .await?
            .iter()
            .any(|name| item::parse_id(name).0 == fixed))
    }

    consume_methods!();
}
