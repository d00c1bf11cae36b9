//! [`MultiLock`]: all of several mutexes or none (Curator's `InterProcessMultiLock`).
//!
//! Curator acquires the locks in the order the caller listed them, so two multi-locks that
//! list the same paths in different orders can deadlock (each holds one and waits for the
//! other). zkit acquires them in one canonical order, the sorted, de-duplicated list of paths
//! ([`acquisition_order`]): any two multi-locks — and any mix of multi-locks and single
//! [`super::Mutex`]es, which hold one lock at a time — then take shared locks in the same
//! order, so none can wait for a lock held by someone who waits for one of its own. When one
//! acquisition fails or times out, the locks already held are released (in reverse order)
//! before the error is returned. Each lock is a plain [`super::Mutex`] (Curator's
//! `InterProcessMutex` layout), so a Java multi-lock or mutex on one of the paths excludes
//! zkit's, and the other way round.
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use zkit::lock::MultiLock;
//! let both = MultiLock::new(&session, &["/accounts/alice", "/accounts/bob"])?;
//! let guard = both.lock().await?;
//! // ... move money between the two accounts ...
//! guard.release().await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::internals::{LockGuard, LockOptions};
use super::mutex::Mutex;
use crate::error::{Error, Result};
use crate::session::Session;

/// The order a [`MultiLock`] takes its locks in: the paths sorted (bytewise), duplicates and
/// trailing slashes removed.
///
/// # Errors
/// [`Error::BadArguments`] for an empty list or a relative path.
pub fn acquisition_order<S: AsRef<str>>(paths: &[S]) -> Result<Vec<String>> {
    if paths.is_empty() {
        return Err(Error::BadArguments(
            "a multi-lock needs at least one path".into(),
        ));
    }
    let mut order = Vec::with_capacity(paths.len());
    for path in paths {
        let path = path.as_ref();
        if !path.starts_with('/') {
            return Err(Error::BadArguments(format!(
                "lock path must be absolute: {path:?}"
            )));
        }
        let trimmed = path.trim_end_matches('/');
        order.push(if trimmed.is_empty() { "/" } else { trimmed }.to_string());
    }
    order.sort();
    order.dedup();
    Ok(order)
}

/// Several mutexes taken together. See the module docs.
#[derive(Debug, Clone)]
pub struct MultiLock {
    mutexes: Vec<Mutex>,
}

impl MultiLock {
    /// A multi-lock on `paths` with default [`LockOptions`].
    ///
    /// # Errors
    /// As [`acquisition_order`].
    pub fn new<S: AsRef<str>>(session: &Session, paths: &[S]) -> Result<MultiLock> {
        MultiLock::with_options(session, paths, LockOptions::default())
    }

    /// A multi-lock whose mutexes use `options`.
    ///
    /// # Errors
    /// As [`acquisition_order`].
    pub fn with_options<S: AsRef<str>>(
        session: &Session,
        paths: &[S],
        options: LockOptions,
    ) -> Result<MultiLock> {
        let mutexes = acquisition_order(paths)?
            .iter()
            .map(|path| Mutex::with_options(session, path, options.clone()))
            .collect();
        Ok(MultiLock { mutexes })
    }

    /// The lock paths in acquisition order.
    pub fn paths(&self) -> Vec<&str> {
        self.mutexes.iter().map(Mutex::path).collect()
    }

    /// Waits until every lock is held.
    ///
    /// # Errors
    /// The first lock's error (as [`super::Mutex::lock`]); the locks taken before it are
    /// released first.
    ///
    /// # Cancellation safety
    /// Safe: a dropped acquisition releases what it held (in the background) and leaves no node.
    pub async fn lock(&self) -> Result<MultiLockGuard> {
        self.acquire(None).await
    }

