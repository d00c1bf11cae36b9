//! [`Semaphore`]: at most `max_leases` holders at once, in Curator's `InterProcessSemaphoreV2`
//! layout: `path/locks` is a mutex serialising the acquirers, `path/leases` holds one
//! ephemeral sequential node per lease (`_c_<uuid>-lease-NNNNNNNNNN`). An acquirer takes the
//! mutex, adds its lease node, waits until the number of lease nodes is at most `max_leases`
//! (watching the children), then releases the mutex. As in Curator, `max_leases` is each
//! client's own setting: all clients of one semaphore must agree on it.

use std::time::Duration;

use tokio::time::Instant;
use zkit_client as zk;

use super::internals::{recover, until, Cleanup, LockGuard, LockOptions};
use super::mutex::Mutex;
use crate::error::{Error, Result};
use crate::protected::{create_protected_sequential_with, join, sequence_of, ProtectedCreate};
use crate::session::Session;

/// A held semaphore lease; release it like a lock guard.
pub type Lease = LockGuard;

/// A counting semaphore with `max_leases` leases on the directory `path`.
#[derive(Debug, Clone)]
pub struct Semaphore {
    session: Session,
    path: String,
    max_leases: usize,
    options: LockOptions,
}

impl Semaphore {
    /// A semaphore on `path` with `max_leases` leases (at least 1).
    pub fn new(session: &Session, path: &str, max_leases: usize) -> Semaphore {
        Semaphore {
            session: session.clone(),
            path: path.trim_end_matches('/').to_string(),
            max_leases: max_leases.max(1),
            options: LockOptions::default(),
        }
    }

    /// The directory of the lease nodes.
    pub fn leases_path(&self) -> String {
        join(&self.path, "leases")
    }

    /// Acquires one lease, waiting at most `timeout` (`None`: forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; otherwise as [`super::Mutex::lock`].
    ///
    /// # Cancellation safety
    /// Safe: a dropped acquisition deletes its lease node and releases the internal mutex in the
    /// background.
    pub async fn acquire(&self, timeout: Option<Duration>) -> Result<Lease> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let timed_out = || Error::Timeout(timeout.unwrap_or_default());
        let mutex = Mutex::with_options(
            &self.session,
            &join(&self.path, "locks"),
            self.options.clone(),
        );
        let gate = match deadline {
            None => mutex.lock().await?,
            Some(deadline) => {
                let remaining = deadline.saturating_duration_since(Instant::now());
                match mutex.try_lock_for(remaining).await {
                    Err(Error::Timeout(_)) => return Err(timed_out()),
                    other => other?,
                }
            }
        };
        let leases = self.leases_path();
        let create = ProtectedCreate::ephemeral();
        let mut cleanup = LeaseCleanup {
            session: &self.session,
            parent: &leases,
            uuid: &create.uuid,
            armed: true,
        };
        let result = until(deadline, async {
            let node = create_protected_sequential_with(
                &self.session,
                &join(&leases, "lease-"),
                &self.options.node_data,
                &create,
            )
            .await?;
            let start = Instant::now();
            let mut retries = 0;
            loop {
                let step: Result<bool> = async {
                    let client = self.session.client();
                    let (children, watcher) = client.list_and_watch_children(&leases).await?;
                    if !children.contains(&node.name) {
                        return Err(Error::LockLost("our lease node vanished".into()));
                    }
                    let count = children.iter().filter(|c| sequence_of(c).is_some()).count();
                    if count <= self.max_leases {
                        return Ok(true);
                    }
                    drop(client);
                    let mut state_rx = self.session.watch_state();
                    tokio::select! {
                        _ = watcher.changed() => {}
                        _ = state_rx.changed() => {}
                    }
                    Ok(false)
                }
                .await;
                match step {
                    Ok(true) => return Ok(node),
                    Ok(false) => {}
                    Err(err) if err.is_recoverable() => {
                        recover(&self.session, err, &self.options.retry, &mut retries, start)
                            .await?
                    }
                    Err(err) => return Err(err),
                }
            }
        })
        .await;
        // The gate is only for ordering the acquirers; give it up in every case.
        let _ = gate.release().await;
        match result {
            None => Err(timed_out()),
            Some(Err(err)) => Err(err),
            Some(Ok(node)) => {
                cleanup.armed = false;
                Ok(LockGuard::start(
                    &self.session,
                    node,
                    Cleanup::ByUuid {
                        parent: leases.clone(),
                        uuid: create.uuid.clone(),
                    },
                    true,
                    None,
                ))
            }
        }
    }

    /// Number of lease nodes right now.
    ///
    /// # Errors
    /// Errors of the listing; no directory is 0.
    pub async fn lease_count(&self) -> Result<usize> {
        match self
            .session
            .client()
            .list_children(&self.leases_path())
            .await
        {
            Ok(children) => Ok(children.iter().filter(|c| sequence_of(c).is_some()).count()),
            Err(zk::Error::NoNode) => Ok(0),
            Err(err) => Err(err.into()),
        }
    }
}

struct LeaseCleanup<'a> {
    session: &'a Session,
    parent: &'a str,
    uuid: &'a str,
    armed: bool,
}

impl Drop for LeaseCleanup<'_> {
    fn drop(&mut self) {
        if self.armed {
            crate::protected::spawn_orphan_cleanup(self.session, self.parent, self.uuid);
        }
    }
}
