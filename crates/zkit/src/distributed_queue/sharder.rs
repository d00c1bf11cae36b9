//! [`QueueSharder`]: one logical FIFO queue spread over shard queues (Curator's
//! `QueueSharder`). ZooKeeper keeps a node's children in one list that every `getChildren`
//! returns whole; a queue node with more than ~10,000 items makes each listing large and slow.
//! The sharder keeps shard queues `<queue path>/queue-<uuid>` (Curator's `QUEUE_PREFIX` names)
//! and adds one when a shard reaches the threshold.
//!
//! As in Curator:
//! - Every [`QueueSharderPolicies::threshold_check`] each sharder counts the items of every
//!   shard ([`plan_shards`], pure): a shard at or above the threshold stops being *preferred*, a
//!   shard at or below half of it becomes preferred again (the gap keeps shards from flapping).
//! - Only the leader among the sharders (a [`crate::election::LeaderLatch`] on the leader path)
//!   adds a shard, when some shard is over the threshold, up to
//!   [`QueueSharderPolicies::max_queues`].
//! - [`QueueSharder::queue`] hands out a random preferred shard for producers (any shard when
//!   none is preferred). Consumers take from every shard ([`QueueSharder::poll`],
//!   [`QueueSharder::take_for`]), so the order is FIFO within a shard only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::{DistributedQueue, Message};
use crate::election::LeaderLatch;
use crate::error::{Error, Result};
use crate::protected::join;
use crate::session::Session;

/// Curator's `QueueSharder.QUEUE_PREFIX`: shard node names start with it.
pub const SHARD_PREFIX: &str = "queue-";

/// Curator's `QueueSharderPolicies`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSharderPolicies {
    /// Items in a shard at which a new shard is added (default 10,000).
    pub new_queue_threshold: usize,
    /// How often shards are counted (default 30 s).
    pub threshold_check: Duration,
    /// At most this many shards (default 10).
    pub max_queues: usize,
}

impl Default for QueueSharderPolicies {
    fn default() -> Self {
        QueueSharderPolicies {
            new_queue_threshold: 10_000,
            threshold_check: Duration::from_secs(30),
            max_queues: 10,
        }
    }
}

/// The result of one count ([`plan_shards`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPlan {
    /// The shards producers should use.
    pub preferred: BTreeSet<String>,
    /// Some shard is over the threshold and there is room for another: the leader adds one.
    pub add_shard: bool,
}

/// Curator's `checkThreshold`, pure: from each shard's item count and the preferred set so
/// far, the new preferred set and whether a shard should be added.
pub fn plan_shards(
    counts: &BTreeMap<String, usize>,
    preferred: &BTreeSet<String>,
    policies: &QueueSharderPolicies,
) -> ShardPlan {
    let mut next: BTreeSet<String> = preferred
        .iter()
        .filter(|p| counts.contains_key(*p))
        .cloned()
        .collect();
    let mut over = false;
    for (shard, &count) in counts {
        if count >= policies.new_queue_threshold {
            over = true;
            next.remove(shard);
        } else if count <= policies.new_queue_threshold / 2 {
            next.insert(shard.clone());
        }
    }
    ShardPlan {
        preferred: next,
        add_shard: over && counts.len() < policies.max_queues,
    }
}

#[derive(Debug, Default)]
struct Shards {
    all: BTreeSet<String>,
    preferred: BTreeSet<String>,
}

/// A sharded queue. See the module docs.
pub struct QueueSharder {
    session: Session,
    path: String,
    policies: QueueSharderPolicies,
    shards: Arc<Mutex<Shards>>,
    latch: Arc<LeaderLatch>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for QueueSharder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSharder")
            .field("path", &self.path)
            .field("shards", &self.lock().all.len())
            .finish()
    }
}

