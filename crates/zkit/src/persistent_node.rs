//! [`PersistentNode`]: a node that stays there as long as we want it (Curator's
//! `PersistentNode`, usually for ephemeral nodes): created at start, created again after a
//! session loss (the ephemeral node went with the old session) or after someone deleted it,
//! and deleted on close.
//!
//! The decision is the pure [`node_action`]; the background task only carries it out.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use crate::error::{Error, Result};
use crate::session::{Session, SessionEvent};

/// What to do about our node, given what the server says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    /// It is there and ours: watch it.
    Watch,
    /// It is missing: create it.
    Create,
    /// It is an ephemeral node of another session (e.g. our previous one, not yet expired):
    /// wait for it to go, then create ours (deleting it could remove someone else's node).
    WaitForOther,
}

/// Decides from the node's `ephemeralOwner` (`None`: it does not exist) and our session id.
/// A persistent node (`owner == 0`) counts as ours.
pub fn node_action(owner: Option<i64>, my_session: i64, ephemeral: bool) -> NodeAction {
    match owner {
        None => NodeAction::Create,
        Some(owner) if !ephemeral || owner == my_session => NodeAction::Watch,
        Some(_) => NodeAction::WaitForOther,
    }
}

struct Inner {
    session: Session,
    path: String,
    data: Vec<u8>,
    mode: zk::CreateMode,
    cancel: CancellationToken,
    present: watch::Sender<bool>,
}

/// A node kept in place. See the module docs.
pub struct PersistentNode {
    inner: Arc<Inner>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for PersistentNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentNode")
            .field("path", &self.inner.path)
            .field("present", &*self.inner.present.borrow())
            .finish()
    }
}

impl PersistentNode {
    /// Keeps `path` in place with `data`, as an `Ephemeral` or `Persistent` node (`mode`).
    /// Parents are created as persistent nodes.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path or a sequential mode.
    pub fn start(session: &Session, path: &str, data: &[u8], mode: zk::CreateMode) -> Result<Self> {
        if !matches!(mode, zk::CreateMode::Ephemeral | zk::CreateMode::Persistent) {
            return Err(Error::BadArguments(
                "PersistentNode takes Ephemeral or Persistent".into(),
            ));
        }
        let (present, _) = watch::channel(false);
        let inner = Arc::new(Inner {
            session: session.clone(),
            path: crate::config::resolve_key("/", path)?,
            data: data.to_vec(),
            mode,
            cancel: CancellationToken::new(),
            present,
        });
        let task = tokio::spawn(run(Arc::clone(&inner)));
        Ok(PersistentNode {
            inner,
            task: Some(task),
        })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// True while the node is known to be in place.
    pub fn is_present(&self) -> bool {
        *self.inner.present.borrow()
    }

    /// Waits until the node is in place, at most `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub async fn wait_present(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.inner.present.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|p| *p)).await;
        match waited {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout(timeout)),
        }
    }

    /// Stops keeping the node and deletes it.
    pub async fn close(mut self) {
        self.inner.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for PersistentNode {
    fn drop(&mut self) {
        self.inner.cancel.cancel();
    }
}

async fn run(inner: Arc<Inner>) {
    let mut state = inner.session.watch_state();
    loop {
        let round = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            r = one_round(&inner, &mut state) => r,
        };
        if let Err(err) = round {
            inner.present.send_replace(false);
            if err == Error::Closed {
                break;
            }
            tracing::debug!(path = %inner.path, error = %err, "persistent node retrying");
            tokio::select! {
                _ = inner.cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = state.changed() => {}
            }
        }
    }
    inner.present.send_replace(false);
    let client = inner.session.client();
    // Only delete what is ours.
    if let Ok(Some(stat)) = client.check_stat(&inner.path).await {
        if node_action(
            Some(stat.ephemeral_owner),
            client.session_id().0,
            inner.mode == zk::CreateMode::Ephemeral,
        ) == NodeAction::Watch
        {
            let _ = client.delete(&inner.path, Some(stat.version)).await;
        }
    }
}

async fn one_round(inner: &Inner, state: &mut watch::Receiver<SessionEvent>) -> Result<()> {
    inner.session.wait_connected().await?;
    state.mark_unchanged();
    let client = inner.session.client();
    let (stat, watcher) = client.check_and_watch_stat(&inner.path).await?;
    let ephemeral = inner.mode == zk::CreateMode::Ephemeral;
    match node_action(
        stat.map(|s| s.ephemeral_owner),
        client.session_id().0,
        ephemeral,
    ) {
        NodeAction::Watch => {
            inner.present.send_replace(true);
        }
        NodeAction::WaitForOther => {
            inner.present.send_replace(false);
        }
        NodeAction::Create => {
            inner.present.send_replace(false);
            let options = inner.mode.with_acls(zk::Acls::anyone_all());
            let created = match client.create(&inner.path, &inner.data, &options).await {
                Err(zk::Error::NoNode) => {
                    if let Some((parent, _)) = inner.path.rsplit_once('/') {
                        if !parent.is_empty() {
                            client
                                .mkdir(
                                    parent,
                                    &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
                                )
                                .await?;
                        }
                    }
                    client.create(&inner.path, &inner.data, &options).await
                }
                other => other,
            };
            match created {
                // Decide again (NodeExists: someone else's, or ours from a retried create).
                Ok(_) | Err(zk::Error::NodeExists) => return Ok(()),
                Err(err) => return Err(err.into()),
            }
        }
    }
    tokio::select! {
        _ = watcher.changed() => {}
        _ = state.changed() => {
            if !state.borrow().state.is_connected() {
                inner.present.send_replace(false);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recreate_only_what_is_missing_and_never_touch_others() {
        assert_eq!(node_action(None, 5, true), NodeAction::Create);
        assert_eq!(node_action(Some(5), 5, true), NodeAction::Watch);
        assert_eq!(node_action(Some(4), 5, true), NodeAction::WaitForOther);
        assert_eq!(node_action(Some(0), 5, false), NodeAction::Watch);
    }
}