    /// Like [`MultiLock::lock`], with one deadline for all of them.
    ///
    /// # Errors
    /// [`Error::Timeout`] when they are not all held within `timeout` (none is then held);
    /// otherwise as [`MultiLock::lock`].
    ///
    /// # Cancellation safety
    /// As [`MultiLock::lock`].
    pub async fn try_lock_for(&self, timeout: Duration) -> Result<MultiLockGuard> {
        self.acquire(Some(timeout)).await
    }

    async fn acquire(&self, timeout: Option<Duration>) -> Result<MultiLockGuard> {
        let deadline = timeout.map(|t| Instant::now() + t);
        // Dropping this vector (on error, or when the future is dropped) releases what is held.
        let mut held: Vec<LockGuard> = Vec::with_capacity(self.mutexes.len());
        for mutex in &self.mutexes {
            let got = match deadline {
                None => mutex.lock().await,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match mutex.try_lock_for(left).await {
                        Err(Error::Timeout(_)) => Err(Error::Timeout(timeout.unwrap_or_default())),
                        other => other,
                    }
                }
            };
            match got {
                Ok(guard) => held.push(guard),
                Err(err) => {
                    // The acquisition's error is the one to report; a lock whose release
                    // failed is deleted by its guard's background cleanup.
                    let _ = release_all(held).await;
                    return Err(err);
                }
            }
        }
        Ok(MultiLockGuard::new(held))
    }
}

/// Releases guards in reverse acquisition order; returns the first error.
async fn release_all(mut guards: Vec<LockGuard>) -> Result<()> {
    let mut first = None;
    while let Some(guard) = guards.pop() {
        if let Err(err) = guard.release().await {
            first.get_or_insert(err);
        }
    }
    first.map_or(Ok(()), Err)
}

/// All locks of a [`MultiLock`]. Dropping it releases them in the background.
#[derive(Debug)]
pub struct MultiLockGuard {
    guards: Vec<LockGuard>,
    lost: CancellationToken,
    stop: CancellationToken,
}

impl MultiLockGuard {
    fn new(guards: Vec<LockGuard>) -> Self {
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let tokens: Vec<CancellationToken> = guards.iter().map(LockGuard::lost).collect();
        let (any_lost, stopped) = (lost.clone(), stop.clone());
        tokio::spawn(async move {
            let any = futures::future::select_all(tokens.iter().map(|t| Box::pin(t.cancelled())));
            tokio::select! {
                _ = any => any_lost.cancel(),
                () = stopped.cancelled() => {}
            }
        });
        MultiLockGuard { guards, lost, stop }
    }

    /// The guards, in acquisition order.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// The fencing tokens of the locks, in acquisition order.
    pub fn fencing_tokens(&self) -> Vec<i64> {
        self.guards.iter().map(LockGuard::fencing_token).collect()
    }

    /// Fires when any of the locks is lost (see [`LockGuard::lost`]).
    pub fn lost(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// True once any lock was lost.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LockGuard::is_lost)
    }

    /// Releases every lock, in reverse acquisition order.
    ///
    /// # Errors
    /// The first release error; every lock is released (or left to its background cleanup)
    /// regardless.
    pub async fn release(mut self) -> Result<()> {
        self.stop.cancel();
        release_all(std::mem::take(&mut self.guards)).await
    }
}

impl Drop for MultiLockGuard {
    fn drop(&mut self) {
        self.stop.cancel();
        // Each guard releases itself in the background, last acquired first.
        while let Some(guard) = self.guards.pop() {
            drop(guard);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_canonical_order_whatever_the_caller_lists() {
        let a = acquisition_order(&["/b", "/a/", "/c", "/a"]).unwrap();
        let b = acquisition_order(&["/c", "/b", "/a"]).unwrap();
        assert_eq!(a, vec!["/a", "/b", "/c"]);
        assert_eq!(
            a, b,
            "two multi-locks on the same paths take them in the same order"
        );
        assert!(acquisition_order::<&str>(&[]).is_err());
        assert!(acquisition_order(&["relative"]).is_err());
    }
}
