//! [`Mutex`] (Curator's `InterProcessMutex`) and [`RevocableMutex`]. Thin: the protocol is in
//! `internals`, the ordering in `decide`.

use std::time::Duration;

use zkit_client as zk;

use super::decide::{sorted_contenders, Rule, MUTEX_NAME};
use super::internals::{acquire, Contend, LockGuard, LockOptions, ReleaseSlot, REVOKE_MESSAGE};
use crate::error::Result;
use crate::protected::join;
use crate::session::Session;

/// A distributed mutex on the directory `path`: each contender creates
/// `path/_c_<uuid>-lock-NNNNNNNNNN` (ephemeral sequential) and watches only its predecessor.
/// Compatible with Curator's `InterProcessMutex` on the same path. Not re-entrant (see
/// [`super`]).
#[derive(Debug, Clone)]
pub struct Mutex {
    session: Session,
    path: String,
    options: LockOptions,
    /// A background release waiting to share a transaction with the next `lock()`.
    release_slot: ReleaseSlot,
}

impl Mutex {
    /// A mutex on the directory `path` (created on first use), with default [`LockOptions`].
    pub fn new(session: &Session, path: &str) -> Mutex {
        Mutex::with_options(session, path, LockOptions::default())
    }

    /// A mutex with explicit options.
    pub fn with_options(session: &Session, path: &str, options: LockOptions) -> Mutex {
        Mutex {
            session: session.clone(),
            path: path.trim_end_matches('/').to_string(),
            options,
            release_slot: ReleaseSlot::default(),
        }
    }

    /// The lock directory.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn contend(&self) -> Contend<'_> {
        Contend {
            session: &self.session,
            parent: &self.path,
            name: MUTEX_NAME,
            rule: Rule::Exclusive { max_leases: 1 },
            exempt: None,
            mode: zk::CreateMode::EphemeralSequential,
            ttl: None,
            options: &self.options,
            max_locked_time: None,
            release_slot: Some(&self.release_slot),
        }
    }

    /// Waits until the lock is held. The uncontended case costs one round trip (the create and
    /// the listing are pipelined on one connection). A disconnect while waiting is survived:
    /// the waiter keeps its place in the line while its session lives, and enters the line
    /// again on the next session when it is lost (see [`LockOptions::fail_waiters_on_lost`]).
    ///
    /// # Errors
    /// [`crate::Error::SessionLost`] with [`LockOptions::fail_waiters_on_lost`] when the session
    /// this acquisition started on is lost or replaced before the lock is held (like Curator's
    /// `acquire` throwing). Unrecoverable errors
    /// ([`crate::Error::Closed`], [`crate::Error::AuthFailed`]), state errors such as
    /// [`crate::Error::NoAuth`], and recoverable ones once the retry policy gives up while
    /// connected.
    ///
    /// # Cancellation safety
    /// Safe: a dropped `lock()` future leaves no node behind (it is deleted in the background).
    pub async fn lock(&self) -> Result<LockGuard> {
        acquire(self.contend(), None).await
    }

    /// Like [`Mutex::lock`], but gives up after `timeout` with [`crate::Error::Timeout`]; the
    /// node is then deleted before returning when possible, else in the background.
    ///
    /// # Errors
    /// As [`Mutex::lock`], plus [`crate::Error::Timeout`].
    ///
    /// # Cancellation safety
    /// Safe, as [`Mutex::lock`].
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<LockGuard> {
        acquire(self.contend(), Some(timeout)).await
    }

    /// The contender node names in lock order (the first holds it).
    ///
    /// # Errors
    /// Errors of the listing; a missing directory is an empty list.
    pub async fn participants(&self) -> Result<Vec<String>> {
        let children = match self.session.client().list_children(&self.path).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(err) => return Err(err.into()),
        };
        Ok(sorted_contenders(&children)
            .into_iter()
            .map(|(_, name)| name.to_string())
            .collect())
    }
}

/// A [`Mutex`] whose holder can be asked to give the lock up, as in ZooKeeper's lock recipe and
/// Curator's `Revoker`: the asker writes `__REVOKE__` into the holder's node, and the holder's
/// [`LockGuard::revocation_requested`] token fires. Releasing is the holder's decision.
#[derive(Debug, Clone)]
pub struct RevocableMutex {
    inner: Mutex,
}

impl RevocableMutex {
    /// A revocable mutex on `path` (same node layout as [`Mutex`]).
    pub fn new(session: &Session, path: &str) -> RevocableMutex {
        RevocableMutex {
            inner: Mutex::new(session, path),
        }
    }

    /// As [`Mutex::lock`]; watch [`LockGuard::revocation_requested`] on the guard.
    ///
    /// # Errors
    /// As [`Mutex::lock`].
    ///
    /// # Cancellation safety
    /// As [`Mutex::lock`].
    pub async fn lock(&self) -> Result<LockGuard> {
        self.inner.lock().await
    }

    /// As [`Mutex::try_lock_for`].
    ///
    /// # Errors
    /// As [`Mutex::try_lock_for`].
    ///
    /// # Cancellation safety
    /// As [`Mutex::lock`].
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<LockGuard> {
        self.inner.try_lock_for(timeout).await
    }

    /// Asks the current holder (if any) to release; returns the holder's node name.
    ///
    /// # Errors
    /// Errors of the listing or the write; a holder that released meanwhile is `Ok(None)`.
    pub async fn request_revoke(&self) -> Result<Option<String>> {
        let Some(holder) = self.inner.participants().await?.into_iter().next() else {
            return Ok(None);
        };
        let client = self.inner.session.client();
        match client
            .set_data(&join(&self.inner.path, &holder), REVOKE_MESSAGE, None)
            .await
        {
            Ok(_) => Ok(Some(holder)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }
}