impl Drop for QueueSharder {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl QueueSharder {
    /// Starts a sharder for the queue `queue_path` whose leader is elected at `leader_path`:
    /// reads the existing shards (adding the first one if there is none) and starts the
    /// periodic check.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for invalid paths or a zero threshold; ZooKeeper errors.
    pub async fn start(
        session: &Session,
        queue_path: &str,
        leader_path: &str,
        policies: QueueSharderPolicies,
    ) -> Result<QueueSharder> {
        if policies.new_queue_threshold == 0 || policies.max_queues == 0 {
            return Err(Error::BadArguments(
                "threshold and max queues must be positive".into(),
            ));
        }
        let path = crate::config::resolve_key("/", queue_path)?;
        let latch = LeaderLatch::start(session, leader_path, &uuid::Uuid::new_v4().to_string())?;
        let sharder = QueueSharder {
            session: session.clone(),
            path,
            policies,
            shards: Arc::new(Mutex::new(Shards::default())),
            latch: Arc::new(latch),
            cancel: CancellationToken::new(),
        };
        let client = session.client();
        crate::discovery::make_parents(&client, &sharder.path).await?;
        let existing = sharder.list_shards().await?;
        if existing.is_empty() {
            sharder.add_shard().await?;
        } else {
            let mut shards = sharder.lock();
            shards.preferred = existing.clone();
            shards.all = existing;
        }
        tokio::spawn(check_loop(
            sharder.session.clone(),
            sharder.path.clone(),
            sharder.policies,
            Arc::clone(&sharder.shards),
            Arc::clone(&sharder.latch),
            sharder.cancel.clone(),
        ));
        Ok(sharder)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shards> {
        // Set operations only: a poisoned lock is still consistent.
        self.shards.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn list_shards(&self) -> Result<BTreeSet<String>> {
        list_shards(&self.session, &self.path).await
    }

    async fn add_shard(&self) -> Result<String> {
        add_shard(&self.session, &self.path, &self.shards).await
    }

    /// Runs one count now (the background task does it every `threshold_check`).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn check_now(&self) -> Result<()> {
        check_once(
            &self.session,
            &self.path,
            &self.policies,
            &self.shards,
            &self.latch,
        )
        .await
    }

    /// The shard paths known now.
    pub fn shard_paths(&self) -> Vec<String> {
        self.lock()
            .all
            .iter()
            .map(|s| join(&self.path, s))
            .collect()
    }

    /// How many shards there are.
    pub fn shard_count(&self) -> usize {
        self.lock().all.len()
    }

    /// Whether this sharder is the leader (the one that adds shards).
    pub fn is_leader(&self) -> bool {
        self.latch.has_leadership()
    }

    /// A shard for producers: a random preferred one, or any one when none is preferred.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid shard name (cannot happen for shards made here).
    pub fn queue(&self) -> Result<DistributedQueue> {
        let shards = self.lock();
        let pool = if shards.preferred.is_empty() {
            &shards.all
        } else {
            &shards.preferred
        };
        let pick = rand::random::<usize>() % pool.len().max(1);
        let name = pool
            .iter()
            .nth(pick)
            .cloned()
            .unwrap_or_else(|| format!("{SHARD_PREFIX}0"));
        DistributedQueue::new(&self.session, &join(&self.path, &name))
    }

    /// Puts `item` into a shard from [`QueueSharder::queue`].
    ///
    /// # Errors
    /// As [`DistributedQueue::put`].
    pub async fn put(&self, item: &[u8]) -> Result<String> {
        self.queue()?.put(item).await
    }

    /// Takes the head item of some shard, without waiting.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn poll(&self) -> Result<Option<Message>> {
        let shards: Vec<String> = self.lock().all.iter().cloned().collect();
        if shards.is_empty() {
            return Ok(None);
        }
        // Start at a random shard so that consumers spread over them.
        let start = rand::random::<usize>() % shards.len();
        for i in 0..shards.len() {
            let name = &shards[(start + i) % shards.len()];
            let queue = DistributedQueue::new(&self.session, &join(&self.path, name))?;
            if let Some(message) = queue.poll().await? {
                return Ok(Some(message));
            }
        }
        Ok(None)
    }

    /// Takes an item from some shard, waiting at most `timeout`.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn take_for(&self, timeout: Duration) -> Result<Option<Message>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(message) = self.poll().await? {
                return Ok(Some(message));
            }
            // Wait for any shard, or the set of shards, to change.
            let client = self.session.client();
            let mut watchers = Vec::new();
            // Shards and the queue node are containers: the server reaps them once empty.
            let shards_watch = match client.list_and_watch_children(&self.path).await {
                Ok((_, watch)) => watch,
                Err(zk::Error::NoNode) => match client.check_and_watch_stat(&self.path).await? {
                    (None, watch) => watch,
                    // Created in between: look again.
                    (Some(_), _) => continue,
                },
                Err(err) => return Err(err.into()),
            };
            watchers.push(Box::pin(shards_watch.changed()));
            for shard in self.shard_paths() {
                match client.list_and_watch_children(&shard).await {
                    Ok((children, watch)) => {
                        if !children.is_empty() {
                            // Something arrived since the poll.
                            watchers.clear();
                            break;
                        }
                        watchers.push(Box::pin(watch.changed()));
                    }
                    Err(zk::Error::NoNode) => {}
                    Err(err) => return Err(err.into()),
                }
            }
            if watchers.is_empty() {
                continue;
            }
            let any = futures::future::select_all(watchers);
            if tokio::time::timeout_at(deadline, any).await.is_err() {
                return Ok(None);
            }
            self.refresh().await?;
        }
    }

    async fn refresh(&self) -> Result<()> {
        let listed = self.list_shards().await?;
        let mut shards = self.lock();
        for new in listed.difference(&shards.all).cloned().collect::<Vec<_>>() {
            shards.preferred.insert(new);
        }
        shards.preferred.retain(|s| listed.contains(s));
        shards.all = listed;
        Ok(())
    }

    /// Stops the periodic check and leaves the leader election.
    pub async fn close(self) {
        self.cancel.cancel();
    }
}

