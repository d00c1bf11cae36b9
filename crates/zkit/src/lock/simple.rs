//! [`SimpleLock`] (the "unique name" lock): the lock is one ephemeral node at a
//! fixed path. Create succeeds: held. `NodeExists`: taken; wait for its deletion and try again.
//! Every waiter watches the same node, so a release wakes them all (the herd effect): fine for a few contenders, use [`super::Mutex`] for many.
//!
//! After a connection loss during the create we cannot tell whether the create happened; the
//! node's `ephemeralOwner` tells: if it is our session id, the node is ours (which is why the
//! session id identifies the holder).

use std::time::Duration;

use tokio::time::Instant;
use zkit_client as zk;

use super::internals::{recover, until, Cleanup, LockGuard, LockOptions};
use crate::error::{Error, Result};
use crate::protected::CreatedNode;
use crate::session::Session;

/// A lock that is a single ephemeral node at `path`. The fencing token is the node's `czxid`.
#[derive(Debug, Clone)]
pub struct SimpleLock {
    session: Session,
    path: String,
    options: LockOptions,
}

impl SimpleLock {
    /// A lock on the node `path` (its parent is created if missing).
    pub fn new(session: &Session, path: &str) -> SimpleLock {
        SimpleLock {
            session: session.clone(),
            path: path.trim_end_matches('/').to_string(),
            options: LockOptions::default(),
        }
    }

    /// Takes the lock, waiting at most `timeout` (`None`: forever).
    ///
    /// # Errors
    /// [`Error::Timeout`]; otherwise as [`super::Mutex::lock`].
    ///
    /// # Cancellation safety
    /// Safe: if dropped after the create may have been sent, a background task deletes the node
    /// if it is owned by this session.
    pub async fn lock(&self, timeout: Option<Duration>) -> Result<LockGuard> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut cleanup = PathCleanup {
            lock: self,
            owner: None,
        };
        let result = until(deadline, self.acquire_loop(&mut cleanup)).await;
        match result {
            None => Err(Error::Timeout(timeout.unwrap_or_default())),
            Some(Err(err)) => Err(err),
            Some(Ok((node, owner))) => {
                cleanup.owner = None;
                Ok(LockGuard::start(
                    &self.session,
                    node,
                    Cleanup::ByPath { owner },
                    true,
                    None,
                ))
            }
        }
    }

    async fn acquire_loop(&self, cleanup: &mut PathCleanup<'_>) -> Result<(CreatedNode, i64)> {
        let options = zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
        let start = Instant::now();
        let mut retries = 0;
        loop {
            self.session.wait_connected().await?;
            let (client, generation) = self.session.client_and_generation();
            let owner = client.session_id().0;
            cleanup.owner = Some(owner);
            let step: Result<Option<CreatedNode>> = async {
                match client
                    .create(&self.path, &self.options.node_data, &options)
                    .await
                {
                    Ok((stat, _)) => {
                        return Ok(Some(self.node(stat.czxid, generation, owner)));
                    }
                    Err(zk::Error::NoNode) => {
                        if let Some((parent, _)) = self.path.rsplit_once('/') {
                            if !parent.is_empty() {
                                let dir =
                                    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                                client.mkdir(parent, &dir).await?;
                            }
                        }
                        return Ok(None);
                    }
                    Err(zk::Error::NodeExists) => {}
                    Err(err) => return Err(err.into()),
                }
                let (stat, watcher) = client.check_and_watch_stat(&self.path).await?;
                match stat {
                    // Our own create got through before a connection loss.
                    Some(stat) if stat.ephemeral_owner == owner => {
                        Ok(Some(self.node(stat.czxid, generation, owner)))
                    }
                    Some(_) => {
                        drop(client);
                        let mut state_rx = self.session.watch_state();
                        tokio::select! {
                            _ = watcher.changed() => {}
                            _ = state_rx.changed() => {}
                        }
                        Ok(None)
                    }
                    None => Ok(None),
                }
            }
            .await;
            match step {
                Ok(Some(node)) => return Ok((node, owner)),
                Ok(None) => {}
                Err(Error::SessionExpired | Error::SessionLost) => {}
                Err(err) if err.is_recoverable() => {
                    recover(&self.session, err, &self.options.retry, &mut retries, start).await?
                }
                Err(err) => return Err(err),
            }
        }
    }

    fn node(&self, czxid: i64, generation: u64, owner: i64) -> CreatedNode {
        CreatedNode {
            path: self.path.clone(),
            name: self.path.rsplit('/').next().unwrap_or_default().to_string(),
            sequence: czxid,
            generation,
            ephemeral_owner: owner,
        }
    }
}

/// Deletes the lock node in the background if an acquisition is dropped after a create may
/// have been sent, but only while it belongs to this session.
struct PathCleanup<'a> {
    lock: &'a SimpleLock,
    owner: Option<i64>,
}

impl Drop for PathCleanup<'_> {
    fn drop(&mut self) {
        let Some(owner) = self.owner else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let session = self.lock.session.clone();
        let path = self.lock.path.clone();
        runtime.spawn(async move {
            let client = session.client();
            if let Ok(Some(stat)) = client.check_stat(&path).await {
                if stat.ephemeral_owner == owner {
                    let _ = client.delete(&path, Some(stat.version)).await;
                }
            }
        });
    }
}
