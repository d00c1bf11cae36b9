//! [`LockingQueue`]: kazoo's `LockingQueue` (`kazoo/recipe/queue.py`), in kazoo's layout so
//! that Python and zkit producers and consumers share one queue:
//! - entries: `<path>/entries/entry-PPP-NNNNNNNNNN`, persistent sequential, the data being the
//!   value itself; `PPP` is the priority (0–999, three digits, **lower first**; kazoo's default
//!   100). Entries are taken in name order, so by priority, then FIFO.
//! - locks: `<path>/taken/<entry name>`, ephemeral, holding the locking queue object's id
//!   (a UUID in hex, as kazoo's `uuid.uuid4().hex`).
//!
//! A consumer [`LockingQueue::get`]s an entry (locks it, reads it, leaves it in place), works
//! on it, then [`LockingQueue::consume`]s it (one transaction deleting the entry and the lock,
//! after checking that the lock is still ours) or [`LockingQueue::release`]s it. A consumer
//! that dies loses its session, hence its lock, and the entry goes to someone else. As in
//! kazoo, one queue object processes one entry at a time: `get` returns the entry already held
//! until it is consumed or released.
//!
//! The choice of the next entry is the pure [`available_entries`] (kazoo's `_filter_locked`).
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use std::time::Duration;
//! use zkit::locking_queue::LockingQueue;
//! let queue = LockingQueue::new(&session, "/jobs")?;
//! queue.put(b"resize image 7", 100).await?;
//! if let Some(job) = queue.get(Some(Duration::from_secs(5))).await? {
//!     // ... work on `job` ...
//!     queue.consume().await?;
//! }
//! # Ok(()) }
//! ```

use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::protected::join;
use crate::session::Session;

/// kazoo's `LockingQueue.entry`: entry node names start with it.
pub const ENTRY_PREFIX: &str = "entry";
/// kazoo's `LockingQueue.entries` node name.
pub const ENTRIES: &str = "entries";
/// kazoo's `LockingQueue.lock` node name.
pub const TAKEN: &str = "taken";
/// kazoo's default priority.
pub const DEFAULT_PRIORITY: u16 = 100;

/// The entries that are not locked, in the order kazoo takes them (sorted by name).
pub fn available_entries<'a, S: AsRef<str>>(entries: &'a [S], taken: &[S]) -> Vec<&'a str> {
    let taken: std::collections::HashSet<&str> = taken.iter().map(AsRef::as_ref).collect();
    let mut available: Vec<&str> = entries
        .iter()
        .map(AsRef::as_ref)
        .filter(|e| !taken.contains(e))
        .collect();
    available.sort_unstable();
    available
}

/// The entry name prefix kazoo creates for `priority`: `entry-PPP-`.
///
/// # Errors
/// [`Error::BadArguments`] for a priority above 999 (kazoo's limit).
pub fn entry_prefix(priority: u16) -> Result<String> {
    if priority > 999 {
        return Err(Error::BadArguments(format!(
            "priority must be between 0 and 999, got {priority}"
        )));
    }
    Ok(format!("{ENTRY_PREFIX}-{priority:03}-"))
}

#[derive(Debug)]
struct Processing {
    name: String,
    value: Vec<u8>,
    /// The lock belongs to this ZooKeeper session.
    client: zk::Client,
}

/// kazoo's `LockingQueue`. See the module docs.
#[derive(Debug)]
pub struct LockingQueue {
    session: Session,
    entries: String,
    taken: String,
    id: String,
    processing: AsyncMutex<Option<Processing>>,
}

impl LockingQueue {
    /// The queue at `path` (its `entries` and `taken` nodes are created on first use).
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn new(session: &Session, path: &str) -> Result<Self> {
        let path = crate::config::resolve_key("/", path)?;
        Ok(LockingQueue {
            session: session.clone(),
            entries: join(&path, ENTRIES),
            taken: join(&path, TAKEN),
            id: uuid::Uuid::new_v4().simple().to_string(),
            processing: AsyncMutex::new(None),
        })
    }

    /// This queue object's id, the data of its lock nodes.
    pub fn id(&self) -> &str {
        &self.id
    }

    async fn ensure_paths(&self, client: &zk::Client) -> Result<()> {
        let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client.mkdir(&self.entries, &options).await?;
        client.mkdir(&self.taken, &options).await?;
        Ok(())
    }

    /// Puts `value` with `priority` (0–999, lower first). Returns the entry name.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a bad priority; ZooKeeper errors (after `ConnectionLoss` the
    /// entry may or may not have been put).
    pub async fn put(&self, value: &[u8], priority: u16) -> Result<String> {
        let prefix = entry_prefix(priority)?;
        let client = self.session.client();
        self.ensure_paths(&client).await?;
        let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let (_, sequence) = client
            .create(&join(&self.entries, &prefix), value, &options)
            .await?;
        Ok(format!("{prefix}{:010}", sequence.into_i64()))
    }