async fn list_shards(session: &Session, path: &str) -> Result<BTreeSet<String>> {
    match session.client().list_children(path).await {
        Ok(children) => Ok(children
            .into_iter()
            .filter(|c| c.starts_with(SHARD_PREFIX))
            .collect()),
        Err(zk::Error::NoNode) => Ok(BTreeSet::new()),
        Err(err) => Err(err.into()),
    }
}

async fn add_shard(session: &Session, path: &str, shards: &Mutex<Shards>) -> Result<String> {
    let name = format!("{SHARD_PREFIX}{}", uuid::Uuid::new_v4());
    let client = session.client();
    crate::discovery::make_parents(&client, &join(path, &name)).await?;
    tracing::info!(queue = path, shard = %name, "adding a queue shard");
    let mut shards = shards.lock().unwrap_or_else(|e| e.into_inner());
    shards.all.insert(name.clone());
    shards.preferred.insert(name.clone());
    Ok(name)
}

async fn check_once(
    session: &Session,
    path: &str,
    policies: &QueueSharderPolicies,
    shards: &Mutex<Shards>,
    latch: &LeaderLatch,
) -> Result<()> {
    let listed = list_shards(session, path).await?;
    let client = session.client();
    let mut counts = BTreeMap::new();
    for shard in &listed {
        if let Some(stat) = client.check_stat(&join(path, shard)).await? {
            counts.insert(
                shard.clone(),
                usize::try_from(stat.num_children).unwrap_or(0),
            );
        }
    }
    let preferred = shards
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .preferred
        .clone();
    let plan = plan_shards(&counts, &preferred, policies);
    {
        let mut shards = shards.lock().unwrap_or_else(|e| e.into_inner());
        shards.all = counts.keys().cloned().collect();
        shards.preferred = plan.preferred;
    }
    if plan.add_shard && latch.has_leadership() {
        add_shard(session, path, shards).await?;
    } else if counts.len() >= policies.max_queues
        && counts.values().any(|c| *c >= policies.new_queue_threshold)
    {
        tracing::warn!(
            queue = path,
            max = policies.max_queues,
            "max number of queue shards reached"
        );
    }
    Ok(())
}

async fn check_loop(
    session: Session,
    path: String,
    policies: QueueSharderPolicies,
    shards: Arc<Mutex<Shards>>,
    latch: Arc<LeaderLatch>,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(policies.threshold_check) => {}
        }
        if let Err(err) = check_once(&session, &path, &policies, &shards, &latch).await {
            if err == Error::Closed {
                return;
            }
            tracing::debug!(queue = %path, error = %err, "queue shard check failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(v: &[(&str, usize)]) -> BTreeMap<String, usize> {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn full_shards_stop_being_preferred_and_ask_for_a_new_one() {
        let policies = QueueSharderPolicies {
            new_queue_threshold: 100,
            max_queues: 3,
            ..QueueSharderPolicies::default()
        };
        let plan = plan_shards(
            &counts(&[("a", 100), ("b", 10)]),
            &set(&["a", "b"]),
            &policies,
        );
        assert_eq!(plan.preferred, set(&["b"]));
        assert!(plan.add_shard);
        // Between half and the threshold: unchanged (hysteresis).
        let plan = plan_shards(&counts(&[("a", 70), ("b", 10)]), &set(&["b"]), &policies);
        assert_eq!(plan.preferred, set(&["b"]));
        assert!(!plan.add_shard);
        // Drained to half: preferred again.
        let plan = plan_shards(&counts(&[("a", 50), ("b", 10)]), &set(&["b"]), &policies);
        assert_eq!(plan.preferred, set(&["a", "b"]));
        // At the maximum: no new shard even when over.
        let plan = plan_shards(
            &counts(&[("a", 100), ("b", 100), ("c", 100)]),
            &set(&[]),
            &policies,
        );
        assert!(!plan.add_shard);
        assert!(plan.preferred.is_empty());
        // Shards that vanished are forgotten.
        let plan = plan_shards(&counts(&[("b", 60)]), &set(&["a", "b"]), &policies);
        assert_eq!(plan.preferred, set(&["b"]));
    }
}
