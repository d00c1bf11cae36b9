//! [`KazooLock`]: a mutex that Python kazoo's default `Lock` recognises (kazoo's
//! `kazoo/recipe/lock.py`).
//!
//! kazoo names its contender nodes `<uuid-hex>__lock__NNNNNNNNNN` and counts as contenders the
//! children matching `__lock__` followed by the 10-digit sequence, anywhere in the name
//! (`re.search`). A zkit [`super::Mutex`] names its nodes `_c_<uuid>-lock-NNNNNNNNNN`, which
//! kazoo's default `Lock` does not see (see [`super`]). This lock names them
//! `_c_<uuid>-__lock__NNNNNNNNNN` instead — still a protected name, so connection losses never
//! leave a duplicate — which kazoo's pattern matches; and zkit orders every child with a
//! sequence suffix, kazoo's included. So kazoo's `Lock(client, path)` and a `KazooLock` on the
//! same path exclude each other in both directions. The node data is the identifier, which
//! kazoo's `Lock.contenders()` reads (and [`KazooLock::contenders`] too).
//!
//! kazoo's `NonBlockingLease` and `SetPartitioner` lock with this layout, so zkit's versions of
//! them ([`super::NonBlockingLease`], [`crate::partitioner::SetPartitioner`]) use this lock.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use zkit::lock::KazooLock;
//! let lock = KazooLock::new(&session, "/locks/report", "host-7");
//! let guard = lock.lock().await?; // excludes kazoo's zk.Lock("/locks/report") too
//! guard.release().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use zkit_client as zk;

use super::decide::{sorted_contenders, Rule};
use super::internals::{acquire, Contend, LockGuard, LockOptions};
use crate::error::Result;
use crate::protected::join;
use crate::session::Session;

/// kazoo's `Lock._NODE_NAME`: the part of a contender's name before its sequence number.
pub const KAZOO_LOCK_NAME: &str = "__lock__";

/// A mutex in kazoo's layout. See the module docs.
#[derive(Debug, Clone)]
pub struct KazooLock {
    session: Session,
    path: String,
    options: LockOptions,
}

impl KazooLock {
    /// A lock on the directory `path` whose contender node holds `identifier` (kazoo's
    /// `identifier`; may be empty).
    pub fn new(session: &Session, path: &str, identifier: &str) -> KazooLock {
        let options = LockOptions {
            node_data: identifier.as_bytes().to_vec(),
            ..LockOptions::default()
        };
        KazooLock::with_options(session, path, options)
    }

    /// A lock with explicit options (the node data is the identifier).
    pub fn with_options(session: &Session, path: &str, options: LockOptions) -> KazooLock {
        KazooLock {
            session: session.clone(),
            path: path.trim_end_matches('/').to_string(),
            options,
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
            name: KAZOO_LOCK_NAME,
            rule: Rule::Exclusive { max_leases: 1 },
            exempt: None,
            mode: zk::CreateMode::EphemeralSequential,
            ttl: None,
            options: &self.options,
            max_locked_time: None,
            release_slot: None,
        }
    }

    /// Waits until the lock is held.
    ///
    /// # Errors
    /// As [`super::Mutex::lock`].
    ///
    /// # Cancellation safety
    /// Safe, as [`super::Mutex::lock`].
    pub async fn lock(&self) -> Result<LockGuard> {
        acquire(self.contend(), None).await
    }

    /// Waits at most `timeout`.
    ///
    /// # Errors
    /// [`crate::Error::Timeout`]; otherwise as [`KazooLock::lock`].
    ///
    /// # Cancellation safety
    /// Safe, as [`super::Mutex::lock`].
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<LockGuard> {
        acquire(self.contend(), Some(timeout)).await
    }

    /// The identifiers (node data) of the contenders in lock order, the holder first
    /// (kazoo's `Lock.contenders()`).
    ///
    /// # Errors
    /// Errors of the reads; a missing directory is an empty list.
    pub async fn contenders(&self) -> Result<Vec<String>> {
        let client = self.session.client();
        let children = match client.list_children(&self.path).await {
            Ok(children) => children,
            Err(zk::Error::NoNode) => return Ok(Vec::new()),
            Err(err) => return Err(err.into()),
        };
        let mut out = Vec::new();
        for (_, name) in sorted_contenders(&children) {
            match client.get_data(&join(&self.path, name)).await {
                Ok((data, _)) => out.push(String::from_utf8_lossy(&data).into_owned()),
                Err(zk::Error::NoNode) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(out)
    }
}
