//! [`Queue`]: ZooKeeper's queue recipe with Curator `SimpleDistributedQueue`'s layout: items are
//! persistent sequential children `qn-NNNNNNNNNN` of the queue node, taken in sequence order.
//! Java Curator processes and zkit processes can share a queue.
//!
//! Two ways to consume:
//! - [`Queue::take`] / [`Queue::poll`] (Curator `SimpleDistributedQueue`): read the head, delete
//!   it; whoever deletes it owns it. **At most once**: an item is returned by exactly one
//!   successful call, but a consumer killed after the delete and before using the item loses
//!   it, as in Curator.
//! - [`Queue::claim`] / [`Queue::try_claim`] then [`Claim::ack`] (Curator `DistributedQueue` with
//!   a lock path): the consumer first creates an *ephemeral* claim node `claim-qn-NNNNNNNNNN`
//!   next to the item, processes the item, and acknowledges it with one `multi` that deletes the
//!   item and the claim, together with the caller's own operations ([`Claim::ack_with`], e.g.
//!   recording the result in ZooKeeper), so the effect and the acknowledgement are atomic. A
//!   consumer killed before its ack loses its session, hence its claim, and the item is
//!   delivered again: every item's ack commits exactly once. While claimed, an item is skipped
//!   by other claimers and by `take`/`poll` (but not by Java Curator's
//!   `SimpleDistributedQueue`, which ignores claim nodes with a "foreign node" warning: do not
//!   mix the two on one queue if claims matter).
//!
//! [`Queue::offer`] is not retried after a connection loss (a blind retry could enqueue twice);
//! the error says the outcome is unknown.
//!
//! The ordering is the pure [`items_in_order`], the choice of the next item the pure
//! [`unclaimed_items`].

use tokio::sync::watch;
use zkit_client as zk;

use crate::claimed::{self, session_lost_if_gone};
use crate::error::{Error, Result};
use crate::protected::{join, sequence_of};
use crate::session::{Session, SessionEvent};

/// Item name prefix (Curator's `SimpleDistributedQueue.PREFIX`).
pub const ITEM_PREFIX: &str = "qn-";

/// Claim node name prefix: the claim of item `qn-N` is the ephemeral sibling `claim-qn-N`.
/// Siblings (not a separate lock path as in Curator) so that one children watch on the queue
/// node wakes a waiting consumer both for new items and for claims that vanish.
pub const CLAIM_PREFIX: &str = "claim-";

/// The items among `children` (names starting with `qn-` and a sequence suffix), head first.
pub fn items_in_order<S: AsRef<str>>(children: &[S]) -> Vec<&str> {
    let mut items: Vec<(i64, &str)> = children
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| c.starts_with(ITEM_PREFIX))
        .filter_map(|c| sequence_of(c).map(|s| (s, c)))
        .collect();
    items.sort_unstable();
    items.into_iter().map(|(_, c)| c).collect()
}

/// The items among `children` that have no claim node among `children`, head first.
pub fn unclaimed_items<S: AsRef<str>>(children: &[S]) -> Vec<&str> {
    let claimed: std::collections::HashSet<&str> = children
        .iter()
        .filter_map(|c| c.as_ref().strip_prefix(CLAIM_PREFIX))
        .collect();
    items_in_order(children)
        .into_iter()
        .filter(|item| !claimed.contains(item))
        .collect()
}

/// A taken item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its sequence number (unique per queue).
    pub sequence: i64,
    /// Its data.
    pub data: Vec<u8>,
}

/// A distributed FIFO queue. See the module docs.
#[derive(Debug, Clone)]
pub struct Queue {
    session: Session,
    path: String,
}