    /// Puts every value with `priority` in one transaction (kazoo's `put_all`): all or none.
    ///
    /// # Errors
    /// As [`LockingQueue::put`].
    pub async fn put_all(&self, values: &[&[u8]], priority: u16) -> Result<()> {
        let prefix = entry_prefix(priority)?;
        let client = self.session.client();
        self.ensure_paths(&client).await?;
        let options = zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());
        let path = join(&self.entries, &prefix);
        let mut multi = client.new_multi_writer();
        for value in values {
            multi.add_create(&path, value, &options)?;
        }
        multi.commit().await.map_err(zk::Error::from)?;
        Ok(())
    }

    /// The number of entries (locked ones included), kazoo's `len(queue)`.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn len(&self) -> Result<usize> {
        match self.session.client().list_children(&self.entries).await {
            Ok(children) => Ok(children.len()),
            Err(zk::Error::NoNode) => Ok(0),
            Err(err) => Err(err.into()),
        }
    }

    /// True when there is no entry.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }

    /// Locks and returns the next entry, waiting at most `timeout` (`None`: forever); `Ok(None)`
    /// on timeout. An entry got before and not yet consumed or released is returned again.
    ///
    /// # Errors
    /// ZooKeeper errors; [`Error::Closed`].
    pub async fn get(&self, timeout: Option<Duration>) -> Result<Option<Vec<u8>>> {
        let mut processing = self.processing.lock().await;
        if let Some(p) = processing.as_ref() {
            return Ok(Some(p.value.clone()));
        }
        let wait = self.wait_for_entry();
        let got = match timeout {
            None => Some(wait.await?),
            Some(t) => match tokio::time::timeout(t, wait).await {
                Ok(got) => Some(got?),
                Err(_) => None,
            },
        };
        let Some(p) = got else {
            return Ok(None);
        };
        let value = p.value.clone();
        *processing = Some(p);
        Ok(Some(value))
    }

    async fn wait_for_entry(&self) -> Result<Processing> {
        let mut state = self.session.watch_state();
        loop {
            let client = self.session.client();
            self.ensure_paths(&client).await?;
            let (entries, entries_watch) = client.list_and_watch_children(&self.entries).await?;
            let (taken, taken_watch) = client.list_and_watch_children(&self.taken).await?;
            for name in available_entries(&entries, &taken) {
                if let Some(p) = self.take(&client, name).await? {
                    return Ok(p);
                }
            }
            tokio::select! {
                _ = entries_watch.changed() => {}
                _ = taken_watch.changed() => {}
                changed = state.changed() => changed.map_err(|_| Error::Closed)?,
            }
        }
    }

    /// kazoo's `_take`: lock the entry, then read it.
    async fn take(&self, client: &zk::Client, name: &str) -> Result<Option<Processing>> {
        let lock = join(&self.taken, name);
        let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        match client.create(&lock, self.id.as_bytes(), &options).await {
            Ok(_) => {}
            // Already locked.
            Err(zk::Error::NodeExists) => return Ok(None),
            Err(err) => return Err(err.into()),
        }
        match client.get_data(&join(&self.entries, name)).await {
            Ok((value, _)) => Ok(Some(Processing {
                name: name.to_string(),
                value,
                client: client.clone(),
            })),
            // Consumed between our listing and our lock.
            Err(zk::Error::NoNode) => {
                let _ = client.delete(&lock, None).await;
                Ok(None)
            }
            Err(err) => {
                let _ = client.delete(&lock, None).await;
                Err(err.into())
            }
        }
    }

    /// Whether the entry being processed is still locked by this object (kazoo's `holds_lock`:
    /// a `sync`, then the lock node's data compared with our id).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn holds_lock(&self) -> Result<bool> {
        let processing = self.processing.lock().await;
        let Some(p) = processing.as_ref() else {
            return Ok(false);
        };
        self.holds(p).await
    }

    async fn holds(&self, p: &Processing) -> Result<bool> {
        let lock = join(&self.taken, &p.name);
        match p.client.sync(&lock).await {
            Ok(()) => {}
            Err(zk::Error::NoNode) => return Ok(false),
            Err(zk::Error::SessionExpired | zk::Error::ClientClosed) => return Ok(false),
            Err(err) => return Err(err.into()),
        }
        match p.client.get_data(&lock).await {
            Ok((data, _)) => Ok(data == self.id.as_bytes()),
            Err(zk::Error::NoNode | zk::Error::SessionExpired | zk::Error::ClientClosed) => {
                Ok(false)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Removes the entry being processed (entry and lock in one transaction) if the lock is
    /// still ours; `Ok(false)` when there is none or the lock was lost.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn consume(&self) -> Result<bool> {
        self.finish(true).await
    }

    /// Unlocks the entry being processed without consuming it; `Ok(false)` when there is none
    /// or the lock was lost.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn release(&self) -> Result<bool> {
        self.finish(false).await
    }

    async fn finish(&self, consume: bool) -> Result<bool> {
        let mut processing = self.processing.lock().await;
        let Some(p) = processing.as_ref() else {
            return Ok(false);
        };
        if !self.holds(p).await? {
            // The lock went with its session: someone else may have the entry now.
            *processing = None;
            return Ok(false);
        }
        let mut multi = p.client.new_multi_writer();
        if consume {
            multi.add_delete(&join(&self.entries, &p.name), None)?;
        }
        multi.add_delete(&join(&self.taken, &p.name), None)?;
        multi.commit().await.map_err(zk::Error::from)?;
        *processing = None;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sort_by_priority_then_sequence_and_locked_ones_are_skipped() {
        let entries = [
            "entry-100-0000000003",
            "entry-005-0000000004",
            "entry-100-0000000001",
            "entry-999-0000000000",
        ];
        let taken = ["entry-100-0000000001"];
        assert_eq!(
            available_entries(&entries, &taken),
            vec![
                "entry-005-0000000004",
                "entry-100-0000000003",
                "entry-999-0000000000"
            ]
        );
        assert_eq!(entry_prefix(7).unwrap(), "entry-007-");
        assert!(entry_prefix(1000).is_err());
    }
}
