//! [`Queue`]: ZooKeeper's queue recipe with Curator `SimpleDistributedQueue`'s layout: items are
//! persistent sequential children `qn-NNNNNNNNNN` of the queue node, taken in sequence order by
//! reading and then deleting the head; whoever deletes it owns it. Java Curator processes and
//! zkit processes can share a queue.
//!
//! Delivery: an item is returned by exactly one successful `take`/`poll` (the delete decides).
//! Not exactly-once end to end: a consumer killed after the delete but before using the item
//! loses it, as in Curator. [`Queue::offer`] is not retried after a connection loss (a blind
//! retry could enqueue twice); the error says the outcome is unknown.
//!
//! The ordering is the pure [`items_in_order`].

use tokio::sync::watch;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::protected::{join, sequence_of};
use crate::session::{Session, SessionEvent};

/// Item name prefix (Curator's `SimpleDistributedQueue.PREFIX`).
pub const ITEM_PREFIX: &str = "qn-";

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

    /// Takes the head item, waiting for one.
    ///
    /// # Errors
    /// ZooKeeper errors, [`Error::Closed`].
    ///
    /// # Cancellation safety
    /// An item is only taken by the delete; a cancelled `take` either returned nothing and
    /// took nothing, or was cancelled while its delete was in flight (the item may be gone).
    pub async fn take(&self) -> Result<Item> {
        let mut state: watch::Receiver<SessionEvent> = self.session.watch_state();
        loop {
            let (item, watcher) = self.try_take(true).await?;
            if let Some(item) = item {
                return Ok(item);
            }
            if let Some(watcher) = watcher {
                tokio::select! {
                    _ = watcher.changed() => {}
                    changed = state.changed() => changed.map_err(|_| Error::Closed)?,
                }
            }
        }
    }

    async fn try_take(&self, watch: bool) -> Result<(Option<Item>, Option<zk::OneshotWatcher>)> {
        let client = self.session.client();
        let (children, watcher) = if watch {
            match client.list_and_watch_children(&self.path).await {
                Ok((c, w)) => (c, Some(w)),
                Err(zk::Error::NoNode) => {
                    let (stat, w) = client.check_and_watch_stat(&self.path).await?;
                    if stat.is_some() {
                        return Ok((None, None));
                    }
                    (Vec::new(), Some(w))
                }
                Err(err) => return Err(err.into()),
            }
        } else {
            match client.list_children(&self.path).await {
                Ok(c) => (c, None),
                Err(zk::Error::NoNode) => return Ok((None, None)),
                Err(err) => return Err(err.into()),
            }
        };
        for name in items_in_order(&children) {
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
}