impl Queue {
    /// The queue at `path` (created on first offer).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        Ok(Queue {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
        })
    }

    /// Appends an item; returns its sequence number.
    ///
    /// # Errors
    /// ZooKeeper errors; after `ConnectionLoss` the item may or may not have been enqueued.
    pub async fn offer(&self, data: &[u8]) -> Result<i64> {
        let client = self.session.client();
        let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let prefix = join(&self.path, ITEM_PREFIX);
        let created = match client.create(&prefix, data, &options).await {
            Err(zk::Error::NoNode) => {
                client
                    .mkdir(
                        &self.path,
                        &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
                    )
                    .await?;
                client.create(&prefix, data, &options).await
            }
            other => other,
        };
        Ok(created?.1.into_i64())
    }

    /// Takes the head item if there is one, without waiting.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn poll(&self) -> Result<Option<Item>> {
        Ok(self.try_take(false).await?.0)
    }

    /// Takes the head item, waiting for one (skipping claimed items).
    ///
    /// At most once: the item is deleted before it is returned, so a consumer that dies before
    /// using it loses it. Use [`Queue::claim`] when items must survive a consumer crash.
    ///
    /// # Errors
    /// ZooKeeper errors, [`Error::Closed`].
    ///
    /// # Cancellation safety
    /// An item is only taken by the delete; a cancelled `take` either returned nothing and
    /// took nothing, or was cancelled while its delete was in flight (the item may be gone).
    pub async fn take(&self) -> Result<Item> {
        self.until_some(|| self.try_take(true)).await
    }

    /// Runs `attempt` (which sets a watch) until it finds something, waiting after each
    /// empty attempt for its watch to fire or the session's state to change.
    async fn until_some<T, F>(&self, mut attempt: impl FnMut() -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<(Option<T>, Option<zk::OneshotWatcher>)>>,
    {
        let mut state: watch::Receiver<SessionEvent> = self.session.watch_state();
        loop {
            let (found, watcher) = attempt().await?;
            if let Some(found) = found {
                return Ok(found);
            }
            if let Some(watcher) = watcher {
                tokio::select! {
                    _ = watcher.changed() => {}
                    changed = state.changed() => changed.map_err(|_| Error::Closed)?,
                }
            }
        }
    }

    /// The queue node's children, with a children watch if `watch` (an exists watch while the
    /// queue node does not exist). `None`: the node appeared in between, list again.
    async fn list(
        &self,
        client: &zk::Client,
        watch: bool,
    ) -> Result<Option<(Vec<String>, Option<zk::OneshotWatcher>)>> {
        if !watch {
            return match client.list_children(&self.path).await {
                Ok(c) => Ok(Some((c, None))),
                Err(zk::Error::NoNode) => Ok(Some((Vec::new(), None))),
                Err(err) => Err(err.into()),
            };
        }
        match client.list_and_watch_children(&self.path).await {
            Ok((c, w)) => Ok(Some((c, Some(w)))),
            Err(zk::Error::NoNode) => {
                let (stat, w) = client.check_and_watch_stat(&self.path).await?;
                if stat.is_some() {
                    return Ok(None);
                }
                Ok(Some((Vec::new(), Some(w))))
            }
            Err(err) => Err(err.into()),
        }
    }

    async fn try_take(&self, watch: bool) -> Result<(Option<Item>, Option<zk::OneshotWatcher>)> {
        let client = self.session.client();
        let Some((children, watcher)) = self.list(&client, watch).await? else {
            return Ok((None, None));
        };
        for name in unclaimed_items(&children) {
            let path = join(&self.path, name);
            let data = match client.get_data(&path).await {
                Ok((data, _)) => data,
                Err(zk::Error::NoNode) => continue,
                Err(err) => return Err(err.into()),
            };
            match client.delete(&path, None).await {
                Ok(()) => {
                    let sequence = sequence_of(name).unwrap_or(-1);
                    return Ok((Some(Item { sequence, data }), None));
                }
                // Another consumer took it.
                Err(zk::Error::NoNode) => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Ok((None, watcher))
    }

    /// Claims the head unclaimed item if there is one, without waiting. See [`Queue::claim`].
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn try_claim(&self) -> Result<Option<Claim>> {
        Ok(self.try_claim_inner(false).await?.0)
    }

    /// Claims the head unclaimed item, waiting for one: creates the ephemeral claim node, then
    /// reads the item. The item stays in the queue until [`Claim::ack`] (or is delivered again
    /// once the claim goes: [`Claim::release`], or the end of this ZooKeeper session).
    ///
    /// A claim belongs to the ZooKeeper session that created it; after the session is replaced
    /// (`Lost`), acking it fails with [`Error::SessionLost`] and the item is delivered again.
    ///
    /// # Errors
    /// ZooKeeper errors, [`Error::Closed`].
    ///
    /// # Cancellation safety
    /// Not cancel-safe: a `claim` cancelled after its claim node was created leaves that node
    /// until the session ends, and the item is not delivered to anyone before that.
    pub async fn claim(&self) -> Result<Claim> {
        self.until_some(|| self.try_claim_inner(true)).await
    }

    async fn try_claim_inner(
        &self,
        watch: bool,
    ) -> Result<(Option<Claim>, Option<zk::OneshotWatcher>)> {
        let (client, generation) = self.session.client_and_generation();
        let Some((children, watcher)) = self.list(&client, watch).await? else {
            return Ok((None, None));
        };
        for name in unclaimed_items(&children) {
            let item_path = join(&self.path, name);
            let claim_path = join(&self.path, &format!("{CLAIM_PREFIX}{name}"));
            if !create_claim(&client, &claim_path).await? {
                // Someone else claimed it since we listed.
                continue;
            }
            // Read the item only now that it is ours: it cannot be acked by anyone else any more.
            match client.get_data(&item_path).await {
                Ok((data, _)) => {
                    let sequence = sequence_of(name).unwrap_or(-1);
                    return Ok((
                        Some(Claim {
                            item: Item { sequence, data },
                            item_path,
                            claim_path,
                            client,
                            generation,
                        }),
                        None,
                    ));
                }
                // Acked by the previous holder between our listing and our claim.
                Err(zk::Error::NoNode) => {
                    delete_if_exists(&client, &claim_path).await?;
                }
                Err(err) => {
                    // Do not keep the item hidden behind a claim nobody will ack.
                    let _ = delete_if_exists(&client, &claim_path).await;
                    return Err(err.into());
                }
            }
        }
        Ok((None, watcher))
    }
}

/// Creates the claim node. `Ok(true)`: it is ours; `Ok(false)`: another session holds it.
///
/// A create whose reply was lost (`ConnectionLoss`) is resolved by looking at the node's
/// `ephemeralOwner`: the same session is ours (the create went through before the loss).
async fn create_claim(client: &zk::Client, claim_path: &str) -> Result<bool> {
    let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
    let ours = client.session_id().0;
    loop {
        match client.create(claim_path, b"", &options).await {
            Ok(_) => return Ok(true),
            Err(zk::Error::NodeExists) => {}
            Err(err) if Error::from(err.clone()).is_recoverable() => {}
            Err(err) => return Err(err.into()),
        }
        // Outcome unknown or node present: whose is it? (The client waits for its reconnect.)
        match client.check_stat(claim_path).await {
            Ok(Some(stat)) => return Ok(stat.ephemeral_owner == ours),
            Ok(None) => continue,
            Err(err) if Error::from(err.clone()).is_recoverable() => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

async fn delete_if_exists(client: &zk::Client, path: &str) -> Result<()> {
    match client.delete(path, None).await {
        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// A claimed queue item: process it, then [`Claim::ack`] (or [`Claim::ack_with`] to commit
/// your own operations atomically with the acknowledgement), or [`Claim::release`] it.
///
/// Dropping a claim without either keeps the item claimed until the ZooKeeper session ends.
#[derive(Debug)]
pub struct Claim {
    item: Item,
    item_path: String,
    claim_path: String,
    /// The claiming session's client: the claim is an ephemeral node of that session only.
    client: zk::Client,
    generation: u64,
}

impl Claim {
    /// The claimed item.
    pub fn item(&self) -> &Item {
        &self.item
    }

    /// The item node's path.
    pub fn item_path(&self) -> &str {
        &self.item_path
    }

    /// The generation of the [`Session`] that holds the claim.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Acknowledges the item: deletes it and the claim in one `multi`.
    ///
    /// # Errors
    /// As [`Claim::ack_with`].
    pub async fn ack(&self) -> Result<()> {
        self.ack_with(|_| Ok(())).await
    }

    /// Acknowledges the item in one `multi` that deletes the item and the claim and carries the
    /// operations `ops` adds (e.g. `add_create("/results/…")`): all of them commit, or none.
    /// `ops` may be called more than once (the multi is rebuilt after a connection loss).
    ///
    /// After a connection loss the outcome is resolved on the same ZooKeeper session: while we
    /// hold the claim only we can delete the item, so "item gone" means our multi committed and
    /// "item present" means it did not and it is sent again.
    ///
    /// # Errors
    /// - an error of one of the operations (e.g. [`Error::NodeExists`] from a caller's create,
    ///   [`Error::BadVersion`] from a caller's check): nothing committed, the claim is still
    ///   held (ack again, or [`Claim::release`] it);
    /// - [`Error::SessionLost`]: the claiming session expired or was closed. The claim is gone;
    ///   the multi either committed entirely before that or not at all (then the item is
    ///   delivered again): the caller's operations still took effect at most once per item;
    /// - other ZooKeeper errors.
    pub async fn ack_with<F>(&self, ops: F) -> Result<()>
    where
        F: Fn(&mut zk::MultiWriter<'_>) -> std::result::Result<(), zk::Error>,
    {
        claimed::ack(&self.client, &self.item_path, &self.claim_path, ops).await
    }

    /// Gives the item back (deletes the claim): it is delivered again, to anyone.
    ///
    /// # Errors
    /// ZooKeeper errors ([`Error::SessionLost`] if the session is gone, which released it too).
    pub async fn release(self) -> Result<()> {
        delete_if_exists(&self.client, &self.claim_path)
            .await
            .map_err(session_lost_if_gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_in_sequence_order_and_others_are_ignored() {
        let children = [
            "qn-0000000010",
            "lock",
            "qn-0000000002",
            "qn-x",
            "_c_u-qn-0000000001",
        ];
        assert_eq!(
            items_in_order(&children),
            vec!["qn-0000000002", "qn-0000000010"]
        );
    }

    #[test]
    fn claimed_items_are_skipped() {
        let children = [
            "qn-0000000003",
            "claim-qn-0000000001",
            "qn-0000000001",
            "qn-0000000002",
            "claim-qn-0000000007",
        ];
        assert_eq!(
            unclaimed_items(&children),
            vec!["qn-0000000002", "qn-0000000003"]
        );
        // A claim node is never an item itself.
        assert_eq!(items_in_order(&["claim-qn-0000000001"]), Vec::<&str>::new());
    }
}
