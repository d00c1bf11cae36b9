//! [`LeaseLock`]: a lock whose nodes are PERSISTENT_SEQUENTIAL_WITH_TTL, so
//! it survives without any session and a crashed holder's node is reaped by the server's TTL
//! reaper. Bounded on both sides: `max_wait` to get it, `max_locked_time` to hold it.

use std::time::Duration;

use zkit_client as zk;

use super::decide::{Rule, MUTEX_NAME};
use super::internals::{acquire, Contend, LockGuard, LockOptions};
use crate::error::{Error, Result};
use crate::session::Session;

/// A TTL-node lock. The node's TTL is `max_locked_time`: a holder that crashes (or is
/// partitioned away) loses the lock once the server reaps the node, `max_locked_time` after its
/// last change plus up to one reaper interval (Apache ZooKeeper: `znode.container.checkIntervalMs`,
/// default 60 s). The holder's lost-signal fires when `max_locked_time` has passed since the
/// acquisition *started* (so before the server can reap it, clocks permitting); session loss does
/// not fire it, since the node does not depend on the session.
///
/// Needs TTL support: Apache ZooKeeper with `-Dzookeeper.extendedTypesEnabled=true`; otherwise
/// acquisition fails with [`Error::Unimplemented`] saying so.
#[derive(Debug, Clone)]
pub struct LeaseLock {
    session: Session,
    path: String,
    max_wait: Duration,
    max_locked_time: Duration,
    options: LockOptions,
}

impl LeaseLock {
    /// A lease lock on the directory `path`.
    pub fn new(
        session: &Session,
        path: &str,
        max_wait: Duration,
        max_locked_time: Duration,
    ) -> LeaseLock {
        // The node outlives disconnects and sessions; only the lease end and deletion matter.
        let options = LockOptions::default();
        LeaseLock {
            session: session.clone(),
            path: path.trim_end_matches('/').to_string(),
            max_wait,
            max_locked_time,
            options,
        }
    }

    /// Waits at most `max_wait` for the lock.
    ///
    /// # Errors
    /// [`Error::Timeout`] after `max_wait`; [`Error::Unimplemented`] when the server has no TTL
    /// nodes; [`Error::BadArguments`] for a zero or too large `max_locked_time`; otherwise as
    /// [`super::Mutex::lock`].
    ///
    /// # Cancellation safety
    /// Safe: a dropped acquisition deletes its node in the background (and the TTL would reap
    /// it anyway).
    pub async fn acquire(&self) -> Result<LockGuard> {
        if self.max_locked_time.is_zero() {
            return Err(Error::BadArguments("max_locked_time must be > 0".into()));
        }
        let contend = Contend {
            session: &self.session,
            parent: &self.path,
            name: MUTEX_NAME,
            rule: Rule::Exclusive { max_leases: 1 },
            exempt: None,
            mode: zk::CreateMode::PersistentSequential,
            ttl: Some(self.max_locked_time),
            options: &self.options,
            max_locked_time: Some(self.max_locked_time),
            release_slot: None,
        };
        acquire(contend, Some(self.max_wait)).await
    }
}
