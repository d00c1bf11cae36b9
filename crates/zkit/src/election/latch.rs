//! The async driver of [`LeaderLatch`]: creates our ephemeral-sequential node (protected, so a
//! retried create cannot make two), follows the decision of [`super::latch_decision`], and
//! publishes [`Leadership`] on a watch channel.
//!
//! It keeps leadership through `Suspended` and `Reconnected` (the session provably lives until
//! its validity deadline, after which the session layer declares `Lost`), withdraws it on `Lost`
//! or when its node is deleted, and creates a new node in a new session after `Lost`. It never
//! reports leadership it has not checked on the server in the session it belongs to.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::decide::{latch_decision, LatchDecision, LATCH_NAME};
use crate::error::{Error, Result};
use crate::protected::{
    create_protected_sequential_with, join, spawn_orphan_cleanup, CreatedNode, ProtectedCreate,
};
use crate::session::{Session, SessionEvent};

/// The latch's view of its own leadership.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Leadership {
    /// True while we are the leader (connected, or suspended while the session provably lives).
    pub is_leader: bool,
    /// The fencing token (our node's sequence number) while leader.
    pub fencing_token: Option<i64>,
    /// Our node's path, once created.
    pub node: Option<String>,
    /// The session generation the leadership belongs to.
    pub generation: u64,
    /// True once the latch is closed. Terminal.
    pub closed: bool,
}

struct Inner {
    session: Session,
    path: String,
    id: String,
    uuid: String,
    tx: watch::Sender<Leadership>,
    cancel: CancellationToken,
}

/// Curator's `LeaderLatch`: among the participants under `path`, the one with the lowest node
/// sequence leads. See the module docs.
pub struct LeaderLatch {
    inner: Arc<Inner>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LeaderLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderLatch")
            .field("path", &self.inner.path)
            .field("id", &self.inner.id)
            .field("leadership", &*self.inner.tx.borrow())
            .finish()
    }
}

impl LeaderLatch {
    /// Joins the election under `path` (created if missing) as participant `id` (stored as the
    /// node's data) and starts contending in the background.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for a relative path.
    pub fn start(session: &Session, path: &str, id: &str) -> Result<LeaderLatch> {
        let path = crate::config::resolve_key("/", path)?;
        let (tx, _) = watch::channel(Leadership::default());
        let inner = Arc::new(Inner {
            session: session.clone(),
            path,
            id: id.to_string(),
            uuid: uuid::Uuid::new_v4().to_string(),
            tx,
            cancel: CancellationToken::new(),
        });
        let task = tokio::spawn(run(Arc::clone(&inner)));
        Ok(LeaderLatch {
            inner,
            task: Some(task),
        })
    }

    /// True while we lead (through a disconnect while the session provably lives; false once
    /// it is lost, or closed).
    pub fn has_leadership(&self) -> bool {
        self.inner.tx.borrow().is_leader
    }

    /// The current leadership state.
    pub fn leadership(&self) -> Leadership {
        self.inner.tx.borrow().clone()
    }

    /// A receiver of leadership changes.
    pub fn subscribe(&self) -> watch::Receiver<Leadership> {
        self.inner.tx.subscribe()
    }

    /// Our id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Waits until we lead and returns the leadership (with its fencing token).
    ///
    /// # Errors
    /// [`Error::Closed`] if the latch or the session is closed first.
    ///
    /// # Cancellation safety
    /// Cancel-safe.
    pub async fn await_leadership(&self) -> Result<Leadership> {
        let mut rx = self.subscribe();
        let l = rx
            .wait_for(|l| l.is_leader || l.closed)
            .await
            .map_err(|_| Error::Closed)?
            .clone();
        if l.closed {
            return Err(Error::Closed);
        }
        Ok(l)
    }

    /// Like [`LeaderLatch::await_leadership`], giving up after `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`], or as [`LeaderLatch::await_leadership`].
    pub async fn await_leadership_for(&self, timeout: Duration) -> Result<Leadership> {
        tokio::time::timeout(timeout, self.await_leadership())
            .await
            .map_err(|_| Error::Timeout(timeout))?
    }

    /// Waits until we no longer lead (returns at once if we do not).
    ///
    /// # Cancellation safety
    /// Cancel-safe.
    pub async fn await_loss(&self) {
        let mut rx = self.subscribe();
        let _ = rx.wait_for(|l| !l.is_leader).await;
    }

    /// The participants' ids in line order (the first is the leader), read from the server.
    ///
    /// # Errors
    /// ZooKeeper errors of the listing and reads.
    pub async fn participants(&self) -> Result<Vec<String>> {
        participants(&self.inner.session, &self.inner.path).await
    }

    /// Leaves the election: stops contending and deletes our node. Leadership is withdrawn
    /// before this returns.
    pub async fn close(mut self) {
        self.inner.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for LeaderLatch {
    fn drop(&mut self) {
        // The background task sees the cancellation, withdraws and deletes the node.
        self.inner.cancel.cancel();
    }
}

/// The participants' ids under `path` in line order (the first leads).
///
/// # Errors
/// ZooKeeper errors of the listing and reads (a participant leaving meanwhile is skipped).
pub async fn participants(session: &Session, path: &str) -> Result<Vec<String>> {
    let client = session.client();
    let children = match client.list_children(path).await {
        Ok(c) => c,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(err) => return Err(err.into()),
    };
    let mut ids = Vec::new();
    for (_, name) in crate::lock::sorted_contenders(&children) {
        match client.get_data(&join(path, name)).await {
            Ok((data, _)) => ids.push(String::from_utf8_lossy(&data).into_owned()),
            Err(zk::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(ids)
}

fn publish(inner: &Inner, leader: Option<&CreatedNode>, node: Option<&CreatedNode>) {
    let next = Leadership {
        is_leader: leader.is_some(),
        fencing_token: leader.map(|n| n.sequence),
        node: node.map(|n| n.path.clone()),
        generation: node.map_or(0, |n| n.generation),
        closed: false,
    };
    inner.tx.send_if_modified(|current| {
        if *current == next {
            false
        } else {
            if next.is_leader != current.is_leader {
                tracing::info!(path = %inner.path, id = %inner.id, leader = next.is_leader, token = ?next.fencing_token, "leadership");
            }
            *current = next;
            true
        }
    });
}

async fn run(inner: Arc<Inner>) {
    let mut node: Option<CreatedNode> = None;
    let mut state_rx = inner.session.watch_state();
    loop {
        let round = tokio::select! {
            _ = inner.cancel.cancelled() => break,
            round = one_round(&inner, &mut node, &mut state_rx) => round,
        };
        if let Err(err) = round {
            publish(&inner, None, node.as_ref());
            if err == Error::Closed {
                break;
            }
            tracing::debug!(path = %inner.path, error = %err, "latch retrying");
            tokio::select! {
                _ = inner.cancel.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = state_rx.changed() => {}
            }
        }
    }
    // Withdraw first, then delete: nobody may see us as leader once we are leaving.
    publish(&inner, None, None);
    inner.tx.send_modify(|l| l.closed = true);
    let deleted = match &node {
        Some(n) => inner.session.client().delete(&n.path, None).await,
        None => Err(zk::Error::NoNode),
    };
    if !matches!(deleted, Ok(())) {
        // Not created, created under an unknown name (cancelled create), or the delete failed:
        // find it by our UUID in the background.
        spawn_orphan_cleanup(&inner.session, &inner.path, &inner.uuid);
    }
}

/// One decision: make sure our node exists in the current session, decide, and wait for the
/// thing that can change the decision.
async fn one_round(
    inner: &Inner,
    node: &mut Option<CreatedNode>,
    state_rx: &mut watch::Receiver<SessionEvent>,
) -> Result<()> {
    let connected = inner.session.wait_connected().await?;
    state_rx.mark_unchanged();
    let (client, generation) = inner.session.client_and_generation();
    if node.as_ref().is_some_and(|n| n.generation != generation) {
        // Its session is gone, and with it the node.
        *node = None;
    }
    let my = match node {
        Some(n) => n.clone(),
        None => {
            let options = ProtectedCreate {
                uuid: inner.uuid.clone(),
                ..ProtectedCreate::ephemeral()
            };
            let prefix = join(&inner.path, LATCH_NAME);
            let created = create_protected_sequential_with(
                &inner.session,
                &prefix,
                inner.id.as_bytes(),
                &options,
            )
            .await?;
            *node = Some(created.clone());
            created
        }
    };
    if my.generation != generation {
        return Ok(());
    }
    let children = client.list_children(&inner.path).await?;
    let owner = match crate::lock::decide(&my.name, &children) {
        crate::lock::Decision::Acquired => client
            .check_stat(&my.path)
            .await?
            .map(|s| s.ephemeral_owner),
        _ => None,
    };
    let session_id = client.session_id().0;
    match latch_decision(&my.name, &children, session_id, owner) {
        LatchDecision::Leader => {
            // Still connected on the same session? (The check above ran on it.)
            let state = *state_rx.borrow();
            if !state.state.is_connected() || state.generation != connected.generation {
                publish(inner, None, node.as_ref());
                return Ok(());
            }
            publish(inner, Some(&my), node.as_ref());
            // Lead until our node goes or its session does. `Suspended` keeps leadership: the
            // session layer declares `Lost` once the session's validity deadline passes.
            let (stat, deleted) = client.check_and_watch_stat(&my.path).await?;
            drop(client);
            if stat.is_none() {
                publish(inner, None, None);
                *node = None;
                return Ok(());
            }
            let mut deleted = std::pin::pin!(deleted.changed());
            loop {
                tokio::select! {
                    _ = &mut deleted => break,
                    changed = state_rx.changed() => {
                        if changed.is_err() || !state_rx.borrow().keeps(my.generation) {
                            break;
                        }
                    }
                }
            }
            publish(inner, None, node.as_ref());
            Ok(())
        }
        LatchDecision::Follow(predecessor) => {
            publish(inner, None, node.as_ref());
            let (stat, watcher) = client
                .check_and_watch_stat(&join(&inner.path, &predecessor))
                .await?;
            if stat.is_some() {
                tokio::select! {
                    _ = watcher.changed() => {}
                    _ = state_rx.changed() => {}
                }
            }
            Ok(())
        }
        LatchDecision::Recreate => {
            publish(inner, None, None);
            if owner.is_some() {
                // Ours by UUID but owned by an older session: remove it, it only blocks others.
                let _ = client.delete(&my.path, None).await;
            }
            *node = None;
            Ok(())
        }
    }
}
